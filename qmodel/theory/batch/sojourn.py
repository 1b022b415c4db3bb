"""The tagged request's sojourn: what a request arriving at a random time experiences.

A request arriving while the queue is blocked finds q waiting and a residual blocking time
(:func:`arrival_view`, PASTA for Poisson arrivals); every batch ahead of it is a full one, so
it leaves after f = floor(q / K) more blockings (K the size a long queue dispatches) in a
batch holding its position plus the requests that arrived behind it: its own batch size
depends on later arrivals (:func:`before_own_batch`, :func:`own_batch`). Requests whose batch
forms at a free epoch with fewer than pmin waiting, or while the node idles, are counted
directly from the formation (:mod:`.members`). The sojourn adds the batch's own service S(k)
(:func:`sojourn_pmf`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import fft, signal

from .arrivals import Arrivals
from .chain import DispatchPass
from .lattice import Lattice
from .members import formation_members
from .rules import Rules
from .spread import Spread

__all__ = ["ArrivalView", "arrival_view", "points_needed", "Ahead", "before_own_batch",
           "own_batch", "sojourn_pmf", "fft_len"]


def fft_len(n: int) -> int:
    """A fast real-FFT length of at least ``n``."""
    return fft.next_fast_len(int(n), real=True)


class ArrivalView(NamedTuple):
    """Z[q, r]: probability that an arrival finds a batch in service with residual r*h and q
    waiting (q < N), and the fraction of arrivals a finite queue rejects."""

    Z: np.ndarray
    rejection: float


def arrival_view(rules: Rules, grid: Lattice, run: DispatchPass) -> ArrivalView:
    """What a Poisson arrival finds (PASTA): the queue and the residual blocking time."""
    B, N, R1 = rules.B, run.chain.N, run.chain.R1
    ps, A, weight = run.blocking.ps, run.counts.A, run.cycle.weight
    top = N + run.counts.J                     # q waiting: left behind plus arrivals so far
    n_fft = fft_len(2 * grid.Ls)
    pois_hat = fft.rfft(run.counts.pois_s, n_fft, axis=0)

    def elapsed_residual(p, a):
        """Y[q, r] = h sum_u p(u + r) Pois(q; rate u): q arrivals so far, residual r*h.

        ``p`` is a (possibly unnormalised) blocking law on the lattice and ``a`` its
        arrival-count law; the trapezoid rule in u counts the ends u = 0 and u = s half.
        """
        corr = fft.irfft(pois_hat * fft.rfft(p[::-1], n_fft)[:, None], n_fft, axis=0)
        Y = np.clip(corr[grid.Ls - 1::-1], 0.0, None).T * grid.h      # (J, Ls)
        Y[0] -= 0.5 * grid.h * p
        Y[:, 0] -= 0.5 * grid.h * a
        return Y

    Z = np.zeros((top, grid.Ls))
    for g in range(run.blocking.groups):
        laws = slice(g * B, (g + 1) * B)
        mix = weight[g * R1:g * R1 + B]
        Y = elapsed_residual(mix @ ps[laws], mix @ A[laws])
        Z[:Y.shape[0]] += Y
        for i, size in enumerate(rules.leaving):
            first = g * R1 + B + i * N
            w = np.concatenate([[0.0], weight[first:first + N]])[:N]
            if not w.any():
                continue
            law = g * B + size - 1
            Y = elapsed_residual(ps[law], A[law])
            conv = signal.fftconvolve(w[:, None], Y, axes=0)[:top]
            Z[:conv.shape[0]] += conv
    Z = np.clip(Z, 0.0, None)
    # a finite queue rejects an arrival that finds Q waiting (PASTA: the fraction of
    # arrivals that do); with an unlimited one, the mass beyond N is the truncation's
    return ArrivalView(Z[:N], float(Z[N:].sum()) if rules.Q else 0.0)


def points_needed(rules: Rules, grid: Lattice, run: DispatchPass, tail: float) -> float:
    """Lattice points that the time before the tagged request's batch leaves spans."""
    B, K, N, R1 = rules.B, rules.K, run.chain.N, run.chain.R1
    reach_q = np.flatnonzero(np.cumsum(run.chain.pi[::-1])[::-1] > tail * 1e-3)
    deepest = 0
    if reach_q.size:
        # the requests the deepest record left behind, plus a blocking's worth of arrivals
        index = reach_q[-1] % R1
        deepest = (0 if index < B else (index - B) % N + 1) + run.counts.J
    F = deepest // K + 1
    mean_K = run.blocking.means[run.blocking.full * B + K - 1] / grid.h
    spread_K = max(grid.Ls - mean_K, 2.0)
    return grid.Ls + grid.Da + (F - 1) * mean_K + math.sqrt(F - 1) * spread_K


