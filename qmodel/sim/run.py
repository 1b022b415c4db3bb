"""``qmodel.simulate``: Monte Carlo sojourn times of a node or cluster under Triton's batching.

Independent replications ("replicas") of the whole system run side by side as array rows
("lanes": one per replica, or per node of a replica where the nodes decouple), on
NumPy or CuPy. Two engines share one batching rule (:mod:`qmodel.sim.batching`):

- ``lookahead`` (:mod:`qmodel.sim.lookahead`): nodes that decouple (one node, or static routing)
  with unlimited queues; one batch per lane per step;
- ``events`` (:mod:`qmodel.sim.events`): dynamic routing or finite queues; one arrival per
  replica per step.

Each replica starts empty; the arrivals of its first ``warmup`` fraction are discarded, and what
is measured in the rest, how long that window must be, where it starts (a random phase) and
what is simulated after it (a cool-down, served but not measured), is :mod:`qmodel.sim.window`.
Confidence intervals come from the spread between groups of replicas (sectioning).
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass

import numpy as np

from ..checks import positive_int
from ..latency import Accuracy, SampledLatency, SimulationEstimate
from ..system import Trace, arrivals_from, as_cluster, check_stable
from .arrivals import replica_arrivals
from .backend import get_backend
from .ensemble import simulate_ensemble
from .events import run_events
from .lookahead import run_lookahead
from .nodetypes import NodeTypes
from .routing import split_by_node, static_assignment
from .window import (WINDOW_CYCLES, ShortRunWarning, batch_places, busy_time, cool_down_arrivals,
                     longest_cycle, measured_batches, window_arrivals)

__all__ = ["simulate", "replay", "Replay"]

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
        if node.max_queue_size:
            # a finite queue confines the walk to Q requests, which it crosses in about
            # Q^2 / spread arrivals
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
    transient = _replica_length(relaxation_arrivals(cluster, rate, arrival_scv))
    return max(transient, window_arrivals(cluster, rate, warmup) / len(cluster.nodes))


def _replica_length(relaxation: float) -> float:
    return max(PER_NODE_FLOOR, REPLICA_RELAXATIONS * relaxation)


def simulate(system, rate=None, *, arrivals=None, requests: int | None = None, seed=None,
             replicas: int | None = None, warmup: float = DEFAULT_WARMUP, backend: str = "auto",
             engine: str = "auto", progress=False, pods=None,
             resolution: float | None = None) -> SampledLatency:
    """Simulate a Node, Cluster or Ensemble and return its sojourn-time distribution.

    Parameters
    ----------
    system : Node, Cluster, Ensemble, or Cluster of Ensemble pods
        An Ensemble runs stage by stage (:mod:`qmodel.sim.ensemble`); its result's
        ``stages`` holds each stage's own latency, batches and utilization.
    rate : float, optional
        Poisson arrival rate (requests/s). Give this or ``arrivals``.
    arrivals : Poisson, Renewal, Trace or Traffic, optional
        A :class:`~qmodel.Traffic` (a rate that changes with time) runs the time-varying
        simulator (:mod:`qmodel.sim.timevarying`) and returns a
        :class:`~qmodel.timeline.TrafficLatency`, with the latency per time window and the
        share within an SLO; ``requests`` and ``warmup`` do not apply (the traffic sets the
        requests), ``replicas`` counts independent realisations of it (default 1).
    requests : int, optional
        Total arrivals over all replicas, warm-up included; default 2,000,000, or the whole
        Trace (a smaller number replays only the start of the trace). Each replica simulates
        a few more, served and never measured (:mod:`qmodel.sim.window`): a random phase of
        up to max_batch_size per node before its window, and after it a cool-down of two
        batches or two batch cycles per node, whichever is fewer, so that its last requests'
        batches fill as in an endless stream. A Trace's segments cool down on the arrivals
        that follow them; its end has none.
    seed : int, optional
        Seeds the random generator; the same seed, backend and arguments reproduce a run.
    replicas : int, optional
        Independent replications of the system. Default: as many as leave every node 100
        relaxation lengths of arrivals per replica (:func:`arrivals_per_replica_node`: longer
        at high load, for large batches and for jittery service) and a measured window of
        20 batch cycles (longer for long delays and slow batches), between 8 and 2048; fewer,
        down to 2, where ``requests`` is too small for 8 such windows. Replicas under 25
        relaxation lengths bias the tail low (each starts empty), and windows under 20
        cycles measure the first batches of fresh replicas: both draw a
        :class:`~qmodel.sim.window.ShortRunWarning` that names the requests to ask for.
    warmup : float
        Fraction of each replica's arrivals discarded as start-up transient, in [0, 0.9).
    backend : {"auto", "numpy", "cupy"}
        "auto" takes NumPy, the faster of the two today (see :mod:`qmodel.sim.backend`);
        "cupy" runs the same engines on a GPU.
    engine : {"auto", "lookahead", "events"}
        Force an engine (for cross-checks); "auto" picks the fastest one that applies.
    progress : bool or callable
        True shows a progress bar; a callable receives the fraction done.
    pods : PodSchedule or int, optional
        With a Traffic: the pods ready over time (an autoscaler's
        :class:`~qmodel.autoscaler.PodSchedule`), each a copy of the system's node or pod.
    resolution : float, optional
        With a Traffic: seconds per time bin of the result.

    Returns
    -------
    SampledLatency
        With ``ci(p)`` confidence intervals, throughput, utilization (the fraction of instance
        time busy inside the measured windows, in [0, 1]), batch sizes (of the batches
        dispatched inside them) and rejections.

    Examples
    --------
    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(1e-3, jitter="exponential"))   # M/M/1, mu = 1000
    >>> r = qm.simulate(node, rate=800.0, requests=400_000, seed=1)
    >>> lo, hi = r.ci(0.99)
    >>> bool(lo < 0.0230259 < hi)                     # exact p99: ln(100) / (mu - lambda)
    True
    """
    from ..traffic import Traffic

    if isinstance(arrivals, Traffic):
        from .timevarying import simulate_traffic

        if rate is not None or requests is not None:
            raise ValueError("with arrivals=Traffic leave out rate= and requests=: the traffic "
                             "sets the rate and how many requests arrive")
        if engine != "auto" or warmup != DEFAULT_WARMUP or progress not in (False, None):
            raise ValueError("with arrivals=Traffic the engine, warm-up and progress are the "
                             "time-varying simulator's own: leave out engine=, warmup= and "
                             "progress=")
        return simulate_traffic(system, arrivals, pods=pods, seed=seed,
                                replicas=1 if replicas is None else replicas, backend=backend,
                                resolution=resolution)
    if pods is not None or resolution is not None:
        raise ValueError("pods= and resolution= go with arrivals=qmodel.Traffic (a rate that "
                         "changes with time)")
    cluster = as_cluster(system)
    source = arrivals_from(rate, arrivals)
    check_stable(system, source.rate)
    if requests is None:
        requests = source.times.size if isinstance(source, Trace) else DEFAULT_REQUESTS
    requests = positive_int(requests, "requests", 100)
    if not isinstance(warmup, numbers.Real) or not 0 <= warmup < 0.9:
        raise ValueError(f"warmup={warmup!r} must be a fraction in [0, 0.9), e.g. 0.1")
    if engine not in ("auto", "lookahead", "events"):
        raise ValueError(f"engine={engine!r} is unknown; use 'auto', 'lookahead' or 'events'")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)
                             or seed < 0):
        raise ValueError(f"seed must be a whole number >= 0 or None, got {seed!r}")

    if isinstance(source, Trace) and requests > source.times.size:
        raise ValueError(f"requests={requests} exceeds the {source.times.size} arrivals of the "
                         "Trace; leave requests out to replay the whole trace")
    if cluster.pods:
        if engine == "events":
            raise ValueError("engine='events' does not run an Ensemble; its stages run on the "
                             "look-ahead engine ('auto' or 'lookahead')")
        report = _progress_callback(progress, requests)
        try:
            return simulate_ensemble(cluster, source, requests, seed, replicas, warmup,
                                     backend, report)
        finally:
            if hasattr(report, "close"):
                report.close()

    nodes = len(cluster.nodes)
    stream = source      # a Trace's arrivals after the replayed ones serve as cool-down
    if isinstance(source, Trace) and requests < source.times.size:
        source = Trace(source.times[:requests])
    replicas, per_replica, ask = _plan_replicas(cluster, source, requests, replicas, warmup)

    static = cluster.router.is_static
    fitting = auto_engine(cluster)
    if engine == "auto":
        engine = fitting
    if engine == "lookahead" and fitting != "lookahead":
        raise ValueError("engine='lookahead' needs a static router (random, round_robin) and "
                         "unlimited queues (max_queue_size=0); use engine='events'")

    bk = get_backend(backend, seed)
    types = NodeTypes(bk, cluster.nodes)
    times, start, counts, totals = replica_arrivals(
        bk, stream, replicas, per_replica, pad=2 * types.bmax + 2,
        cool=cool_down_arrivals(cluster, source.rate), phase=batch_places(cluster),
        requests=requests)
    report = _progress_callback(progress, requests)
    try:
        if engine == "lookahead":
            out = _run_static(bk, types, cluster, times, totals, replicas, nodes, report)
        else:
            width = int(totals.max())
            assign = (static_assignment(bk, cluster.router, nodes, (replicas, width))
                      if static else None)
            out = _from_events(bk, run_events(bk, types, cluster.router, times[:, :width],
                                              assign, report), times[:, :width],
                               _overheads(cluster))
    finally:
        if hasattr(report, "close"):
            report.close()
    return _assemble(out, bk.asnumpy(times), bk.asnumpy(start), bk.asnumpy(counts), types,
                     warmup, engine, bk.name, requests, ask)


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
        replicas = max(2, min(replicas, int(requests // window)))
    return replicas


def auto_engine(cluster) -> str:
    """The engine ``engine="auto"`` runs: look-ahead for static routing and unlimited queues,
    events otherwise."""
    finite = any(n.max_queue_size > 0 for n in cluster.nodes)
    return "lookahead" if cluster.router.is_static and not finite else "events"


def _plan_replicas(cluster, source, requests: int, replicas, warmup: float):
    """(replicas, arrivals per replica, the fix to ask for) for a run of ``requests``;
    warns with ShortRunWarning where the replicas are too short for the load or the delay."""
    nodes = len(cluster.nodes)
    relaxation = relaxation_arrivals(cluster, source.rate, source.scv)
    transient = _replica_length(relaxation)
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
def _run_static(bk, types, cluster, times, totals, replicas, nodes, report):
    """Lookahead engine over (replica, node) lanes, lane = replica * nodes + node."""
    xp = bk.xp
    if nodes == 1:
        lane_times, lane_counts = times, totals
    else:
        width = int(totals.max())
        assign = static_assignment(bk, cluster.router, nodes, (replicas, width))
        lane_times, lane_counts = split_by_node(bk, times[:, :width], assign, nodes,
                                                pad=2 * types.bmax + 2)
    lane_type = xp.asarray(np.tile(types.type_of_node, replicas))
    rec = run_lookahead(bk, types, lane_times, lane_counts, lane_type, report)
    start, service, size = rec["start"], rec["service"], rec["size"]   # (steps, lanes)
    # Lane l's batches in step order cover its requests in arrival order, so repeating each
    # batch's completion time by its size, lane by lane (hence the transposes), gives completion
    # times request by request. Size-0 entries (finished lanes) repeat zero times.
    completion = np.repeat((start + service).T.ravel(), size.T.ravel())
    sojourn = np.empty(completion.size, dtype=np.float32)   # float64 difference, stored float32
    lane_counts = bk.asnumpy(lane_counts)
    lt = bk.asnumpy(lane_times)
    if nodes == 1 and np.all(lane_counts == lane_counts[0]):
        arrival = lt[:, :lane_counts[0]]            # full rows: a view, no mask needed
        np.subtract(completion.reshape(arrival.shape), arrival,
                    out=sojourn.reshape(arrival.shape))
        segments = list(arrival)
    else:
        arrival = lt[np.arange(lt.shape[1])[None, :] < lane_counts[:, None]]
        np.subtract(completion, arrival, out=sojourn)
        segments = np.split(arrival, np.cumsum(lane_counts)[:-1])

    def first_arrival():
        # Lane l's batches take its requests in order: a batch's first request is the one
        # after all that its lane's earlier batches took (a finished lane's entries: +inf).
        first = np.cumsum(size, axis=0) - size
        got = lt[np.arange(lt.shape[0])[None, :], np.minimum(first, lt.shape[1] - 1)]
        return np.where(size > 0, got, np.inf)

    overhead = _overheads(cluster)
    if overhead is not None:
        # lane l = replica * nodes + node serves lane_counts[l] requests, lane after lane
        sojourn += np.repeat(np.tile(overhead, replicas), lane_counts).astype(np.float32)
    return {
        "arrival": segments, "segment_replica": np.arange(replicas * nodes) // nodes,
        "sojourn": sojourn,
        "rejected_arrival": np.zeros(0), "rejected": np.zeros(replicas, dtype=np.int64),
        # Batch records stay (steps, lanes); a column's replica broadcasts over the steps.
        # Finished lanes' entries have start +inf and size 0 and fall outside every window.
        "batch_start": start, "batch_service": service, "batch_size": size,
        "batch_replica": (np.arange(replicas * nodes) // nodes)[None, :],
        "batch_first_arrival": first_arrival,
    }


def _overheads(cluster):
    """Each node's Node.overhead (seconds outside the batcher, added to its requests'
    sojourns), or None where all are 0."""
    overhead = np.array([node.overhead for node in cluster.nodes])
    return overhead if overhead.any() else None


def _from_events(bk, rec, times, overhead=None):
    """Per-request sojourns from the event engine's routes and per-node dispatch records;
    ``overhead`` (per node, or None) is added to each request's."""
    nodes = rec["nodes"]
    route = rec["route"]
    times = bk.asnumpy(times)
    replicas = route.shape[0]
    # Requests of each (replica, node) in arrival order are served by that node's batches in
    # dispatch order; a stable sort by node key lines both lists up.
    accepted = route >= 0
    # Small integer keys let NumPy's stable sort use radix sort (16-bit) instead of timsort.
    kdt = np.int16 if replicas * nodes < 2 ** 15 else np.int64
    key = (np.arange(replicas, dtype=kdt)[:, None] * kdt(nodes) + route.astype(kdt))[accepted]
    req_order = np.argsort(key, kind="stable")
    batch_order = np.argsort(rec["pair"].astype(kdt), kind="stable")
    done = np.repeat((rec["start"] + rec["service"])[batch_order], rec["size"][batch_order])
    if done.size != key.size:
        raise AssertionError(f"event engine served {done.size} of {key.size} accepted requests")
    completion = np.empty(key.size)
    completion[req_order] = done
    arrival = times[accepted]
    rejected = np.isfinite(times) & ~accepted
    served = accepted.sum(axis=1)

    def first_arrival():
        # Each node's batches take its requests in order, as lined up above.
        size = rec["size"][batch_order]
        got = np.empty(size.size)
        got[batch_order] = arrival[req_order][np.cumsum(size) - size]
        return got

    sojourn = completion - arrival
    if overhead is not None:
        sojourn += overhead[route[accepted]]
    return {
        "arrival": np.split(arrival, np.cumsum(served)[:-1]),
        "segment_replica": np.arange(replicas), "sojourn": sojourn,
        "rejected_arrival": times[rejected], "rejected": rejected.sum(axis=1),
        "batch_start": rec["start"], "batch_service": rec["service"],
        "batch_size": rec["size"], "batch_replica": rec["pair"] // nodes,
        "batch_first_arrival": first_arrival,
    }


