"""The compiled engine: every replica simulated request by request, replicas in parallel.

The rule of one replica is :mod:`qmodel.sim.replica_rule`, compiled by Numba for the CPU
(``njit``, the sections of replicas spread over the cores with ``prange``) or for a GPU
(``numba.cuda.jit``, one thread per replica); the same source runs under Numba's CUDA
simulator (``NUMBA_ENABLE_CUDASIM=1``) where there is no GPU. Requests are counted into
log-spaced histograms as they leave, so memory does not grow with the run: the result is a
:class:`~qmodel.latency.HistogramLatency` at :data:`RESOLUTION` relative resolution.

What it runs: single nodes and clusters behind every router (a replica holds the whole
cluster, so least outstanding and power of d see every queue), instances, max_batch_size,
max_queue_delay, preferred sizes, Triton's prefetching batcher (``Node.prefetch``, which the
event engine does not run: here it runs behind dynamic routers too), max_queue_size
rejections, every jitter law and measured samples, overheads, Poisson, renewal and trace
arrivals; Ensembles (and pods of them behind a static router) with every stage of every pod
inside one replica (:mod:`qmodel.sim.compiled_ensemble`).

The measured window of each replica, its warm-up, random phase and cool-down, and the
replica-length rule are the reference engines' (:mod:`qmodel.sim.window`,
:mod:`qmodel.sim.replicas`); a GPU takes more replicas, each as long as the rule asks.

Why Numba: one Python source compiled for both targets, testable without a GPU; measured in
benchmarks/sim_speed.py against the vectorised engines.
"""

from __future__ import annotations

import math
import types
import warnings

import numpy as np

from ..latency import Accuracy, HistogramLatency, SimulationEstimate
from ..system import Trace
from . import replica_rule
from .replica_rule import (ARRIVAL, LAW, NODE_FLOAT, NODE_INT, OPENED, ROUTER, STAT, build,
                           cpu_driver)
from .replicas import MAX_REPLICAS, MAX_SECTIONS, arrivals_per_replica_node, plan_replicas
from .window import ShortRunWarning, batch_places, cool_down_arrivals

__all__ = ["simulate_compiled", "compiled_target", "replay_compiled", "unsupported",
           "gpu_present", "RESOLUTION", "HIST_LO", "HIST_HI", "GPU_MAX_REPLICAS",
           "GPU_AUTO_REQUESTS", "histogram_result", "launch_on_gpu"]

# Histogram bins: relative width 0.05% from 0.1 us to 1e5 s (about 55,000 bins).
RESOLUTION = 5e-4
HIST_LO = 1e-7
HIST_HI = 1e5
# A GPU runs one replica per thread: up to this many, each as long as the replica-length rule
# asks (an H100 holds 270,000 threads at once).
GPU_MAX_REPLICAS = 1 << 18
# backend="auto" takes the GPU (where one is present) from this many requests: below it the
# kernel's compilation and launch cost more than the CPU's run.
GPU_AUTO_REQUESTS = 50_000_000
GPU_BLOCK = 128
# Entries of 8 bytes in a 64-byte cache line.
CACHE_LINE = 8
# Rows of histogram counters per section on the GPU (summed on the host).
HIST_COPIES = 8
# Queue room per node per replica, grown four-fold (and the run repeated) when a queue
# outgrows it, up to the largest.
FIRST_QUEUE_ROOM = 256
LARGEST_QUEUE_ROOM = 1 << 22

_compiled: dict = {}


def unsupported(cluster, source) -> str | None:
    """Why the compiled engine cannot run ``cluster`` under ``source`` (None: it can)."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return "the compiled engine needs Numba: pip install numba"
    return None


def gpu_present() -> bool:
    """True when Numba's CUDA target answers (a GPU, or the CUDA simulator)."""
    try:
        cuda = _cuda()
        return bool(cuda.is_available())
    except Exception:  # no numba-cuda, no driver, no device: all mean "use the CPU"
        return False


