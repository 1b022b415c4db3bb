"""``qmodel.predict(system, arrivals=traffic)``: the latency over a traffic that changes.

Two models, second by second (each time bin of the result):

- **Pointwise stationary** (PSA): where the pods keep up, a bin's requests take the
  stationary law of the system at that bin's rate and pod count, as ``predict`` gives it
  (Green and Kolesar, "The pointwise stationary approximation for queues with nonstationary
  arrivals", Management Science 37(1), 1991; asymptotically correct as the rate changes slowly
  against the queue's relaxation time: Whitt, Management Science 37(3), 1991). Where the bins
  hold more than 256 distinct rates (a ramp, a day), each is rounded on a grid of the load's
  logit log(load / (1 - load)) in steps of 0.02, so that a day needs a few hundred stationary
  answers, not tens of thousands: the load moves by at most 0.01 load (1 - load), which
  moves a tail of 1 / (1 - load) by about 1%. Where no stationary model answers a rate,
  ``predict`` simulates it, one simulation for the rates of a grid five times coarser (stated
  in its part's accuracy, and so in the result's).
- **Fluid and diffusion backlog**: where the rate exceeds what the ready pods serve, or a
  backlog from such a time is still being worked off, the requests of a pod that holds a
  backlog take :class:`~qmodel.theory.transient.BacklogLatency` (the backlog ahead at the
  pod's capacity, then a full batch); :class:`~qmodel.autoscaler.FluidCohorts` follows the
  backlog of each cohort of pods (new pods start empty).

The result is a :class:`~qmodel.timeline.TrafficPrediction`: a mixture of the bins' laws by
their expected arrivals, with the window and SLO queries of a simulation's result. Its
measured error, window by window against the time-varying simulator, is that of families
``traffic_pointwise_stationary`` and ``traffic_fluid_backlog``
(validation/traffic_accuracy.py).
"""

from __future__ import annotations

import math

import numpy as np

from .autoscaler import FluidCohorts, PodSchedule
from .checks import UnstableError
from .latency import Accuracy, Approximation, WeightedMixture
from .system import Cluster, as_cluster
from .stationary import predict_stationary
from .theory.measured import measured_table
from .theory.transient import BacklogLatency, saturation_spread
from .timeline import TrafficPrediction, default_resolution

__all__ = ["predict_traffic"]

# beyond this many distinct bin rates, rates are rounded on a grid of the load's logit; where
# no model answers, the simulation that stands in is shared over a coarser grid
EXACT_RATES = 256
LOGIT_STEP = 0.02
COARSE_STEP = 0.1
# from this load per pod up, where no stationary model answers, the backlog's diffusion law
# stands in for it
NEAR_CAPACITY = 0.9
FAMILIES = ("traffic_pointwise_stationary", "traffic_fluid_backlog")


