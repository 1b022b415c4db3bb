"""``qmodel.simulate``: Monte Carlo sojourn times of a node or cluster under Triton's batching.

Independent replications ("replicas") of the whole system run side by side as array lanes, on
NumPy or CuPy. Two engines share one batching rule (:mod:`qmodel.sim.batching`):

- ``lookahead`` (:mod:`qmodel.sim.lookahead`): nodes that decouple (one node, or static routing)
  with unlimited queues; one batch per lane per step;
- ``events`` (:mod:`qmodel.sim.events`): dynamic routing or finite queues; one arrival per
  replica per step.

Each replica starts empty; the first ``warmup`` fraction of its arrival time span is discarded.
Confidence intervals come from the spread between groups of replicas (sectioning).
"""

from __future__ import annotations

import numbers

import numpy as np

from ..latency import Accuracy, SampledLatency
from ..system import Trace, arrivals_from, as_cluster, check_stable
from .arrivals import replica_arrivals
from .backend import get_backend
from .events import run_events
from .lookahead import run_lookahead
from .nodetypes import NodeTypes
from .routing import split_by_node, static_assignment

__all__ = ["simulate"]

# A replica should give every node this many arrivals, so the start-up transient (a fraction
# `warmup` of it) is short against the run; more requests buy more replicas, not longer ones.
TARGET_PER_NODE = 10_000
DEFAULT_REQUESTS = 2_000_000
MAX_REPLICAS = 4096
MIN_REPLICAS = 8
# Sections for confidence intervals: enough for a stable t interval, each holding many replicas.
MAX_SECTIONS = 32


