"""How long and how many replicas a run takes: each replica starts empty, so it must be long
against the start-up transient (the relaxation time in arrivals), and more requests buy more
replicas, not longer ones. Shared by every engine's driver (:mod:`qmodel.sim.run`,
:mod:`~qmodel.sim.ensemble`, :mod:`~qmodel.sim.timevarying`) and by the cost estimate
(:mod:`qmodel.sim.cost`)."""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..checks import positive_int
from ..system import Trace
from .window import WINDOW_CYCLES, ShortRunWarning, longest_cycle, window_arrivals

__all__ = ["relaxation_arrivals", "arrivals_per_replica_node", "replica_length",
           "default_replicas", "auto_engine", "plan_replicas", "REPLICA_RELAXATIONS",
           "PER_NODE_FLOOR", "DEFAULT_REQUESTS", "MAX_REPLICAS", "MIN_REPLICAS", "MAX_SECTIONS",
           "DEFAULT_WARMUP"]

# Replicas start empty, so each must be long against the start-up transient. Its length in
# arrivals scales like R = load^2 (ca^2 + load B cs^2) / (1 - load)^2 (relaxation_arrivals):
# the heavy-traffic diffusion of the queue, measured in batches of B, has drift -(1 - load) B
# and variance load B ca^2 + (load B)^2 cs^2 per batch time (ca^2, cs^2: the squared
# coefficients of variation of the interarrival times and of a full batch's service time), and
# relaxes in about variance / drift^2 batch times. Measured against exact one-instance models
# (validation/replica_bias.py, results/replica_bias.txt: mean p99 error of eight 4M-request
# runs per length): at 3, 6, 12, 25 R arrivals per replica p99 reads -18, -8.6, -3.9, -1.8% low
# (B = 1, deterministic, 95% load, R = 361), -13, -7.1, -2.2, -1.4% (B = 32, lognormal cv 0.3,
# R = 1,349), -14, -7.7, -2.7, +0.8% (B = 64 lognormal, R = 2,336), -7.9, -3.5, -1.4, -0.4%
# (B = 64 deterministic); from 50 R on, every mean lies within 2 standard errors of zero
# (the largest, +2.5%, with a standard error of 3.9%). Replicas hold 100 R arrivals per node
# (at least 2,000); more requests buy more replicas, not longer ones.
REPLICA_RELAXATIONS = 100.0
PER_NODE_FLOOR = 2_000
DEFAULT_REQUESTS = 2_000_000
# Beyond ~2048 lanes a step's arrays outgrow the CPU caches and each request costs more
# (measured on the look-ahead engine: 23M req/s at 2048 lanes, 20M at 4096, 18M at 8000).
MAX_REPLICAS = 2048
MIN_REPLICAS = 8
# Sections for confidence intervals: enough for a stable t interval, each holding many replicas.
MAX_SECTIONS = 32
DEFAULT_WARMUP = 0.1


def relaxation_arrivals(cluster, rate: float, arrival_scv: float = 1.0) -> float:
    """R = load^2 (ca^2 + load B cs^2) / (1 - load)^2: arrivals per node over which the queue
    forgets its start (see REPLICA_RELAXATIONS above), the largest over the nodes.

    B is the node's max_batch_size, cs^2 the squared coefficient of variation of its service
    time (of the measured batch size nearest B for empirical service), ca^2 ``arrival_scv``.
    A finite queue of Q caps it at Q^2 / (ca^2 + load B cs^2); a dynamic router (which pools
    the N nodes' queues) divides it by N.

    Examples
    --------
    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(1e-3))              # M/D/1, capacity 1000/s
    >>> round(relaxation_arrivals(qm.Cluster(node), 950.0), 3)   # 0.95^2 / 0.05^2
    361.0
    """
    if not (rate > 0 and math.isfinite(rate)):
        raise ValueError(f"rate must be a positive number of requests per second, got {rate!r}")
    if not (arrival_scv >= 0 and math.isfinite(arrival_scv)):
        raise ValueError(f"arrival_scv must be a finite number >= 0 (1 for Poisson), got "
                         f"{arrival_scv!r}")
    load = rate / cluster.capacity
    worst = 0.0
    for node in cluster.nodes:
        spread = arrival_scv + load * node.max_batch_size * node.service.scv(node.max_batch_size)
        # |1 - load|: a finite queue may be overloaded, and then relaxes towards its full end
        relax = load ** 2 * spread / max(abs(1.0 - load), 1e-3) ** 2
        if node.max_queue_size and spread > 0:
            # a finite queue confines the walk to Q requests, which it crosses in about
            # Q^2 / spread arrivals (with no spread at all, deterministic arrivals and
            # service, the walk has no noise and the bound says nothing)
            relax = min(relax, node.max_queue_size ** 2 / spread)
        worst = max(worst, relax)
    if not cluster.router.is_static:
        # a dynamic router pools the nodes into one queue of N servers, which relaxes over R
        # arrivals in all: R / N per node (an 8-node least_outstanding cluster at 97% load:
        # p99 2.7% low at 7 R / N arrivals per node per replica, unbiased at 28 R / N)
        worst /= len(cluster.nodes)
    return worst


