"""Simulating traffic that changes with time, and pods that come and go.

``qmodel.simulate(system, arrivals=traffic)`` (with ``pods=`` a
:class:`~qmodel.autoscaler.PodSchedule` for an autoscaled deployment) lands here.

1. **Arrivals.** Each replica (an independent realisation of the whole traffic) draws its
   arrival times from the :class:`~qmodel.Traffic` (thinning, or a renewal process in the
   traffic's own clock).
2. **Routing.** A static router splits them among the pods ready at each arrival: random picks
   one of the n(t) ready pods uniformly, round robin takes them in turn; pods are numbered in
   the order they became ready and the newest leave first, so a pod that leaves stops
   receiving requests and drains what it holds. A dynamic router (least outstanding, power of
   d) runs the whole cluster on the event engine; it needs a fixed node count.
3. **Chunks.** A pod's stream is long (a two-hour sale at 10k req/s is 70 M requests), and
   the engines are fast only over many lanes side by side. So each stream is cut into chunks
   of consecutive arrivals, each run as its own lane: a chunk's lane starts, empty, a warm-up
   of arrivals before the chunk (ten relaxation lengths at the highest per-pod load just
   before it, :func:`qmodel.sim.replicas.relaxation_arrivals`, at least 500 and four batches of
   every stage, and back to before
   the start of any overload still being worked off, from the fluid backlog) and runs on a
   cool-down of arrivals after it. No chunk starts inside an overload: one that would end in
   it runs on until the fluid backlog is worked off. Only the chunk's own arrivals are measured. A lane that
   starts empty forgets that start over a few relaxation lengths (the stationary simulator
   measures this, :mod:`qmodel.sim.run`); ``chunk=`` larger than any stream runs each stream
   as one lane, the reference the chunks are tested against (tests/test_sim_traffic.py).
4. **Results** are kept by arrival-time bin (:class:`~qmodel.timeline.TrafficLatency`).
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from ..autoscaler import PodSchedule
from ..latency import Accuracy, Approximation, SimulationEstimate
from ..system import Cluster, as_cluster
from ..timeline import TrafficLatency, default_resolution
from ..traffic import Traffic
from .assemble import from_events
from .backend import get_backend
from .cost import BYTES_PER_REQUEST, STAGE_BYTES, check_memory
from .ensemble import run_stages, stage_arrival_scv
from .events import run_events
from .lookahead import run_lookahead
from .nodetypes import NodeTypes
from .replicas import relaxation_arrivals

__all__ = ["simulate_traffic"]

# Warm-up of a chunk's lane, in relaxation lengths of the load just before the chunk, and
# at least this many arrivals.
WARM_RELAXATIONS = 10.0
WARM_FLOOR = 500
# The load at which a lane's warm-up stops growing as a relaxation length; beyond it the
# fluid backlog decides where the warm-up starts.
LOAD_CAP = 0.995
# Lane cells (lanes x width) run at once: bounds the engines' memory.
GROUP_CELLS = 12_000_000
GROUP_CELLS_ENSEMBLE = 4_000_000
# realisations' lanes gathered before they run (many short realisations run together)
PENDING_ARRIVALS = 4_000_000


def simulate_traffic(system, traffic: Traffic, *, pods=None, seed=None, replicas: int = 1,
                     backend: str = "auto", resolution: float | None = None,
                     chunk: int | None = None) -> TrafficLatency:
    """Simulate ``system`` under ``traffic`` (see the module docstring).

    Parameters
    ----------
    system : Node, Cluster, Ensemble or Cluster of Ensemble pods
    traffic : Traffic
    pods : PodSchedule or int, optional
        Pods ready over time (an autoscaler's :class:`~qmodel.autoscaler.PodSchedule`), each a
        copy of the system's node (or pod) behind its router; default the system's own count.
        With it, the system's own count is not used (only its node and router).
    seed : int, optional
    replicas : int
        Independent realisations of the whole traffic: the confidence intervals come from
        them (with one there are none; stretches of one run are not independent enough for
        a tail quantile).
    backend : {"auto", "numpy", "cupy"}
    resolution : float, optional
        Seconds per time bin of the result (:func:`default_resolution`).
    chunk : int, optional
        Measured arrivals per lane, at least four times its warm-up (default: a 500th of
        a stream, 2,000-100,000).

    Returns
    -------
    TrafficLatency
    """
    if not isinstance(traffic, Traffic):
        raise ValueError(f"arrivals must be a qmodel.Traffic here, got {type(traffic).__name__}")
    cluster = as_cluster(system)
    if isinstance(replicas, bool) or not isinstance(replicas, numbers.Integral) \
            or not 1 <= replicas <= 1000:
        raise ValueError(f"replicas={replicas!r} must be a whole number in 1-1000 "
                         "(independent realisations of the traffic)")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)
                             or seed < 0):
        raise ValueError(f"seed must be a whole number >= 0 or None, got {seed!r}")
    if resolution is None:
        resolution = default_resolution(traffic)
    elif isinstance(resolution, bool) or not isinstance(resolution, numbers.Real) \
            or not 0 < resolution <= traffic.duration:
        raise ValueError(f"resolution={resolution!r} must be seconds in (0, the traffic's "
                         f"{traffic.duration:g} s]")
    if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, numbers.Integral)
                              or chunk < 100):
        raise ValueError(f"chunk={chunk!r} must be a whole number of arrivals >= 100")
    schedule = _schedule(cluster, pods, traffic)
    expected = replicas * traffic.expected()
    stages = len(cluster.nodes[0].stages) if cluster.pods else 0
    check_memory((BYTES_PER_REQUEST + STAGE_BYTES * stages) * expected, expected,
                 "the traffic's expected arrivals")
    dynamic = not cluster.router.is_static
    bk = get_backend(backend, seed)
    arrivals_rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0]
                                         if seed is not None else None)
    bins = max(1, int(math.ceil(traffic.duration / resolution - 1e-9)))
    edges = traffic.start + resolution * np.arange(bins + 1)
    collected = _Collected(bins, traffic.start, resolution)
    unit = cluster.nodes[0]
    runner = _Runner(bk, cluster, dynamic)
    profiles: dict = {}             # a stream's rate, warm-up need and backlog over time
    lanes, pending = [], 0
    for replica in range(replicas):
        arrivals = traffic.sample(arrivals_rng)
        if arrivals.size == 0:
            continue
        if dynamic:
            streams = [(arrivals, None)]
        else:
            streams = _route(cluster, schedule, arrivals, arrivals_rng, pods is not None)
        for times, node in streams:
            if times.size == 0:
                continue
            if node not in profiles:
                rate_of = _stream_rate(traffic, schedule, cluster, node, dynamic)
                profiles[node] = _profile(rate_of, runner, traffic)
            kind = runner.kind_of(node, pods is not None)
            lanes += [(*lane, kind, replica)
                      for lane in _chunks(times, profiles[node], runner, traffic, chunk)]
            pending += times.size
        # many small realisations run together; a long one on its own
        if pending >= PENDING_ARRIVALS or replica == replicas - 1:
            runner.run(lanes, collected)
            lanes, pending = [], 0
    instance_seconds = replicas * _instance_seconds(cluster, schedule, traffic)
    # the queues' relaxation time per bin: the longest over the streams, from their grids
    relaxation = np.zeros(bins)
    for step, grid, _, _, _, seconds in profiles.values():
        idx = np.clip(((grid - traffic.start) / resolution).astype(np.int64), 0, bins - 1)
        np.maximum.at(relaxation, idx, seconds)
    return collected.result(traffic, schedule, edges, runner, replicas, instance_seconds, unit,
                            cluster, relaxation)


# ------------------------------------------------------------------------------------------
# routing and chunks
# ------------------------------------------------------------------------------------------
def _schedule(cluster, pods, traffic) -> PodSchedule:
    if pods is None:
        return PodSchedule.constant(len(cluster.nodes), traffic.start, traffic.end)
    if len(set(cluster.nodes)) > 1:
        raise ValueError("pods= repeats one node or pod: give a system whose nodes are all "
                         "alike (a Node, an Ensemble, or Cluster(node, count=...))")
    if not cluster.router.is_static or cluster.weights is not None:
        raise ValueError(f"pods= needs an unweighted static router (random or round_robin); "
                         f"{cluster.router.name!r} over a changing pod count is not simulated")
    if isinstance(pods, numbers.Integral) and not isinstance(pods, bool):
        if pods < 1:
            raise ValueError(f"pods={pods} must be >= 1")
        return PodSchedule.constant(int(pods), traffic.start, traffic.end)
    if not isinstance(pods, PodSchedule):
        raise ValueError(f"pods must be a PodSchedule (Autoscaler.run) or a pod count, got "
                         f"{type(pods).__name__}")
    if pods.times[0] > traffic.start or pods.end < traffic.end:
        raise ValueError(f"pods: the schedule covers [{pods.times[0]:g}, {pods.end:g}] s, not "
                         f"the whole traffic [{traffic.start:g}, {traffic.end:g}] s")
    return pods


def _route(cluster, schedule, arrivals, rng, changing: bool):
    """[(arrival times of node k, k)] for a static router."""
    n = arrivals.size
    if not changing:
        nodes = len(cluster.nodes)
        if nodes == 1:
            return [(arrivals, 0)]
        assign = cluster.router.kind.assign(cluster.router, np, rng, nodes, (1, n))[0]
    else:
        ready = schedule.ready_at(arrivals)
        if cluster.router.name == "round_robin":
            assign = (np.arange(n) + rng.integers(0, 1 << 30)) % ready
        else:
            assign = np.floor(rng.random(n) * ready).astype(np.int64)
        nodes = int(ready.max())
    order = np.argsort(assign, kind="stable")
    counts = np.bincount(assign, minlength=nodes)
    parts = np.split(arrivals[order], np.cumsum(counts)[:-1])
    if not changing:
        return [(part, k) for k, part in enumerate(parts)]
    # a pod that leaves and is asked for again later is a new pod, empty: each time its
    # number becomes ready starts a stream of its own
    out = []
    for k, part in enumerate(parts):
        cuts = np.searchsorted(part, _activations(schedule, k)[1:])
        out += [(piece, k) for piece in np.split(part, cuts) if piece.size]
    return out


def _activations(schedule, k) -> np.ndarray:
    """The times at which pod number k (0-based) becomes ready."""
    before = np.concatenate([[0], schedule.ready[:-1]])
    return schedule.times[(before <= k) & (schedule.ready > k)]


def _stream_rate(traffic, schedule, cluster, node, dynamic):
    """The rate of one stream over time (a vectorised function of t)."""
    if dynamic:
        return traffic.rate_at
    shares = cluster.shares
    fixed = schedule.times.size == 1 and len(cluster.nodes) == int(schedule.ready[0])

    def rate(t):
        if fixed:
            return traffic.rate_at(t) * shares[node]
        ready = schedule.ready_at(t)
        return np.where(node < ready, traffic.rate_at(t) / ready, 0.0)
    return rate


def _profile(rate_of, runner, traffic):
    """A stream's rate, warm-up need (arrivals), fluid backlog (requests) and relaxation time
    (seconds) on a grid of 4,000 points over the traffic: (grid step, grid, rate, need,
    backlog, relaxation)."""
    grid_step = max(traffic.duration / 4000, 1e-3)
    grid = np.arange(traffic.start, traffic.end + grid_step, grid_step)
    x = rate_of(grid)
    relax = runner.relaxation_arrivals(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        seconds = np.where(x > 0, relax / x, 0.0)
    return (grid_step, grid, x, np.maximum(runner.floor, WARM_RELAXATIONS * relax),
            runner.fluid_backlog(x, grid_step), seconds)


def _chunks(times, profile, runner, traffic, chunk):
    """The lanes of one stream: (lane arrivals, first measured index, measured count)."""
    n = times.size
    grid_step, grid, x, need, backlog, _ = profile
    base = chunk if chunk is not None else int(np.clip(n // 500, 2_000, 100_000))
    cool = runner.cool
    lanes = []
    i = 0
    while i < n:
        g = min(int((times[i] - traffic.start) / grid_step), grid.size - 1)
        # the warm-up: ten relaxation lengths of the load over the time they take
        span = need[g] / max(x[g], 1e-9)
        g0 = max(0, g - int(math.ceil(span / grid_step)))
        warm = float(need[g0:g + 1].max())
        if backlog[g] > 0:
            # inside an overload still being worked off: back to before its start
            clear = np.flatnonzero(backlog[:g + 1] <= 0)
            g_start = int(clear[-1]) if clear.size else 0
            t_start = grid[g_start]
            warm = max(warm, i - np.searchsorted(times, t_start) + need[g_start])
        warm = int(min(i, math.ceil(warm)))
        m = min(n - i, max(base, 4 * warm))
        g_end = min(int((times[i + m - 1] - traffic.start) / grid_step), grid.size - 1)
        if backlog[g_end] > 0:
            # no chunk starts inside an overload: this one runs on until it is worked off
            clear = np.flatnonzero(backlog[g_end:] <= 0)
            t_clear = grid[g_end + int(clear[0])] if clear.size else math.inf
            m = max(m, int(np.searchsorted(times, t_clear)) - i)
            m = min(n - i, m)
        lo, hi = i - warm, min(n, i + m + cool)
        lanes.append((times[lo:hi], warm, m))
        i += m
    return lanes


def _instance_seconds(cluster, schedule, traffic) -> float:
    """Instances of the ready pods integrated over the traffic (for the utilization)."""
    unit = cluster.nodes[0]
    per_pod = (sum(n.instances for n in unit.stages.values()) if cluster.pods
               else unit.instances)
    if schedule.times.size == 1 and len(cluster.nodes) == int(schedule.ready[0]):
        instances = (sum(n.instances for n in cluster.nodes) if not cluster.pods
                     else per_pod * len(cluster.nodes))
        return instances * traffic.duration
    edges = np.concatenate([schedule.times, [schedule.end]])
    lo = np.clip(edges[:-1], traffic.start, traffic.end)
    hi = np.clip(edges[1:], traffic.start, traffic.end)
    return float(np.sum(schedule.ready * (hi - lo))) * per_pod


# ------------------------------------------------------------------------------------------
# running lanes
# ------------------------------------------------------------------------------------------
class _Runner:
    """Runs lanes of one kind of stream on the right engine and reports, per lane, the
    completion of each request (NaN where rejected) and its batches."""

    def __init__(self, bk, cluster, dynamic):
        self.bk, self.cluster, self.dynamic = bk, cluster, dynamic
        unit = cluster.nodes[0]
        self.ensemble = cluster.pods
        if dynamic:
            self.kind = "events"
            self.types = NodeTypes(bk, cluster.nodes)
            self.unit_cluster = cluster
            nodes = cluster.nodes
        elif self.ensemble:
            self.kind = "ensemble"
            self.unit_cluster = Cluster(unit)
            nodes = list(unit.stages.values())
        else:
            self.kind = "lookahead" if all(n.max_queue_size == 0 for n in cluster.nodes) \
                else "events-node"
            self.unit_cluster = Cluster(unit)
            nodes = list(dict.fromkeys(cluster.nodes))
        self.nodes = nodes
        bmax = max(n.max_batch_size for n in nodes)
        self.pad = 2 * bmax + 2
        self.cool = 2 * sum(n.max_batch_size for n in nodes) + 8
        # a lane forgets its empty start over a few batch cycles even at low load
        self.floor = max(WARM_FLOOR, 4 * sum(n.max_batch_size for n in nodes))
        self.capacity = (min(n.capacity for n in unit.stages.values()) if self.ensemble
                         else (cluster.capacity if dynamic else
                               min(n.capacity for n in cluster.nodes)))
        self.batches: list = []        # (sizes, services) of measured batches
        self.lanes_run = 0

    def kind_of(self, node, changing: bool) -> int:
        """The index in ``self.nodes`` of stream ``node``'s kind (0 for pods, ensembles and
        a dynamic router's whole cluster)."""
        if self.kind in ("lookahead", "events-node") and not changing:
            return self.nodes.index(self.cluster.nodes[node])
        return 0

    def relaxation_arrivals(self, x):
        """Relaxation lengths (arrivals) of a stream at rate x (array), taken at the load
        rounded to 0.001 (at most LOAD_CAP)."""
        loads = np.round(np.minimum(x / self.capacity, LOAD_CAP), 3)
        keys, where = np.unique(loads, return_inverse=True)
        relax = np.array([self._relaxation(max(float(k), 1e-3) * self.capacity)
                          for k in keys])
        return relax[where]

    def _relaxation(self, rate):
        if self.ensemble:
            unit = self.cluster.nodes[0]
            scv = stage_arrival_scv(unit, 1.0)
            return max(relaxation_arrivals(Cluster(node), rate, scv[name])
                       for name, node in unit.stages.items())
        cluster = self.cluster if self.dynamic else self.unit_cluster
        if self.dynamic:
            return relaxation_arrivals(cluster, rate) * len(cluster.nodes)
        return relaxation_arrivals(cluster, rate)

    def fluid_backlog(self, x, step):
        """The fluid backlog of a stream served at capacity (requests), per grid point:
        b_k = max(0, b_(k-1) + (x_k - capacity) step), by the reflection of its running sum
        (b_k = S_k - min(0, min_(j<=k) S_j))."""
        total = np.cumsum((x - self.capacity) * step)
        return np.maximum(total - np.minimum(0.0, np.minimum.accumulate(total)), 0.0)

    def run(self, lanes, collected):
        """Run every lane, in groups of similar width, into ``collected`` (a finite queue's
        lanes one node kind at a time: each is a one-node cluster of the event engine)."""
        if self.kind == "events-node":
            for kind in range(len(self.nodes)):
                self._run_sorted([lane for lane in lanes if lane[3] == kind], collected)
        else:
            self._run_sorted(lanes, collected)

    def _run_sorted(self, lanes, collected):
        order = sorted(range(len(lanes)), key=lambda k: lanes[k][0].size)
        limit = GROUP_CELLS_ENSEMBLE if self.ensemble else GROUP_CELLS
        group: list = []
        width = 0
        for k in order:
            w = lanes[k][0].size + self.pad
            if group and (len(group) + 1) * max(width, w) > limit:
                self._run_group([lanes[j] for j in group], collected)
                group, width = [], 0
            group.append(k)
            width = max(width, w)
        if group:
            self._run_group([lanes[j] for j in group], collected)

    def _run_group(self, group, collected):
        xp = self.bk.xp
        count = len(group)
        totals = np.array([g[0].size for g in group], dtype=np.int64)
        width = int(totals.max())
        times = np.full((count, width + self.pad), np.inf)
        for r, lane in enumerate(group):
            times[r, :lane[0].size] = lane[0]
        kinds = np.array([g[3] for g in group], dtype=np.int64)
        first = np.array([g[1] for g in group], dtype=np.int64)
        measured = np.array([g[2] for g in group], dtype=np.int64)
        # the measured span of each lane, in time (for the batches counted)
        t_lo = times[np.arange(count), first]
        t_hi = times[np.arange(count), first + measured - 1]
        if self.kind == "lookahead":
            types = NodeTypes(self.bk, self.nodes)
            rec = run_lookahead(self.bk, types, xp.asarray(times), xp.asarray(totals),
                                xp.asarray(kinds))
            size, start, service = rec["size"], rec["start"], rec["service"]
            done = np.full((count, width), np.nan)
            completion = np.repeat((start + service).T.ravel(), size.T.ravel())
            real = np.arange(width)[None, :] < totals[:, None]
            overhead = np.array([n.overhead for n in self.nodes])[kinds]
            done[real] = completion + np.repeat(overhead, totals)
            lane_of = np.broadcast_to(np.arange(count)[None, :], size.shape)
            self._batches(start, service, size, lane_of, t_lo, t_hi)
        elif self.kind == "ensemble":
            unit = self.cluster.nodes[0]
            out = run_stages(self.bk, unit, times[:, :width], totals)
            done = out[unit.exits[0]]["finish"]
            for name in unit.exits[1:]:
                done = np.maximum(done, out[name]["finish"])
            for name in unit.order:
                rec = out[name]["record"]
                lane_of = np.broadcast_to(np.arange(count)[None, :], rec["size"].shape)
                self._batches(rec["start"], rec["service"], rec["size"], lane_of, t_lo, t_hi)
        else:
            if self.kind == "events":
                types, router = self.types, self.cluster.router
                overhead = np.array([n.overhead for n in self.cluster.nodes])
            else:
                node = self.nodes[int(kinds[0])]
                types, router = NodeTypes(self.bk, [node]), Cluster(node).router
                overhead = np.array([node.overhead])
            t = times[:, :width]
            # one node per lane: every request goes to it
            assign = None if self.kind == "events" else xp.zeros(t.shape, dtype=np.int64)
            rec = run_events(self.bk, types, router, xp.asarray(t), assign)
            out = from_events(self.bk, rec, t, overhead if overhead.any() else None)
            accepted = rec["route"] >= 0
            done = np.full((count, width), np.nan)
            done[accepted] = t[accepted] + out["sojourn"]
            lane_of = rec["pair"] // rec["nodes"]
            self._batches(rec["start"], rec["service"], rec["size"], lane_of, t_lo, t_hi)
        for r in range(count):
            a, b = first[r], first[r] + measured[r]
            collected.add(times[r, a:b], done[r, a:b] - times[r, a:b], group[r][4])
        self.lanes_run += count

    def _batches(self, start, service, size, lane_of, t_lo, t_hi):
        inside = (size > 0) & (start >= t_lo[lane_of]) & (start <= t_hi[lane_of])
        self.batches.append((np.asarray(size)[inside], np.asarray(service)[inside]))


class _Collected:
    """Measured requests by arrival bin."""

    def __init__(self, bins, t0, resolution):
        self.bins, self.t0, self.resolution = bins, t0, resolution
        self.keys: list = []
        self.sojourns: list = []
        self.replicas: list = []
        self.requests = 0

    def add(self, arrival, sojourn, replica):
        key = np.clip(((arrival - self.t0) / self.resolution).astype(np.int64), 0,
                      self.bins - 1)
        self.keys.append(key.astype(np.uint16 if self.bins <= 65_535 else np.int64))
        self.sojourns.append(sojourn.astype(np.float32))
        self.replicas.append(np.full(arrival.size, replica, dtype=np.uint16))
        self.requests += arrival.size

    def result(self, traffic, schedule, edges, runner, replicas, instance_seconds, unit,
               cluster, relaxation) -> TrafficLatency:
        if not self.keys:
            raise ValueError("the traffic produced no arrivals; raise its rates or its length")
        key = np.concatenate(self.keys)
        sojourn = np.concatenate(self.sojourns)
        replica = np.concatenate(self.replicas)
        self.keys, self.sojourns, self.replicas = [], [], []
        rejected_mask = np.isnan(sojourn)
        rejected = np.bincount(key[rejected_mask], minlength=self.bins)
        key, sojourn = key[~rejected_mask], sojourn[~rejected_mask]
        replica = replica[~rejected_mask]
        order = np.argsort(key, kind="stable")
        served = np.bincount(key, minlength=self.bins)
        sojourn, replica = sojourn[order], replica[order]
        if sojourn.size and not np.isfinite(sojourn).all():
            raise AssertionError("simulated sojourn times are not all finite (a bug in the "
                                 "time-varying engine)")
        sizes = np.concatenate([s for s, _ in runner.batches]) if runner.batches else \
            np.zeros(0, dtype=np.int64)
        busy = float(sum(float(np.sum(v)) for _, v in runner.batches))
        hist = np.bincount(sizes.astype(np.int64)) if sizes.size else np.array([0, 1])
        utilization = min(1.0, busy / instance_seconds) if instance_seconds > 0 else 0.0
        where = ("a changing pod count" if schedule.times.size > 1
                 else f"{len(cluster.nodes)} node(s)" if not cluster.pods
                 else f"{len(cluster.nodes)} pod(s)")
        method = (f"simulation over {traffic.describe()} ({runner.kind} engine, "
                  f"{runner.lanes_run} lanes, {replicas} replica(s), {where})")
        rejected_total = int(rejected.sum())
        accuracy = Accuracy(
            "simulation",
            basis="time-varying Monte Carlo: each pod's stream in chunks, each chunk's lane "
                  "warmed up on the arrivals before it",
            approximations=[Approximation(
                "chunked_lanes",
                f"each lane starts empty {WARM_RELAXATIONS:g} relaxation lengths (and before "
                "any overload being worked off) ahead of the arrivals it measures",
                WARM_RELAXATIONS)],
            simulation=SimulationEstimate(requests=int(sojourn.size), replicas=replicas,
                                          p99_half_width=None, engine=runner.kind,
                                          backend=runner.bk.name))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = TrafficLatency(
                sojourn, served, rejected, edges, traffic=traffic, pods=schedule,
                replica=replica, relaxation=relaxation, model="simulation",
                method=method, accuracy=accuracy,
                throughput=sojourn.size / (replicas * traffic.duration),
                utilization=utilization,
                batch_size_distribution={k: int(c) for k, c in enumerate(hist) if c},
                rejection_fraction=rejected_total / max(1, rejected_total + sojourn.size))
        result.lanes = runner.lanes_run
        if result.sections >= 2:
            lo, hi = result.ci(0.99)
            from dataclasses import replace

            result.accuracy = replace(accuracy, simulation=replace(
                accuracy.simulation, p99_half_width=(hi - lo) / 2 / result.p99))
        return result
