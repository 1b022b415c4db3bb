"""Arrivals during a blocking: how many, and how old the first of them is when it ends.

A blocking (the time after a dispatch until an instance is free, :mod:`.instances`) holds
arrival counts mixed over its law. After a batch that left nobody, the age of the oldest
waiting request when the instance frees follows exactly from the arrival times during the
blocking: for Poisson arrivals, n arrivals with the first a before the end have density
Phi_k(a) (rate a)^(n-1) / (n-1)!, Phi_k(a) = E[rate e^{-rate S}; S >= a]. Whether that age
has reached the delay decides between a formation and an immediate dispatch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from .. import budget
from .instances import Blocking
from .lattice import MODEL, Lattice

__all__ = ["BlockingArrivals", "arrivals_during_blocking"]


@dataclass(frozen=True, eq=False)
class BlockingArrivals:
    """Arrival counts during each blocking law, cut at J counts.

    Attributes
    ----------
    J : int
        Counts kept: 0..J-1, the last one holding the mass beyond it.
    pois_s : ndarray, shape (Ls, J)
        Counts over each lattice time, so cut.
    A : ndarray, shape (laws, J)
        A[law, j] = P(j arrivals during the blocking).
    ps_positive, A_pos : ndarray
        The blocking laws without their atom at 0 (a free instance at once), and the arrivals
        during a positive blocking: after it, the next dispatch finds all others busy.
    age_phi, age_term, age_scale : ndarray
        The factors of the oldest arrival's age (see :meth:`oldest_ages`).
    folded : bool
        True when a finite queue cut the counts at max_queue_size + 2, short of where their
        tail is negligible.
    """

    J: int
    pois_s: np.ndarray
    A: np.ndarray
    ps_positive: np.ndarray
    A_pos: np.ndarray
    age_phi: np.ndarray
    age_term: np.ndarray
    age_scale: np.ndarray
    folded: bool = False

    def oldest_ages(self, laws: slice, length: int) -> np.ndarray:
        """G[k-1, n, a] for the blocking laws ``laws``, n < pmin, a < length: n arrivals during
        the blocking, the first of them a*h before its end (row n = 0 is zero)."""
        length = min(length, self.age_phi.shape[1])
        pmin = self.age_term.shape[0] + 1           # the ages are kept for n = 1..pmin-1
        G = np.zeros((laws.stop - laws.start, pmin, length))
        G[:, 1:] = (self.age_phi[laws, None, :length] * self.age_term[None, :, :length]
                    * self.age_scale[laws, :, None])
        return G


def arrivals_during_blocking(blocking: Blocking, grid: Lattice, rate: float, pmin: int,
                             B: int, cut: float, queue: int = 0) -> BlockingArrivals:
    """A[k-1, j] = P(j arrivals during a blocking), and the oldest one's age.

    G[k-1, n, a] = P(n arrivals during the blocking, the first of them a*h before its end),
    for n < pmin: the age of the oldest waiting request when the instance frees (kept as
    factors; :meth:`BlockingArrivals.oldest_ages` builds it). ``cut`` is the truncation of the
    chain that uses these counts; ``queue`` a finite max_queue_size (0: unlimited).
    """
    ps, pois = blocking.ps, grid.pois_lattice
    laws, count = ps.shape[0], pois.shape[1]
    # the lattice's counts, and the counts during each blocking law with their tails
    what = f"the arrivals during its blockings ({laws} laws x {count:,} counts)"
    budget.check_memory(8.0 * (grid.Ls + 2 * laws) * count, MODEL, what)
    budget.charge(budget.flops(2.0 * laws * grid.Ls * count)
                  + budget.elements((6.0 * laws + 3.0 * grid.Ls) * count), MODEL, what)
    A = ps @ pois
    # keep the counts up to where every blocking law's tail (more arrivals than that) is
    # below 1e-3 of the truncation: the bound above is for the longest service time on
    # the lattice, far beyond the typical one (and for S(k)/c, far beyond its support).
    # The counts beyond are lumped into the last one kept, so that every law still sums
    # to one (the chain's balance check needs its rows whole).
    beyond = np.cumsum(A[:, ::-1], axis=1)[:, ::-1]
    alive = np.flatnonzero(beyond.max(axis=0) > cut * 1e-3)
    J = min(max(int(alive[-1]) + 2 if alive.size else 2, B + 2), A.shape[1])
    if queue:
        # at most Q wait: Q + 1 or more arrivals leave the queue full whatever waited before
        # (every destination depends on them only through min(n, Q)), and an arrival that
        # finds Q or more waiting is rejected, so counts beyond Q + 1 lump exactly; a long
        # service tail otherwise keeps thousands of counts for a queue of a few dozen
        folded = queue + 2 < J
        J = min(J, queue + 2)
    else:
        folded = False
    pois_s = pois[:, :J].copy()
    pois_s[:, -1] += pois[:, J:].sum(axis=1)
    A[:, J - 1] += A[:, J:].sum(axis=1)          # = ps @ pois_s
    A = A[:, :J]
    ps_positive = ps.copy()
    ps_positive[:, 0] = 0.0
    A_pos = A.copy()                     # no arrivals in a blocking of no time
    A_pos[:, 0] = np.clip(A[:, 0] - ps[:, 0], 0.0, None)
    # density of (n, a): Phi_k(a) (rate a)^(n-1) / (n-1)!, Phi_k(a) = E[rate e^{-rate S}; S >= a]
    a = grid.times
    phi = np.cumsum((ps * rate * np.exp(-rate * a))[:, ::-1], axis=1)[:, ::-1]
    n = np.arange(1, max(pmin, 2))
    with np.errstate(divide="ignore"):
        log_term = ((n[:, None] - 1) * np.log(np.where(a > 0, rate * a, 1.0))[None, :]
                    - special.gammaln(n)[:, None])
    term = np.exp(log_term)
    term[:, 0] = (n == 1)
    # G[k-1, n, a] = h phi_k(a) term_n(a) scale_k(n) is kept as its factors (see
    # oldest_ages): the chain needs only the ages below the delay, and the tagged request
    # only their mix over the records. The lattice sum of the density misses A_k[n] by
    # O(h); the scale makes the ages of n arrivals carry exactly the probability of n.
    age_phi, age_term = grid.h * phi, term[:pmin - 1]
    total = age_phi @ age_term.T                        # (law, n - 1)
    target = A[:, 1:pmin]
    age_scale = np.divide(target, total, out=np.zeros_like(total), where=total > 0)
    return BlockingArrivals(J=J, pois_s=pois_s, A=A, ps_positive=ps_positive, A_pos=A_pos,
                            age_phi=age_phi, age_term=age_term, age_scale=age_scale,
                            folded=folded)