def _assemble(out, times, start, counts, types, warmup, engine: str, backend: str,
              requests: int, ask: str):
    """Cut the warm-up and the cool-down, compute the metrics and build the SampledLatency.

    The measured window of each replica and what counts inside it: :mod:`qmodel.sim.window`;
    the window of replica r is its ``counts[r]`` arrivals from index ``start[r]``, less
    their ``warmup`` fraction. ``requests`` and ``ask`` (the fix, from
    :func:`_plan_replicas`) go into its warning."""
    replicas = counts.size
    method = f"simulation ({engine} engine, {backend}, {replicas} replicas)"
    rows = np.arange(replicas)
    t_warm = times[rows, start + np.minimum((warmup * counts).astype(np.int64), counts - 1)]
    t_end = times[rows, start + counts - 1]
    span = float(np.sum(t_end - t_warm))
    if span <= 0:
        raise ValueError("the measured window is empty; raise requests or lower warmup")
    # Within a segment, served requests are in arrival order, so the window keeps a slice of
    # each segment: a search per segment instead of a mask over all requests.
    seg_replica = out["segment_replica"]
    lengths = np.array([a.size for a in out["arrival"]], dtype=np.int64)
    # [t_warm, t_end] is [t_warm, next float after t_end): one search for both edges
    edges = np.stack([t_warm, np.nextafter(t_end, np.inf)], axis=1)
    bounds = np.array([np.searchsorted(a, edges[r]) for a, r in zip(out["arrival"], seg_replica)],
                      dtype=np.int64).reshape(-1, 2)
    offsets = np.cumsum(lengths) - lengths
    cut, ends = offsets + bounds[:, 0], offsets + bounds[:, 1]
    sojourn = np.concatenate([out["sojourn"][c:e] for c, e in zip(cut, ends)],
                             dtype=np.float32, casting="same_kind")
    kept = np.bincount(seg_replica, weights=ends - cut, minlength=replicas)
    refused = out["rejected_arrival"]
    rejected = int(np.sum((refused >= np.repeat(t_warm, out["rejected"]))
                          & (refused <= np.repeat(t_end, out["rejected"]))))
    served = sojourn.size

    b_rep = out["batch_replica"]
    b_warm, b_end = t_warm[b_rep], t_end[b_rep]
    counted, after_window = measured_batches(np, out["batch_start"], out["batch_size"],
                                             b_warm, b_end, out["batch_first_arrival"])
    if after_window and served:
        warnings.warn(f"requests={requests} is too short: no batch was dispatched "
                      f"inside the measured windows ({span / replicas:.3g} s each); the batch "
                      "statistics count the batches dispatched after the windows that "
                      f"carried the measured requests: {ask}.", ShortRunWarning, stacklevel=3)
    hist = np.bincount(out["batch_size"][counted], minlength=types.bmax + 1)
    instance_count = sum(types.kinds[t].instances for t in types.type_of_node)
    busy = float(busy_time(np, out["batch_start"], out["batch_service"], b_warm, b_end).sum())
    utilization = busy / (span * instance_count)
    # An instance runs one batch at a time: busy <= instances x window, up to rounding.
    if utilization > 1 + 1e-9:
        raise AssertionError(f"{engine} engine reported {utilization:.6g} of its instances "
                             "busy in the measured window; an instance overlapped two batches")
    utilization = min(1.0, utilization)

    # Contiguous groups of replicas form the sections of the confidence intervals.
    sections = min(replicas, MAX_SECTIONS)
    section_of_replica = rows * sections // replicas
    section_sizes = np.bincount(section_of_replica, weights=kept, minlength=sections)
    result = SampledLatency(
        sojourn, section_sizes.astype(np.int64), method=method,
        accuracy=Accuracy("simulation"),
        throughput=served / span, utilization=utilization,
        batch_size_distribution={k: int(c) for k, c in enumerate(hist) if c},
        rejection_fraction=rejected / max(1, rejected + served))
    half_width = None
    if result.sections >= 2:
        lo, hi = result.ci(0.99)
        half_width = (hi - lo) / 2 / result.p99
    result.accuracy = Accuracy("simulation", simulation=SimulationEstimate(
        requests=served, replicas=replicas, p99_half_width=half_width, engine=engine,
        backend=backend))
    return result


