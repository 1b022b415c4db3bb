"""Plans that follow the traffic: pods by an autoscaler, knobs fixed.

``qmodel.size(service, traffic=day, slo=..., autoscale=qm.Autoscaler(...))`` lands here, after
the static search has sized the traffic's whole range of rates (the plan it is compared with).

1. **Configurations.** The static search's configurations (for Ensemble pods, the pods it
   configured at each count), under a static router (the pod count changes: random or round
   robin). The knobs are the same in every pod, one config.pbtxt; only the pod count moves.
2. **Targets.** For each configuration the autoscaler's metric is tabulated against the rate a
   pod receives (the model's utilization, or requests in flight by Little's law: rate x mean
   sojourn), and a target is tried for each load per pod in :data:`TARGET_LOADS` (or the
   autoscaler's own target where given). For each (configuration, target) the autoscaler's
   control loop is replayed over the traffic (:meth:`qmodel.Autoscaler.run`): the pods ready
   and requested over time, and so the exact cost (pod-seconds asked for).
3. **Feasibility, cheapest first.** In order of cost, the time-varying model
   (:func:`qmodel.timevarying.predict_traffic`, in bins of 5 s, its stationary answers shared
   between the targets of one configuration) gives every window's latency; the first
   feasible pair is the cheapest. Feasible: every settled window meets the SLO (below), and
   over the whole traffic every SLO key holds as well (p95: 95% of all its requests within
   the target), so that the transients' misses stay within what the SLO allows. The pair is feasible where every SLO quantile, raised by its stated error, plus
   the network, meets its target in every **settled** window: one with no moment of a
   transient. A transient is the time after a rise while the pods asked for are starting, and
   while the backlog they left is being worked off (held and falling); a backlog that grows
   with no pod starting is no transient (the autoscaler did not react) and fails its window.
   The transients are not required, and are reported (the worst windowed quantile and the
   share of requests beyond the target), as the plan's choice of target leaves them.
4. **Verification.** The cheapest feasible pair is simulated over the whole traffic with its
   pod schedule (:mod:`qmodel.sim.timevarying`, one realisation); it is kept where the
   simulated SLO quantiles of the whole traffic and of every settled window meet the SLO,
   otherwise the next pair.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..checks import UnstableError
from ..ensemble import Ensemble
from ..slo import LEVELS
from ..system import Cluster
from .deployment import knobs, system_of
from .plan import Plan, Transient
from .report import autoscaled_markdown as markdown, plot_autoscaled as plot_plan
from .trust import model_answer, trusted_quantile

# the report's parts for an autoscaled plan live in sizing/report.py; named here as before
__all__ = ["plan_autoscaled", "TARGET_LOADS", "metric_curve", "markdown", "plot_plan"]

# loads per pod (rate over a pod's capacity) at which a target is tried
TARGET_LOADS = tuple(np.round(np.arange(0.30, 0.951, 0.05), 2))
# seconds between the points the control loop follows in the search (it decides every
# sync period); bins of the time-varying model in the search
LOOP_STEP = 1.0
SEARCH_BINS = 5.0
# per-pod rates (fractions of a pod's capacity) the metric is tabulated at
CURVE_LOADS = np.concatenate([np.geomspace(0.005, 0.3, 12)[:-1], np.linspace(0.3, 0.98, 18)])
# verifying simulations of feasible pairs, cheapest first, before the search gives up
MOST_VERIFICATIONS = 4


def plan_autoscaled(static: Plan, search, traffic, autoscaler, verify: bool, seed: int,
                    window: float = 60.0) -> Plan:
    """The autoscaled plan (see the module docstring); ``static`` is the static plan over the
    traffic's range and ``search`` the search that found it."""
    space = search.space
    routers = [r for r in space.routers if r in ("random", "round_robin")]
    if not routers:
        raise ValueError("autoscale: the pod count changes, which needs a static router; add "
                         "'round_robin' or 'random' to routers")
    window = float(window)
    # every (configuration, target): its control loop replayed (cheap), so its exact cost
    pairs, curves = [], {}
    for node, router in _units(search, routers):
        curve = curves.setdefault((node, router),
                                  metric_curve(node, router, autoscaler.metric, space))
        if curve is None:
            continue
        targets = ([curve.at(load * curve.capacity) for load in TARGET_LOADS]
                   if autoscaler.target is None else [autoscaler.target])
        for target in dict.fromkeys(round(float(t), 6) for t in targets if np.isfinite(t)):
            scaler = autoscaler.with_target(target)
            schedule = scaler.run(traffic, curve, curve.capacity, step=LOOP_STEP)
            pairs.append((schedule.pod_seconds(), len(pairs), node, router, scaler, schedule,
                          curve))
    pairs.sort(key=lambda p: p[:2])
    flat = [c for c in curves.values() if c is not None and autoscaler.metric == "utilization"
            and c.at(0.5 * c.capacity) >= 0.9]
    # then the time-varying model in order of cost: the first feasible (and, verifying, the
    # first whose simulation agrees) is the cheapest
    best, tried, verifications, caches = None, 0, 0, {}
    notes, rejected_notes = list(static.notes), []
    verification, simulated = "not verified (verify=False)", None
    for cost, _, node, router, scaler, schedule, curve in pairs:
        if verifications >= MOST_VERIFICATIONS:
            break
        tried += 1
        found = _evaluate(node, router, scaler, schedule, traffic, space, window,
                          caches.setdefault((node, router), {}))
        if found is None or not found["feasible"]:
            continue
        if not verify:
            best = found
            break
        verifications += 1
        sim, misses = _simulate(found, traffic, seed, window, space)
        if not misses:
            best, simulated = found, sim
            verification = (f"simulated the whole traffic with its pod schedule (seed {seed}, "
                            f"{sim.requests:,} requests, one realisation): its SLO quantiles "
                            f"over the whole traffic and in every settled {window:g} s window "
                            "meet their targets"
                            + (" plus the network budget" if space.network else ""))
            break
        rejected_notes.append(
            f"autoscaled {knobs(found['node'])} at target {found['autoscaler'].target:.3g}: "
            f"its simulation missed the SLO over the whole traffic or in {len(misses)} "
            f"settled window(s), first from {misses[0]:,.0f} s: rejected")
    notes += rejected_notes
    if best is not None and static.feasible and best["cost"] >= static.cost / space.gpu_cost \
            * traffic.duration:
        notes.append(f"the static plan for the whole range ({static.nodes} "
                     f"{'pod' if isinstance(static.node, Ensemble) else 'node'}(s), cost "
                     f"{static.cost:g}) costs no more than the autoscaled one and meets the "
                     "SLO in every window: prefer it")
    if flat:
        notes.append(f"in {len(flat)} of {len(curves)} configurations the instances are busy "
                     "90% of the time at half the pod's capacity (small batches keep them "
                     "busy): an autoscaler reading utilization cannot tell half load from "
                     "full there; metric='in_flight' follows the load")
    if best is None:
        reason = ("no configuration and target keep the SLO in every settled window"
                  + (" in simulation (see the notes)" if rejected_notes else
                     f"; {tried} of {len(pairs)} (configuration, target) pairs evaluated"))
        return replace(static, feasible=False, reason=reason, static=static, traffic=traffic,
                       autoscaler=autoscaler, notes=tuple(notes), schedule=None)
    found = best
    schedule, prediction = found["schedule"], found["prediction"]
    transients = _transients(found, simulated, traffic, space, window)
    per_pod_gpus = space.gpus_per_node
    system = system_of(found["node"], found["router"], schedule.most)
    notes.append(f"the autoscaler's {autoscaler.metric} per pod is taken from the model at "
                 "each pod's rate (steady state); with a backlog it counts the backlog"
                 if autoscaler.metric == "in_flight" else
                 "the autoscaler's utilization per pod is the model's busy fraction of the "
                 "pod's instances (for a pod of several models, its busiest stage's), at each "
                 "pod's rate")
    return Plan(
        True, "", system, int(schedule.requested.max()),
        int(schedule.requested.max()) * per_pod_gpus,
        schedule.pod_seconds() / traffic.duration * space.gpu_cost,
        prediction, simulated, verification, static.alternatives, static.pareto,
        static.candidates, static.evaluated + tried, dict(space.slo), space.given.peak,
        tuple(notes), network=space.network, load=space.rates.peak, failures=space.failures,
        low=space.rates.low, binding=found["binding"], schedule=schedule, scv=space.scv,
        autoscaler=found["autoscaler"], traffic=traffic, static=static,
        transients=tuple(transients), windows=tuple(found["windows"]))