def _cuda():
    # numba-cuda up to 0.30 imports numpy.row_stack, which NumPy 2.5 removed (an alias of
    # vstack since NumPy 2.0).
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack
    from numba import cuda
    return cuda


def _cpu_runner():
    """The CPU target: sections of replicas in parallel, replicas of a section in turn."""
    if "cpu" not in _compiled:
        import numba

        # Compiled once per machine: Numba caches the machine code beside the source.
        jit = lambda f: numba.njit(f, cache=True)    # noqa: E731
        driver = cpu_driver(jit, jit(replica_rule.add), numba.prange)
        run = numba.njit(driver, parallel=True, cache=True)
        _compiled["cpu"] = run
    return _compiled["cpu"]


def _gpu_runner():
    """The GPU target: one thread per replica, counters added atomically."""
    if "gpu" not in _compiled:
        cuda = _cuda()
        # cuda.atomic is looked up when the device function runs: the CUDA simulator puts it
        # there only inside a kernel.
        add = cuda.jit(device=True)(types.FunctionType(_atomic_add.__code__, {"cuda": cuda},
                                                        "atomic_add"))
        run_replica = build(cuda.jit(device=True), add)

        kernel = cuda.jit(cache=True)(types.FunctionType(
            _one_thread_per_replica.__code__,
            {"cuda": cuda, "run_replica": run_replica, "HIST_COPIES": HIST_COPIES},
            "one_thread_per_replica"))
        _compiled["gpu"] = kernel
    return _compiled["gpu"]


def _one_thread_per_replica(replicas, sections, nodes, node_i, node_f, pref, mean, emp_off,
                            emp_cnt, emp_scale, pool, slow, arr_code, arr_f, trace, trace_off,
                            router_i, cum, totals, first, last, seeds, hist, hist_lo, hist_step,
                            bhist, stats, qbuf, qhead, qlen, free, busy_k, nt, nk, opened, perm,
                            held, rs, record, qidx, rec_sojourn, rec_node, rec_batch, rec_batch_i):
    # cuda and run_replica are bound by _gpu_runner
    r = cuda.grid(1)  # noqa: F821
    if r < replicas:
        # each section's counters in HIST_COPIES rows, block by block, so that fewer threads
        # add to one address at once
        section = r * sections // replicas
        row = section * HIST_COPIES + cuda.blockIdx.x % HIST_COPIES  # noqa: F821
        run_replica(r, r, row, nodes, node_i, node_f, pref,  # noqa: F821
                    mean, emp_off, emp_cnt, emp_scale, pool, slow, arr_code, arr_f, trace,
                    trace_off, router_i, cum, totals, first, last, seeds, hist, hist_lo,
                    hist_step, bhist, stats, qbuf, qhead, qlen, free, busy_k, nt, nk, opened,
                    perm, held, rs, record, qidx, rec_sojourn, rec_node, rec_batch, rec_batch_i)


def _atomic_add(array, index, value):
    cuda.atomic.add(array, index, value)    # noqa: F821 (bound by _gpu_runner)