def predict_traffic(system, traffic, *, pods=None, resolution: float | None = None,
                    budget=None, stationary: dict | None = None) -> TrafficPrediction:
    """The model's latency of ``system`` under ``traffic`` (see the module docstring).

    Parameters
    ----------
    system : Node, Cluster, Ensemble or Cluster of Ensemble pods
    traffic : Traffic
    pods : PodSchedule or int, optional
        Pods ready over time, each a copy of the system's node or pod behind its router.
    resolution : float, optional
        Seconds per bin (:func:`qmodel.timeline.default_resolution`).
    budget : qmodel.Budget, optional
        Passed to each stationary prediction.
    stationary : dict, optional
        A cache of the stationary answers (by pod count and rate), shared between calls on
        one system and one traffic shape (the sizing's targets of one configuration).

    Raises
    ------
    NotImplementedError
        Where a cluster of unlike nodes is overloaded.

    Examples
    --------
    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(1e-3, jitter="exponential"))   # mu = 1000/s
    >>> day = qm.Traffic([0, 60, 120], [500.0, 800.0])
    >>> r = predict_traffic(node, day)
    >>> early, late = r.window(0, 60), r.window(60, 120)
    >>> round(early.p99 * 1e3, 2), round(late.p99 * 1e3, 2)   # M/M/1: ln(100) / (mu - lambda)
    (9.21, 23.03)
    """
    cluster = as_cluster(system)
    schedule = _schedule(cluster, pods, traffic)
    resolution = default_resolution(traffic) if resolution is None else float(resolution)
    if not 0 < resolution <= traffic.duration:
        raise ValueError(f"resolution={resolution!r} must be seconds in (0, the traffic's "
                         f"{traffic.duration:g} s]")
    unit = cluster.nodes[0]
    dynamic = not cluster.router.is_static
    alike = len(set(cluster.nodes)) == 1 and cluster.weights is None
    stage_nodes = (list(unit.stages.values()) if cluster.pods else list(cluster.nodes))
    finite = any(n.max_queue_size > 0 for n in stage_nodes)
    bins = max(1, int(math.ceil(traffic.duration / resolution - 1e-9)))
    edges = traffic.start + resolution * np.arange(bins + 1)
    edges[-1] = min(edges[-1], traffic.end)
    expected = np.diff(traffic.cumulative(edges))
    rates = expected / np.diff(edges)
    capacity, s_mean, s_var, departure_scv = _saturation(unit, cluster)
    scv_per_pod = traffic.scv / (len(cluster.nodes) if cluster.router.name == "round_robin"
                                 and schedule.times.size == 1 else 1.0)
    if dynamic:
        # a dynamic router pools its nodes: one cohort, the cluster's rate shared
        scv_per_pod = traffic.scv / len(cluster.nodes)
    stationary = {} if stationary is None else stationary
    used: dict = {}             # the stationary answers this traffic's bins took
    rounding = np.unique(rates[rates > 0]).size > EXACT_RATES

    def psa(n, rate):
        target = _system(unit, cluster, n, schedule)
        cap = target.capacity if not cluster.pods else capacity * n
        rounded = rate
        if rounding and rate < cap:
            load = rate / cap
            logit = round(math.log(load / (1 - load)) / LOGIT_STEP) * LOGIT_STEP
            rounded = cap / (1 + math.exp(-logit))
        key = (n, rounded)
        if key not in stationary:
            stationary[key] = _stationary(target, (rounded, rate), "raise", budget,
                                          traffic.scv)
            if isinstance(stationary[key], NotImplementedError):
                # no model here: a simulation, shared by the rates of a coarser grid
                coarse = rate
                if rate < cap:
                    load = rate / cap
                    logit = round(math.log(load / (1 - load)) / COARSE_STEP) * COARSE_STEP
                    coarse = cap / (1 + math.exp(-logit))
                if (n, "simulated", coarse) not in stationary:
                    stationary[(n, "simulated", coarse)] = _stationary(
                        target, (coarse, rate), "simulate", budget, traffic.scv)
                stationary[key] = stationary[(n, "simulated", coarse)]
        found = stationary[key]
        if isinstance(found, Exception):
            raise NotImplementedError(f"no stationary answer for {n} pod(s) at "
                                      f"{rate:,.6g} req/s: {found}")
        if found is not None:
            used[id(found)] = found
        return found

    fluid = FluidCohorts(capacity)
    fluid.add(int(schedule.ready_at(edges[0])))
    parts, backlog_bins, backlog_requests = [], 0, 0.0
    backlog = np.zeros(bins)
    fluid_bin = np.zeros(bins, dtype=bool)
    util_num, util_den = 0.0, 0.0
    batches: dict = {}
    per_pod_instances = (sum(n.instances for n in unit.stages.values()) if cluster.pods
                         else unit.instances)
    for k in range(bins):
        dt = edges[k + 1] - edges[k]
        n = int(schedule.ready_at((edges[k] + edges[k + 1]) / 2))
        if n > fluid.pods:
            fluid.add(n - fluid.pods)
        elif n < fluid.pods:
            fluid.remove(fluid.pods - n)
        x = rates[k] / n
        spread = x * scv_per_pod + capacity * departure_scv
        fluid.step(x, dt / 2, spread)
        groups = [(c.pods, c.backlog, c.variance) for c in fluid.cohorts]
        backlog[k] = fluid.backlog
        fluid.step(x, dt / 2, spread)
        if rates[k] <= 0:
            parts.append(None)
            continue
        held = [g for g in groups if g[1] > 0]
        free = sum(g[0] for g in groups if g[1] <= 0)
        base = None
        if free and x < capacity:
            try:
                base = psa(n, rates[k])
            except NotImplementedError:
                if x < NEAR_CAPACITY * capacity:
                    raise
                # so near capacity no stationary law is computed (nor reached, in the time
                # the queue would take to relax): the diffusion of the backlog stands in
        fluid_bin[k] = bool(held) or base is None
        if fluid_bin[k]:
            if finite:
                raise NotImplementedError(
                    f"the rate {rates[k]:,.0f} req/s at {edges[k]:g} s overloads nodes with a "
                    "finite max_queue_size, which reject the excess instead of holding a "
                    "backlog: not modelled; simulate it")
            if not (alike or dynamic):
                raise NotImplementedError(
                    f"the rate {rates[k]:,.0f} req/s at {edges[k]:g} s overloads a cluster "
                    "of unlike nodes, whose backlog is not modelled; simulate it")
            laws, weights = [], []
            for pods_g, b, v in groups:
                if b > 0 or base is None:
                    laws.append(BacklogLatency(b, v, capacity, s_mean, s_var,
                                               **_metrics(capacity * pods_g, 1.0, unit)))
                else:
                    laws.append(base)
                weights.append(pods_g)
            law = laws[0] if len(laws) == 1 else WeightedMixture(
                laws, weights, **_metrics(rates[k], 1.0, unit))
            backlog_bins += 1
            backlog_requests += expected[k]
            util_num += dt * n * per_pod_instances
            for size in (unit.max_batch_size,) if not cluster.pods else ():
                batches[size] = batches.get(size, 0.0) + expected[k] / size
        else:
            law = base
            util_num += base.utilization * dt * n * per_pod_instances
            mean_batch = max(base.mean_batch_size, 1.0)
            for size, p in base.batch_size_distribution.items():
                batches[size] = batches.get(size, 0.0) + p * expected[k] / mean_batch
        util_den += dt * n * per_pod_instances
        parts.append(law)
    used = list(used.values())
    table = measured_table()
    rules = (
        (Approximation("pointwise_stationary",
                       f"each {resolution:g} s bin's requests take the stationary law at its "
                       "rate" + (f" (rounded on a grid of the load's logit, step "
                                 f"{LOGIT_STEP:g})" if rounding else "") + " and pod count",
                       LOGIT_STEP if rounding else 0.0), table.get(FAMILIES[0])),
        (Approximation("fluid_backlog",
                       "a pod holding a backlog (or near its capacity) delays a request by "
                       "the fluid backlog at its capacity, spread as a diffusion, then a full "
                       "batch", backlog_requests / max(expected.sum(), 1e-300)),
         table.get(FAMILIES[1])))
    if traffic.scv != 1.0:
        # the families were measured on Poisson traffic
        rules = tuple((a, None) for a, _ in rules) + ((Approximation(
            "outside_measured_domain",
            f"extrapolated: renewal-shaped traffic (scv {traffic.scv:g}); the time-varying "
            "families were measured on Poisson traffic"), None),)
    basis = (f"time-varying model over {bins} bins: pointwise stationary ({len(used)} "
             "stationary answers)"
             + (f", fluid backlog in {backlog_bins} bins" if backlog_bins else ""))
    accuracy = _accuracy(basis, rules, ~fluid_bin, fluid_bin, used)
    filler = next((p for p in parts if p is not None), None)
    if filler is None:
        raise ValueError("the traffic has no arrivals: every rate is 0")
    parts = [filler if p is None else p for p in parts]
    result = TrafficPrediction(
        parts, expected, edges, traffic=traffic, pods=schedule,
        model="time_varying", method=f"pointwise stationary model over {traffic.describe()}"
               + (" with a fluid backlog" if backlog_bins else ""),
        accuracy=accuracy, throughput=float(expected.sum() / traffic.duration),
        utilization=min(1.0, util_num / util_den) if util_den else 0.0,
        batch_size_distribution=batches or {1: 1.0})
    result.backlog = backlog
    result.fluid = fluid_bin
    result.window_accuracy = lambda i, j: _accuracy(
        basis, rules, ~fluid_bin[i:j], fluid_bin[i:j],
        [p for p in {id(p): p for p in parts[i:j]}.values()
         if not isinstance(p, (BacklogLatency, WeightedMixture))])
    return result