class Curve:
    """The autoscaler's metric of one pod against the rate it receives, from the model."""

    def __init__(self, rates, values, capacity):
        self.rates, self.values, self.capacity = rates, values, capacity

    def __call__(self, x):
        return np.interp(x, self.rates, self.values)

    def at(self, x) -> float:
        return float(self(x))


def metric_curve(node, router, metric: str, space) -> Curve | None:
    """The metric against a pod's rate: the model's utilization (an Ensemble pod: its
    busiest stage's), or requests in flight by Little's law (rate x mean sojourn)."""
    capacity = _capacity(node)
    rates, values = [0.0], [0.0]
    for load in CURVE_LOADS:
        x = load * capacity
        try:
            r = model_answer(node, x, scv=space.scv)
        except (UnstableError, NotImplementedError):
            continue
        if metric == "utilization":
            stages = getattr(r, "stages", None)
            value = (max(s.utilization for s in stages.values()) if stages
                     else r.utilization)
        else:
            value = x * r.mean
        rates.append(x)
        values.append(value)
    if len(rates) < 3:
        return None
    values = np.maximum.accumulate(np.asarray(values))    # a metric grows with the rate
    return Curve(np.asarray(rates), values, capacity)


def _units(search, routers):
    """(node or pod, router) pairs: the static search's configurations."""
    out = []
    seen = set()
    for config in search.configs:
        if config.router not in routers:
            continue
        nodes = ([config.node] if hasattr(config, "node")
                 else [p for p in config.chosen.values() if p is not None])
        for node in nodes:
            key = (node, config.router)
            if key not in seen:
                seen.add(key)
                out.append(key)
    return out


