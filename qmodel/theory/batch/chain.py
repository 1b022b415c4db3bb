"""The embedded Markov chain of dispatch records, and the cycle between dispatches.

The chain's state is the record of a dispatch: its batch size k, the number m of requests it
left waiting (m > 0 only when a queue longer than the batch was waiting) and, with several
instances, its group (:mod:`.instances`). After a dispatch the queue is blocked until an
instance is free; at the free epoch the batcher dispatches at once (pmin or more waiting, or
the oldest request's delay D already ran out, or D = 0), or forms a batch (:mod:`.formation`).
The records are numbered

    group g, then the B records (k, m = 0), then for each size k in ``leaving`` the N
    records (k, m = 1..N),

the chain is truncated where its stationary tail mass, from the Cramer-Lundberg decay rate
of the homogeneous part, is below the truncation (no truncation for a finite queue, which ends
at max_queue_size), and its balance equations are solved as a banded linear system
(:class:`~.banded.BandedChain`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import budget
from ..tails import decay_rate
from .arrivals import Arrivals
from .banded import BandedChain
from .blocking import BlockingArrivals, arrivals_during_blocking
from .instances import Blocking, Gaps, blocking_laws
from .lattice import MODEL, Lattice
from .rules import Rules

__all__ = ["DispatchPass", "dispatch_pass", "DispatchChain", "dispatch_chain", "queue_states",
           "chain_work", "Cycle", "dispatch_cycle", "MAX_QUEUE_STATES", "PRUNE_UNREACHED"]

MAX_QUEUE_STATES = 4_000  # beyond this the load is too close to the model's capacity
# c > 1: leave group 0's never-reached records out of the linear system (see dispatch_chain)
PRUNE_UNREACHED = True


def _step_log_mgf(increment_pmf: np.ndarray, step: int):
    """theta -> log E[exp(theta (A - step))], A with law ``increment_pmf`` on 0, 1, ..."""
    j = np.flatnonzero(increment_pmf > 0)
    logp = np.log(increment_pmf[j])

    def log_mgf(theta):                  # log-sum-exp, shifted by the largest term
        a = logp + theta * (j - step)
        top = a.max()
        return float(top + np.log(np.exp(a - top).sum()))

    return log_mgf


@dataclass(frozen=True, eq=False)
class DispatchChain:
    """The stationary law of the dispatch records.

    Attributes
    ----------
    N : int
        Queue states: a record leaves m = 1..N requests behind.
    R1 : int
        Records per group, B + len(leaving) N.
    pi : ndarray, shape (groups * R1,)
        The stationary law.
    after : ndarray, shape (groups * R1,)
        The mean idle plus formation time after each record's blocking.
    truncated : float
        The stationary mass of the records within a blocking's arrivals of the truncation.
    rec_k, rec_law : ndarray
        Each record's batch size and the row of its blocking law.
    """

    N: int
    R1: int
    pi: np.ndarray
    after: np.ndarray
    truncated: float
    rec_k: np.ndarray
    rec_law: np.ndarray

    def batch_sizes(self, B: int) -> np.ndarray:
        """The stationary law of the batch sizes over 0..B (not normalised, 0 at 0)."""
        return np.bincount(self.rec_k, weights=self.pi, minlength=B + 1)


def queue_states(rules: Rules, blocking: Blocking, counts: BlockingArrivals, rate: float,
                 cut: float) -> int:
    """How many requests left behind the chain follows: max_queue_size for a finite queue,
    else enough that the stationary mass beyond is below ``cut``; NotImplementedError when
    that is more than ``MAX_QUEUE_STATES``."""
    if rules.Q:
        # a finite queue: at most Q wait, arrivals beyond are rejected; no truncation
        N = rules.Q
    else:
        B, K = rules.B, rules.K
        # the queue's tail decays like exp(-theta n), theta the Cramer-Lundberg rate of the
        # long queue's step: the arrivals during a full batch's blocking, less K
        grows = counts.A[blocking.full * B + K - 1]
        if np.flatnonzero(grows > 0).max() <= K:
            theta = 50.0                 # the queue never grows past a full batch
        else:
            try:
                theta = decay_rate(_step_log_mgf(grows, K), start=1.0)
            except ArithmeticError:      # it does not drain: far more states than allowed
                theta = 1e-9
        N = B + counts.J + int(math.ceil(-math.log(cut) / theta)) + 1
    if N > MAX_QUEUE_STATES:
        raise NotImplementedError(
            f"the batch model's queue does not drain fast enough at rate {rate:g}/s "
            f"(it would need {N:,} queue states): the load is too close to what the model "
            f"sees as capacity. Lower the rate, or use qmodel.simulate for this node")
    return N


def chain_work(B: int, groups: int, leaving: int, behind: int, N: int, J: int, Ls: int,
               expiry: bool) -> tuple:
    """The chain's estimated peak memory (bytes) and work (seconds), and what they are for.

    ``leaving`` sizes leave requests behind, in ``behind`` of the ``groups`` record groups;
    ``N`` queue states, ``J`` arrival counts, ``Ls`` lattice points; ``expiry``: the delay
    splits the long queue's dispatches. Numbered by queue length (see :func:`dispatch_chain`),
    a step of the queue moves a record by the records per queue length times the step: down
    by at most a batch, up by at most a blocking's arrivals; the banded LU costs 2 kl (kl +
    ku) flops per state, its band and the copy the solve works in 8 (2 kl + ku + 1) bytes
    per state each.

    Examples
    --------
    The node of issue 21's case 6 at 0.974 of capacity (max_batch_size 78, four sizes that
    leave requests behind, 2960 queue states, 398 arrival counts):

    >>> nbytes, seconds, what = chain_work(78, 1, 4, 1, 2960, 398, 120, True)
    >>> round(nbytes / 2**30, 2), round(seconds, 1), what
    (0.51, 3.2, 'its chain of dispatch records (11,918 states, a band 2,451 wide)')
    """
    per_m = leaving * behind
    size = groups * B + per_m * N
    kl = per_m * B + groups * B
    ku = per_m * J + groups * B
    height = 2 * kl + ku + 1
    split = 2 if expiry else 1
    nbytes = 8.0 * (2 * height * size + split * per_m * N * J + groups * (B + leaving * N) * B)
    seconds = (budget.flops(2.0 * size * kl * (kl + ku))
               + budget.elements(per_m * (3 * split * N * J + (3 * Ls * J if expiry else 0))))
    return nbytes, seconds, f"its chain of dispatch records ({size:,} states, a band " \
                            f"{height:,} wide)"


def dispatch_chain(rules: Rules, arrivals: Arrivals, grid: Lattice, blocking: Blocking,
                   counts: BlockingArrivals, cut: float) -> DispatchChain:
    """Stationary law of dispatch records (batch size k, requests left behind m, group)."""
    B, pmin, D, rate = rules.B, rules.pmin, rules.D, arrivals.rate
    leaving, groups, full = rules.leaving, blocking.groups, blocking.full
    N = queue_states(rules, blocking, counts, rate, cut)
    R1 = B + len(leaving) * N               # records per group
    R = groups * R1
    # Group 0's records that left requests behind are reached only through a blocking of
    # no time (a free instance at once) after a record that left requests behind; group
    # 1's blocking S(k)/c takes time, so from group 1 they are never reached, and so
    # never at all. Left out of the system (with c > 1 they are half its states, and
    # without them the groups need not interleave), they keep their stationary mass 0.
    unreached = (PRUNE_UNREACHED and groups == 2 and not blocking.ps[full * B:, 0].any())
    # the groups whose records that left requests behind are in the system
    behind = [g for g in range(groups) if g == full or not unreached]
    # without a delay, or with preferred sizes {B}, the delay-expired dispatch is the
    # preferred one: no separate transitions
    expiry = D > 0 and pmin < B
    nbytes, seconds, what = chain_work(B, groups, len(leaving), len(behind), N, counts.J,
                                       grid.Ls, expiry)
    # with the lattice's arrival counts, which stay alive meanwhile
    budget.check_memory(nbytes + grid.pois_lattice.nbytes, MODEL, what)
    budget.charge(seconds, MODEL, what)
    # The records of one queue length (every group, every size that leaves requests
    # behind) lie side by side, so that the system stays banded: its band spans a
    # blocking's arrivals times the records per queue length, not the whole queue (numbered
    # size by size, several leaving sizes made the band N wide: gigabytes near capacity).
    # The system numbers them from the end.
    within = np.arange(R)
    pos = within % R1
    size_of, m_of = np.divmod(np.maximum(pos - B, 0), N)
    slot = np.where(pos < B, pos, B + m_of * len(leaving) + size_of)
    order = slot * groups + within // R1
    live = np.ones(R, bool)
    if unreached:
        live[B:R1] = False
    index = np.full(R, -1)
    index[live] = live.sum() - 1 - np.argsort(np.argsort(order[live]))
    system = BandedChain(index, MODEL)
    # Transitions into group 0's records with m = 0 (formations, idle starts, small
    # queues) fill a dense R x B block; immediate dispatches go straight to the system.
    small = np.zeros((R, B))
    # where an immediate dispatch from n waiting leads: record (k, rest) with k the largest
    # preferred size <= min(n, B), or min(n, B) once the oldest request's delay ran out
    n_all = np.arange(N + counts.J)
    if rules.Q:
        n_all = np.minimum(n_all, rules.Q)        # the arrivals beyond Q were rejected

    def destination(k_imm):
        m_imm = np.minimum(n_all - k_imm, N)
        return np.where(m_imm > 0,
                        B + np.searchsorted(leaving, k_imm) * N + (m_imm - 1),
                        k_imm - 1)

    dest_imm = destination(rules.table[np.minimum(n_all, B)])
    dest_exc = destination(np.minimum(n_all, B))
    exc0, exc_m = _exceeded_counts(rules, rate, grid, counts, N,
                                   [g * B + k - 1 for g in behind for k in leaving])
    after = np.zeros(R)     # mean idle + formation time after each record's blocking
    x = np.arange(counts.J)
    A, A_pos = counts.A, counts.A_pos
    for g in range(groups):
        _small_queue(small, after, g, R1, rules, rate, grid, counts)
        big = x >= pmin
        laws = slice(g * B, (g + 1) * B)
        system.add(g * R1 + np.arange(B)[:, None], full * R1 + dest_imm[x[big]][None, :],
                   (A[laws] - exc0[laws])[:, big])
        if expiry:
            system.add(g * R1 + np.arange(B)[:, None], full * R1 + dest_exc[x[big]][None, :],
                       exc0[laws][:, big])
        for k in (leaving if g in behind else ()):
            first = g * R1 + B + leaving.index(k) * N
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
            atom = A[law][0] - A_pos[law][0]
            if atom > 0:
                ready = np.arange(max(pmin, 1), N + 1)
                expired = (D > 0) & (ready / rate >= D)
                system.add(first + ready - 1,
                           np.where(expired, dest_exc[ready], dest_imm[ready]), atom)
            _remainder_small_queue(small, after, first, law, N, rules, rate, grid, blocking,
                                   counts)
    rows_small, cols_small = np.nonzero(small)
    system.add(rows_small, cols_small, small[rows_small, cols_small])
    pi = system.stationary()
    truncated = 0.0 if rules.Q else float(sum(
        pi[g * R1 + B + i * N + N - counts.J:g * R1 + B + (i + 1) * N].sum()
        for g in range(groups) for i in range(len(leaving))))
    sizes = np.concatenate([np.arange(1, B + 1), np.repeat(leaving, N)])
    rec_k = np.tile(sizes, groups)
    rec_law = np.repeat(np.arange(groups), R1) * B + rec_k - 1
    return DispatchChain(N=N, R1=R1, pi=pi, after=after, truncated=truncated, rec_k=rec_k,
                         rec_law=rec_law)


def _exceeded_counts(rules: Rules, rate: float, grid: Lattice, counts: BlockingArrivals,
                     N: int, leaving_laws):
    """Where the delay matters for an immediate dispatch: the mass of x arrivals during a
    positive blocking after which the oldest request waited at least D.

    Returns exc0[law, x] (records that left nobody: the oldest of x arrivals over a
    blocking s is s * Beta(x, 1) old) and exc_m[law] of shape (N, J) for the blocking laws
    ``leaving_laws`` of the records that leave requests behind (the oldest is taken as
    s + m / rate old). Without a delay, or when the preferred and the delay-expired
    dispatch agree (preferred sizes {B}), exc0 is zero and exc_m empty.
    """
    D, Ls = rules.D, grid.Ls
    positive, J = counts.ps_positive, counts.J
    laws = positive.shape[0]
    exc0 = np.zeros((laws, J))
    exc_m = {}
    if D == 0 or rules.pmin == rules.B:
        return exc0, exc_m
    s = grid.times
    x = np.arange(J)
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(s > D, D / np.where(s > 0, s, 1.0), 1.0)
    weight = counts.pois_s * (1.0 - frac[:, None] ** x[None, :])
    if counts.folded:
        # counts lumped at a finite queue: the oldest's age depends on how many arrived, so
        # the lumped column takes each count's own weight (it lumps exactly, see
        # arrivals_during_blocking, only after that)
        pois = grid.pois_lattice[:, J - 1:]
        weight[:, J - 1] = (pois * (1.0 - frac[:, None] ** np.arange(J - 1, J - 1 + pois.shape[1])
                                    [None, :])).sum(axis=1)
    exc0 = positive @ weight
    m = np.arange(1, N + 1)
    start = np.clip(np.ceil((D - m / rate) / grid.h).astype(int), 0, Ls)
    for law in leaving_laws:
        suffix = np.zeros((Ls + 1, J))
        suffix[:-1] = np.cumsum((positive[law][:, None] * counts.pois_s)[::-1], axis=0)[::-1]
        exc_m[law] = suffix[start]
    return exc0, exc_m


def _small_queue(T, after, g, R1, rules: Rules, rate: float, grid: Lattice,
                 counts: BlockingArrivals):
    """Transitions of group g's records with m = 0 into free epochs with fewer than pmin
    waiting (those dispatches go to group 0), into ``T``; their mean idle and formation
    times into ``after``."""
    pmin, B = rules.pmin, rules.B
    forming = grid.formations
    recs = g * R1 + np.arange(B)
    A = counts.A[g * B:(g + 1) * B]
    if pmin > 1:
        T[recs, :B] += A[:, :1] * forming.idle_sizes[None, 1:]
        after[recs] += A[:, 0] * forming.idle_time
    else:
        T[recs, 0] += A[:, 0]
        after[recs] += A[:, 0] / rate
    if pmin == 1:
        return
    # n0 = 1..pmin-1 waiting, the oldest a*h old: a < Da a formation, else at once
    G = counts.oldest_ages(slice(g * B, (g + 1) * B), grid.Da)[:, 1:]
    T[recs, :pmin - 1] += np.clip(A[:, 1:pmin] - G.sum(axis=2), 0.0, None)
    if G.shape[2]:
        flat = G.reshape(B, -1)                                    # (k, (n0, a))
        T[recs, :B] += (flat @ forming.young_sizes[1:pmin, :G.shape[2]].reshape(flat.shape[1],
                                                                               -1))[:, 1:]
        after[recs] += flat @ forming.young_wait[1:pmin, :G.shape[2]].ravel()


def _remainder_small_queue(small, after, first, law, N, rules: Rules, rate: float,
                           grid: Lattice, blocking: Blocking, counts: BlockingArrivals):
    """Records (k, m), 1 <= m < pmin (rows first + m - 1 of ``small``), followed by fewer
    than pmin waiting: the oldest is a left-behind request; its age is taken as the
    blocking time plus m / rate (approximation)."""
    pmin, D, B, Da = rules.pmin, rules.D, rules.B, grid.Da
    forming = grid.formations
    top = min(pmin - 1, N)
    if top < 1:
        return
    m = np.arange(1, top + 1)
    p = blocking.ps[law]
    # blocking times s below young[m - 1] leave the oldest younger than D: the batch
    # still forms; from there on the delay has run out and n = m + x go at once
    young = (grid.times[None, :] + m[:, None] / rate < D).sum(axis=1)
    # suffix[s0, x] = P(blocking index >= s0, x arrivals during it)
    suffix = np.zeros((grid.Ls + 1, pmin))
    suffix[:-1] = np.cumsum((p[:, None] * counts.pois_s[:, :pmin])[::-1], axis=0)[::-1]
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
    mass = (p[s][:, None] * counts.pois_s[s, :pmin - 1]).T[None, :, :] * fits  # (mm, x, s)
    a_idx = np.minimum(np.rint((grid.times[s][None, :] + mm[:, None] / rate) / grid.h)
                       .astype(int), Da - 1)                                     # (mm, s)
    n0 = np.minimum(mm[:, None, None] + x[None, :, None], pmin - 1)          # (mm, x, 1)
    cell = (np.arange(mm.size)[:, None, None] * pmin + n0) * Da + a_idx[:, None, :]
    W = np.bincount(cell.ravel(), mass.ravel(), mm.size * pmin * Da).reshape(mm.size, -1)
    small[first + mm - 1, :B] += (W @ forming.young_sizes[:, :Da].reshape(W.shape[1], -1)
                                  )[:, 1:]
    after[first + mm - 1] += W @ forming.young_wait[:, :Da].ravel()


@dataclass(frozen=True, eq=False)
class Cycle:
    """The time between dispatches, all that the c > 1 gap iteration needs from a pass.

    Attributes
    ----------
    mean, scv : float
        The mean and squared coefficient of variation of the time between dispatches.
    busy : float
        The implied utilization: mean service per dispatch over c times the mean time
        between dispatches.
    weight : ndarray
        pi / mean: each record's dispatches per second.
    """

    mean: float
    scv: float
    busy: float
    weight: np.ndarray


def dispatch_cycle(rules: Rules, rate: float, blocking: Blocking, counts: BlockingArrivals,
                   chain: DispatchChain, times: np.ndarray) -> Cycle:
    """The mean and scv of the time between dispatches, and the utilization."""
    B, R1, pi, means = rules.B, chain.R1, chain.pi, blocking.means
    cycle = float(np.dot(pi, means[chain.rec_law] + chain.after))
    busy = float(np.dot(pi, rules.own_means[chain.rec_k - 1]) / (rules.c * cycle))
    # spread of the time between dispatches: blocking variance, exponential idle times and
    # the spread of the records' means (formation times counted at their means)
    block_var = blocking.ps @ times ** 2 - means ** 2
    idle_var = np.zeros(pi.size)
    for g in range(blocking.groups):
        idle_var[g * R1:g * R1 + B] = counts.A[g * B:(g + 1) * B, 0] / rate ** 2
    rec_mean = means[chain.rec_law] + chain.after
    var = np.dot(pi, block_var[chain.rec_law] + idle_var
                 + (rec_mean - np.dot(pi, rec_mean)) ** 2)
    return Cycle(mean=cycle, scv=float(var / np.dot(pi, rec_mean) ** 2), busy=busy,
                 weight=pi / cycle)


@dataclass(frozen=True, eq=False)
class DispatchPass:
    """One solve of the chain: its blocking laws, the arrivals during them, the stationary
    law of the records truncated at ``cut``, and the cycle between dispatches."""

    cut: float
    blocking: Blocking
    counts: BlockingArrivals
    chain: DispatchChain
    cycle: Cycle

    def gaps(self, B: int) -> Gaps:
        """What the next pass of the several-instance gap iteration takes from this one."""
        return Gaps(self.chain.batch_sizes(B)[1:], self.cycle.mean, self.cycle.scv)


def dispatch_pass(rules: Rules, arrivals: Arrivals, grid: Lattice, gaps: Gaps | None,
                  cut: float) -> DispatchPass:
    """Blocking laws (from ``gaps`` with several instances), arrival counts, the chain of
    dispatch records truncated at ``cut``, and its cycle."""
    blocking = blocking_laws(rules, grid, gaps)
    counts = arrivals_during_blocking(blocking, grid, arrivals.rate, rules.pmin, rules.B, cut,
                                      rules.Q)
    chain = dispatch_chain(rules, arrivals, grid, blocking, counts, cut)
    cycle = dispatch_cycle(rules, arrivals.rate, blocking, counts, chain, grid.times)
    return DispatchPass(cut, blocking, counts, chain, cycle)
