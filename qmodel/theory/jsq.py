"""Least outstanding (join the shortest queue) over identical one-request nodes: a balanced model.

A router that sends each request to the node with the fewest outstanding requests keeps the
nodes' counts within one of each other most of the time. The model takes that as exact:

1. The total number n of requests in the cluster, seen by an arrival, has the law of the
   central-queue system with the same N servers (M/D/N for deterministic service, M/M/N for
   exponential), by PASTA. Nelson & Philips (1989) approximate JSQ's mean response time from
   the M/M/c central queue's state probabilities in the same spirit.
2. With balanced counts the shortest node holds q = floor(n / N) requests. q = 0: the request
   starts at once. q >= 1: it waits for the residual R of the service in progress there and
   q - 1 full services behind it, then its own: latency = R + q S (q + 1 service times in
   all, counting R as one), with R the equilibrium residual of S (density P(S > x) / E[S];
   uniform on (0, S) for deterministic service, S itself for exponential service).
3. How often a request waits at all is corrected. The central queue has every server busy
   more often than least outstanding, whose nodes can idle while others hold a queue (at
   N = 128, load 0.9: 15% against 4% simulated). A two-dimensional Markov chain follows the
   busy nodes b and the extra requests e queued behind them, for exponential service: an
   arrival takes an idle node (b + 1) or, with all busy, joins a shortest queue (e + 1); a
   node holding extras finishes at rate mu each (e - 1, min(e, b) such nodes, extras spread
   evenly), a node holding one request finishes and idles (b - 1). Its P(b = N) is least
   outstanding's waiting probability under exponential service; for other service laws the
   central queue's waiting probability is scaled by the same ratio P(b = N) / Erlang C. The
   law of q given q >= 1 stays as in 2.

The latency law is assembled on a time lattice of step h = E[S] / resolution by transforms:
L(s) = P(q = 0) S(s) + R(s) S(s) sum_{q >= 1} P(q = q) S(s)^(q - 1).

What it is: an approximation, with its error measured against the simulator
(validation/router_accuracy.py, one-request nodes, N = 2-128, loads 0.3-0.95; see the README's
table). For service times with jitter other than exponential the count comes from M/D/N with
the mean service time, measured for lognormal jitter up to cv 0.3; at cv 0.7 and more it
misses by 10-20%, and ``predict`` does not use it there.

References
----------
Nelson, R. & Philips, T. (1989). An approximation to the response time for shortest queue
routing. ACM SIGMETRICS Performance Evaluation Review 17(1), 181-189.
Crommelin, C. D. (1932). Delay probability formulae when the holding times are constant.
Post Office Electrical Engineers Journal 25 (the M/D/c count, via :func:`~.classical.mdc`).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import fft, special, stats
from scipy.linalg import lapack

from ..latency import Accuracy, Approximation, LatticeLatency
from ..system import Node
from . import budget
from .blas import one_blas_thread
from .classical import erlang_c, mdc
from .measured import measured
from .service_law import service_lattice

__all__ = ["balanced_least_outstanding", "waiting_probability"]

MODEL = "the least-outstanding model"   # how the budget's messages name it

# lattice steps per mean service time: the residual is spread over ~this many cells
RESOLUTION = 100
_CUT = 1e-14          # drop count classes below this probability


def _central_count(service, rate: float, nodes: int) -> np.ndarray:
    """P(n in system) seen by a Poisson arrival in the central-queue M/D/N or M/M/N."""
    mean = float(service.mean(1))
    a = rate * mean
    if service.jitter == "exponential":
        # M/M/N: p(n) proportional to a^n / n! below N, then geometric with ratio a / N
        rho = a / nodes
        top = nodes + int(np.ceil(np.log(_CUT) / np.log(rho))) + 1
        n = np.arange(top + 1)
        logp = np.where(n <= nodes, n * np.log(a) - special.gammaln(n + 1),
                        nodes * np.log(a) - special.gammaln(nodes + 1) + (n - nodes) * np.log(rho))
        p = np.exp(logp - logp.max())
        return p / p.sum()
    # M/D/N: Q = B + A with B = (Q - N)^+ one service earlier and A ~ Poisson(a) independent
    waiting = mdc(rate, mean, nodes).queue_after_epoch
    arrivals = stats.poisson.pmf(np.arange(int(a + 40.0 * np.sqrt(a) + 40.0)), a)
    p = np.convolve(waiting, arrivals)
    return p / p.sum()


@one_blas_thread
def waiting_probability(nodes: int, load: float, tail: float = 1e-12) -> float:
    """P(all N nodes busy) under least outstanding with exponential service (step 3 above).

    The chain on (b busy nodes, e extra requests) is cut where the extras' geometric tail (ratio
    ``load``) falls below ``tail``, and extras are kept only within 4 sqrt(N) + 4 busy levels
    of N (a node freeing below that drops them; the mass there is below 1e-5 of the answer's).

    Examples
    --------
    >>> round(waiting_probability(1, 0.7), 12)       # one node: M/M/1, P(wait) = load
    0.7
    >>> round(waiting_probability(128, 0.9), 3)      # Erlang C is 0.169 here
    0.045
    """
    if isinstance(nodes, bool) or not isinstance(nodes, (int, np.integer)) or nodes < 1:
        raise ValueError(f"nodes must be a whole number >= 1, got {nodes!r}")
    if not 0.0 < load < 1.0:
        raise ValueError(f"load must lie strictly between 0 and 1 (the offered rate over the "
                         f"nodes' capacity), got {load!r}")
    if not 0.0 < tail < 1.0:
        raise ValueError(f"tail must lie strictly between 0 and 1, e.g. 1e-12, got {tail!r}")
    lam = load * nodes
    extras = int(math.ceil(math.log(tail) / math.log(load))) + 2
    low = max(nodes - int(math.ceil(4.0 * math.sqrt(nodes))) - 4, 1)
    levels = nodes + 1 - low                  # busy levels that keep extras
    # states: (b, 0) for b = 0..N, then (b, e) for e = 1..extras and b = low..N, numbered
    # extras first, so that every transition but one stays within a few levels of busy
    # nodes of the diagonal (numbered busy first, the solve filled in extras-wide rows:
    # seconds at N = 8 and load 0.99, and out of memory at 0.999)
    R = nodes + 1 + levels * extras
    # pi Q = 0, solved as the transposed system by a banded LU. One balance equation is
    # redundant: the one of (low - 1, 0), which every (low, e) enters (a dense row), is
    # dropped, and pi = 1 fixed at a likely state instead, (min(N, lam), 0), normalised
    # after the solve. The equations between the two shift by one row, so that the fixed
    # state's sits on the diagonal: the band is then levels + 1 wide either side.
    dense, fixed = low - 1, min(nodes, int(lam))
    w = levels + 1
    height = 3 * w + 1                        # LAPACK's band storage, with w rows for the fill
    what = f"the busy-nodes/extras chain ({R:,} states, {levels} busy levels)"
    budget.check_memory(8.0 * (height + 12) * R, MODEL, what)
    budget.charge(budget.flops(4.0 * R * w ** 2), MODEL, what)
    busy = np.concatenate([np.arange(nodes + 1), np.tile(np.arange(low, nodes + 1), extras)])
    extra = np.concatenate([np.zeros(nodes + 1, int),
                            np.repeat(np.arange(1, extras + 1), levels)])
    states = np.arange(R)

    def index(b, e):
        return np.where(e == 0, b, nodes + 1 + (e - 1) * levels + (b - low))

    def row(state):
        """Where the balance equation of ``state`` sits in the system."""
        if fixed < dense:
            return np.where((state >= fixed) & (state < dense), state + 1, state)
        return np.where((state > dense) & (state <= fixed), state - 1, state)

    band = np.zeros((height, R), order="F")
    flat = band.reshape(-1, order="F")        # a view: entry (i, j) at j * height + 2w + i - j
    leaving = np.zeros(R)

    def move(mask, b, e, r):
        """Transitions from the states in ``mask`` to (b, e) at rates ``r``: one per state,
        so no entry of the band twice within one call."""
        j = states[mask]
        to = index(b, e)
        r = np.broadcast_to(np.asarray(r, float), j.shape)
        leaving[j] += r
        kept = to != dense
        flat[j[kept] * height + 2 * w + row(to[kept]) - j[kept]] += r[kept]
    m = busy < nodes
    move(m, busy[m] + 1, extra[m], lam)                           # an idle node takes it
    m = (busy == nodes) & (extra < extras)
    move(m, busy[m], extra[m] + 1, lam)                           # all busy: joins a queue
    doubled = np.minimum(extra, busy)
    m = doubled > 0
    move(m, busy[m], extra[m] - 1, doubled[m])                    # a node with extras finishes
    single = busy - doubled
    m = single > 0
    below = busy[m] - 1
    move(m, below, np.where(below < low, 0, extra[m]), single[m])  # a lone request finishes
    kept = states != dense
    flat[states[kept] * height + 2 * w + row(states[kept]) - states[kept]] -= leaving[kept]
    flat[fixed * height + 2 * w] = 1.0                             # pi[fixed] = 1
    rhs = np.zeros(R)
    rhs[fixed] = 1.0
    _, _, pi, info = lapack.dgbsv(w, w, band, rhs, overwrite_ab=True, overwrite_b=True)
    if info != 0:
        raise ArithmeticError(f"the busy-nodes/extras chain is singular (LAPACK info {info})")
    pi = np.clip(pi, 0.0, None)
    return float(pi[busy == nodes].sum() / pi.sum())


def balanced_least_outstanding(node: Node, rate: float, nodes: int,
                               resolution: int = RESOLUTION) -> LatticeLatency:
    """Latency behind a least-outstanding router over ``nodes`` copies of a one-request node.

    Parameters
    ----------
    node : Node
        max_batch_size 1, one instance, unlimited queue; deterministic or exponential service,
        or lognormal/gamma jitter with cv up to
        :attr:`qmodel.routers.LeastOutstanding.BALANCED_MAX_CV` (lognormal/gamma jitter takes
        its count from M/D/N: measured within 8% at cv 0.3). The caller (``predict``) checks
        that, once.
    rate : float
        Total Poisson arrival rate (requests per second), below the cluster's capacity.
    nodes : int
        N >= 1.
    resolution : int
        Lattice steps per mean service time.

    Returns
    -------
    LatticeLatency
        Accuracy "approximation", with the measured error in its statement.

    Examples
    --------
    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(2e-3, 0.0), max_batch_size=1)
    >>> r = balanced_least_outstanding(node, rate=1600.0, nodes=4)       # load 0.8
    >>> round(r.p50 * 1e3, 2), round(r.p99 * 1e3, 1)
    (2.19, 7.3)
    """
    service = node.service
    mean = float(service.mean(1))
    count = _central_count(service, rate, nodes)
    per_node = np.bincount(np.arange(count.size) // nodes, weights=count)
    keep = np.nonzero(per_node > _CUT)[0]
    per_node = per_node[:keep[-1] + 1]
    # how often a request waits: least outstanding's, not the central queue's (step 3)
    central_wait = 1.0 - per_node[0]
    load = rate * mean / nodes
    ratio = waiting_probability(nodes, load) / erlang_c(nodes, rate * mean)
    waiting = min(central_wait * ratio, 1.0)
    if central_wait > 0:
        per_node[1:] *= waiting / central_wait
    per_node[0] = 1.0 - waiting
    h = mean / resolution
    # the latency is at most (q_max + 1) service times; the service law's own tail needs room
    # too, which the lattice's last point absorbs (reported as overflow)
    length = fft.next_fast_len(int((per_node.size + 1 + 8 * service.cv) * resolution) + 8)
    law, overflow = service_lattice(service, [1], h, length)
    law = law[0]
    # equilibrium residual on the lattice: P(R in cell i) proportional to P(S > i h)
    residual = np.concatenate([[0.0], 1.0 - np.cumsum(law)[:-1]])
    residual = np.clip(residual, 0.0, None)
    residual /= residual.sum()
    size = fft.next_fast_len(2 * length)
    # near capacity the per-node count reaches thousands, and the lattice spans that many
    # services: the sum below is count x lattice work
    what = (f"the waits behind up to {per_node.size - 1:,} requests per node on a lattice of "
            f"{size:,} points")
    budget.check_memory(16.0 * 6 * (size // 2 + 1), MODEL, what)
    budget.charge(budget.elements(4.0 * per_node.size * (size // 2 + 1)), MODEL, what)
    S, R = fft.rfft(law, size), fft.rfft(residual, size)
    behind = np.zeros_like(S)                       # sum_{q >= 1} P(q) S^(q - 1), by Horner
    for prob in per_node[:0:-1]:
        behind = behind * S + prob
    pmf = fft.irfft(per_node[0] * S + R * S * behind, size)[:size]
    kind = "M" if service.jitter == "exponential" else "D"
    balanced = Approximation(
        "balanced_queues", f"balanced-queue model: central-queue M/{kind}/{nodes} count, the "
        f"shortest node holds floor(n / N), equilibrium residual (Nelson & Philips 1989 in "
        f"spirit), P(wait) = {waiting:.3g} from the busy-nodes/extras chain (the central "
        f"queue's {central_wait:.3g} scaled by {ratio:.3g})")
    accuracy = Accuracy("approximation", lattice_step=h, quantile_error=h,
                        truncated_mass=overflow if overflow > 1e-9 else None,
                        approximations=[balanced],
                        measured=[measured("least_outstanding_balanced")])
    return LatticeLatency(
        np.clip(pmf, 0.0, None), h,
        model="balanced_queues",
        method=f"least outstanding over {nodes} one-request nodes: balanced-queue model",
        accuracy=accuracy, throughput=rate,
        utilization=rate * mean / nodes, batch_size_distribution={1: 1.0})