class Ahead(NamedTuple):
    """M0/M1[j-1, e]: the tagged request is j-th in the batch that takes it, after e*h; M0
    when that batch is the next one, M1 when full batches go ahead of it. E: the times e*h."""

    M0: np.ndarray
    M1: np.ndarray
    E: np.ndarray


def before_own_batch(rules: Rules, grid: Lattice, run: DispatchPass, view: ArrivalView,
                     tail: float) -> Ahead:
    """The tagged request's position and wait until the batch that takes it is dispatched."""
    K, N, Ls = rules.K, run.chain.N, grid.Ls
    F = (N + K - 1) // K
    pK = run.blocking.ps[run.blocking.full * rules.B + K - 1]     # batches ahead: group 1
    Le = fft_len(points_needed(rules, grid, run, tail) + Ls)
    Zp = np.zeros((F * K, Ls))
    Zp[:N] = view.Z
    blocks = Zp.reshape(F, K, Ls)
    M0 = np.zeros((K, Le))
    M0[:, :Ls] = blocks[0]
    phi = fft.rfft(pK, Le)
    acc = np.zeros((K, Le // 2 + 1), complex)
    power = phi.copy()
    mass = blocks.sum(axis=(1, 2))
    alive = np.flatnonzero(np.cumsum(mass[::-1])[::-1] > tail * 1e-3)
    last = int(alive[-1]) if alive.size else 0
    for f in range(1, last + 1):
        acc += fft.rfft(blocks[f], Le, axis=1) * power
        power = power * phi
    M1 = np.clip(fft.irfft(acc, Le, axis=1), 0.0, None)
    return Ahead(M0, M1, np.arange(Le) * grid.h)


def behind(M: np.ndarray, pois: np.ndarray, rows: int) -> np.ndarray:
    """G[n, e] = sum_j M[j - 1, e] pois[n - j, e] for n < rows: a request j-th in line with
    n - j arrivals behind it makes n waiting.

    A convolution along the short first axis, summed directly: a few dozen terms per column,
    2-7 times faster than an FFT along that axis over thousands of columns, and exact.
    """
    G = np.zeros((rows, M.shape[1]))
    for j in range(1, min(M.shape[0], rows - 1) + 1):
        m = min(rows - j, pois.shape[0])
        G[j:j + m] += M[j - 1] * pois[:m]
    return G


def own_batch(rules: Rules, arrivals: Arrivals, grid: Lattice, run: DispatchPass,
              ahead: Ahead, tail: float) -> Spread:
    """H[k, w]: probability that a request's batch has k requests and leaves w*h after it
    arrived."""
    B, pmin = rules.B, rules.pmin
    Le = ahead.E.size
    H = Spread(B, max(Le, grid.Ls + grid.Da + 2))
    pois = np.ascontiguousarray(arrivals.counts(ahead.E, B).T)      # x arrivals behind it
    for M, next_batch in ((ahead.M0, True), (ahead.M1, False)):
        G = behind(M, pois, B + 1)
        G[B] = np.clip(M.sum(axis=0) - G[:B].sum(axis=0), 0.0, None)  # B or more waiting
        for n in range(pmin, B + 1):
            # after waiting through full batches, the oldest request ahead has run out its
            # delay: all n go (D > 0); otherwise the largest preferred size <= n
            k = rules.table[n] if next_batch or rules.D == 0 else n
            if n < B and k < n:
                left = _passed_over(M, pois, n, k, rules.K)
                G[n] -= left
                _next_batch_after(H, left, n, k, rules, arrivals.rate, grid, run)
            H.dense[k, :Le] += G[n]
        if not next_batch and pmin > 1:
            _late_small_batch(H, M, pois, G, rules, arrivals, ahead.E, grid.h, tail)
    formation_members(H, rules, arrivals, grid, run, tail)
    return H


def _passed_over(M, pois, n, k, K):
    """Mass of requests in position j > k when n wait and a batch of k < n goes: the
    dispatch does not take them."""
    left = np.zeros(M.shape[1])
    for j in range(k + 1, min(n, K) + 1):
        left += M[j - 1] * pois[n - j]
    return left


def _next_batch_after(H: Spread, left, n, k, rules: Rules, rate: float, grid: Lattice,
                      run: DispatchPass):
    """A request passed over by a batch of k leaves in the next one: after that batch's
    blocking time, with the n - k left behind plus the mean arrivals meanwhile
    (approximation: one more round, its size at the mean)."""
    Le = left.size
    law = run.blocking.ps[run.blocking.full * rules.B + k - 1]
    size = int(min(rules.B, max(1, round(n - k + rate * float(law @ grid.times)))))
    later = signal.fftconvolve(left, law)[:Le]
    H.dense[size, :Le] += np.clip(later, 0.0, None)


def _late_small_batch(H: Spread, M, pois, G, rules: Rules, arrivals: Arrivals, E, h, tail):
    """A request that waited through full batches and then finds fewer than pmin waiting.

    The oldest request ahead of it is taken to be (j - 1) / rate older, and a formation
    that still has to wait is taken to last its mean time (approximations of a case that
    needs a long queue followed by a lull). ``G[n]`` is the mass of n waiting, j-th of them,
    summed over j (the convolution of M with the arrivals behind).
    """
    D, pmin, rate, Le = rules.D, rules.pmin, arrivals.rate, E.size
    j = np.arange(1, rules.K + 1)[:, None]
    old = (E[None, :] + (j - 1) / rate >= D) | (D == 0)       # (j, e)
    # the oldest's delay has run out: the n = j + x < pmin waiting go at once; summed over
    # j that is G restricted to such requests
    if old.all():
        early = G[1:pmin]
    else:
        early = behind(M * old, pois, pmin)[1:]
    H.dense[1:pmin, :Le] += early
    # the oldest's delay has not run out: a formation with n0 = j + x waiting (x arrivals
    # behind the tagged request), r = D - its age left; the batch leaves when pmin is
    # reached or the delay runs out: its size law is exact given r, its leaving time is
    # taken at the mean of that wait. Cases (j, e) first, then (case, x) in chunks.
    jj, ee = np.nonzero(~old[:pmin - 1] & (M[:pmin - 1] > 0))         # j = jj + 1
    if not jj.size:
        return
    counts = arrivals.counts(D - (E[ee] + jj / rate), pmin)[:, :pmin]
    cdf = np.cumsum(counts, axis=1)
    above = np.cumsum(np.clip(1.0 - cdf, 0.0, None), axis=1) / rate
    per_case = pmin - 1 - jj                                           # x = 0..pmin-j-1
    case_of = np.repeat(np.arange(jj.size), per_case)
    x_of = np.arange(case_of.size) - np.repeat(np.cumsum(per_case) - per_case, per_case)
    # cases lighter than 1e-5 of the truncation are left out (as in the formation members;
    # they show in the lost mass)
    light = tail * 1e-5
    mass_of = M[jj[case_of], ee[case_of]] * pois[x_of, ee[case_of]]
    heavy = mass_of >= light
    case_of, x_of, mass_of = case_of[heavy], x_of[heavy], mass_of[heavy]
    i = np.arange(pmin)[None, :]                                      # size n0 + i
    step = max(1, 2_000_000 // pmin)
    for lo in range(0, case_of.size, step):
        case, x = case_of[lo:lo + step], x_of[lo:lo + step]
        n0 = jj[case] + 1 + x
        need = (pmin - n0)[:, None]
        mass = mass_of[lo:lo + step]
        when = ee[case] + np.rint(above[case, need[:, 0] - 1] / h).astype(int)
        # the delay ran out first, i arrivals came
        weight = mass[:, None] * counts[case]
        row, size = np.nonzero((i < need) & (weight >= light))
        H.points(n0[row] + size, when[row], weight[row, size])
        H.points(pmin, when, mass * np.clip(1.0 - cdf[case, need[:, 0] - 1], 0.0, None))


def sojourn_pmf(H: Spread, ps_own: np.ndarray):
    """The sojourn's law on the lattice: the wait before the batch leaves (H) plus the
    batch's own service S(k); and the total mass of H."""
    waits = H.result()
    L = fft_len(H.length + ps_own.shape[1])
    spec = (fft.rfft(waits[1:], L, axis=1) * fft.rfft(ps_own, L, axis=1)).sum(axis=0)
    return np.clip(fft.irfft(spec, L), 0.0, None), float(waits.sum())