def arrivals_per_replica_node(cluster, rate: float, arrival_scv: float = 1.0,
                              warmup: float = DEFAULT_WARMUP) -> float:
    """Arrivals each node needs per replica: 100 relaxations (:func:`relaxation_arrivals`)
    for the start-up transient not to bias the tail, at least 2,000, and the node's part of
    a measured window of 20 batch cycles after the ``warmup`` fraction
    (:func:`qmodel.sim.window.window_arrivals`).

    Examples
    --------
    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(1e-3))                 # capacity 1000/s
    >>> round(arrivals_per_replica_node(qm.Cluster(node), 950.0), 6)
    36100.0
    """
    transient = replica_length(relaxation_arrivals(cluster, rate, arrival_scv))
    return max(transient, window_arrivals(cluster, rate, warmup) / len(cluster.nodes))


def replica_length(relaxation: float) -> float:
    return max(PER_NODE_FLOOR, REPLICA_RELAXATIONS * relaxation)


def default_replicas(cluster, source, requests: int, warmup: float = DEFAULT_WARMUP) -> int:
    """The replicas a run of ``requests`` takes when none are asked for: as many as leave each
    node :func:`arrivals_per_replica_node` arrivals, between MIN_REPLICAS and MAX_REPLICAS."""
    nodes = len(cluster.nodes)
    per_node = arrivals_per_replica_node(cluster, source.rate, source.scv, warmup)
    replicas = int(np.clip(requests // (nodes * per_node), MIN_REPLICAS, MAX_REPLICAS))
    window = window_arrivals(cluster, source.rate, warmup)
    if requests // replicas < window:
        # A window of a few batch cycles measures the first batches of fresh replicas and
        # may see requests arrive and no batch leave: fewer, longer replicas instead, two
        # at least for a confidence interval.
        # (a whole window each: requests // replicas must not fall a fraction short of it,
        # which warned that 1,000,000 requests were too short and asked for 21,624)
        replicas = max(2, min(replicas, int(requests // math.ceil(window))))
    return replicas


def auto_engine(cluster) -> str:
    """The engine ``engine="auto"`` runs: look-ahead for static routing and unlimited queues,
    events otherwise."""
    finite = any(n.max_queue_size > 0 for n in cluster.nodes)
    return "lookahead" if cluster.router.is_static and not finite else "events"


def plan_replicas(cluster, source, requests: int, replicas, warmup: float):
    """(replicas, arrivals per replica, the fix to ask for) for a run of ``requests``;
    warns with ShortRunWarning where the replicas are too short for the load or the delay."""
    nodes = len(cluster.nodes)
    relaxation = relaxation_arrivals(cluster, source.rate, source.scv)
    transient = replica_length(relaxation)
    window = window_arrivals(cluster, source.rate, warmup)
    per_node = max(transient, window / nodes)
    chosen = replicas is not None
    if chosen:
        replicas = positive_int(replicas, "replicas")
    else:
        replicas = default_replicas(cluster, source, requests, warmup)
    per_replica = requests // replicas
    if per_replica < 2:
        raise ValueError(f"requests={requests} over replicas={replicas} leaves fewer than 2 "
                         "arrivals per replica; raise requests or lower replicas")
    reasons = []
    # below 25 relaxations the measured p99 bias reaches a few percent (see above)
    if (not isinstance(source, Trace)
            and per_replica / nodes < REPLICA_RELAXATIONS / 4 * relaxation):
        load = min(source.rate / cluster.capacity, 0.999)
        reasons.append(f"{replicas} replicas leave {per_replica / nodes:,.0f} arrivals per "
                       f"node per replica; at {load:.0%} load about {transient:,.0f} are "
                       "needed for the start-up transient not to bias the tail low")
    if per_replica < window:
        cycle = longest_cycle(cluster, source.rate)
        length = per_replica * (1 - warmup) / source.rate
        reasons.append(f"{replicas} replicas leave measured windows of {length:.3g} s, "
                       f"{length / cycle:.2g} batch cycles of {cycle:.3g} s (the wait for a "
                       "batch to fill or its max_queue_delay, then the slowest batch's "
                       f"service), where {WINDOW_CYCLES} are needed for the means and batch "
                       "statistics not to come from the start-up transient")
    needed = math.ceil(nodes * per_node)
    total = (replicas if chosen else MIN_REPLICAS) * needed
    ask = (f"replay a trace of at least {total:,} arrivals" if isinstance(source, Trace)
           else f"ask for at least {total:,} requests")
    if chosen and requests // needed >= 1:
        ask = f"lower replicas to {requests // needed} or {ask}"
    if reasons:
        warnings.warn(f"requests={requests} is too short: {'; '.join(reasons)}: {ask}.",
                      ShortRunWarning, stacklevel=3)
    return replicas, per_replica, ask


# ------------------------------------------------------------------------------------------
# Engine adapters. Both return, on the host: served requests as "sojourn", in segments that are
# each in arrival order ("arrival": the list of segments' arrival times; "segment_replica": the
# replica of each segment; segments of one replica are adjacent), rejected requests
# ("rejected_arrival"; "rejected", per-replica counts), and one entry per executed batch
# ("batch_*").
# ------------------------------------------------------------------------------------------