def _tables(cluster):
    """Per-node parameters as the arrays of :mod:`qmodel.sim.replica_rule`."""
    nodes = cluster.nodes
    bmax = max(n.max_batch_size for n in nodes)
    cmax = max(n.instances for n in nodes)
    node_i = np.zeros((len(nodes), len(NODE_INT)), dtype=np.int64)
    node_f = np.zeros((len(nodes), len(NODE_FLOAT)))
    pref = np.zeros((len(nodes), bmax + 1), dtype=np.int64)
    mean = np.zeros((len(nodes), bmax + 1))
    emp_off = np.zeros((len(nodes), bmax + 1), dtype=np.int64)
    emp_cnt = np.ones((len(nodes), bmax + 1), dtype=np.int64)
    emp_scale = np.zeros((len(nodes), bmax + 1))
    pools = []
    offset = 0
    from ..system import preferred_table
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")       # the Node warned of extrapolated sizes already
        for n, node in enumerate(nodes):
            B = node.max_batch_size
            service = node.service
            node_i[n, NODE_INT["batch"]] = B
            node_i[n, NODE_INT["pmin"]] = min(node.effective_preferred)
            node_i[n, NODE_INT["instances"]] = node.instances
            node_i[n, NODE_INT["max_queue"]] = node.max_queue_size
            node_f[n, NODE_FLOAT["delay"]] = node.max_queue_delay
            node_f[n, NODE_FLOAT["overhead"]] = node.overhead
            node_f[n, NODE_FLOAT["prefetch"]] = node.prefetch if node.prefetches else -1.0
            if node.drift is not None:
                node_f[n, NODE_FLOAT["drift_sigma"]] = node.drift.sigma
                node_f[n, NODE_FLOAT["drift_period"]] = node.drift.period
                node_f[n, NODE_FLOAT["drift_rho"]] = node.drift.correlation
            pref[n, :B + 1] = preferred_table(node.effective_preferred, B)
            mean[n, 1:B + 1] = service.mean(np.arange(1, B + 1))
            law = service.jitter_law
            if law is None:
                node_i[n, NODE_INT["law"]] = LAW["empirical"]
                base = {}
                for k, values in service.samples:
                    values = np.asarray(values, dtype=float)
                    pools.append(values)
                    base[k] = (offset, values.size, float(values.mean()))
                    offset += values.size
                for k in range(1, B + 1):
                    o, c, m = base[service.nearest_measured(k)]
                    emp_off[n, k], emp_cnt[n, k], emp_scale[n, k] = o, c, mean[n, k] / m
            else:
                node_i[n, NODE_INT["law"]] = LAW[law.name]
                if law.name == "gamma":
                    node_f[n, NODE_FLOAT["law_param"]] = 1.0 / law.cv ** 2
                elif law.name == "lognormal":
                    node_f[n, NODE_FLOAT["law_param"]] = math.sqrt(math.log1p(law.cv ** 2))
    pool = np.concatenate(pools) if pools else np.zeros(1)
    # slow[n, m]: the factor on S(k) of a batch that starts with m instances busy (column 0:
    # 1 where node n's instances slow each other, else 0)
    slow = np.zeros((len(nodes), cmax + 1))
    for n, node in enumerate(nodes):
        if node.slowdown is not None:
            slow[n, 0] = 1.0
            slow[n, 1:node.instances + 1] = [node.slowdown_at(m)
                                             for m in range(1, node.instances + 1)]
    return (node_i, node_f, pref, mean, emp_off, emp_cnt, emp_scale, pool, slow), bmax, cmax


def _router(cluster):
    router = cluster.router
    nodes = len(cluster.nodes)
    if nodes == 1:
        return np.array([ROUTER["one"], 1], dtype=np.int64), np.ones(1)
    code = ROUTER[router.kind.name]
    shares = router.kind.shares(router, nodes)
    cum = np.cumsum(np.ones(nodes) / nodes if shares is None else shares)
    d = router.choices if router.kind.name == "power_of_d" else 1
    return np.array([code, d], dtype=np.int64), cum


def _arrivals(source):
    """(code, [mean gap, shape]) of a renewal stream."""
    if isinstance(source, Trace):
        return ARRIVAL["trace"], np.array([0.0, 1.0])
    mean_gap = 1.0 / source.rate
    if source.scv == 1.0:
        return ARRIVAL["poisson"], np.array([mean_gap, 1.0])
    if source.scv == 0.0:
        return ARRIVAL["deterministic"], np.array([mean_gap, 1.0])
    return ARRIVAL["gamma"], np.array([mean_gap, 1.0 / source.scv])


