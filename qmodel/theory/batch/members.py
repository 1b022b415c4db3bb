"""The formation members: requests whose batch forms at a free epoch or while the node idles.

A request that finds the instance free with fewer than pmin waiting, or the node idle, joins a
batch that forms: it leaves when pmin are there or the oldest request's delay runs out
(Triton's rule, see docs/triton-semantics.md). Its wait follows from the ages of the waiting
requests at the free epoch, which the chain's records give (after a batch that left nobody:
the oldest's age from the arrival times during the blocking, the others uniform below it),
and from the formation itself.
"""

from __future__ import annotations

import numpy as np

from .arrivals import Arrivals, poisson_table
from .chain import DispatchPass
from .lattice import Lattice
from .rules import Rules
from .spread import Spread

__all__ = ["formation_members", "formation"]


def formation_members(H: Spread, rules: Rules, arrivals: Arrivals, grid: Lattice,
                      run: DispatchPass, tail: float) -> None:
    """Add to ``H`` the requests whose batch forms at an instance-free epoch with fewer than
    pmin waiting, or while the instance idles: their waits follow from the ages at that epoch
    and the formation (Triton's delay from the oldest request, or pmin reached)."""
    B, pmin, D, Da, h = rules.B, rules.pmin, rules.D, grid.Da, grid.h
    rate, N, R1 = arrivals.rate, run.chain.N, run.chain.R1
    counts, groups = run.counts, run.blocking.groups
    per_request = run.cycle.weight / rate
    m0 = [slice(g * R1, g * R1 + B) for g in range(groups)]
    laws = [slice(g * B, (g + 1) * B) for g in range(groups)]
    idle = float(sum(np.dot(per_request[r], counts.A[lw, 0]) for r, lw in zip(m0, laws)))
    if pmin == 1:
        H.points(1, np.array([0]), np.array([idle]))
        return
    # ages at the free epoch after a batch that left nobody: oldest a, the rest U[0, a]
    g = np.zeros((pmin, grid.Ls))                                   # the records' mix of G
    g[1:] = counts.age_term * sum((per_request[r][:, None] * counts.age_scale[lw]).T
                                  @ counts.age_phi[lw] for r, lw in zip(m0, laws))
    g[1, 0] += idle                                                # an arrival to idle
    n0 = np.arange(1, pmin)[:, None]
    a_idx = np.arange(grid.Ls)[None, :]
    old = (a_idx >= Da) if D > 0 else np.ones_like(a_idx, bool)
    # the oldest's delay ran out: all n0 go at once, the oldest aged a, the rest U[0, a]
    H.points(n0, a_idx, g[1:] * old)
    H.uniform(n0, 0, a_idx, g[1:] * old * (n0 - 1))
    # otherwise a formation: the oldest counted, n0 - 1 others with ages U[0, a]
    n_y, a_y = np.nonzero(~old & (g[1:] > 0))
    parts = [(n_y + 1, a_y, g[n_y + 1, a_y], n_y.astype(float), a_y, np.ones(n_y.size))]
    # after a batch that left m behind: the m left-behind requests were counted when they
    # missed their first batch; here the x newcomers (ages U[0, s]) and the formation.
    # Cases lighter than 1e-5 of the truncation are left out: with lognormal service most
    # of them are (92% for B = 64 with a delay, together 1e-10 of the mass); what is left
    # out shows in the result's truncated mass.
    light = tail * 1e-5
    m = np.arange(1, pmin - 1)                     # left behind: 1..pmin-2
    x = np.arange(1, pmin - 1)                     # newcomers: 1..pmin-1-m
    fits = x[None, :] <= pmin - 1 - m[:, None]     # (m, x)
    for g_, i in ((g_, i) for g_ in range(groups) for i in range(len(rules.leaving))):
        first = g_ * R1 + B + i * N
        w = per_request[first:first + m.size]
        if not w.any():
            continue
        p = run.blocking.ps[g_ * B + rules.leaving[i] - 1]
        on = np.flatnonzero(p > 0)
        age = grid.times[on][None, :] + m[:, None] / rate                    # (m, s)
        old = age >= D
        mass = (w[:, None, None] * fits[:, :, None]
                * (p[on][:, None] * counts.pois_s[on, 1:pmin - 1]).T[None, :, :])  # (m, x, s)
        mi, xi, si = np.unravel_index(np.flatnonzero(mass >= light), mass.shape)
        ran_out = old[mi, si]
        H.uniform(m[mi[ran_out]] + x[xi[ran_out]], 0, on[si[ran_out]],
                  mass[mi, xi, si][ran_out] * x[xi[ran_out]])
        # formations of n0 = m + x, the oldest (not counted here) aged a, x newcomers
        # with ages U[0, s]
        mi, xi, si = mi[~ran_out], xi[~ran_out], si[~ran_out]
        if mi.size:
            a_young = np.minimum(np.rint(age[mi, si] / h).astype(int), Da - 1)
            parts.append((m[mi] + x[xi], a_young, mass[mi, xi, si], x[xi].astype(float),
                          on[si], np.zeros(mi.size)))
    formation(H, pmin, arrivals, Da, h, *(np.concatenate(z) for z in zip(*parts)))