def _accuracy(basis, rules, stationary_bins, fluid_bins, parts) -> Accuracy:
    """The accuracy of bins: the rule of each kind present, its measured family, and the
    stationary answers' own (a third rule, where there is one, applies to every bin)."""
    present = (bool(np.any(stationary_bins)), bool(np.any(fluid_bins)), True)
    outer = Accuracy("approximation", basis=basis,
                     approximations=[a for (a, _), on in zip(rules, present) if on],
                     measured=[m for (_, m), on in zip(rules, present) if on and m is not None])
    return Accuracy.combine(outer, [p.accuracy for p in parts])


def _stationary(system, rates, fallback, budget, scv=1.0):
    """The stationary answer at the first of ``rates`` below the capacity (renewal arrivals
    where ``scv`` is not 1); None where all are unstable; the NotImplementedError where no
    model answers and ``fallback`` is "raise"."""
    from .system import Renewal

    for r in rates:
        try:
            arrivals = Renewal(r, scv) if scv != 1.0 else None
            return predict_stationary(system, rate=None if arrivals else r,
                                      arrivals=arrivals, extrapolate=True, fallback=fallback,
                                      budget=budget)
        except UnstableError:
            continue
        except NotImplementedError as err:
            return err
    return None


def _schedule(cluster, pods, traffic) -> PodSchedule:
    """The pods over time (the simulator's rule: a changing count repeats one node or pod
    behind an unweighted static router)."""
    from .sim.timevarying import _schedule as schedule

    return schedule(cluster, pods, traffic)


