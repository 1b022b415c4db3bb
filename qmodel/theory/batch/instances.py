"""The blocking after a dispatch: S(k) for one instance, a staggered-instance law for several.

After a dispatch the queue waits until an instance is free (the "blocking"). With one instance
that is the batch's own service time S(k): exact. With c > 1 instances (approximation) the
dispatch records come in two groups:

- group 1, a dispatch to an instance that had just freed while the others were all busy (a
  queue was waiting): the next instance frees S(k)/c later, the spacing of c instances that
  take batches in turn (its mean is right in saturation; its spread is not);
- group 0, any other dispatch: the time until the first of the other instances frees, each
  started a sum of gaps between dispatches earlier, given that the instance the dispatch
  reuses had finished (:func:`staggered_law`).

Group 0's law needs the batch sizes and the gaps between dispatches, which the chain gives:
the model is a first pass with S(k)/c for every blocking, then :data:`PASSES` more passes of
that gap iteration, stopping early once the gaps settle to 1e-3 (:func:`settled`). The pass
count is part of the approximation, not a truncation of a converging solve: iterated to
convergence the gaps settle on values that put p99 further from the simulator
(docs/notes/batch-model.md holds the measurements behind these choices). Each request still
takes its own batch's full S(k).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ...jitter import jitter_law
from ..service_law import lattice_cells
from .lattice import Lattice
from .rules import Rules

__all__ = ["PASSES", "PASS_TAIL", "Gaps", "Blocking", "blocking_laws", "staggered_law",
           "settled"]

# c > 1: passes of the gap iteration after the first (part of the model, see above)
PASSES = 2
# c > 1: truncation of the chains before the last pass, which give the next pass only the
# batch-size law and the gaps' mean and scv (moved by about this fraction of themselves)
PASS_TAIL = 1e-5


class Gaps(NamedTuple):
    """What a pass gives the next one: the stationary law of the batch sizes (k = 1..B, not
    normalised) and the mean and scv of the time between dispatches."""

    batch_law: np.ndarray
    mean: float
    scv: float


def settled(gaps: Gaps, mean: float, scv: float) -> bool:
    """Whether a pass's gaps (``mean``, ``scv``) moved less than 1e-3 from ``gaps``."""
    return abs(mean / gaps.mean - 1) < 1e-3 and abs(scv - gaps.scv) < 1e-3 * max(gaps.scv,
                                                                                  1e-3)


class Blocking(NamedTuple):
    """Blocking laws ps[g * B + k - 1] of each record group g and batch size k, and their means.

    groups : int
        1 (one instance, or the first pass, where both groups block alike: where a record
        leads then does not depend on its group, so the chain lumps them, the same answer
        with half the states) or 2 (group 0, then group 1).
    ps : ndarray, shape (groups * B, Ls)
    means : ndarray, shape (groups * B,)
    """

    groups: int
    ps: np.ndarray
    means: np.ndarray

    @property
    def full(self) -> int:
        """The group of "all others busy" records, the group of a long queue's dispatches."""
        return self.groups - 1


def blocking_laws(rules: Rules, grid: Lattice, gaps: Gaps | None) -> Blocking:
    """The blocking laws: S(k) for one instance; for several, S(k)/c for both groups in the
    first pass (``gaps`` None), then group 0's :func:`staggered_law` from ``gaps``."""
    if rules.c == 1:
        return Blocking(1, grid.ps_own, rules.own_means)
    full = grid.ps_spaced
    if gaps is None:
        groups, ps = 1, full
    else:
        groups, ps = 2, np.vstack([staggered_law(grid.ps_own, gaps, rules.c, grid.h), full])
    return Blocking(groups, ps, ps @ grid.times)