def formation(H: Spread, pmin: int, arrivals: Arrivals, Da: int, h: float, n0, a_idx, mass,
              spread_count, spread_len, oldest) -> None:
    """Add the members of formations to ``H``: case i starts with n0[i] waiting, the oldest
    aged a_idx[i]*h, with probability mass[i].

    spread_count[i] members (besides the oldest, which is added where oldest[i] is 1) have
    ages uniform on [0, spread_len[i]*h] at the start; newcomers join until pmin are there
    or the oldest's delay (``Da`` steps) runs out. All arrays have one entry per case.
    """
    if not n0.size:
        return
    rate = arrivals.rate
    need = (pmin - n0)[:, None]                            # arrivals that complete the batch
    r_idx = (Da - a_idx)[:, None]                          # time left, in steps
    # the delay runs out first, x < need newcomers joined: (cases, x) arrays; the cases
    # share a few dozen times left, so the counts are computed once per time
    left, which = np.unique(r_idx[:, 0], return_inverse=True)
    w = mass[:, None] * arrivals.counts(left * h, pmin - 1)[which]
    case, x = np.nonzero((w > 0) & (np.arange(pmin - 1)[None, :] < need))
    w, k, r_case = w[case, x], n0[case] + x, r_idx[case, 0]
    H.points(k, Da, w * oldest[case])
    H.uniform(k, r_case, r_case + spread_len[case], w * spread_count[case])
    H.uniform(k, 0, r_case, w * x)
    # pmin reached at tau (the need-th arrival) before the delay runs out
    tau_idx = np.arange(int(r_idx.max()))
    if arrivals.poisson:
        dens = h * rate * poisson_table(rate, tau_idx * h, pmin - 1).T
    else:   # the need-th arrival: differences of P(N(t) >= need) on the lattice
        edges = np.concatenate([[0.0], (tau_idx + 0.5) * h])
        reached = 1.0 - np.cumsum(arrivals.counts(edges, pmin - 1), axis=1).T
        dens = np.clip(np.diff(reached, axis=1), 0.0, None)
    w = mass[:, None] * dens[need[:, 0] - 1] * (tau_idx[None, :] < r_idx)   # (cases, tau)
    # newcomers before the last: uniform on [0, tau]; the last one waits no time
    H.uniform(pmin, 0, tau_idx, (w * (need - 1)).sum(axis=0))
    H.points(pmin, np.zeros(1, int), np.array([w.sum()]))
    case, t = np.nonzero(w)
    w = w[case, t]
    H.points(pmin, a_idx[case] + t, w * oldest[case])
    H.uniform(pmin, t, t + spread_len[case], w * spread_count[case])