def _system(unit, cluster, n, schedule):
    """The stationary system with n pods (the cluster itself where its count is fixed)."""
    if schedule.times.size == 1 and n == len(cluster.nodes):
        return cluster.nodes[0] if n == 1 else cluster
    return unit if n == 1 else Cluster(unit, count=n, router=cluster.router)


def _saturation(unit, cluster):
    """(capacity per pod, S mean, S variance, departures' scv rate) at saturation: of the
    node, or of an ensemble's slowest stage (its full batches; the other stages are taken to
    add their own full batch's mean along the longest path)."""
    if not cluster.pods:
        if cluster.router.is_static:
            return saturation_spread(min(cluster.nodes, key=lambda n: n.capacity))
        cap, mean, var, per = saturation_spread(cluster.nodes[0])
        return cap, mean, var, per
    stages = unit.stages
    slowest = min(stages, key=lambda s: stages[s].capacity)
    cap, mean, var, per = saturation_spread(stages[slowest])
    longest = _longest_path(unit, lambda s: float(stages[s].service.mean(
        stages[s].max_batch_size)))
    return cap, longest, var, per


def _longest_path(ensemble, weight) -> float:
    graph = ensemble.graph
    best: dict = {}
    for name in ensemble.order:
        ups = list(graph.predecessors(name))
        best[name] = weight(name) + (max(best[u] for u in ups) if ups else 0.0)
    return max(best.values())


def _metrics(throughput, utilization, unit) -> dict:
    size = unit.max_batch_size if hasattr(unit, "max_batch_size") else 1
    return {"model": "fluid_backlog", "method": "fluid backlog",
            "accuracy": Accuracy("approximation"),
            "throughput": float(throughput), "utilization": float(utilization),
            "batch_size_distribution": {size: 1.0}}
