"""One Triton batching node: the sojourn-time distribution on a time lattice.

The model follows the node from one dispatch to the next (an embedded Markov chain in the
spirit of Bailey 1954 and Neuts 1967 for bulk service, with Triton's dispatch rule from
triton-semantics.md), then computes what a request arriving at a random time experiences
(PASTA for Poisson arrivals). Every law lives on a time lattice of step h.

Dispatch records
    The chain's state is the record of a dispatch: its batch size k and the number m of
    requests it left waiting (m > 0 only when a queue longer than the batch was waiting). After
    a dispatch the queue is blocked until an instance is free: for one instance that is S(k);
    the arrivals meanwhile are Poisson counts mixed over that time. At the free epoch the
    batcher dispatches at once (pmin or more waiting, or the oldest request's delay D already
    ran out, or D = 0), or forms a batch: it waits until pmin requests are there or the oldest
    reaches D. The age of the oldest request matters there; after a batch that left nobody it
    follows exactly from the arrival times during the blocking (the first of n arrivals). The
    chain is truncated where its stationary tail mass, from the Cramer-Lundberg decay rate of
    the homogeneous part, is below ``tail``; it is solved as a banded linear system.

A request's sojourn
    A request arriving while the queue is blocked finds q waiting and a residual blocking time;
    every batch ahead of it is a full one, so it leaves after f = floor(q / K) more blockings
    (K the size a long queue dispatches), in a batch holding its position plus the requests
    that arrived behind it: its own batch size depends on later arrivals. Requests whose batch
    forms at a free epoch with fewer than pmin waiting, or while the node idles, are counted
    directly from the formation: their waits are their ages at that epoch plus the formation
    time. The sojourn adds the batch's own service S(k).

Several instances (approximation)
    The blocking after a dispatch is the time until some instance is free. A dispatch to an
    instance that had just freed while the others were busy (group 1) blocks for S(k)/c, the
    spacing of evenly staggered instances that take batches in turn (its mean is right in
    saturation; its spread is not, see below). Any other dispatch (group 0) blocks for min
    over the instances taken j = 1..c-1 dispatches ago of their remaining time, each started
    G_j earlier, G_j = X_1 + ... + X_j the partial sums of gamma gaps with the mean and
    spread of the gaps between dispatches measured in the previous pass, given that the
    instance it reuses (taken c dispatches ago) had finished: S'_c <= G_c. The expectation
    over the nested G_j is a backward recursion (taking the instances as independent put the
    chance that all are busy at light load several times too low: -25% on p99 at B = 4, c =
    4, load 0.1; leaving out the condition on the reused instance put it too high: lognormal
    B = 32 nodes 6-9% high at every load, 20 of the holdout's 108 nodes below beyond 8% on
    p99 instead of 7). The model is defined as a first pass with S(k)/c for every blocking
    and at most 2 more passes of that gap iteration, stopping early once the gaps settle to 1e-3 (the passes before the last only
    feed the next one its batch sizes and gaps, so their chains are truncated at 1e-5; group
    0's records that left requests behind are never reached, since group 1's S(k)/c takes
    time, and are left out of the linear system). The pass count is part of the
    approximation, not a truncation of a converging solve: iterated to convergence the gaps
    settle on values that put p99 further from the simulator. Measured worst / median p99
    error with 1, 2 and 3 more passes on the issue grid (validation/predict_accuracy.py, 266
    nodes with 2 or 4 instances): 24.5 / 1.5%, 15.8 / 1.4%, 13.8 / 1.4% (nodes beyond 8%:
    29, 17, 14); on a holdout of 108 nodes off that grid (validation/multi_instance_holdout.py:
    another S(k), B 2-64, 2, 3 and 8 instances): 17.1 / 1.8%, 15.7 / 1.8%, 18.2 / 2.0% (9, 7,
    9), both against the simulations of 2026-11-23. Two passes have the smallest worst case
    over both sets and cost a pass less than three. Without the condition on the reused
    instance the passes ran away on some nodes: each raised the scv of the gaps, a more spread
    gap made another instance more often free at a dispatch, so more small batches, which
    spread the gaps further (holdout, B = 64, 2 instances, no delay, load 0.8: gap scv 0.04,
    0.19, 0.43, 0.64 over the passes, 12% batches of one against the simulator's 3.5%, p99
    +13.8%; with it +6.9%).
    The other error, measured on the simulator's replayed batches: after a group-1 dispatch
    the next instance frees S(k)/c later in the model, evenly staggered, but with
    deterministic service the instances keep the phases they had when their busy period began
    (they started at arrival times, close together): B = 4, 4 instances, 95% load, the
    real spacing has median 0.11 ms, 90th percentile 2.2 ms and scv 2.3, against 0.61 ms
    every time in the model (three short spacings of about an interarrival time, then the
    rest of the round), so queued requests wait longer than modelled (p99 10-15% low at loads
    0.5-0.9 there). With lognormal jitter (cv 0.3) the phases mix: B = 32, 2 instances, load
    0.7, scv 0.36, close to the 1/3 of uniformly random phases. Drawing group 1's blocking
    independently from that short-short-short-long mixture (mean S(k)/c) loses the negative
    correlation between successive spacings: the chain then dispatches many small batches
    and loses capacity (p99 up to 40 times too high near saturation; measured, not adopted).
    A chain that keeps the round's order (group 1 split into c phases, c - 1 short spacings
    of an interarrival time and then the rest of the round, in turn) mended those nodes (B = 4,
    4 instances, no delay, loads 0.7-0.9: p99 -12..-9% -> -0.5..+3.5%) but broke the nodes
    with a delay (whose instances start at formation times, not arrivals) and near saturation
    (p99 up to 43% low): measured on the grid's 140 deterministic several-instance nodes and
    not adopted (both measured with the group-0 law before its condition on the reused
    instance). Near saturation the real instances spread out again (a small batch's shorter
    service moves its instance's phase), which the phase chain does not: B = 8, 4 instances,
    no delay, 95% load, mean batch 5.87 in that chain against 7.38 simulated, its implied
    utilisation 1.16. Group 1's blocking from group 0's recursion instead, given that the
    reused instance freed at the dispatch (S'_c = G_c: for deterministic service the gap c
    dispatches back given that the last c gaps sum to S, mean S/c) and the others were busy,
    drawn afresh at each dispatch (measured on the grid's deterministic nodes, not adopted):
    B = 4-8 with 4 instances and no delay at loads 0.7-0.9 mend (-15..-10% -> -4..+5%), but
    near saturation it runs away both ways (B = 32, 4 instances, no delay, load 0.9: +186%;
    B = 8, 2 instances, load 0.95: -29%), and the light-load misses (B = 8 and 32, 4
    instances, no delay, load 0.3: -12%, -15%) do not move. There the model has an instance
    free too often (B = 8: mean batch 1.50 with 75% batches of one, simulated 1.86 and 65%;
    B = 32: 2.71 and 51%, simulated 3.65 and 42%), consistent with instances bunched by
    batches started at nearby arrivals, which drawing each spacing afresh does not capture.
    Modelling how the phases arise and mix is open; it is what is left of the error on the
    grid: its 21 several-instance nodes beyond 8% (p95 or p99) all have deterministic
    service, all are low, 18 of them without a delay.
    The chain does not tie the time between dispatches to the instances' service time, so
    its implied utilisation (mean service per dispatch over c times the mean time between
    dispatches) can exceed 1: on 61 of the grid's 252 several-instance nodes with B >= 4, up to
    1.39 (lognormal B = 32, 4 instances, no delay, load 0.7), with batch sizes too small there;
    the result then reports utilisation 1 and says so (validation/batch_size_accuracy.py
    measures the means). The cause, measured: after a positive blocking (an instance freed
    with all others busy) that left fewer than pmin waiting, the chain files the at-once
    dispatch under group 0, whose blocking law has a "free instance at once" atom (0.35 at B
    = 8, 4 instances, no delay, load 0.3), although every other instance is busy then. Filing
    those dispatches under group 1 instead makes the means right (that node: utilisation
    0.946 and mean batch 1.79 against 0.918 and 1.86 simulated, was 1.105 and 1.50; load 0.7:
    0.996 and 4.76 against 0.992 and 4.81), but then group 1's evenly staggered S(k)/c is the
    spacing of most dispatches, and its missing spread shows: grid p99 worst 10.7 -> 21.3%
    with 2 instances, 15.8 -> 34.0% with 4, lognormal nodes without a delay 6.0 -> 19.5%, all
    low. The atom had been standing in for that spread. Giving group 1 the spread of the
    group-0 recursion (the reused instance freed at the dispatch, the others busy), with or
    without its mean pinned to S(k)/c, drew spacings independently and lost capacity as
    before (p99 up to +192% near saturation). Not adopted; measured 2026-11-25.
    Two more variants on top of that filing, measured the same day on the grid and not
    adopted: (a) the chain keeps S(k)/c, and a request that leaves in the next batch sees the
    spacing of c phases uniform on a round of S(k), S(k) Beta(1, c - 1) (an inspection
    effect the chain's mean cannot carry): deterministic B = 4-8, 4 instances, no delay, loads
    0.5-0.9 move from -15..-12% to -14..-4%, but B = 32 at light load stays far low (4
    instances, load 0.3: -33%) and lognormal nodes reach +11%; worst p99 32.5%. (b) That
    spacing also in the chain for batches below K: B = 4-8 within -8..+5%, but B = 32 +8 to
    +36% (independent spacings lose the round's regularity). Why deterministic service is
    harder, from the simulator's free epochs: with S(k) = a + b k the next round's spacing
    between instances i - 1 and i is sigma_i + b (k_i - k_{i-1}), and E[k_i - k_{i-1}] =
    rate (sigma_i - sigma_{i-1}), so a long spacing grows with gain b rate (0.85 at B = 32, 4
    instances, load 0.3) until the short ones end in an idle instance restarted at an
    arrival: the phases bunch and the pattern persists (spacing scv 0.82, 1.23 and 2.14 at B
    = 32 load 0.3, B = 8 load 0.5, B = 4 load 0.95, all 4 instances, against 0.6 for uniform
    phases; lag-4 autocorrelation +0.72, +0.91, +1.00). Lognormal cv 0.3 jitter mixes them
    (scv 0.61, lag-4 +0.25). The derivation ``instance_phases`` (docs/derivations) makes this
    exact for the linearised recursion: the evenly staggered spacing this chain uses is an
    unstable equilibrium, every pattern of phases growing by about 1 + (b rate / c)(1 - cos 2
    pi j / c) per dispatch until an instance idles or the batches fill, so no spread drawn
    about S(k)/c can stand for it. A model of that pattern (a quasi-static spacing environment)
    is the lead left open. Variant (a) first missed most requests: without a delay they are
    counted from the ages of the arrivals at a free epoch (the formation members), which came
    from the chain's blocking law, not the view's; with the view there too (its idle starts
    still the chain's, so that the requests' mass stays whole), and the round taken as c times
    the chain's mean spacing rather than a random S(k), the grid's lognormal nodes without a
    delay came within 3.6-7.0% and deterministic ones within 14% (4 instances: B = 4 and 8 at
    loads 0.8-0.9 still -13..-14%), but delay nodes rose to +20% (their dispatches at delay
    expiry keep the spacing regular: scv 0.28 at B = 32, D = 0.5 S(1), 4 instances, load 0.5).
    Taking, for delay nodes, the spacing the group-0 recursion gives from the chain's own gaps
    (the reused instance freed at the dispatch, the mean pinned to S(k)/c) brought the grid to
    19 nodes beyond 8% (from 21), 7 beyond 12% (from 13), p99 median 1.2% (from 1.4%), worst
    18.9% (from 15.8%); but the holdout of validation/multi_instance_holdout.py went from 7
    nodes beyond 8% on p99 to 19 (B = 64 at loads 0.5-0.8 up to +19%: uniform phases overstate
    the spread of large batches), so it was not adopted either.

Renewal arrivals (approximation)
    Counts in an interval follow the stationary renewal law (exact for Erlang interarrival
    times), and a request is taken to see the time-average state.

Finite queue (max_queue_size = Q >= B)
    At most Q requests wait; arrivals beyond are rejected. The chain's queue then ends at Q
    (no truncation, and no stability condition: an overloaded node sheds load), the arrivals
    counted during a blocking stop at Q, and an arrival that finds Q waiting (PASTA) is
    rejected: ``rejection_fraction``; the distribution is that of served requests. Exact up
    to the lattice for one instance and D = 0 (the M/G/1/K queue when B = 1).

What is exact and what is not
    One instance, D = 0 and a single preferred size (Triton's default {B}), Poisson arrivals:
    exact up to the lattice step h (quantiles within about h) and the truncation mass, both
    stated in ``accuracy`` ("numerical"). Everything else is an "approximation" whose
    statement lists the rules it simplifies: several preferred sizes (a request passed over by
    a smaller preferred batch leaves in the next one, sized at its mean), a delay with requests
    left behind (the oldest left-behind request is taken to be the blocking time plus m / rate
    old), several instances, renewal arrivals. Measured errors: validation/predict_accuracy.py.

References
----------
Bailey, N. T. J. (1954). On queueing processes with bulk service. J. R. Stat. Soc. B 16, 80-87.
Neuts, M. F. (1967). A general class of bulk queues with Poisson input. Ann. Math. Stat. 38.
Inoue, Y. (2021). Queueing analysis of GPU-based inference servers with dynamic batching: a
closed-form characterization. Performance Evaluation 147 (mean sojourn, used as a check).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import fft, optimize, signal, special, stats
from scipy.linalg import blas, lapack

from ..latency import Accuracy, Approximation, LatticeLatency
from ..system import Node, UnstableError
from .measured import family_of, measured
from .blas import one_blas_thread
from .service_law import lattice_cells, service_lattice, service_upper, unit_jitter

__all__ = ["batch_node", "BatchNodeLatency"]

# The lattice step is the batch-of-one mean service time divided by this, unless a caller asks
# for another resolution. 100 keeps the quantile error near 1% of S(1) and a solve in
# milliseconds for deterministic service.
DEFAULT_RESOLUTION = 100
# Mass the model may leave out (queue lengths beyond the chain, service times beyond the
# lattice): 1e-7 is 1e-4 of the mass above p99.9, and against 1e-10 it moved quantiles by at
# most 1.2% (lognormal jitter, where the shorter service support also makes the lattice finer;
# deterministic service: 7e-5) and cut the median predict time by 15% (72 nodes of the
# benchmarks/predict_speed.py grid; that script: median 40 -> 35 ms).
DEFAULT_TAIL = 1e-7


class BatchNodeLatency(LatticeLatency):
    """The batch node's sojourn-time distribution (a :class:`~qmodel.latency.LatticeLatency`)."""