def _capacity(node) -> float:
    if isinstance(node, Ensemble):
        return min(n.capacity for n in node.stages.values())
    return node.capacity


def _evaluate(node, router, autoscaler, schedule, traffic, space, window, cache):
    """The time-varying model over the traffic with the pods of ``schedule``: feasibility in
    the settled windows, and what the plan reports."""
    from ..timevarying import predict_traffic

    system = Cluster(node, count=max(1, schedule.most), router=router)
    try:
        prediction = predict_traffic(system, traffic, pods=schedule,
                                     resolution=_bins_of(window, SEARCH_BINS),
                                     stationary=cache)
    except NotImplementedError:
        return None
    settled = _settled(prediction, schedule, window)
    # over the whole traffic, too, every SLO key holds, trusted as a window is: the
    # transients' misses and the settled windows' together stay within what it allows
    if any(trusted_quantile(prediction, LEVELS[k]) + space.network > t
           for k, t in space.slo.items()):
        return {"feasible": False}
    worst, binding, rows = 0.0, 0.0, []
    for (start, end, latency), ok in zip(prediction.windows(window), settled):
        if latency is None:
            continue
        ratios = {k: (trusted_quantile(latency, LEVELS[k]) + space.network) / t
                  for k, t in space.slo.items()}
        rows.append((start, end, {k: float(latency.quantile(LEVELS[k])) for k in space.slo},
                     ok))
        if ok and max(ratios.values()) > worst:
            worst, binding = max(ratios.values()), float(traffic.mean_rate(start, end))
        if worst > 1.0:
            return {"feasible": False}
    return {"node": node, "router": router, "autoscaler": autoscaler, "schedule": schedule,
            "prediction": prediction, "feasible": worst <= 1.0, "worst": worst,
            "binding": binding, "cost": schedule.pod_seconds(), "windows": rows,
            "settled": settled}


def _bins_of(window: float, most: float) -> float:
    """The longest bin of at most ``most`` seconds that a window is a whole number of."""
    return window / math.ceil(window / most)


