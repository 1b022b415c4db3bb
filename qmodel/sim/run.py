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

import numbers
from dataclasses import dataclass

import numpy as np

from ..checks import positive_int
from ..latency import SampledLatency
from ..system import Trace, arrivals_from, as_cluster, check_stable
from .arrivals import replica_arrivals
from .assemble import assemble, from_events, overheads
from .backend import get_backend
from .ensemble import simulate_ensemble
from .events import run_events
from .lookahead import run_lookahead
from .nodetypes import NodeTypes
from .compiled import (GPU_AUTO_REQUESTS, gpu_present, replay_compiled, simulate_compiled,
                       unsupported)
from .compiled_ensemble import simulate_compiled_ensemble
from .cost import check_memory, run_cost
from .replicas import DEFAULT_REQUESTS, DEFAULT_WARMUP, auto_engine, plan_replicas
from .routing import split_by_node, static_assignment
from .window import batch_places, cool_down_arrivals

__all__ = ["simulate", "replay", "Replay", "ENGINES", "BACKENDS"]

ENGINES = ("auto", "lookahead", "events", "compiled")
# "numpy" and "cupy" run the vectorised engines on their array library; "cpu" and "gpu" the
# compiled engine on that target; "auto" the compiled engine on a GPU for large runs, else
# the vectorised engines on NumPy.
BACKENDS = ("auto", "numpy", "cupy", "cpu", "gpu")

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
    backend : {"auto", "numpy", "cupy", "cpu", "gpu"}
        "cpu" and "gpu" run the compiled engine (:mod:`qmodel.sim.compiled`) on the CPU's
        cores or on a GPU; "numpy" and "cupy" run the vectorised engines on that array
        library. "auto" takes the compiled engine on a GPU where one is present and the run
        holds at least 50 M requests, else the vectorised engines on NumPy.
    engine : {"auto", "lookahead", "events", "compiled"}
        Force an engine (for cross-checks); "auto" picks the fastest one that applies. The
        compiled engine returns a :class:`~qmodel.latency.HistogramLatency` (quantiles at
        0.05% resolution, no samples kept), for ensembles with every stage inside one
        replica; it is the one engine that runs ``Node.prefetch`` behind a dynamic router
        ("auto" takes it there).
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
        if backend in ("cpu", "gpu"):
            raise ValueError(f"backend={backend!r} runs the compiled engine, which does not "
                             "simulate a Traffic yet; use backend='auto' or 'numpy'")
        if _drifts(as_cluster(system)):
            raise ValueError("a Traffic of drifting nodes (Node.drift) cannot be simulated: "
                             "the time-varying simulator does not run drift yet; set "
                             "drift=None, or simulate each rate of the traffic as a steady "
                             "one")
        if _only_compiled(as_cluster(system)):
            raise ValueError("a Traffic of prefetching nodes (Node.prefetch) behind a dynamic "
                             "router cannot be simulated: the time-varying simulator runs the "
                             "event engine, which does not prefetch, and the compiled engine "
                             "does not run a Traffic yet; set prefetch=None, or a static "
                             "router (round_robin, random)")
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
    if engine not in ENGINES:
        raise ValueError(f"engine={engine!r} is unknown; use one of {', '.join(ENGINES)}")
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r} is unknown; use one of {', '.join(BACKENDS)}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)
                             or seed < 0):
        raise ValueError(f"seed must be a whole number >= 0 or None, got {seed!r}")

    if isinstance(source, Trace) and requests > source.times.size:
        raise ValueError(f"requests={requests} exceeds the {source.times.size} arrivals of the "
                         "Trace; leave requests out to replay the whole trace")
    if backend in ("cpu", "gpu") and engine in ("lookahead", "events"):
        raise ValueError(f"backend={backend!r} runs the compiled engine; engine={engine!r} "
                         "runs on backend='numpy' or 'cupy'")
    if _runs_compiled(engine, backend, cluster, source, requests):
        # histograms, not samples: memory does not grow with the requests
        run = simulate_compiled_ensemble if cluster.pods else simulate_compiled
        return run(cluster, source, requests, seed, replicas, warmup, backend)
    if backend in ("cpu", "gpu"):
        raise ValueError(f"backend={backend!r} runs the compiled engine, which cannot run this "
                         f"system: {unsupported(cluster, source)}; use backend='numpy'")
    if _drifts(cluster):
        raise ValueError(f"drifting nodes (Node.drift) run on the compiled engine only; with "
                         f"engine={engine!r} and backend={backend!r} the vectorised engines "
                         f"were asked for: use engine='auto' (or 'compiled') with "
                         f"backend='auto', 'cpu' or 'gpu'")
    check_memory(run_cost(system, source, requests, warmup).nbytes, requests)
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
    replicas, per_replica, ask = plan_replicas(cluster, source, requests, replicas, warmup)

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
            out = from_events(bk, run_events(bk, types, cluster.router, times[:, :width],
                                              assign, report), times[:, :width],
                               overheads(cluster))
    finally:
        if hasattr(report, "close"):
            report.close()
    return assemble(out, bk.asnumpy(times), bk.asnumpy(start), bk.asnumpy(counts), types,
                     warmup, engine, bk.name, requests, ask)


