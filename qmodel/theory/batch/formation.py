"""Batch formation: fewer than pmin wait, and the batch leaves at pmin or when the delay runs out.

A formation that starts with n0 waiting, its oldest request r seconds from its delay, ends at
the (pmin - n0)-th further arrival or after r, whichever comes first (Triton's rule, see
docs/triton-semantics.md). Its batch-size law and mean duration follow from the arrival counts
in r; the chain of dispatch records starts such formations after a batch that left nobody and
when an arrival finds the node idle.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .arrivals import Arrivals
from .rules import Rules

__all__ = ["formation_all", "Formations", "formations"]


def formation_all(arrivals: Arrivals, pmin: int, B: int, r):
    """Batch-size law and mean wait of formations starting with n0 = 1..pmin-1 waiting.

    The batch leaves at the (pmin - n0)-th further arrival or when the oldest request's
    delay runs out, ``r`` seconds from now, whichever comes first (Triton's delay rule).

    Returns
    -------
    sizes : array, shape (pmin, len(r), B + 1)
        P(batch size = k), indexed by n0 (row 0 unused).
    wait : array, shape (pmin, len(r))
        E[min(time of the (pmin - n0)-th arrival, r)].

    Examples
    --------
    Two waiting of pmin = 3, the delay 1 s away, Poisson arrivals of rate 1: the third comes
    in time with probability 1 - e^-1, and the wait is E[min(Exp(1), 1)] = 1 - e^-1.

    >>> sizes, wait = formation_all(Arrivals(1.0), 3, 4, [1.0])
    >>> sizes[2, 0].round(4).tolist(), round(float(wait[2, 0]), 4)
    ([0.0, 0.0, 0.3679, 0.6321, 0.0], 0.6321)
    """
    r = np.atleast_1d(np.asarray(r, float))
    P = pmin
    pois = arrivals.counts(r, P)[:, :P]
    cdf = np.cumsum(pois, axis=1)
    above = np.cumsum(np.clip(1.0 - cdf, 0.0, None), axis=1) / arrivals.rate
    n0 = np.arange(P)
    need = np.maximum(P - n0, 1)                   # arrivals that complete the batch
    # sizes n0 + i, i < need: i arrivals came before the delay ran out; pmin: need came
    shift = np.arange(P)[None, :] - n0[:, None]                      # (n0, k): i = k - n0
    sizes = np.zeros((n0.size, r.size, B + 1))
    sizes[:, :, :P] = np.where((shift >= 0)[:, None, :],
                               pois[:, np.maximum(shift, 0)].transpose(1, 0, 2), 0.0)
    sizes[:, :, P] = np.clip(1.0 - cdf[:, need - 1], 0.0, None).T
    wait = above[:, need - 1].T.copy()
    sizes[0], wait[0] = 0.0, 0.0                   # n0 = 0 is no formation
    return sizes, wait


class Formations(NamedTuple):
    """The formations the chain of dispatch records starts.

    idle_sizes, idle_time : ndarray or None, float
        An arrival to an idle node: the batch-size law of the formation it starts (None when
        pmin = 1: it leaves alone at once) and the mean idle plus formation time.
    young_sizes, young_wait : ndarray
        After a batch that left nobody, n0 waiting, the oldest a*h old (a < Da) when the
        instance frees: ``formation_all`` at the times left D - a*h.
    """

    idle_sizes: np.ndarray | None
    idle_time: float
    young_sizes: np.ndarray
    young_wait: np.ndarray


def formations(rules: Rules, arrivals: Arrivals, h: float, Da: int) -> Formations:
    """The formations' tables on a lattice of step ``h`` with the delay ``Da`` steps long."""
    idle_sizes, idle_time = None, 1.0 / arrivals.rate
    if rules.pmin > 1:            # an arrival to an idle node starts a formation of one
        sizes, wait = formation_all(arrivals, rules.pmin, rules.B, np.array([rules.D]))
        idle_sizes = sizes[1, 0]
        idle_time += float(wait[1, 0])
    r_grid = rules.D - np.arange(Da) * h
    young_sizes, young_wait = formation_all(arrivals, rules.pmin, rules.B, r_grid)
    return Formations(idle_sizes, idle_time, young_sizes, young_wait)