def simulate(system, rate=None, *, arrivals=None, requests: int | None = None, seed=None,
             lanes: int | None = None, warmup: float = 0.1, backend: str = "auto",
             engine: str = "auto", progress=False) -> SampledLatency:
    """Simulate a Node or Cluster and return its sojourn-time distribution.

    Parameters
    ----------
    system : Node or Cluster
    rate : float, optional
        Poisson arrival rate (requests/s). Give this or ``arrivals``.
    arrivals : Poisson, Renewal or Trace, optional
    requests : int, optional
        Total arrivals over all replicas; default 2,000,000, or the whole Trace (a smaller
        number replays only the start of the trace).
    seed : int, optional
        Seeds the random generator; the same seed, backend and arguments reproduce a run.
    lanes : int, optional
        Independent replicas of the system. Default: enough for ~10,000 arrivals per node each,
        between 8 and 4096.
    warmup : float
        Fraction of each replica's time span discarded as start-up transient, in [0, 0.9).
    backend : {"auto", "numpy", "cupy"}
        "auto" takes CuPy only when a GPU is usable.
    engine : {"auto", "lookahead", "events"}
        Force an engine (for cross-checks); "auto" picks the fastest one that applies.
    progress : bool or callable
        True shows a progress bar; a callable receives the fraction done.

    Returns
    -------
    SampledLatency
        With ``ci(p)`` confidence intervals, throughput, utilisation, batch sizes and rejections.

    Examples
    --------
    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(1e-3, jitter="exponential"))   # M/M/1, mu = 1000
    >>> r = qm.simulate(node, rate=800.0, requests=400_000, seed=1)
    >>> lo, hi = r.ci(0.99)
    >>> bool(lo < 0.0230259 < hi)                     # exact p99: ln(100) / (mu - lambda)
    True
    """
    cluster = as_cluster(system)
    source = arrivals_from(rate, arrivals)
    check_stable(cluster, source.rate)
    if requests is None:
        requests = source.times.size if isinstance(source, Trace) else DEFAULT_REQUESTS
    requests = _whole(requests, "requests", 100)
    if not isinstance(warmup, numbers.Real) or not 0 <= warmup < 0.9:
        raise ValueError(f"warmup={warmup!r} must be a fraction in [0, 0.9), e.g. 0.1")
    if engine not in ("auto", "lookahead", "events"):
        raise ValueError(f"engine={engine!r} is unknown; use 'auto', 'lookahead' or 'events'")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)
                             or seed < 0):
        raise ValueError(f"seed must be a whole number >= 0 or None, got {seed!r}")

    nodes = len(cluster.nodes)
    if isinstance(source, Trace) and requests < source.times.size:
        source = Trace(source.times[:requests])
    elif isinstance(source, Trace) and requests > source.times.size:
        raise ValueError(f"requests={requests} exceeds the {source.times.size} arrivals of the "
                         "Trace; leave requests out to replay the whole trace")
    if lanes is None:
        replicas = int(np.clip(requests // (nodes * TARGET_PER_NODE), MIN_REPLICAS, MAX_REPLICAS))
    else:
        replicas = _whole(lanes, "lanes", 1)
    per_replica = requests // replicas
    if per_replica < 2:
        raise ValueError(f"requests={requests} over lanes={replicas} leaves fewer than 2 arrivals "
                         "per replica; raise requests or lower lanes")

    static = cluster.router.is_static
    finite = any(n.max_queue_size > 0 for n in cluster.nodes)
    if engine == "auto":
        engine = "lookahead" if static and not finite else "events"
    if engine == "lookahead" and not (static and not finite):
        raise ValueError("engine='lookahead' needs a static router (random, round_robin) and "
                         "unlimited queues (max_queue_size=0); use engine='events'")

    bk = get_backend(backend, seed)
    types = NodeTypes(bk, cluster.nodes)
    times, counts = replica_arrivals(bk, source, replicas, per_replica)
    report = _progress_callback(progress, requests)
    try:
        if engine == "lookahead":
            out = _run_static(bk, types, cluster, times, replicas, nodes, report)
        else:
            assign = static_assignment(bk, cluster.router, nodes, times.shape) if static else None
            out = _from_events(run_events(bk, types, cluster.router, times, assign, report))
    finally:
        if hasattr(report, "close"):
            report.close()
    method = f"simulation ({engine} engine, {bk.name}, {replicas} replicas)"
    return _assemble(out, bk.asnumpy(times), bk.asnumpy(counts), types, warmup, method,
                     replicas, nodes)


# ------------------------------------------------------------------------------------------
def _run_static(bk, types, cluster, times, replicas, nodes, report):
    """Lookahead engine over (replica, node) lanes; returns per-request and per-batch arrays."""
    xp = bk.xp
    pad = 2 * types.bmax + 2
    if nodes == 1:
        lane_times = xp.concatenate([times, xp.full((replicas, pad), xp.inf)], axis=1)
        lane_counts = xp.isfinite(times).sum(axis=1)
    else:
        assign = static_assignment(bk, cluster.router, nodes, times.shape)
        lane_times, lane_counts = split_by_node(bk, times, assign, nodes, pad)
    lane_type = xp.asarray(np.tile(types.type_of_node, replicas))
    rec = run_lookahead(bk, types, lane_times, lane_counts, lane_type, report)
    # Lane-major order: lane l's batches in step order cover its requests in arrival order.
    size = rec["size"].T.ravel()
    keep = size > 0
    start, service, size = rec["start"].T.ravel()[keep], rec["service"].T.ravel()[keep], size[keep]
    lane = np.repeat(np.arange(replicas * nodes), rec["size"].shape[0])[keep]
    lt = bk.asnumpy(lane_times)
    arrival = lt[np.isfinite(lt)]              # row-major: lane by lane, in arrival order
    completion = np.repeat(start + service, size)
    req_lane = np.repeat(np.arange(replicas * nodes), bk.asnumpy(lane_counts))
    return {
        "arrival": arrival, "sojourn": completion - arrival, "replica": req_lane // nodes,
        "rejected_arrival": np.zeros(0), "rejected_replica": np.zeros(0, dtype=np.int64),
        "batch_start": start, "batch_service": service, "batch_size": size,
        "batch_replica": lane // nodes,
    }


def _from_events(rec):
    """Per-request sojourns from the event engine's routes and per-node dispatch records."""
    nodes = rec["nodes"]
    route = rec["route"]
    replicas, n = route.shape
    # Requests of each (replica, node) in arrival order are served by that node's batches in
    # dispatch order; a stable sort by node key lines both lists up.
    accepted = route >= 0
    key = (np.arange(replicas)[:, None] * nodes + route)[accepted]
    req_order = np.argsort(key, kind="stable")
    batch_order = np.argsort(rec["pair"], kind="stable")
    done = np.repeat((rec["start"] + rec["service"])[batch_order], rec["size"][batch_order])
    if done.size != key.size:
        raise AssertionError(f"event engine served {done.size} of {key.size} accepted requests")
    completion = np.empty(key.size)
    completion[req_order] = done
    return {"route": route, "completion": completion, "accepted": accepted,
            "batch_start": rec["start"], "batch_service": rec["service"],
            "batch_size": rec["size"], "batch_replica": rec["pair"] // nodes}


def _assemble(out, times, counts, types, warmup, method, replicas, nodes):
    """Apply the warm-up cut, compute the metrics and build the SampledLatency."""
    first = np.minimum((warmup * counts).astype(np.int64), counts - 1)
    t_warm = times[np.arange(replicas), first]
    t_end = times[np.arange(replicas), counts - 1]
    span = float(np.sum(t_end - t_warm))
    if span <= 0:
        raise ValueError("the measured window is empty; raise requests or lower warmup")
    if "route" in out:  # event engine: rebuild per-request arrays from routes
        accepted = out["accepted"]
        valid = np.arange(times.shape[1])[None, :] < counts[:, None]
        rep = np.broadcast_to(np.arange(replicas)[:, None], times.shape)
        out = dict(out, arrival=times[accepted], sojourn=out["completion"] - times[accepted],
                   replica=rep[accepted], rejected_arrival=times[valid & ~accepted],
                   rejected_replica=rep[valid & ~accepted])
    keep = out["arrival"] >= t_warm[out["replica"]]
    sojourn, replica = out["sojourn"][keep], out["replica"][keep]
    rejected = int(np.sum(out["rejected_arrival"] >= t_warm[out["rejected_replica"]]))
    served = sojourn.size

    in_window = ((out["batch_start"] >= t_warm[out["batch_replica"]])
                 & (out["batch_start"] <= t_end[out["batch_replica"]]))
    sizes = out["batch_size"][in_window]
    hist = np.bincount(sizes, minlength=types.bmax + 1)
    instance_count = sum(types.kinds[t].instances for t in types.type_of_node)
    utilization = float(out["batch_service"][in_window].sum()) / (span * instance_count)

    sections = min(replicas, MAX_SECTIONS)
    result = SampledLatency(
        sojourn, replica % sections, method=method,
        accuracy=Accuracy("simulation", "placeholder"),
        throughput=served / span, utilization=utilization,
        batch_size_distribution={k: int(c) for k, c in enumerate(hist) if c},
        rejection_fraction=rejected / max(1, rejected + served))
    if sections >= 2:
        lo, hi = result.ci(0.99)
        statement = (f"Monte Carlo: {served} requests after warm-up in {replicas} replicas; "
                     f"p99 95% CI +/-{(hi - lo) / 2 / result.p99:.2%}")
    else:
        statement = f"Monte Carlo: {served} requests, 1 replica (no confidence interval)"
    result.accuracy = Accuracy("simulation", statement)
    return result


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


def _whole(value, name, minimum):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or \
            not float(value).is_integer() or value < minimum:
        raise ValueError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    return int(value)