# --------------------------------------------------------------------------------------------
def _poisson_table(rate: float, times: np.ndarray, count: int) -> np.ndarray:
    """P[t, j] = P(Poisson(rate * times[t]) = j), j < count (log space: no overflow)."""
    mu = rate * np.asarray(times, float)[:, None]
    j = np.arange(count)[None, :]
    with np.errstate(divide="ignore"):
        log_mu = np.log(mu)
    logp = np.where(j == 0, 0.0, j * np.where(mu > 0, log_mu, 0.0)) - mu - special.gammaln(j + 1)
    out = np.exp(logp)
    out[(mu[:, 0] == 0), 1:] = 0.0
    return out


def _renewal_counts(rate: float, scv: float, times: np.ndarray, count: int) -> np.ndarray:
    """P[t, j] = P(N(times[t]) = j) for a stationary renewal process with gamma interarrivals.

    Erlang-k interarrivals (scv = 1/k) are exact: N(t) = floor((P + U) / k), P ~ Poisson(k rate
    t) phases and U the stationary phase, uniform on 0..k-1. Other scv < 1 mix the two nearest
    Erlang laws so that the count variance rate/k matches; scv > 1 uses the negative binomial
    with the same mean rate t and variance scv rate t (a two-moment approximation).
    """
    times = np.asarray(times, float)
    if scv == 1.0:
        return _poisson_table(rate, times, count)
    if scv > 1.0:
        mu = rate * times[:, None]
        r = np.maximum(mu / (scv - 1.0), 1e-300)
        out = stats.nbinom.pmf(np.arange(count)[None, :], r, 1.0 / scv)
        out[times == 0] = 0.0
        out[times == 0, 0] = 1.0
        return out
    k = 1.0 / scv
    lo, hi = int(math.floor(k + 1e-9)), int(math.ceil(k - 1e-9))
    if lo == hi:
        return _erlang_counts(rate, lo, times, count)
    # 1/k = w/lo + (1 - w)/hi
    w = (1.0 / k - 1.0 / hi) / (1.0 / lo - 1.0 / hi)
    return w * _erlang_counts(rate, lo, times, count) + (1 - w) * _erlang_counts(rate, hi,
                                                                                times, count)