def _runs_compiled(engine, backend, cluster, source, requests) -> bool:
    """Whether this run goes to the compiled engine: asked for by name or by a "cpu" or
    "gpu" backend, or, with engine="auto", where a GPU is present and the run is large."""
    if engine == "compiled":
        return True
    if engine != "auto" or unsupported(cluster, source) is not None:
        return False
    if backend in ("cpu", "gpu"):
        return True
    if backend == "auto" and _only_compiled(cluster):
        return True
    return backend == "auto" and requests >= GPU_AUTO_REQUESTS and gpu_present()


def _only_compiled(cluster) -> bool:
    """Prefetching nodes behind a dynamic router (the event engine does not prefetch), and
    drifting nodes (``Node.drift``: only the compiled engine runs it)."""
    return _drifts(cluster) or (not cluster.pods and auto_engine(cluster) == "events"
                                and any(node.prefetches for node in cluster.nodes))


def _drifts(cluster) -> bool:
    """Whether any node of ``cluster`` (an ensemble pod's stages included) drifts."""
    nodes = cluster.nodes
    if cluster.pods:
        nodes = [stage for pod in nodes for stage in pod.stages.values()]
    return any(node.drift is not None for node in nodes)


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

    overhead = overheads(cluster)
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
    if engine not in ENGINES:
        raise ValueError(f"engine={engine!r} is unknown; use one of {', '.join(ENGINES)}")
    if cluster.pods:
        raise ValueError("replay runs a node or a cluster of nodes, not an Ensemble; "
                         "qmodel.simulate runs ensembles stage by stage")
    nodes = len(cluster.nodes)
    decoupled = nodes == 1 and all(n.max_queue_size == 0 for n in cluster.nodes)
    # a prefetching cluster replays on the compiled engine: the event engine does not
    # prefetch, and the look-ahead engine replays one node only
    prefetching = any(n.prefetches for n in cluster.nodes) and not decoupled
    if engine == "compiled" or (engine == "auto" and (prefetching or _drifts(cluster))):
        rec = replay_compiled(cluster, source.times, seed)
        return Replay(source.times, rec["sojourn"], rec["node"], rec["start"], rec["service"],
                      rec["size"], rec["batch_node"])
    if engine == "lookahead" and not decoupled:
        raise ValueError("replay with engine='lookahead' needs one node with an unlimited queue")
    if _drifts(cluster):
        raise ValueError(f"drifting nodes (Node.drift) replay on the compiled engine only: use "
                         f"engine='auto' or 'compiled', not {engine!r}")
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
    out = from_events(bk, rec, t[:, :n], overheads(cluster))
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