def staggered_law(ps_own: np.ndarray, gaps: Gaps, c: int, h: float) -> np.ndarray:
    """Time V from a dispatch until some instance is free, for group-0 dispatches.

    Instances take batches in turn, so the instance taken j dispatches ago started G_j
    earlier, G_j = X_1 + ... + X_j the sum of the last j gaps between dispatches, and is
    still busy at v if its batch time S'_j exceeds v + G_j. The S'_j are drawn from the
    batch-size mix and the gaps X_i are independent gammas with the mean and spread of
    ``gaps``. A group-0 dispatch goes to the instance taken c dispatches ago, so that one was
    free, S'_c <= G_c; the others' chance of being busy is taken given that:

        P(V > v) = P(S(k) > v) E[prod_{j=1}^{c-1} P(S' > v + G_j) ; S'_c <= G_c]
                               / P(S'_c <= G_c).

    (Without the condition the gaps before a dispatch look typical; given that the reused
    instance was free they are longer, and the others less often busy.) The G_j are nested
    partial sums, so the expectation is taken by a backward recursion over j rather than as
    a product of marginals (which would treat the instances as independent and, at light
    load, put the chance that all others are still busy several times too low), in the time
    t = v + G_j since the dispatch: K_c(v, t) = P(S' <= t - v), K_j(v, t) = P(S' > t)
    E[K_{j+1}(v, t + X)], and the numerator is E[K_1(v, v + X)]. For deterministic service
    and exponential gaps of rate r this is (r (S' - v))^(c-1) / (c-1)! / sum_{j<c} (r S')^j
    / j! (qmodel/derivations/staggered_instances.py; tests/test_batch_node.py compares the
    two). V = 0 means a free instance was waiting.

    Parameters
    ----------
    ps_own : ndarray, shape (B, Ls)
        S(k) on the lattice, k = 1..B.
    gaps : Gaps
    c : int
        Instances.
    h : float
        The lattice step.

    Returns
    -------
    ndarray, shape (B, Ls)
        The law of V after a batch of k, k = 1..B.
    """
    w = gaps.batch_law / gaps.batch_law.sum()
    mix = w @ ps_own
    free = np.minimum(np.cumsum(mix), 1.0)          # P(S' <= i h)
    busy = 1.0 - free                               # P(S' > i h)
    # one gap X ~ gamma with mean gap and scv gap_scv, on the lattice (to its 1 - 1e-9
    # quantile). Only gaps below 2 Ls matter below (a later instance is busy only before Ls;
    # the reused instance's tail P(X >= d) is read up to d = 2 Ls - 1), so the lattice stops
    # at 2 Ls, its last cell holding the rest: at light load a gap spans millions of steps
    # (127M cells, a MemoryError, for one node at 0.1 req/s).
    gap_law = jitter_law("gamma", math.sqrt(max(gaps.scv, 1e-6)))
    Ls = ps_own.shape[1]
    length = min(int(math.ceil(float(gap_law.isf(1e-9)) * gaps.mean / h)) + 2, 2 * Ls + 1)
    g_pmf = lattice_cells(gap_law, [gaps.mean], h, length)[0][0]
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
    for _ in range(c - 2):
        K = busy[None, :] * (K @ shift)
    joint = np.einsum("vt,tv->v", K, shift)             # E[K_1(v, v + X)]
    # P(S'_c <= G_c): G_c is the c-fold sum of the same lattice gaps (below Ls)
    g_c = g_pmf[:Ls]
    for _ in range(c - 1):
        g_c = np.convolve(g_c, g_pmf[:Ls])[:Ls]
    reused_free = float(g_c @ free[:g_c.size]) + max(1.0 - float(g_c.sum()), 0.0)
    others = np.clip(joint / max(reused_free, 1e-300), 0.0, 1.0)
    surv = np.clip(1.0 - np.cumsum(ps_own, axis=1), 0.0, 1.0) * others[None, :]
    law = np.empty_like(ps_own)
    law[:, 0] = 1.0 - surv[:, 0]
    law[:, 1:] = surv[:, :-1] - surv[:, 1:]
    law = np.clip(law, 0.0, None)
    return law / law.sum(axis=1, keepdims=True)