def _erlang_counts(rate: float, k: int, times: np.ndarray, count: int) -> np.ndarray:
    """P[t, n] = P(N(times[t]) = n), n < count, for the stationary Erlang-k renewal process.

    N(t) = floor((P + U) / k) with P ~ Poisson(k rate t) completed phases and U uniform on
    0..k-1 (the phase at time 0), so P(N = n) = sum_j P(P = j) max(0, 1 - |j - n k| / k): a
    triangular weighting of the Poisson law around n k. The Poisson law is cut into blocks
    of k (block n holds j = n k .. n k + k - 1); count n takes block n with weights
    (k - o) / k and block n - 1 with weights o / k (o the offset in the block). Positive
    terms only, and one Poisson table instead of 2k cdf evaluations per count.
    """
    times = np.asarray(times, float)
    length = count * k
    offset = np.arange(k)
    out = np.empty((times.size, count))
    rows = max(1, 2_000_000 // length)             # at most 2 million table entries at once
    for lo in range(0, times.size, rows):
        blocks = _poisson_table(k * rate, times[lo:lo + rows], length).reshape(-1, count, k)
        out[lo:lo + rows] = blocks @ ((k - offset) / k)
        out[lo:lo + rows, 1:] += blocks[:, :-1] @ (offset / k)
    return out


def _decay_rate(increment_pmf: np.ndarray, step: int) -> float:
    """theta > 0 with E[exp(theta (A - step))] = 1 (Cramer-Lundberg rate of the queue tail)."""
    j = np.flatnonzero(increment_pmf > 0)
    logp = np.log(increment_pmf[j])

    def log_mgf(theta):                  # log-sum-exp, shifted by the largest term
        a = logp + theta * (j - step)
        top = a.max()
        return float(top + np.log(np.exp(a - top).sum()))

    if j.max() <= step:           # the queue can never grow past a full batch
        return 50.0
    hi = 1.0
    while log_mgf(hi) < 0:
        hi *= 2
    return optimize.brentq(log_mgf, 1e-9, hi) if log_mgf(1e-9) < 0 else 1e-9


class _BandedChain:
    """A Markov chain's transitions gathered straight into LAPACK band storage, and its
    stationary law.

    The balance equations pi (T - I) = 0 are solved as a banded system (LAPACK gbsv, LU with
    partial pivoting) with the states numbered by ``index`` (state -> row of the system; -1
    for states left out, which keep probability 0). The batch chain's queue steps down by at
    most a batch per dispatch and up by up to a service's arrivals, so the matrix lies in a
    band; numbered from the longest queue down, the narrow side (the step down) is below the
    diagonal, which keeps the LU's fill to the band (measured on the
    benchmarks/predict_speed.py grid: 2-6x faster than SuperLU on the same system in natural
    order, same answers to 1e-11).

    Transitions come as triplets (:meth:`add`) or as a block whose destination depends on
    the queue length n = m + x alone (:meth:`add_block`): the long-queue part of the chain,
    which holds most of the entries, goes into the band with one bincount when small, else
    one slice per arrival count x, with no triplet lists to build, concatenate and sort into
    place. A transition from or to a state left out is a programming error and raises.
    """

    SMALL_BLOCK = 20_000      # entries up to which a block goes in with one bincount

    def __init__(self, index: np.ndarray):
        self.index = np.asarray(index)
        self.size = int(self.index.max()) + 1
        self.triplets = []        # (rows i, columns j, values) of the system, T' entry (i, j)
        self.blocks = []          # (j per m, i per n, values, n_min)
        self.lo, self.hi = 0, 0   # extremes of i - j

    @staticmethod
    def _check(i, j):
        if (i.size and i.min() < 0) or (j.size and j.min() < 0):
            raise ValueError("a transition from or to a state left out of the banded system")

    def _extent(self, diff):
        if diff.size:
            self.lo, self.hi = min(self.lo, int(diff.min())), max(self.hi, int(diff.max()))

    def add(self, frm, to, vals):
        """T[frm, to] += vals (arrays broadcast together)."""
        frm, to, vals = (a.ravel() for a in np.broadcast_arrays(frm, to, vals))
        i, j = self.index[to], self.index[frm]
        self._check(i, j)
        self._extent(i - j)
        self.triplets.append((i, j, np.asarray(vals, float)))

    def add_block(self, frm, to_of_n, vals, n_min: int):
        """T[frm[m - 1], to_of_n[m + x]] += vals[m - 1, x] for m = 1..len(frm), x < J, and
        m + x >= n_min; ``vals`` is (len(frm), J), or (J,) when it does not depend on m."""
        j = self.index[frm]
        J = vals.shape[-1]
        i_of_n = self.index[to_of_n[:len(frm) + J]]
        self._check(i_of_n[1:], j)
        # i - j over the entries, as a strided view over m (no copy) less j
        window = np.lib.stride_tricks.sliding_window_view(i_of_n, J)[1:len(frm) + 1]
        top = min(max(n_min - 1, 0), len(frm))      # rows with some m + x < n_min
        n = np.arange(1, top + 1)[:, None] + np.arange(J)[None, :]
        self._extent((window[:top] - j[:top, None])[n >= n_min])
        if top < len(frm):
            self._extent(np.concatenate([window[top:].min(axis=1) - j[top:],
                                         window[top:].max(axis=1) - j[top:]]))
        self.blocks.append((j, i_of_n, vals, n_min))

    @staticmethod
    def _entries(block):
        """A block's entries as (row i, column j, value) of T' in the system's numbering."""
        j, i_of_n, vals, n_min = block
        N, J = len(j), vals.shape[-1]
        n = np.arange(1, N + 1)[:, None] + np.arange(J)[None, :]
        on = n >= n_min
        return (i_of_n[n][on], np.broadcast_to(j[:, None], on.shape)[on],
                np.broadcast_to(vals, on.shape)[on])

    def transitions(self):
        """All transitions as (row i, column j, value) of T' in the system's numbering, the
        blocks expanded (for checks: the solve writes the large blocks into the band
        directly)."""
        parts = list(self.triplets) + [self._entries(block) for block in self.blocks]
        return tuple(np.concatenate(z) for z in zip(*parts))

    def stationary(self) -> np.ndarray:
        """pi over the states (0 for those left out). One balance equation is redundant; it is
        replaced by a normalisation over the states that its row of the band reaches, so the
        band stays intact. That needs those states to carry stationary mass; where they carry
        none (transient states, e.g. an overloaded finite queue that never empties) the
        system is singular or nearly so and the solve is garbage. So each solve is checked by
        its residual max |pi T - pi| (1e-9 of the largest probability), and a failed one is
        retried with the row of its most likely state, then with rows a quarter window apart.
        """
        size = self.size
        kl, ku = max(self.hi, 1), max(-self.lo, 1)
        height = 2 * kl + ku + 1                        # gbsv's storage: kl more rows for the fill
        # (T - I)' in band storage: entry (i, j) at [kl + ku + i - j, j]; the triplets and
        # the small blocks (one bincount beats J slices) go in together
        parts, large = list(self.triplets), []
        for block in self.blocks:
            if len(block[0]) * block[2].shape[-1] > self.SMALL_BLOCK:
                large.append(block)
            else:
                parts.append(self._entries(block))
        band = np.zeros(height * size)
        if parts:
            i, j, v = (np.concatenate(z) for z in zip(*parts))
            band += np.bincount((kl + ku + i - j) * size + j, v, height * size)
        band = band.reshape(height, size)
        for j, i_of_n, vals, n_min in large:
            N, J = len(j), vals.shape[-1]
            for x in range(J):                     # m = m_lo..N: distinct columns j, no clash
                m_lo = max(1, n_min - x)
                if m_lo > N:
                    continue
                cols = j[m_lo - 1:]
                band[kl + ku + i_of_n[m_lo + x:N + x + 1] - cols, cols] += (
                    vals[m_lo - 1:, x] if vals.ndim == 2 else vals[x])
        band[kl + ku] -= 1.0
        live = self.index >= 0

        def solve(row):
            """pi (system order) with balance equation ``row`` replaced by sum(pi[window]) =
            1, the window being every column that row has in the band, and whether it
            balances."""
            window = np.arange(max(row - kl, 0), min(row + ku + 1, size))
            ab = band.copy()
            ab[kl + ku + row - window, window] = 1.0
            rhs = np.zeros(size)
            rhs[row] = 1.0
            _, _, x, info = lapack.dgbsv(kl, ku, ab, rhs, overwrite_ab=True, overwrite_b=True)
            x = np.clip(x, 0.0, None)
            if info != 0 or not x.sum() > 0:
                return None, False                      # singular: the window holds no mass
            x = x / x.sum()
            # (T - I)' x; the wrapper wants at least kl + ku + 1 rows, and the rows beyond the
            # system's are zero in the band
            rows = max(size, kl + ku + 1)
            residual = np.abs(blas.dgbmv(rows, size, kl, ku, 1.0, band[kl:], x)[:size]).max()
            return x, bool(residual <= 1e-9 * x.max())

        # the row of the chain's first state; if that fails, the row of the state the failed
        # solve put most mass on, then rows a quarter window apart until one balances
        x, ok = solve(size - 1)
        retries = [int(np.argmax(x))] if x is not None else []
        retries += list(range(size - 1, -1, -max(1, (kl + ku + 1) // 4)))[1:]
        for row in retries:
            if ok:
                break
            x, ok = solve(row)
        if not ok:
            raise ArithmeticError("the batch chain's balance equations could not be solved "
                                  "with any normalisation tried")
        pi = np.zeros(self.index.size)
        pi[live] = x[self.index[live]]
        return pi


def _behind(M: np.ndarray, pois: np.ndarray, rows: int) -> np.ndarray:
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


def _fft_len(n: int) -> int:
    return fft.next_fast_len(int(n), real=True)


def check_resolution(resolution) -> int:
    """The lattice resolution as a whole number >= 4, or a ValueError that says so."""
    if isinstance(resolution, bool) or not isinstance(resolution, int) or resolution < 4:
        raise ValueError(f"resolution must be a whole number of lattice steps per batch-of-one "
                         f"service time, at least 4 (default {DEFAULT_RESOLUTION}); got "
                         f"{resolution!r}")
    return resolution


@one_blas_thread
def batch_node(node: Node, rate: float, resolution: int = DEFAULT_RESOLUTION,
               tail: float = DEFAULT_TAIL, arrival_scv: float = 1.0) -> BatchNodeLatency:
    """Sojourn-time distribution of a batching node with Poisson (or renewal) arrivals.

    Parameters
    ----------
    node : Node
        Any max_batch_size, max_queue_delay, preferred sizes, service law and instances. A
        finite ``max_queue_size`` (at least max_batch_size) is a loss system: an arrival that
        finds that many requests waiting is rejected, ``rejection_fraction`` says how many,
        and the distribution is that of served requests.
    rate : float
        Arrival rate, requests per second; below the node's capacity unless the queue is
        finite.
    resolution : int
        Lattice steps per batch-of-one mean service time; the quantile error shrinks like 1/it.
    tail : float
        Truncation: stationary queue-length mass left out of the embedded chain, and the
        service-time mass beyond the lattice's longest service time.
    arrival_scv : float
        Squared coefficient of variation of the interarrival times (1: Poisson). Renewal
        arrivals are an approximation: counts in an interval follow the stationary renewal law
        (exact for Erlang interarrivals), and a request is taken to see the time-average state.

    Returns
    -------
    BatchNodeLatency

    Examples
    --------
    With B = 1 the node is an M/D/1 queue, whose exact sojourn p99 is 11.3559 (D = 1, rho = 0.8):

    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(base=1.0), max_batch_size=1)
    >>> round(batch_node(node, rate=0.8).p99, 2)
    11.36
    """
    check_resolution(resolution)
    rate = float(rate)
    if not rate > 0 or not math.isfinite(rate):
        raise ValueError(f"rate must be a positive number of requests per second, got {rate}")
    queue = node.max_queue_size
    if queue and queue < node.max_batch_size:
        raise NotImplementedError(
            f"batch_node models a finite queue only when it holds a full batch: "
            f"max_queue_size={queue} < max_batch_size={node.max_batch_size}. Raise "
            f"max_queue_size to at least {node.max_batch_size}, or use qmodel.simulate")
    if queue > _SingleInstance.MAX_QUEUE_STATES:
        raise NotImplementedError(
            f"max_queue_size={queue} is more queue states than the batch model solves "
            f"({_SingleInstance.MAX_QUEUE_STATES}); use qmodel.simulate for this node, or "
            f"max_queue_size=0 (unlimited) if the load is below capacity")
    if not queue and rate >= node.capacity:
        raise UnstableError(f"rate {rate:g}/s is at or above the node's capacity "
                            f"{node.capacity:g}/s; lower the rate or add instances")
    if not (arrival_scv >= 0 and math.isfinite(arrival_scv)):
        raise ValueError(f"arrival_scv must be a finite number >= 0, got {arrival_scv}")
    return _SingleInstance(node, rate, resolution, tail,
                           arrival_scv=max(float(arrival_scv), 1e-3)).solve()


class _SingleInstance:
    """The computation behind :func:`batch_node`, in steps named after the module docstring."""

    MAX_QUEUE_STATES = 4_000  # beyond this the load is too close to the model's capacity
    MAX_SERVICE_POINTS = 200   # lattice points across the longest service time
    MAX_DELAY_POINTS = 50     # lattice points across max_queue_delay
    ITERATIONS = 2      # c > 1: passes of the gap iteration (part of the model: see docstring)
    # c > 1: truncation of the chains before the last pass, which give the next pass only the
    # batch-size law and the gaps' mean and scv (moved by about this fraction of themselves)
    PASS_TAIL = 1e-5
    # c > 1: leave group 0's never-reached records out of the linear system (see chain)
    PRUNE_UNREACHED = True

    def __init__(self, node: Node, rate: float, resolution: int, tail: float,
                 max_points: int = 4096, arrival_scv: float = 1.0):
        self.node, self.rate, self.tail = node, rate, tail
        self.cut = tail              # the chain's truncation in the current pass
        self.scv = float(arrival_scv)
        self.max_points = max_points
        self.B = node.max_batch_size
        self.Q = node.max_queue_size      # 0: unlimited
        self.D = float(node.max_queue_delay)
        self.table = node.preferred_table()
        self.pmin = min(node.effective_preferred)
        # what a long queue dispatches: B once the oldest request's delay has run out (with a
        # delay, a long queue always holds such a request), else the largest preferred size
        self.K = node.saturated_batch_size
        # sizes that can leave requests behind: a queue of n >= pmin dispatches table[min(n, B)]
        self.leaving = sorted({int(self.table[n]) for n in range(self.pmin, self.B + 1)}
                              | ({self.B} if self.D > 0 else set()))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            own = np.asarray(node.service.mean(np.arange(1, self.B + 1)), float)
        self.c = node.instances
        self.own_means = own
        # After a dispatch the queue waits until an instance is free ("blocking"): S(k) for one
        # instance (exact). With c > 1 (approximation, see _blocking_laws) dispatch records
        # come in two groups: group 1 when the dispatch went to an instance that had just
        # freed with all others busy, group 0 otherwise. Each request still takes its own
        # batch's full S(k). (_blocking_laws sets the number of groups: one in the first pass,
        # where both block alike.)
        self.groups = 1
        self.batch_law = None         # c > 1: batch sizes and gaps of the previous pass
        self.gap = self.gap_scv = None
        # the lattice: ``resolution`` steps per S(1), coarser where the service law's support
        # or the delay would need more points than the work budget allows
        upper = service_upper(node.service, range(1, self.B + 1), tail)
        self.set_lattice(max(float(own[0]) / resolution, upper / self.MAX_SERVICE_POINTS,
                             self.D / self.MAX_DELAY_POINTS))

    def set_lattice(self, h: float):
        """Service laws on a lattice of step h (seconds)."""
        self.h = h
        upper = service_upper(self.node.service, range(1, self.B + 1), self.tail)
        self.Ls = int(math.ceil(upper / self.h)) + 2
        sizes = range(1, self.B + 1)
        self.ps_own, self.service_overflow = service_lattice(self.node.service, sizes, self.h,
                                                             self.Ls)
        self.times = np.arange(self.Ls) * self.h
        # c > 1: S(k)/c, the spacing of instances taken in turn (group 1's blocking law)
        # (a spacing takes time: what the lattice puts at 0, spacings below h/2, goes to h)
        self.ps_spaced = None
        if self.c > 1:
            self.ps_spaced = service_lattice(self.node.service, sizes, self.h * self.c,
                                             self.Ls)[0]
            self.ps_spaced[:, 1] += self.ps_spaced[:, 0]
            self.ps_spaced[:, 0] = 0.0
        self._blocking_laws()
        # the delay in lattice steps: at least one when there is a delay (a service law with a
        # long tail can make the step longer than a short delay)
        self.Da = max(int(round(self.D / self.h)), 1 if self.D > 0 else 0)
        # what depends on the lattice but not on the blocking laws (which the c > 1 passes
        # change): arrival counts over each lattice time, and the formation tables
        mu = self.rate * float(self.times[-1])
        count = max(int(mu + 12 * math.sqrt(max(self.scv, 1.0) * mu) + 30), self.B + 4)
        self.pois_lattice = self.counts(self.times, count)
        self._formation_tables()

    def _formation_tables(self):
        """Batch-size laws and mean waits of the formations the chain starts: an arrival to
        an idle node, and a formation after a batch that left nobody, its oldest a*h old
        (a < Da) when the instance frees."""
        self.idle_sizes, self.idle_time = None, 1.0 / self.rate
        if self.pmin > 1:            # an arrival to an idle node starts a formation of one
            idle_sizes, idle_wait = self.formation_all(np.array([self.D]))
            self.idle_sizes = idle_sizes[1, 0]
            self.idle_time += float(idle_wait[1, 0])
        r_grid = self.D - np.arange(self.Da) * self.h
        self.young_sizes, self.young_wait = self.formation_all(r_grid)

    def _blocking_laws(self):
        """Blocking laws ps[g * B + k - 1] of each record group g and batch size k.

        One instance: S(k), exact. Several instances (approximation, error measured in
        validation/predict_accuracy.py):

        - group 1, a dispatch to an instance that has just freed while the others were all
          busy (a queue was waiting): the next instance frees S(k)/c later, the spacing of c
          instances that take batches in turn: the mean of the real spacing while a queue
          waits, not its spread (see the module docstring).
        - group 0, any other dispatch: see :meth:`_staggered_law`.

        The first pass uses S(k)/c for both; later passes use the batch sizes and the time
        between dispatches of the previous pass. While both groups block alike, where a
        record leads does not depend on its group, so the first pass solves the chain with
        the groups lumped into one (the same answer, half the states).
        """
        if self.c == 1:
            self.ps, self.means = self.ps_own, self.own_means
            return
        full = self.ps_spaced
        if self.batch_law is None:
            self.groups, self.ps = 1, full
        else:
            self.groups, self.ps = 2, np.vstack([self._staggered_law(), full])
        self.means = self.ps @ self.times

    def _staggered_law(self):
        """Time V from a dispatch until some instance is free, for group-0 dispatches.

        Instances take batches in turn, so the instance taken j dispatches ago started G_j
        earlier, G_j = X_1 + ... + X_j the sum of the last j gaps between dispatches, and is
        still busy at v if its batch time S'_j exceeds v + G_j. The S'_j are drawn from the
        batch-size mix and the gaps X_i are independent gammas with the mean and spread of
        the gaps of the previous pass. A group-0 dispatch goes to the instance taken c
        dispatches ago, so that one was free, S'_c <= G_c; the others' chance of being busy
        is taken given that:

            P(V > v) = P(S(k) > v) E[prod_{j=1}^{c-1} P(S' > v + G_j) ; S'_c <= G_c]
                                   / P(S'_c <= G_c).

        (Without the condition the gaps before a dispatch look typical; given that the
        reused instance was free they are longer, and the others less often busy: on the
        grid of validation/predict_accuracy.py the unconditioned law put lognormal B = 32
        nodes' p99 6-9% high at every load; with the condition every lognormal node with
        several instances is within 6%.) The G_j are nested partial sums, so the expectation
        is taken by a backward recursion over j rather than as a product of marginals (which
        would treat the instances as independent and, at light load, put the chance that all
        others are still busy several times too low), in the time t = v + G_j since the
        dispatch: K_c(v, t) = P(S' <= t - v), K_j(v, t) = P(S' > t) E[K_{j+1}(v, t + X)], and
        the numerator is E[K_1(v, v + X)]. For deterministic service and exponential gaps of
        rate r this is (r (S' - v))^(c-1) / (c-1)! / sum_{j<c} (r S')^j / j!
        (qmodel/derivations/staggered_instances.py; tests/test_batch_node.py compares the two).
        V = 0 means a free instance was waiting.
        """
        w = self.batch_law / self.batch_law.sum()
        mix = w @ self.ps_own
        free = np.minimum(np.cumsum(mix), 1.0)          # P(S' <= i h)
        busy = 1.0 - free                               # P(S' > i h)
        # one gap X ~ gamma with mean gap and scv gap_scv, on the lattice (to its 1 - 1e-9
        # quantile)
        gap_law = unit_jitter("gamma", math.sqrt(max(self.gap_scv, 1e-6)))
        gaps = int(math.ceil(float(gap_law.isf(1e-9)) * self.gap / self.h)) + 2
        g_pmf = lattice_cells(gap_law, [self.gap], self.h, gaps)[0][0]
        # Only gaps shorter than the lattice matter below (a later instance is busy only
        # before Ls), except through the reused instance's tail P(X >= d), kept in full.
        Ls = self.Ls
        beyond = np.concatenate([np.cumsum(g_pmf[::-1])[::-1], [0.0]])      # P(X >= i)
        lag = np.arange(Ls)[:, None] - np.arange(Ls)[None, :]
        # E[K(v, t + X)] = (K @ shift)[v, t], shift[u, t] = P(X = u - t): a Toeplitz matrix
        shift = np.where(lag >= 0, g_pmf[np.clip(lag, 0, g_pmf.size - 1)], 0.0)
        shift[lag >= g_pmf.size] = 0.0
        # K_c(v, t) = P(S' <= t - v) depends on d = t - v alone, so its expectation is a 1-D
        # table: E[P(S' <= d + X)] for d = -(Ls - 1) .. Ls - 1, with P(S' <= u) = 1 beyond the
        # lattice (the tail term)
        d = np.arange(-(Ls - 1), Ls)
        reach = g_pmf[:2 * Ls - 1]                 # d + X < Ls needs X < 2 Ls - 1
        free_d = np.concatenate([np.zeros(Ls - 1), free, np.zeros(reach.size - 1)])
        reused = np.correlate(free_d, reach, mode="valid") \
            + beyond[np.minimum(Ls - d, beyond.size - 1)]
        K = busy[None, :] * reused[lag.T + Ls - 1]              # K_{c-1}(v, t), lag.T = t - v
        for _ in range(self.c - 2):
            K = busy[None, :] * (K @ shift)
        joint = np.einsum("vt,tv->v", K, shift)             # E[K_1(v, v + X)]
        # P(S'_c <= G_c): G_c is the c-fold sum of the same lattice gaps (below Ls)
        g_c = g_pmf[:Ls]
        for _ in range(self.c - 1):
            g_c = np.convolve(g_c, g_pmf[:Ls])[:Ls]
        reused_free = float(g_c @ free[:g_c.size]) + max(1.0 - float(g_c.sum()), 0.0)
        others = np.clip(joint / max(reused_free, 1e-300), 0.0, 1.0)
        surv = np.clip(1.0 - np.cumsum(self.ps_own, axis=1), 0.0, 1.0) * others[None, :]
        law = np.empty_like(self.ps_own)
        law[:, 0] = 1.0 - surv[:, 0]
        law[:, 1:] = surv[:, :-1] - surv[:, 1:]
        law = np.clip(law, 0.0, None)
        return law / law.sum(axis=1, keepdims=True)

    def counts(self, times, count: int) -> np.ndarray:
        """P[t, j]: j arrivals in an interval of length times[t] (Poisson, or renewal)."""
        return _renewal_counts(self.rate, self.scv, times, count)

    # --- batch formation -----------------------------------------------------------------
    def formation_all(self, r):
        """Batch-size law and mean wait of formations starting with n0 = 1..pmin-1 waiting.

        The batch leaves at the (pmin - n0)-th further arrival or when the oldest request's
        delay runs out, ``r`` seconds from now, whichever comes first (Triton's delay rule).

        Returns
        -------
        sizes : array, shape (pmin, len(r), B + 1)
            P(batch size = k), indexed by n0 (row 0 unused).
        wait : array, shape (pmin, len(r))
            E[min(time of the (pmin - n0)-th arrival, r)].
        """
        r = np.atleast_1d(np.asarray(r, float))
        P = self.pmin
        pois = self.counts(r, P)[:, :P]
        cdf = np.cumsum(pois, axis=1)
        above = np.cumsum(np.clip(1.0 - cdf, 0.0, None), axis=1) / self.rate
        n0 = np.arange(P)
        need = np.maximum(P - n0, 1)                   # arrivals that complete the batch
        # sizes n0 + i, i < need: i arrivals came before the delay ran out; pmin: need came
        shift = np.arange(P)[None, :] - n0[:, None]                      # (n0, k): i = k - n0
        sizes = np.zeros((n0.size, r.size, self.B + 1))
        sizes[:, :, :P] = np.where((shift >= 0)[:, None, :],
                                   pois[:, np.maximum(shift, 0)].transpose(1, 0, 2), 0.0)
        sizes[:, :, P] = np.clip(1.0 - cdf[:, need - 1], 0.0, None).T
        wait = above[:, need - 1].T.copy()
        sizes[0], wait[0] = 0.0, 0.0                   # n0 = 0 is no formation
        return sizes, wait

    # --- embedded chain ------------------------------------------------------------------
    def arrivals_during_service(self):
        """A[k-1, j] = P(j Poisson arrivals during S(k)), and the oldest one's age.

        G[k-1, n, a] = P(n arrivals during S(k), the first of them a*h before the end), for
        n < pmin: the age of the oldest waiting request when the instance frees (kept as
        factors; :meth:`oldest_ages` builds it).
        """
        pois = self.pois_lattice
        A = self.ps @ pois
        # keep the counts up to where every blocking law's tail (more arrivals than that) is
        # below 1e-3 of the truncation: the bound above is for the longest service time on
        # the lattice, far beyond the typical one (and for S(k)/c, far beyond its support).
        # The counts beyond are lumped into the last one kept, so that every law still sums
        # to one (the chain's balance check needs its rows whole).
        beyond = np.cumsum(A[:, ::-1], axis=1)[:, ::-1]
        alive = np.flatnonzero(beyond.max(axis=0) > self.cut * 1e-3)
        self.J = min(max(int(alive[-1]) + 2 if alive.size else 2, self.B + 2), A.shape[1])
        self.pois_s = pois[:, :self.J].copy()
        self.pois_s[:, -1] += pois[:, self.J:].sum(axis=1)
        A[:, self.J - 1] += A[:, self.J:].sum(axis=1)          # = ps @ pois_s
        self._pois_hat = None              # its transform, made when the arrival view needs it
        self.A = A[:, :self.J]
        # the blocking laws without their atom at 0 (a free instance at once), and the
        # arrivals during a positive blocking: after it, the next dispatch finds all others busy
        self.ps_positive = self.ps.copy()
        self.ps_positive[:, 0] = 0.0
        self.A_pos = self.A.copy()                     # no arrivals in a blocking of no time
        self.A_pos[:, 0] = np.clip(self.A[:, 0] - self.ps[:, 0], 0.0, None)
        # density of (n, a): Phi_k(a) (rate a)^(n-1) / (n-1)!, Phi_k(a) = E[rate e^{-rate S}; S >= a]
        a = self.times
        phi = np.cumsum((self.ps * self.rate * np.exp(-self.rate * a))[:, ::-1], axis=1)[:, ::-1]
        n = np.arange(1, max(self.pmin, 2))
        with np.errstate(divide="ignore"):
            log_term = ((n[:, None] - 1) * np.log(np.where(a > 0, self.rate * a, 1.0))[None, :]
                        - special.gammaln(n)[:, None])
        term = np.exp(log_term)
        term[:, 0] = (n == 1)
        # G[k-1, n, a] = h phi_k(a) term_n(a) scale_k(n) is kept as its factors (see
        # oldest_ages): the chain needs only the ages below the delay, and the tagged request
        # only their mix over the records. The lattice sum of the density misses A_k[n] by
        # O(h); the scale makes the ages of n arrivals carry exactly the probability of n.
        self.age_phi, self.age_term = self.h * phi, term[:self.pmin - 1]
        total = self.age_phi @ self.age_term.T                        # (law, n - 1)
        target = self.A[:, 1:self.pmin]
        self.age_scale = np.divide(target, total, out=np.zeros_like(total), where=total > 0)

    def oldest_ages(self, laws: slice, length: int) -> np.ndarray:
        """G[k-1, n, a] for the blocking laws ``laws``, n < pmin, a < length: n arrivals during
        the blocking, the first of them a*h before its end (row n = 0 is zero)."""
        length = min(length, self.Ls)
        G = np.zeros((laws.stop - laws.start, self.pmin, length))
        G[:, 1:] = (self.age_phi[laws, None, :length] * self.age_term[None, :, :length]
                    * self.age_scale[laws, :, None])
        return G

    def chain(self):
        """Stationary law of dispatch records (batch size k, requests left behind m, group)."""
        B, K, pmin, D = self.B, self.K, self.pmin, self.D
        full = self.groups - 1                       # the group of "all others busy" records
        if self.Q:
            # a finite queue: at most Q wait, arrivals beyond are rejected; no truncation
            N = self.Q
        else:
            theta = _decay_rate(self.A[full * B + K - 1], K)
            N = B + self.J + int(math.ceil(-math.log(self.cut) / theta)) + 1
        if N > self.MAX_QUEUE_STATES:
            raise NotImplementedError(
                f"the batch model's queue does not drain fast enough at rate {self.rate:g}/s "
                f"(it would need {N:,} queue states): the load is too close to what the model "
                f"sees as capacity. Lower the rate, or use qmodel.simulate for this node")
        self.N = N
        R1 = B + len(self.leaving) * N               # records per group
        self.R1 = R1
        R = self.groups * R1
        # Group 0's records that left requests behind are reached only through a blocking of
        # no time (a free instance at once) after a record that left requests behind; group
        # 1's blocking S(k)/c takes time, so from group 1 they are never reached, and so
        # never at all. Left out of the system (with c > 1 they are half its states, and
        # without them the groups need not interleave), they keep their stationary mass 0.
        unreached = (self.PRUNE_UNREACHED and self.groups == 2
                     and not self.ps[full * B:, 0].any())
        # The record groups interleave, so that a queue length's records lie side by side and
        # the system stays banded; the system numbers them from the end.
        within = np.arange(R)
        order = (within % R1) * self.groups + within // R1
        live = np.ones(R, bool)
        if unreached:
            live[B:R1] = False
        index = np.full(R, -1)
        index[live] = live.sum() - 1 - np.argsort(np.argsort(order[live]))
        system = _BandedChain(index)
        # Transitions into group 0's records with m = 0 (formations, idle starts, small
        # queues) fill a dense R x B block; immediate dispatches go straight to the system.
        small = np.zeros((R, B))
        # where an immediate dispatch from n waiting leads: record (k, rest) with k the largest
        # preferred size <= min(n, B), or min(n, B) once the oldest request's delay ran out
        n_all = np.arange(N + self.J)
        if self.Q:
            n_all = np.minimum(n_all, self.Q)        # the arrivals beyond Q were rejected

        def destination(k_imm):
            m_imm = np.minimum(n_all - k_imm, N)
            return np.where(m_imm > 0,
                            B + np.searchsorted(self.leaving, k_imm) * N + (m_imm - 1),
                            k_imm - 1)

        dest_imm = destination(self.table[np.minimum(n_all, B)])
        dest_exc = destination(np.minimum(n_all, B))
        exc0, exc_m = self._exceeded_counts(N)
        # without a delay, or with preferred sizes {B}, the delay-expired dispatch is the
        # preferred one: no separate transitions
        expiry = self.D > 0 and pmin < B
        self.after = np.zeros(R)     # mean idle + formation time after each record's blocking
        x = np.arange(self.J)
        A_pos = self.A_pos
        for g in range(self.groups):
            self._small_queue(small, g)
            big = x >= pmin
            laws = slice(g * B, (g + 1) * B)
            system.add(g * R1 + np.arange(B)[:, None], full * R1 + dest_imm[x[big]][None, :],
                       (self.A[laws] - exc0[laws])[:, big])
            if expiry:
                system.add(g * R1 + np.arange(B)[:, None], full * R1 + dest_exc[x[big]][None, :],
                           exc0[laws][:, big])
            for k in (self.leaving if g == full or not unreached else ()):
                first = g * R1 + B + self.leaving.index(k) * N
                law = g * B + k - 1
                # record (k, m) with x arrivals during its blocking: n = m + x waiting
                rows = first + np.arange(N)
                if expiry:
                    late = exc_m[law]                                      # (m, x)
                    system.add_block(rows, full * R1 + dest_imm, A_pos[law][None, :] - late,
                                     pmin)
                    system.add_block(rows, full * R1 + dest_exc, late, pmin)
                else:
                    system.add_block(rows, full * R1 + dest_imm, A_pos[law], pmin)
                # blocked for no time (a free instance at once): the next one goes at once too
                atom = self.A[law][0] - A_pos[law][0]
                if atom > 0:
                    ready = np.arange(max(pmin, 1), N + 1)
                    expired = (D > 0) & (ready / self.rate >= D)
                    system.add(first + ready - 1,
                               np.where(expired, dest_exc[ready], dest_imm[ready]), atom)
                self._remainder_small_queue(small, first, law)
        rows_small, cols_small = np.nonzero(small)
        system.add(rows_small, cols_small, small[rows_small, cols_small])
        self.pi = system.stationary()
        self.R = R
        self.chain_tail = 0.0 if self.Q else float(sum(
            self.pi[g * R1 + B + i * N + N - self.J:g * R1 + B + (i + 1) * N].sum()
            for g in range(self.groups) for i in range(len(self.leaving))))

    def _exceeded_counts(self, N):
        """Where the delay matters for an immediate dispatch: the mass of x arrivals during a
        positive blocking after which the oldest request waited at least D.

        Returns exc0[law, x] (records that left nobody: the oldest of x arrivals over a
        blocking s is s * Beta(x, 1) old) and exc_m[law] of shape (N, J) (records that left m:
        the oldest is taken as s + m / rate old). Without a delay, or when the preferred and
        the delay-expired dispatch agree (preferred sizes {B}), exc0 is zero and exc_m empty.
        """
        laws, J = self.ps.shape[0], self.J
        exc0 = np.zeros((laws, J))
        exc_m = {}
        if self.D == 0 or self.pmin == self.B:
            return exc0, exc_m
        s = self.times
        x = np.arange(J)
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(s > self.D, self.D / np.where(s > 0, s, 1.0), 1.0)
        weight = self.pois_s * (1.0 - frac[:, None] ** x[None, :])
        positive = self.ps_positive
        exc0 = positive @ weight
        m = np.arange(1, N + 1)
        start = np.clip(np.ceil((self.D - m / self.rate) / self.h).astype(int), 0, self.Ls)
        for law in range(laws):
            suffix = np.zeros((self.Ls + 1, J))
            suffix[:-1] = np.cumsum((positive[law][:, None] * self.pois_s)[::-1], axis=0)[::-1]
            exc_m[law] = suffix[start]
        return exc0, exc_m

    def _small_queue(self, T, g):
        """Transitions of group g's records with m = 0 into free epochs with fewer than pmin
        waiting (those dispatches go to group 0)."""
        pmin, B = self.pmin, self.B
        recs = g * self.R1 + np.arange(B)
        A = self.A[g * B:(g + 1) * B]
        if pmin > 1:
            T[recs, :B] += A[:, :1] * self.idle_sizes[None, 1:]
            self.after[recs] += A[:, 0] * self.idle_time
        else:
            T[recs, 0] += A[:, 0]
            self.after[recs] += A[:, 0] / self.rate
        if pmin == 1:
            return
        # n0 = 1..pmin-1 waiting, the oldest a*h old: a < Da a formation, else at once
        G = self.oldest_ages(slice(g * B, (g + 1) * B), self.Da)[:, 1:]
        T[recs, :pmin - 1] += np.clip(A[:, 1:pmin] - G.sum(axis=2), 0.0, None)
        if G.shape[2]:
            flat = G.reshape(B, -1)                                    # (k, (n0, a))
            T[recs, :B] += (flat @ self.young_sizes[1:pmin, :G.shape[2]].reshape(flat.shape[1],
                                                                                  -1))[:, 1:]
            self.after[recs] += flat @ self.young_wait[1:pmin, :G.shape[2]].ravel()

    def _remainder_small_queue(self, small, first, law):
        """Records (k, m), 1 <= m < pmin (rows first + m - 1 of ``small``), followed by fewer
        than pmin waiting: the oldest is a left-behind request; its age is taken as the
        blocking time plus m / rate (approximation)."""
        pmin, D, B, rate = self.pmin, self.D, self.B, self.rate
        top = min(pmin - 1, self.N)
        if top < 1:
            return
        m = np.arange(1, top + 1)
        p = self.ps[law]
        # blocking times s below young[m - 1] leave the oldest younger than D: the batch
        # still forms; from there on the delay has run out and n = m + x go at once
        young = (self.times[None, :] + m[:, None] / rate < D).sum(axis=1)
        # suffix[s0, x] = P(blocking index >= s0, x arrivals during it)
        suffix = np.zeros((self.Ls + 1, pmin))
        suffix[:-1] = np.cumsum((p[:, None] * self.pois_s[:, :pmin])[::-1], axis=0)[::-1]
        left, waiting = np.nonzero(m[:, None] <= np.arange(1, pmin)[None, :])
        left, waiting = left + 1, waiting + 1          # record (k, left), then left <= n < pmin
        small[first + left - 1, waiting - 1] += suffix[young[left - 1], waiting - left]
        # the records whose oldest is still young for some blocking times: a formation with
        # n0 = mm + x waiting, the oldest's age on the lattice of ages (time left D - a*h)
        mm = np.flatnonzero(young > 0) + 1
        if not mm.size:
            return
        s = np.arange(young[mm[0] - 1])                 # young blocking times (longest for mm[0])
        x = np.arange(pmin - 1)
        fits = ((x[None, :, None] < pmin - mm[:, None, None])
                & (s[None, None, :] < young[mm - 1][:, None, None]))
        mass = (p[s][:, None] * self.pois_s[s, :pmin - 1]).T[None, :, :] * fits  # (mm, x, s)
        a_idx = np.minimum(np.rint((self.times[s][None, :] + mm[:, None] / rate) / self.h)
                           .astype(int), self.Da - 1)                            # (mm, s)
        n0 = np.minimum(mm[:, None, None] + x[None, :, None], pmin - 1)          # (mm, x, 1)
        cell = (np.arange(mm.size)[:, None, None] * pmin + n0) * self.Da + a_idx[:, None, :]
        W = np.bincount(cell.ravel(), mass.ravel(), mm.size * pmin * self.Da).reshape(mm.size, -1)
        small[first + mm - 1, :B] += (W @ self.young_sizes[:, :self.Da].reshape(W.shape[1], -1)
                                      )[:, 1:]
        self.after[first + mm - 1] += W @ self.young_wait[:, :self.Da].ravel()

    # --- tagged request ------------------------------------------------------------------
    def dispatch_cycle(self):
        """The records' batch sizes, the mean and scv of the time between dispatches, and the
        utilisation (all the c > 1 gap iteration needs from a pass)."""
        B, N, R1 = self.B, self.N, self.R1
        sizes = np.concatenate([np.arange(1, B + 1), np.repeat(self.leaving, N)])
        left = np.concatenate([np.zeros(B, int), np.tile(np.arange(1, N + 1),
                                                          len(self.leaving))])
        self.rec_k = np.tile(sizes, self.groups)
        self.rec_m = np.tile(left, self.groups)
        self.rec_law = np.repeat(np.arange(self.groups), R1) * B + self.rec_k - 1
        self.cycle = float(np.dot(self.pi, self.means[self.rec_law] + self.after))
        self.busy = float(np.dot(self.pi, self.own_means[self.rec_k - 1])
                          / (self.c * self.cycle))
        weight = self.pi / self.cycle
        self.weight = weight
        # spread of the time between dispatches: blocking variance, exponential idle times and
        # the spread of the records' means (formation times counted at their means)
        block_var = self.ps @ self.times ** 2 - self.means ** 2
        idle_var = np.zeros(self.R)
        for g in range(self.groups):
            idle_var[g * R1:g * R1 + B] = self.A[g * B:(g + 1) * B, 0] / self.rate ** 2
        rec_mean = self.means[self.rec_law] + self.after
        var = np.dot(self.pi, block_var[self.rec_law] + idle_var
                     + (rec_mean - np.dot(self.pi, rec_mean)) ** 2)
        self.cycle_scv = float(var / np.dot(self.pi, rec_mean) ** 2)

    def arrival_view(self):
        """Z[q, r]: probability a Poisson arrival finds a batch in service with residual r*h
        and q requests waiting (PASTA)."""
        B, N, R1 = self.B, self.N, self.R1
        weight = self.weight
        top = N + self.J                     # q waiting: left behind plus arrivals so far
        Z = np.zeros((top, self.Ls))
        for g in range(self.groups):
            laws = slice(g * B, (g + 1) * B)
            mix = weight[g * R1:g * R1 + B]
            Y = self._elapsed_residual(mix @ self.ps[laws], mix @ self.A[laws])
            Z[:Y.shape[0]] += Y
            for i, size in enumerate(self.leaving):
                first = g * R1 + B + i * N
                w = np.concatenate([[0.0], weight[first:first + N]])[:N]
                if not w.any():
                    continue
                law = g * B + size - 1
                Y = self._elapsed_residual(self.ps[law], self.A[law])
                conv = signal.fftconvolve(w[:, None], Y, axes=0)[:top]
                Z[:conv.shape[0]] += conv
        Z = np.clip(Z, 0.0, None)
        # a finite queue rejects an arrival that finds Q waiting (PASTA: the fraction of
        # arrivals that do); with an unlimited one, the mass beyond N is the truncation's
        self.rejection = float(Z[N:].sum()) if self.Q else 0.0
        self.Z = Z[:N]

    def _elapsed_residual(self, p, a):
        """Y[q, r] = h sum_u p(u + r) Pois(q; rate u): q arrivals so far, residual r*h.

        ``p`` is a (possibly unnormalised) service law on the lattice and ``a`` its arrival-count
        law; the trapezoid rule in u counts the ends u = 0 and u = s half.
        """
        if self._pois_hat is None:
            self._fft_n = _fft_len(2 * self.Ls)
            self._pois_hat = fft.rfft(self.pois_s, self._fft_n, axis=0)
        corr = fft.irfft(self._pois_hat * fft.rfft(p[::-1], self._fft_n)[:, None], self._fft_n,
                         axis=0)
        Y = np.clip(corr[self.Ls - 1::-1], 0.0, None).T * self.h      # (J, Ls)
        Y[0] -= 0.5 * self.h * p
        Y[:, 0] -= 0.5 * self.h * a
        return Y

    def lattice_points_needed(self) -> float:
        """Lattice points that the time before the tagged request's batch leaves spans."""
        reach_q = np.flatnonzero(np.cumsum(self.pi[::-1])[::-1] > self.tail * 1e-3)
        deepest = int(self.rec_m_max(reach_q[-1])) if reach_q.size else 0
        F = deepest // self.K + 1
        mean_K = self.means[(self.groups - 1) * self.B + self.K - 1] / self.h
        spread_K = max(self.Ls - mean_K, 2.0)
        return self.Ls + self.Da + (F - 1) * mean_K + math.sqrt(F - 1) * spread_K

    def rec_m_max(self, index: int) -> int:
        """Requests left behind by record ``index`` plus a service's worth of arrivals."""
        index = index % self.R1
        m = 0 if index < self.B else (index - self.B) % self.N + 1
        return m + self.J

    def before_own_batch(self):
        """M0/M1[j-1, e]: the tagged request is j-th in the batch that takes it, after e*h;
        M0 when that batch is the next one, M1 when full batches go ahead of it."""
        K = self.K
        F = (self.N + K - 1) // K
        pK = self.ps[(self.groups - 1) * self.B + K - 1]       # batches ahead: group 1
        self.Le = _fft_len(self.lattice_points_needed() + self.Ls)
        Zp = np.zeros((F * K, self.Ls))
        Zp[:self.N] = self.Z
        blocks = Zp.reshape(F, K, self.Ls)
        self.M0 = np.zeros((K, self.Le))
        self.M0[:, :self.Ls] = blocks[0]
        phi = fft.rfft(pK, self.Le)
        acc = np.zeros((K, self.Le // 2 + 1), complex)
        power = phi.copy()
        mass = blocks.sum(axis=(1, 2))
        alive = np.flatnonzero(np.cumsum(mass[::-1])[::-1] > self.tail * 1e-3)
        last = int(alive[-1]) if alive.size else 0
        for f in range(1, last + 1):
            acc += fft.rfft(blocks[f], self.Le, axis=1) * power
            power = power * phi
        self.M1 = np.clip(fft.irfft(acc, self.Le, axis=1), 0.0, None)
        self.E = np.arange(self.Le) * self.h

    def own_batch(self):
        """H[k, w]: probability that a request's batch has k requests and leaves w*h after it
        arrived."""
        B, pmin = self.B, self.pmin
        self.Lh = max(self.Le, self.Ls + self.Da + 2)
        self.H = _Spread(B, self.Lh)
        pois = np.ascontiguousarray(self.counts(self.E, B).T)      # x arrivals behind it
        for M, next_batch in ((self.M0, True), (self.M1, False)):
            G = _behind(M, pois, B + 1)
            G[B] = np.clip(M.sum(axis=0) - G[:B].sum(axis=0), 0.0, None)  # B or more waiting
            for n in range(pmin, B + 1):
                # after waiting through full batches, the oldest request ahead has run out its
                # delay: all n go (D > 0); otherwise the largest preferred size <= n
                k = self.table[n] if next_batch or self.D == 0 else n
                if n < B and k < n:
                    left = self._passed_over(M, pois, n, k)
                    G[n] -= left
                    self._next_batch_after(left, n, k)
                self.H.dense[k, :self.Le] += G[n]
            if not next_batch and pmin > 1:
                self._late_small_batch(M, pois, G)
        self._formation_members()

    def _passed_over(self, M, pois, n, k):
        """Mass of requests in position j > k when n wait and a batch of k < n goes: the
        dispatch does not take them."""
        left = np.zeros(self.Le)
        for j in range(k + 1, min(n, self.K) + 1):
            left += M[j - 1] * pois[n - j]
        return left

    def _next_batch_after(self, left, n, k):
        """A request passed over by a batch of k leaves in the next one: after that batch's
        blocking time, with the n - k left behind plus the mean arrivals meanwhile
        (approximation: one more round, its size at the mean)."""
        law = self.ps[(self.groups - 1) * self.B + k - 1]
        size = int(min(self.B, max(1, round(n - k + self.rate * float(law @ self.times)))))
        later = signal.fftconvolve(left, law)[:self.Le]
        self.H.dense[size, :self.Le] += np.clip(later, 0.0, None)

    def _late_small_batch(self, M, pois, G):
        """A request that waited through full batches and then finds fewer than pmin waiting.

        The oldest request ahead of it is taken to be (j - 1) / rate older, and a formation
        that still has to wait is taken to last its mean time (approximations of a case that
        needs a long queue followed by a lull). ``G[n]`` is the mass of n waiting, j-th of them,
        summed over j (the convolution of M with the arrivals behind).
        """
        D, pmin = self.D, self.pmin
        j = np.arange(1, self.K + 1)[:, None]
        old = (self.E[None, :] + (j - 1) / self.rate >= D) | (D == 0)       # (j, e)
        # the oldest's delay has run out: the n = j + x < pmin waiting go at once; summed over
        # j that is G restricted to such requests
        if old.all():
            early = G[1:pmin]
        else:
            early = _behind(M * old, pois, pmin)[1:]
        self.H.dense[1:pmin, :self.Le] += early
        # the oldest's delay has not run out: a formation with n0 = j + x waiting (x arrivals
        # behind the tagged request), r = D - its age left; the batch leaves when pmin is
        # reached or the delay runs out: its size law is exact given r, its leaving time is
        # taken at the mean of that wait. Cases (j, e) first, then (case, x) in chunks.
        jj, ee = np.nonzero(~old[:pmin - 1] & (M[:pmin - 1] > 0))         # j = jj + 1
        if not jj.size:
            return
        counts = self.counts(D - (self.E[ee] + jj / self.rate), pmin)[:, :pmin]
        cdf = np.cumsum(counts, axis=1)
        above = np.cumsum(np.clip(1.0 - cdf, 0.0, None), axis=1) / self.rate
        per_case = pmin - 1 - jj                                           # x = 0..pmin-j-1
        case_of = np.repeat(np.arange(jj.size), per_case)
        x_of = np.arange(case_of.size) - np.repeat(np.cumsum(per_case) - per_case, per_case)
        # cases lighter than 1e-5 of the truncation are left out (as in _formation_members;
        # they show in the lost mass)
        light = self.tail * 1e-5
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
            when = ee[case] + np.rint(above[case, need[:, 0] - 1] / self.h).astype(int)
            # the delay ran out first, i arrivals came
            weight = mass[:, None] * counts[case]
            row, size = np.nonzero((i < need) & (weight >= light))
            self.H.points(n0[row] + size, when[row], weight[row, size])
            self.H.points(pmin, when, mass * np.clip(1.0 - cdf[case, need[:, 0] - 1], 0.0, None))

    def _formation_members(self):
        """Requests whose batch forms at an instance-free epoch with fewer than pmin waiting,
        or while the instance idles: their waits follow from the ages at that epoch and the
        formation (Triton's delay from the oldest request, or pmin reached)."""
        B, pmin, D, Da, h = self.B, self.pmin, self.D, self.Da, self.h
        per_request = self.weight / self.rate
        R1 = self.R1
        m0 = [slice(g * R1, g * R1 + B) for g in range(self.groups)]
        laws = [slice(g * B, (g + 1) * B) for g in range(self.groups)]
        idle = float(sum(np.dot(per_request[r], self.A[lw, 0]) for r, lw in zip(m0, laws)))
        if pmin == 1:
            self.H.points(1, np.array([0]), np.array([idle]))
            return
        # ages at the free epoch after a batch that left nobody: oldest a, the rest U[0, a]
        g = np.zeros((pmin, self.Ls))                                   # the records' mix of G
        g[1:] = self.age_term * sum((per_request[r][:, None] * self.age_scale[lw]).T
                                    @ self.age_phi[lw] for r, lw in zip(m0, laws))
        g[1, 0] += idle                                                # an arrival to idle
        n0 = np.arange(1, pmin)[:, None]
        a_idx = np.arange(self.Ls)[None, :]
        old = (a_idx >= Da) if D > 0 else np.ones_like(a_idx, bool)
        # the oldest's delay ran out: all n0 go at once, the oldest aged a, the rest U[0, a]
        self.H.points(n0, a_idx, g[1:] * old)
        self.H.uniform(n0, 0, a_idx, g[1:] * old * (n0 - 1))
        # otherwise a formation: the oldest counted, n0 - 1 others with ages U[0, a]
        n_y, a_y = np.nonzero(~old & (g[1:] > 0))
        parts = [(n_y + 1, a_y, g[n_y + 1, a_y], n_y.astype(float), a_y, np.ones(n_y.size))]
        # after a batch that left m behind: the m left-behind requests were counted when they
        # missed their first batch; here the x newcomers (ages U[0, s]) and the formation.
        # Cases lighter than 1e-5 of the truncation are left out: with lognormal service most
        # of them are (92% for B = 64 with a delay, together 1e-10 of the mass); what is left
        # out shows in the result's truncated mass.
        light = self.tail * 1e-5
        m = np.arange(1, pmin - 1)                     # left behind: 1..pmin-2
        x = np.arange(1, pmin - 1)                     # newcomers: 1..pmin-1-m
        fits = x[None, :] <= pmin - 1 - m[:, None]     # (m, x)
        for g_, i in ((g_, i) for g_ in range(self.groups) for i in range(len(self.leaving))):
            first = g_ * R1 + self.B + i * self.N
            w = per_request[first:first + m.size]
            if not w.any():
                continue
            p = self.ps[g_ * B + self.leaving[i] - 1]
            on = np.flatnonzero(p > 0)
            age = self.times[on][None, :] + m[:, None] / self.rate               # (m, s)
            old = age >= D
            mass = (w[:, None, None] * fits[:, :, None]
                    * (p[on][:, None] * self.pois_s[on, 1:pmin - 1]).T[None, :, :])  # (m, x, s)
            mi, xi, si = np.unravel_index(np.flatnonzero(mass >= light), mass.shape)
            ran_out = old[mi, si]
            self.H.uniform(m[mi[ran_out]] + x[xi[ran_out]], 0, on[si[ran_out]],
                           mass[mi, xi, si][ran_out] * x[xi[ran_out]])
            # formations of n0 = m + x, the oldest (not counted here) aged a, x newcomers
            # with ages U[0, s]
            mi, xi, si = mi[~ran_out], xi[~ran_out], si[~ran_out]
            if mi.size:
                a_young = np.minimum(np.rint(age[mi, si] / h).astype(int), Da - 1)
                parts.append((m[mi] + x[xi], a_young, mass[mi, xi, si], x[xi].astype(float),
                              on[si], np.zeros(mi.size)))
        self._formation(*(np.concatenate(z) for z in zip(*parts)))

    def _formation(self, n0, a_idx, mass, spread_count, spread_len, oldest):
        """Add the members of formations: case i starts with n0[i] waiting, the oldest aged
        a_idx[i]*h, with probability mass[i].

        spread_count[i] members (besides the oldest, which is added where oldest[i] is 1) have
        ages uniform on [0, spread_len[i]*h] at the start; newcomers join until pmin are there
        or the oldest's delay runs out. All arrays have one entry per case.
        """
        pmin, Da, h = self.pmin, self.Da, self.h
        if not n0.size:
            return
        need = (pmin - n0)[:, None]                            # arrivals that complete the batch
        r_idx = (Da - a_idx)[:, None]                          # time left, in steps
        # the delay runs out first, x < need newcomers joined: (cases, x) arrays; the cases
        # share a few dozen times left, so the counts are computed once per time
        left, which = np.unique(r_idx[:, 0], return_inverse=True)
        w = mass[:, None] * self.counts(left * h, pmin - 1)[which]
        case, x = np.nonzero((w > 0) & (np.arange(pmin - 1)[None, :] < need))
        w, k, r_case = w[case, x], n0[case] + x, r_idx[case, 0]
        self.H.points(k, Da, w * oldest[case])
        self.H.uniform(k, r_case, r_case + spread_len[case], w * spread_count[case])
        self.H.uniform(k, 0, r_case, w * x)
        # pmin reached at tau (the need-th arrival) before the delay runs out
        tau_idx = np.arange(int(r_idx.max()))
        if self.scv == 1.0:
            dens = h * self.rate * _poisson_table(self.rate, tau_idx * h, pmin - 1).T
        else:   # the need-th arrival: differences of P(N(t) >= need) on the lattice
            edges = np.concatenate([[0.0], (tau_idx + 0.5) * h])
            reached = 1.0 - np.cumsum(self.counts(edges, pmin - 1), axis=1).T
            dens = np.clip(np.diff(reached, axis=1), 0.0, None)
        w = mass[:, None] * dens[need[:, 0] - 1] * (tau_idx[None, :] < r_idx)   # (cases, tau)
        # newcomers before the last: uniform on [0, tau]; the last one waits no time
        self.H.uniform(pmin, 0, tau_idx, (w * (need - 1)).sum(axis=0))
        self.H.points(pmin, np.zeros(1, int), np.array([w.sum()]))
        case, t = np.nonzero(w)
        w = w[case, t]
        self.H.points(pmin, a_idx[case] + t, w * oldest[case])
        self.H.uniform(pmin, t, t + spread_len[case], w * spread_count[case])

    def sojourn(self):
        H = self.H.result()
        self.H_total = float(H.sum())
        L = _fft_len(self.Lh + self.Ls)
        spec = (fft.rfft(H[1:], L, axis=1) * fft.rfft(self.ps_own, L, axis=1)).sum(axis=0)
        self.pmf = np.clip(fft.irfft(spec, L), 0.0, None)

    def approximations(self) -> list:
        """What this node's result approximates (empty: exact up to lattice and truncation)."""
        notes = []
        table = self.table
        for j in range(1, self.K + 1):
            if any((table[n] if n >= self.pmin else n) < j for n in range(j, self.B + 1)):
                notes.append(Approximation(
                    "passed_over", "several preferred sizes: a request passed over by a smaller "
                    "preferred batch leaves in the next one, sized at its mean"))
                break
        if self.scv != 1.0:
            notes.append(Approximation(
                "renewal_counts", f"renewal arrivals (scv {self.scv:g}): stationary counts, "
                f"requests see time averages"))
        if self.c > 1:
            notes.append(Approximation(
                "staggered_instances", f"{self.c} instances: the wait for a free instance "
                f"assumes instances taken in turn (staggered)"))
        if self.D > 0 and self.pmin > 1:
            notes.append(Approximation(
                "left_behind_age", "delay with a queue left behind: the age of the oldest "
                "left-behind request is approximated"))
        return notes

    def dispatch_pass(self, cut: float):
        """Arrival counts, the chain of dispatch records truncated at ``cut``, its cycle."""
        self.cut = cut
        self.arrivals_during_service()
        self.chain()
        self.dispatch_cycle()

    def solve(self) -> BatchNodeLatency:
        passes = self.ITERATIONS if self.c > 1 else 0
        self.dispatch_pass(self.PASS_TAIL if passes else self.tail)
        for i in range(passes):
            # c > 1: group 0's blocking law from this pass's batch sizes and gaps
            if self.gap is not None and abs(self.cycle / self.gap - 1) < 1e-3 \
                    and abs(self.cycle_scv - self.gap_scv) < 1e-3 * max(self.gap_scv, 1e-3):
                break                                          # the fixed point has settled
            self.batch_law = np.bincount(self.rec_k, weights=self.pi, minlength=self.B + 1)[1:]
            self.gap, self.gap_scv = self.cycle, self.cycle_scv
            self._blocking_laws()
            self.dispatch_pass(self.tail if i == passes - 1 else self.PASS_TAIL)
        if self.cut != self.tail:                  # settled early: the last chain in full
            self.dispatch_pass(self.tail)
        needed = self.lattice_points_needed()
        if needed > self.max_points:
            # Long queues: a coarser lattice keeps the work bounded; the step stays small
            # against the quantiles, which grow in proportion.
            self.set_lattice(self.h * needed / self.max_points)
            self.dispatch_pass(self.tail)
        self.arrival_view()
        self.before_own_batch()
        self.own_batch()
        self.sojourn()
        lost = max(self.chain_tail, self.service_overflow,
                   abs(1.0 - self.rejection - self.H_total))
        notes = self.approximations()
        utilization = self.busy
        if utilization > 1.0:
            # c > 1: the chain's time between dispatches is not tied to the instances' service
            # time (validation/batch_size_accuracy.py measures what that does to the means)
            notes.append(Approximation(
                "utilization_capped", f"the model's dispatch rate implies a utilization of "
                f"{utilization:.3f} (its instances free faster than they serve, so its batch "
                f"sizes run small), capped at 1"))
            utilization = 1.0
        family = family_of(self.c, self.node.service.jitter == "deterministic", self.D > 0,
                           renewal=self.scv != 1.0)
        accuracy = Accuracy(
            "approximation" if notes else "numerical",
            "embedded chain of dispatch records on a time lattice", lattice_step=self.h,
            quantile_error=self.h, truncated_mass=lost, approximations=notes,
            measured=(measured(family),) if notes else ())
        batches = np.bincount(self.rec_k, weights=self.pi, minlength=self.B + 1)
        return BatchNodeLatency(
            self.pmf, self.h,
            method=(f"batch node, embedded chain at instance-free epochs "
                    f"({self.c} instance{'s' if self.c > 1 else ''})"),
            accuracy=accuracy, throughput=self.rate * (1.0 - self.rejection), utilization=utilization,
            rejection_fraction=self.rejection,
            batch_size_distribution={int(i): float(v) for i, v in enumerate(batches) if v > 0})


class _Spread:
    """Probability masses over (batch size, wait on the lattice): points and uniform blocks.

    Uniform blocks go into a difference array, so one costs O(1) whatever its length; all adds
    are collected and summed once in :meth:`result`.
    """

    def __init__(self, B: int, length: int):
        self.B, self.length = B, length
        self.dense = np.zeros((B + 1, length))
        self._idx, self._w = [], []           # point masses, flat (k, wait) index
        self._lo, self._hi, self._per = [], [], []

    def points(self, k, idx, w):
        """Mass w at lattice point idx for batch size k (arrays broadcast together)."""
        flat = np.asarray(k) * self.length + np.minimum(np.maximum(idx, 0), self.length - 1)
        w = np.asarray(w, float)
        shape = np.broadcast(flat, w).shape
        self._idx.append(np.broadcast_to(flat, shape).ravel())
        self._w.append(np.broadcast_to(w, shape).ravel())

    def uniform(self, k, lo, hi, w):
        """Mass w spread evenly over lattice points lo..hi (inclusive)."""
        lo = np.minimum(np.maximum(lo, 0), self.length - 1)
        hi = np.minimum(np.maximum(hi, 0), self.length - 1)
        base = np.asarray(k) * (self.length + 1)
        start, stop = base + lo, base + hi + 1
        per = np.asarray(w, float) / (hi - lo + 1)
        shape = np.broadcast(start, stop, per).shape
        self._lo.append(np.broadcast_to(start, shape).ravel())
        self._hi.append(np.broadcast_to(stop, shape).ravel())
        self._per.append(np.broadcast_to(per, shape).ravel())

    def result(self) -> np.ndarray:
        size = (self.B + 1) * self.length
        out = self.dense.copy()
        if self._idx:
            out += np.bincount(np.concatenate(self._idx), np.concatenate(self._w),
                               size).reshape(self.B + 1, self.length)
        if self._lo:
            per = np.concatenate(self._per)
            n = (self.B + 1) * (self.length + 1)
            diff = (np.bincount(np.concatenate(self._lo), per, n)
                    - np.bincount(np.concatenate(self._hi), per, n))
            out += np.cumsum(diff.reshape(self.B + 1, self.length + 1), axis=1)[:, :-1]
        return out


# The shipped number of passes of the several-instance gap iteration (part of the model).
SEVERAL_INSTANCE_PASSES = _SingleInstance.ITERATIONS