def _replica_plan(cluster, source, requests, replicas, warmup, target, rng, cool=None,
                  phase=None, plan_source=None):
    """Replicas, and for each its arrivals, its measured arrival indices and trace offset.

    A Trace is planned on the ``requests`` arrivals it replays, as the reference engines do;
    its later arrivals serve only as cool-down. The replicas are planned for ``cluster``
    under ``plan_source`` (``source`` by default), with ``cool`` arrivals after the window
    and the window's phase drawn over ``phase`` places (those of ``cluster`` by default): an
    ensemble's driver plans for its most demanding stage and gives the pipeline's own."""
    stream = source
    if isinstance(source, Trace) and requests < source.times.size:
        source = Trace(source.times[:requests])
    if plan_source is None or isinstance(source, Trace):
        plan_source = source
    if replicas is None and target == "gpu" and not isinstance(source, Trace):
        per_node = arrivals_per_replica_node(cluster, plan_source.rate, plan_source.scv,
                                             warmup)
        wanted = int(requests // (len(cluster.nodes) * per_node))
        if wanted > MAX_REPLICAS:
            replicas = min(wanted, GPU_MAX_REPLICAS)
    replicas, per_replica, ask = plan_replicas(cluster, plan_source, requests, replicas,
                                               warmup)
    if cool is None:
        cool = cool_down_arrivals(cluster, source.rate)
    if isinstance(source, Trace):
        cuts = np.linspace(0, requests, replicas + 1).astype(np.int64)
        counts = np.diff(cuts)
        totals = np.minimum(cuts[1:] + cool, stream.times.size) - cuts[:-1]
        start = np.zeros(replicas, dtype=np.int64)
        offsets = cuts[:-1].copy()
    else:
        if phase is None:
            phase = batch_places(cluster)
        counts = np.full(replicas, per_replica, dtype=np.int64)
        totals = counts + phase - 1 + cool
        start = (rng.integers(0, phase, replicas, dtype=np.int64) if phase > 1
                 else np.zeros(replicas, dtype=np.int64))
        offsets = np.zeros(replicas, dtype=np.int64)
    first = start + np.minimum((warmup * counts).astype(np.int64), counts - 1)
    last = start + counts - 1
    return replicas, totals, first, last, offsets, ask


def compiled_target(cluster, source, requests: int, backend: str) -> str:
    """"cpu" or "gpu": where the compiled engine runs ``cluster`` for ``backend`` ("cpu",
    "gpu", or "auto": the GPU where Numba's CUDA target answers and the run is large, else
    the CPU); ValueError where it cannot."""
    why = unsupported(cluster, source)
    if why is not None:
        raise ValueError(f"engine='compiled' cannot run this system: {why}")
    target = {"cpu": "cpu", "gpu": "gpu"}.get(backend)
    if backend == "auto":
        target = "gpu" if requests >= GPU_AUTO_REQUESTS and gpu_present() else "cpu"
    if target is None:
        raise ValueError(f"engine='compiled' runs on backend='cpu', 'gpu' or 'auto', not "
                         f"{backend!r} ('numpy' and 'cupy' are the vectorised engines' array "
                         "libraries)")
    if target == "gpu" and not gpu_present():
        raise ValueError("backend='gpu' needs Numba's CUDA target and a GPU (pip install "
                         "qmodel[gpu]), or NUMBA_ENABLE_CUDASIM=1 for the CUDA simulator")
    return target


def simulate_compiled(cluster, source, requests: int, seed, replicas, warmup: float,
                      backend: str = "auto") -> HistogramLatency:
    """Run the compiled engine over nodes (Ensemble pods:
    :func:`qmodel.sim.compiled_ensemble.simulate_compiled_ensemble`); the arguments are
    :func:`qmodel.simulate`'s, checked there, ``backend`` as :func:`compiled_target` takes it.
    """
    target = compiled_target(cluster, source, requests, backend)
    if cluster.pods:
        raise ValueError("simulate_compiled runs nodes; Ensemble pods run on "
                         "qmodel.sim.compiled_ensemble.simulate_compiled_ensemble")
    rng = np.random.default_rng(seed)
    replicas, totals, first, last, offsets, ask = _replica_plan(
        cluster, source, requests, replicas, warmup, target, rng)
    seeds = rng.integers(1, np.iinfo(np.uint64).max, (replicas, 2), dtype=np.uint64,
                         endpoint=True)
    tables, bmax, cmax = _tables(cluster)
    router_i, cum = _router(cluster)
    arr_code, arr_f = _arrivals(source)
    # a writable copy: a read-only array would compile the engine a second time
    trace = np.array(source.times, dtype=float) if isinstance(source, Trace) else np.zeros(1)
    nodes = len(cluster.nodes)
    sections = min(replicas, MAX_SECTIONS)
    bins = int(math.ceil(math.log(HIST_HI / HIST_LO) / math.log1p(RESOLUTION))) + 2
    hist_lo, hist_step = math.log(HIST_LO), math.log1p(RESOLUTION)
    # Queue room starts small whatever max_queue_size allows and grows where a queue fills
    # it (a limit of 10^8 is legal, and its queue rarely holds more than a few batches).
    room = FIRST_QUEUE_ROOM
    while room < 4 * bmax:
        room *= 2
    while True:
        out = _run(target, replicas, sections, nodes, tables, arr_code, arr_f, trace, offsets,
                   router_i, cum, totals, first, last, seeds, bins, hist_lo, hist_step, bmax,
                   cmax, room)
        hist, bhist, stats = out["hist"], out["bhist"], out["stats"]
        if not stats[:, STAT["overflow"]].any():
            break
        if room >= LARGEST_QUEUE_ROOM:
            raise ValueError(f"a queue grew past {room:,} requests in one replica: the load "
                             "is too close to capacity to simulate; lower the rate")
        room *= 4
    return _result(cluster, hist, bhist, stats, replicas, target, requests, ask, bmax)


def _run(target, replicas, sections, nodes, tables, arr_code, arr_f, trace, offsets, router_i,
         cum, totals, first, last, seeds, bins, hist_lo, hist_step, bmax, cmax, room,
         record=False):
    """One launch of the engine; returns the histograms, the per-replica results and, with
    ``record`` (one replica), the request and batch records."""
    slots = sections if target == "cpu" else replicas
    out = {"hist": np.zeros((sections, bins), dtype=np.int64),
           "bhist": np.zeros((sections, 2 * (bmax + 1) + CACHE_LINE), dtype=np.int64),
           "stats": np.zeros((replicas, len(STAT)))}
    n = int(totals[0]) if record else 1
    rec = {"rec_sojourn": np.full(n, np.nan), "rec_node": np.full(n, -1, dtype=np.int64),
           "rec_batch": np.zeros((n, 2)), "rec_batch_i": np.zeros((n, 2), dtype=np.int64)}
    # On the CPU each section's rows are padded past a cache line (8 entries): threads
    # writing neighbouring rows would otherwise share lines and stall each other (16 cores
    # ran at 18 M/s unpadded, about one core's speed).
    pad = CACHE_LINE if target == "cpu" else 0
    scratch = [np.zeros((slots, nodes, room)), np.zeros((slots, nodes + pad), dtype=np.int64),
               np.zeros((slots, nodes + pad), dtype=np.int64),
               np.zeros((slots, nodes, cmax + pad)),
               np.zeros((slots, nodes, cmax + pad), dtype=np.int64),
               np.zeros((slots, nodes + pad)), np.zeros((slots, nodes + pad), dtype=np.int64),
               np.zeros((slots, nodes + pad, len(OPENED) - 1 + 2 * cmax)),
               np.zeros((slots, nodes + pad), dtype=np.int64),
               np.zeros((slots, nodes + pad), dtype=np.int64),
               np.zeros((slots, 2 + pad), dtype=np.uint64)]
    qidx = np.zeros((slots, nodes, room) if record else (1, 1, 1), dtype=np.int64)
    args = [nodes, *tables, arr_code, arr_f, trace, offsets, router_i, cum, totals, first,
            last, seeds, out["hist"], hist_lo, hist_step, out["bhist"], out["stats"], *scratch,
            int(record), qidx, *rec.values()]
    if target == "cpu":
        _cpu_runner()(replicas, sections, *args)
        return {**out, **rec}
    return launch_on_gpu(_gpu_runner(), replicas, sections, args, scratch,
                         {**out, **rec})


def launch_on_gpu(kernel, replicas: int, sections: int, args: list, scratch: list,
                  wanted: dict) -> dict:
    """Run ``kernel`` over one thread per replica and bring ``wanted`` back (name -> the
    host array among ``args``), the histograms (``wanted["hist"]`` and ``["bhist"]``, first
    axis by section) summed over their HIST_COPIES rows per section. ``scratch`` (among
    ``args``) is allocated on the device, uninitialised (each replica sets up its own),
    column-major: a thread's state is column ``slot`` of each array, so the threads of a warp
    touch neighbouring addresses."""
    cuda = _cuda()
    rows = {id(wanted[name]): np.zeros((sections * HIST_COPIES, *wanted[name].shape[1:]),
                                       dtype=wanted[name].dtype) for name in ("hist", "bhist")}
    args = [rows.get(id(a), a) for a in args]
    need = sum(a.nbytes for a in scratch) + wanted["stats"].nbytes
    free, _ = cuda.current_context().get_memory_info()
    if need > 0.9 * free:
        raise ValueError(f"the compiled engine needs {need / 2**30:.1f} GiB of GPU memory for "
                         f"{replicas:,} replicas and has {free / 2**30:.1f} GiB free: ask for "
                         "fewer replicas (replicas=) or fewer requests")
    on_device = {id(a): cuda.device_array(a.shape, a.dtype, order="F") for a in scratch}
    device = [on_device[id(a)] if id(a) in on_device else
              cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    # Numba's CUDA simulator runs a block's threads as Python threads and swaps a device
    # function's ``cuda`` global for each call, unsafely between them: a thread could find
    # the real module back mid-call ("module 'numba.cuda' has no attribute 'atomic'", one
    # test run in a few). There each block is one thread; the counts are sums either way.
    from numba import config
    per_block = 1 if config.ENABLE_CUDASIM else GPU_BLOCK
    blocks = (replicas + per_block - 1) // per_block
    kernel[blocks, per_block](replicas, sections, *device)
    cuda.synchronize()
    got = {name: device[next(i for i, a in enumerate(args) if a is rows.get(id(array), array))]
           .copy_to_host() for name, array in wanted.items()}
    for name in ("hist", "bhist"):
        got[name] = got[name].reshape(sections, HIST_COPIES, *got[name].shape[1:]).sum(axis=1)
    return got


def replay_compiled(cluster, times, seed=None, backend: str = "cpu"):
    """One replica over the arrival ``times``, every request and batch recorded: the
    compiled engine's side of :func:`qmodel.replay` (which builds its Replay from this).

    Returns a dict: ``sojourn`` and ``node`` by request (NaN and -1 where rejected), and the
    batches' ``start``, ``service``, ``size`` and ``node`` in dispatch order.
    """
    why = ("replay runs a node or a cluster of nodes, not an Ensemble" if cluster.pods
           else unsupported(cluster, Trace(times)))
    if why is not None:
        raise ValueError(f"engine='compiled' cannot run this system: {why}")
    target = "gpu" if backend == "gpu" else "cpu"
    times = np.array(times, dtype=float)
    rng = np.random.default_rng(seed)
    seeds = rng.integers(1, np.iinfo(np.uint64).max, (1, 2), dtype=np.uint64, endpoint=True)
    tables, bmax, cmax = _tables(cluster)
    router_i, cum = _router(cluster)
    n = times.size
    room = 1 << max(8, int(n).bit_length())
    bins = 3
    got = _run(target, 1, 1, len(cluster.nodes), tables, ARRIVAL["trace"], np.zeros(2), times,
               np.zeros(1, dtype=np.int64), router_i, cum, np.array([n]), np.zeros(1, np.int64),
               np.array([n - 1]), seeds, bins, math.log(HIST_LO), math.log1p(RESOLUTION), bmax,
               cmax, room, record=True)
    used = got["rec_batch_i"][:, 0] > 0
    return {"sojourn": got["rec_sojourn"], "node": got["rec_node"],
            "start": got["rec_batch"][used, 0], "service": got["rec_batch"][used, 1],
            "size": got["rec_batch_i"][used, 0], "batch_node": got["rec_batch_i"][used, 1]}


def _result(cluster, hist, bhist, stats, replicas, target, requests, ask, bmax):
    span = float(np.sum(stats[:, STAT["t_end"]] - stats[:, STAT["t_warm"]]))
    instance_count = sum(node.instances for node in cluster.nodes)
    backend = "gpu" if target == "gpu" else "cpu"
    return histogram_result(
        hist, bhist.sum(axis=0), bmax, float(stats[:, STAT["busy"]].sum()), span,
        instance_count, float(stats[:, STAT["served"]].sum()),
        float(stats[:, STAT["sojourn_sum"]].sum()), float(stats[:, STAT["rejected"]].sum()),
        replicas, backend, f"simulation (compiled engine, {backend}, {replicas} replicas)",
        requests, ask)


def histogram_result(hist, counts, bmax, busy, span, instance_count, served, sojourn_sum,
                     rejected, replicas, backend, method, requests, ask) -> HistogramLatency:
    """The result of a compiled run from its counters: ``hist`` (sections, bins), ``counts``
    the batch sizes (columns up to ``bmax``: in the window; after them: the batches that
    carried the window's requests), the instances' ``busy`` seconds over ``span`` seconds of
    measured windows, the measured requests and their sojourn sum, the rejected ones."""
    if span <= 0:
        raise ValueError("the measured window is empty; raise requests or lower warmup")
    batches = counts[:bmax + 1]
    if not batches[1:].any() and served:
        warnings.warn(f"requests={requests} is too short: no batch was dispatched "
                      f"inside the measured windows ({span / replicas:.3g} s each); the batch "
                      "statistics count the batches dispatched after the windows that "
                      f"carried the measured requests: {ask}.", ShortRunWarning, stacklevel=5)
        batches = counts[bmax + 1:2 * (bmax + 1)]
    utilization = busy / (span * instance_count)
    if utilization > 1 + 1e-9:
        raise AssertionError(f"compiled engine reported {utilization:.6g} of its instances "
                             "busy in the measured window; an instance overlapped two batches")
    metrics = dict(model="simulation", method=method, throughput=served / span,
                   utilization=min(1.0, utilization),
                   batch_size_distribution={k: int(c) for k, c in enumerate(batches) if c},
                   rejection_fraction=rejected / max(1.0, rejected + served))
    result = HistogramLatency(hist, HIST_LO, RESOLUTION, sojourn_sum / max(served, 1.0),
                              accuracy=Accuracy("simulation"), **metrics)
    half_width = None
    if result.sections >= 2:
        try:
            lo, hi = result.ci(0.99)
            half_width = (hi - lo) / 2 / result.p99
        except ValueError:      # a section's p99 (or the p99) outside the bins: say nothing
            half_width = None
    result.accuracy = Accuracy("simulation", simulation=SimulationEstimate(
        requests=int(served), replicas=replicas, p99_half_width=half_width, engine="compiled",
        backend=backend))
    return result