@dataclass(frozen=True)
class Replay:
    """What every request of a replayed trace experienced, in arrival order.

    Attributes
    ----------
    arrival, sojourn : ndarray
        Seconds; ``sojourn`` is NaN for a rejected request.
    node : ndarray of int
        Node that served the request, -1 if rejected.
    batch_start, batch_service : ndarray
        Dispatch time and service time of every executed batch, in dispatch order per node.
    batch_size, batch_node : ndarray of int
    """

    arrival: np.ndarray
    sojourn: np.ndarray
    node: np.ndarray
    batch_start: np.ndarray
    batch_service: np.ndarray
    batch_size: np.ndarray
    batch_node: np.ndarray


def replay(system, times, *, seed=None, engine: str = "auto") -> Replay:
    """Run one replica over the given arrival times and report every request and batch.

    For inspecting the batcher on a hand-made or recorded trace; ``simulate`` is the tool for
    latency distributions. No warm-up is removed and there is no cool-down: the trace has no
    successors past its end, so with a delay its last batch waits the delay out.

    Examples
    --------
    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(1e-3), max_batch_size=8, max_queue_delay=2e-3)
    >>> r = qm.replay(node, [0.0, 1.0])          # two lone requests, far apart
    >>> r.sojourn.round(6).tolist()              # each waits the full 2 ms delay, then 1 ms
    [0.003, 0.003]
    """
    cluster = as_cluster(system)
    source = Trace(times)
    if engine not in ("auto", "lookahead", "events"):
        raise ValueError(f"engine={engine!r} is unknown; use 'auto', 'lookahead' or 'events'")
    nodes = len(cluster.nodes)
    decoupled = nodes == 1 and all(n.max_queue_size == 0 for n in cluster.nodes)
    if engine == "lookahead" and not decoupled:
        raise ValueError("replay with engine='lookahead' needs one node with an unlimited queue")
    bk = get_backend("numpy", seed)
    types = NodeTypes(bk, cluster.nodes)
    n = source.times.size
    t = np.concatenate([source.times, np.full(2 * types.bmax + 2, np.inf)])[None, :]
    if engine == "lookahead" or (engine == "auto" and decoupled):
        rec = run_lookahead(bk, types, t, np.array([n]), np.zeros(1, dtype=np.int64))
        size = rec["size"][:, 0]
        used = size > 0
        start, service, size = rec["start"][used, 0], rec["service"][used, 0], size[used]
        sojourn = np.repeat(start + service, size) - source.times + cluster.nodes[0].overhead
        return Replay(source.times, sojourn, np.zeros(n, dtype=np.int64), start, service, size,
                      np.zeros(size.size, dtype=np.int64))
    assign = (static_assignment(bk, cluster.router, nodes, (1, n))
              if cluster.router.is_static else None)
    rec = run_events(bk, types, cluster.router, t[:, :n], assign)
    out = _from_events(bk, rec, t[:, :n], _overheads(cluster))
    route = rec["route"][0]
    sojourn = np.full(n, np.nan)
    sojourn[route >= 0] = out["sojourn"]
    return Replay(source.times, sojourn, route, rec["start"], rec["service"], rec["size"],
                  rec["pair"] % nodes)


def _progress_callback(progress, requests):
    if progress is False or progress is None:
        return None
    if callable(progress) and progress is not True:
        return progress
    from tqdm import tqdm

    bar = tqdm(total=100, unit="%", desc=f"simulating {requests:,} requests",
               bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed}<{remaining}")

    class _Report:
        def __call__(self, fraction):
            bar.n = min(100, round(100 * fraction, 1))
            bar.refresh()

        def close(self):
            bar.close()

    return _Report()