def _settled(prediction, schedule, window) -> list:
    """Per window: False where it is part of a transient, True where the SLO must hold.

    A transient is a stretch where a backlog is held or pods are starting that contains a
    scale-up: from the backlog's first growth (the autoscaler's reaction time included) to the
    last pod asked for becoming ready, and on while the backlog it left is worked off (falls).
    A backlog that grows with no scale-up under way, or that grows again once every pod asked
    for serves, is no transient: the autoscaler did not keep up, and its windows must meet
    the SLO (they will not)."""
    backlog = prediction.backlog
    edges = prediction.edges
    mids = (edges[:-1] + edges[1:]) / 2
    starting = schedule.requested_at(mids) > schedule.ready_at(mids)
    busy = starting | (backlog > 0)
    transient = np.zeros(backlog.size, dtype=bool)
    i = 0
    while i < busy.size:
        if not busy[i]:
            i += 1
            continue
        j = i
        while j < busy.size and busy[j]:
            j += 1
        ups = np.flatnonzero(starting[i:j])
        if ups.size:
            last = i + int(ups[-1])
            transient[i:last + 1] = True
            k = last + 1
            while k < j and backlog[k] <= backlog[k - 1]:
                transient[k] = True
                k += 1
        i = j
    out = []
    step = max(1, int(round(window / prediction.resolution)))
    for i in range(0, edges.size - 1, step):
        out.append(not bool(transient[i:i + step].any()))
    return out


def _simulate(found, traffic, seed, window, space):
    """The plan's time-varying simulation and the starts of the settled windows it misses."""
    import warnings

    from ..sim.timevarying import simulate_traffic

    schedule = found["schedule"]
    system = Cluster(found["node"], count=max(1, schedule.most), router=found["router"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # bins that the windows are whole numbers of, so that they line up with the model's
        sim = simulate_traffic(system, traffic, pods=schedule, seed=seed,
                               resolution=_bins_of(window, 1.0))
    windows = sim.windows(window)
    if len(windows) != len(found["settled"]):
        raise AssertionError("the simulation's windows do not line up with the model's")
    misses = []
    # the whole traffic first (its start stands for it)
    for key, target in space.slo.items():
        if sim.quantile(LEVELS[key]) + space.network > target:
            return sim, [traffic.start]
    for (start, end, latency), ok in zip(windows, found["settled"]):
        if not ok or latency is None:
            continue
        for key, target in space.slo.items():
            # one realisation: its quantile (no confidence interval without several)
            hi = latency.ci(LEVELS[key])[1] if latency.sections >= 2 \
                else latency.quantile(LEVELS[key])
            if hi + space.network > target:
                misses.append(start)
                break
    return sim, misses


def _transients(found, simulated, traffic, space, window) -> list:
    """The unsettled stretches: worst windowed quantile and share beyond the target."""
    settled = found["settled"]
    prediction = found["prediction"]
    edges = prediction.edges
    step = max(1, int(round(window / prediction.resolution)))
    starts = [float(edges[i]) for i in range(0, edges.size - 1, step)]
    ends = starts[1:] + [float(edges[-1])]
    out, i = [], 0
    while i < len(settled):
        if settled[i]:
            i += 1
            continue
        j = i
        while j < len(settled) and not settled[j]:
            j += 1
        a, b = starts[i], ends[j - 1]
        worst, over, sim_worst, sim_over = {}, {}, {}, {}
        shares = prediction.within(space.slo, a, b, space.network)
        for key in space.slo:
            level = LEVELS[key]
            worst[key] = max(prediction.window(s, e).quantile(level)
                             for s, e in zip(starts[i:j], ends[i:j]))
            over[key] = 1.0 - shares[key]
        if simulated is not None:
            sim_shares = simulated.within(space.slo, a, b, space.network)
            for key in space.slo:
                level = LEVELS[key]
                values = [simulated.window(s, e).quantile(level)
                          for s, e in zip(starts[i:j], ends[i:j])]
                sim_worst[key] = max(values)
                sim_over[key] = 1.0 - sim_shares[key]
        out.append(Transient(a, b, worst, over, traffic.expected(a, b), sim_worst, sim_over))
        i = j
    return out
