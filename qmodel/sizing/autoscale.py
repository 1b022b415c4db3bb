"""Plans that follow the traffic: pods by an autoscaler, knobs fixed.

``qmodel.size(service, traffic=day, slo=..., autoscale=qm.Autoscaler(...))`` lands here, after
the static search has sized the traffic's whole range of rates (the plan it is compared with).

1. **Configurations.** The static search's configurations (for Ensemble pods, the pods it
   configured at each count), under a static router (the pod count changes: random or round
   robin). The knobs are the same in every pod, one config.pbtxt; only the pod count moves.
2. **Targets.** For each configuration the autoscaler's metric is tabulated against the rate a
   pod receives (the model's utilization, or requests in flight by Little's law: rate x mean
   sojourn), and a target is tried for each load per pod in :data:`TARGET_LOADS` (or the
   autoscaler's own target where given). Each (configuration, target) has a cost bound, the
   pod-seconds of pods that always match the rate at that load; they are taken cheapest
   first, and the search stops once the bound reaches the best cost found.
3. **Each pair**: the autoscaler's control loop is replayed over the traffic
   (:meth:`qmodel.Autoscaler.run`), giving the pods ready and requested over time, and the
   time-varying model (:func:`qmodel.timevarying.predict_traffic`) gives every window's
   latency. The pair is feasible where every SLO quantile, raised by its stated error, plus
   the network, meets its target in every **settled** window: one with no moment of a
   transient. A transient is the time after a rise while the pods asked for are starting, and
   while the backlog they left is being worked off (held and falling); a backlog that grows
   with no pod starting is no transient (the autoscaler did not react) and fails its window.
   The transients are not required, and are reported (the worst windowed quantile and the
   share of requests beyond the target), as the plan's choice of target leaves them.
4. **Verification.** The cheapest feasible pair is simulated over the whole traffic with its
   pod schedule (:mod:`qmodel.sim.timevarying`); it is kept where every settled window's
   simulated quantiles (their 95% CI upper ends) meet the SLO, otherwise the next pair.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..checks import UnstableError
from ..ensemble import Ensemble
from ..slo import LEVELS
from ..system import Cluster
from .plan import Plan, Transient, knobs, system_of
from .trust import model_answer, trusted_quantile

__all__ = ["plan_autoscaled", "TARGET_LOADS", "metric_curve", "plot_plan", "markdown"]

# loads per pod (rate over a pod's capacity) at which a target is tried
TARGET_LOADS = tuple(np.round(np.arange(0.30, 0.951, 0.05), 2))
# per-pod rates (fractions of a pod's capacity) the metric is tabulated at
CURVE_LOADS = np.concatenate([np.geomspace(0.005, 0.3, 12)[:-1], np.linspace(0.3, 0.98, 18)])
# full evaluations (control loop + time-varying model) before the search stops
MOST_EVALUATIONS = 60
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
    window = min(float(window), traffic.duration / 4)
    units = _units(search, routers)
    pairs = []
    for node, router in units:
        capacity = _capacity(node)
        loads = TARGET_LOADS if autoscaler.target is None else (None,)
        for load in loads:
            pairs.append((_cost_bound(traffic, capacity, load, autoscaler, node, router,
                                      space), node, router, load))
    pairs.sort(key=lambda p: p[0])
    best, tried, curves, feasible = None, 0, {}, []
    rejected_notes = []
    for bound, node, router, load in pairs:
        if best is not None and bound >= best[0]:
            break
        if tried >= MOST_EVALUATIONS:
            break
        key = (id(node), router)
        if key not in curves:
            curves[key] = metric_curve(node, router, autoscaler.metric, space)
        curve = curves[key]
        if curve is None:
            continue
        target = autoscaler.target if load is None else curve.at(load * curve.capacity)
        if target is None or not np.isfinite(target):
            continue
        # settled, a pod runs at up to the rate where the metric is a tolerance above the
        # target: a pod that misses the SLO there cannot hold it (checked first: cheap)
        top = curve.rate_of(target * (1 + autoscaler.tolerance))
        if curve.ratio_at(min(top, curve.rates[-1])) > 1.0:
            continue
        tried += 1
        found = _evaluate(node, router, autoscaler.with_target(float(target)), traffic, curve,
                          space, window)
        if found is not None and found["feasible"]:
            feasible.append(found)
            if best is None or found["cost"] < best[0]:
                best = (found["cost"], found)
    notes = list(static.notes)
    verification, simulated = "not verified (verify=False)", None
    if best is not None and verify:
        verified = None
        for found in sorted(feasible, key=lambda f: f["cost"])[:MOST_VERIFICATIONS]:
            sim, misses = _simulate(found, traffic, seed, window, space)
            if not misses:
                verified = (found, sim)
                break
            rejected_notes.append(
                f"autoscaled {knobs(found['node'])} at target {found['autoscaler'].target:.3g}: "
                f"its simulation missed the SLO in {len(misses)} settled window(s), first at "
                f"{misses[0]:,.0f} s: rejected")
        if verified is None:
            best = None
        else:
            found, simulated = verified
            best = (found["cost"], found)
            verification = (f"simulated the whole traffic with its pod schedule (seed {seed}, "
                            f"{simulated.requests:,} requests): every settled {window:g} s "
                            "window's SLO quantiles (95% CI upper ends) meet their targets"
                            + (" plus the network budget" if space.network else ""))
    notes += rejected_notes
    if best is None:
        reason = ("no configuration and target keep the SLO in every settled window"
                  + (" (see the notes)" if rejected_notes else
                     f"; {tried} (configuration, target) pairs evaluated"))
        return replace(static, feasible=False, reason=reason, static=static, traffic=traffic,
                       autoscaler=autoscaler, notes=tuple(notes))
    found = best[1]
    schedule, prediction = found["schedule"], found["prediction"]
    transients = _transients(found, simulated, traffic, space, window)
    per_pod_gpus = space.gpus_per_node
    system = system_of(found["node"], found["router"], schedule.most)
    notes.append(f"the autoscaler's {autoscaler.metric} per pod is taken from the model at "
                 "each pod's rate (steady state); with a backlog it counts the backlog"
                 if autoscaler.metric == "in_flight" else
                 f"the autoscaler's utilization per pod is the model's busy fraction of the "
                 "pod's instances (for a pod of several models, its busiest stage's), at each "
                 "pod's rate")
    return Plan(
        True, "", system, int(schedule.requested.max()),
        int(schedule.requested.max()) * per_pod_gpus,
        schedule.pod_seconds() / traffic.duration * space.gpu_cost,
        prediction, simulated, verification, static.alternatives, static.pareto,
        static.candidates, static.evaluated + tried, dict(space.slo), space.given.peak,
        tuple(notes), network=space.network, load=space.rates.peak, failures=space.failures,
        low=space.rates.low, binding=found["binding"], schedule=schedule,
        autoscaler=found["autoscaler"], traffic=traffic, static=static,
        transients=tuple(transients), windows=tuple(found["windows"]))


class Curve:
    """The autoscaler's metric of one pod against the rate it receives, from the model, and
    the pod's worst trusted quantile over its target there (alone, Poisson arrivals)."""

    def __init__(self, rates, values, capacity, ratios):
        self.rates, self.values, self.capacity = rates, values, capacity
        self.ratios = ratios

    def rate_of(self, value: float) -> float:
        """The rate at which the metric reaches ``value`` (the capacity where it never
        does)."""
        above = np.flatnonzero(self.values >= value)
        if not above.size:
            return self.capacity
        i = int(above[0])
        if i == 0:
            return float(self.rates[0])
        v0, v1 = self.values[i - 1], self.values[i]
        frac = 0.0 if v1 == v0 else (value - v0) / (v1 - v0)
        return float(self.rates[i - 1] + frac * (self.rates[i] - self.rates[i - 1]))

    def ratio_at(self, x: float) -> float:
        """The worst trusted quantile over target at rate x (interpolated; inf beyond the
        tabulated rates)."""
        if x > self.rates[-1]:
            return math.inf
        return float(np.interp(x, self.rates[1:], self.ratios))

    def __call__(self, x):
        return np.interp(x, self.rates, self.values)

    def at(self, x):
        return float(self(x))


def metric_curve(node, router, metric: str, space) -> Curve | None:
    """The metric against a pod's rate: the model's utilization (an Ensemble pod: its
    busiest stage's), or requests in flight by Little's law (rate x mean sojourn)."""
    capacity = _capacity(node)
    rates, values, ratios = [0.0], [0.0], []
    for load in CURVE_LOADS:
        x = load * capacity
        try:
            r = model_answer(node, x)
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
        ratios.append(max((trusted_quantile(r, LEVELS[k]) + space.network) / t
                          for k, t in space.slo.items()))
    if len(rates) < 3:
        return None
    values = np.maximum.accumulate(np.asarray(values))    # a metric grows with the rate
    return Curve(np.asarray(rates), values, capacity, np.asarray(ratios))


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


def _cost_bound(traffic, capacity, load, autoscaler, node, router, space) -> float:
    """Pod-seconds of pods that always match the rate at ``load`` per pod (a lower bound of
    what the autoscaler asks for, which lags and holds pods through its stabilization)."""
    t = np.linspace(traffic.start, traffic.end, 2001)
    rates = traffic.rate_at(t)
    per_pod = (load if load is not None else 0.95) * capacity
    pods = np.clip(np.ceil(rates / per_pod), autoscaler.min_pods, autoscaler.max_pods)
    return float(np.sum((pods[1:] + pods[:-1]) / 2 * np.diff(t)))


def _evaluate(node, router, autoscaler, traffic, curve, space, window):
    """The control loop replayed and the time-varying model over the traffic: feasibility in
    the settled windows, cost, and what the plan reports."""
    from ..timevarying import predict_traffic

    schedule = autoscaler.run(traffic, curve, curve.capacity)
    system = Cluster(node, count=max(2, schedule.most), router=router) \
        if schedule.most > 1 else node
    if not isinstance(system, Cluster):
        system = Cluster(node, count=1, router=router)
    try:
        prediction = predict_traffic(system, traffic, pods=schedule)
    except NotImplementedError:
        return None
    settled = _settled(prediction, schedule, window)
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
    return {"node": node, "router": router, "autoscaler": autoscaler, "schedule": schedule,
            "prediction": prediction, "feasible": worst <= 1.0, "worst": worst,
            "binding": binding, "cost": schedule.pod_seconds(), "windows": rows,
            "settled": settled}


def _settled(prediction, schedule, window) -> list:
    """Per window: False where it is part of a transient, True where the SLO must hold.

    A moment belongs to a transient while pods asked for are still starting, or while a
    backlog is being worked off (held and falling). A backlog that grows while no pod is
    starting is no transient: the autoscaler did not react, and the window must meet the SLO
    (it will not)."""
    backlog = prediction.backlog
    edges = prediction.edges
    mids = (edges[:-1] + edges[1:]) / 2
    starting = schedule.requested_at(mids) > schedule.ready_at(mids)
    falling = np.zeros(backlog.size, dtype=bool)
    falling[1:] = (backlog[1:] > 0) & (backlog[1:] < backlog[:-1])
    transient = starting | falling
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
        sim = simulate_traffic(system, traffic, pods=schedule, seed=seed)
    misses = []
    for (start, end, latency), ok in zip(sim.windows(window), found["settled"]):
        if not ok or latency is None:
            continue
        for key, target in space.slo.items():
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


def markdown(plan) -> list:
    """The report's lines for an autoscaled plan: the schedule, the cost, the transients."""
    a = plan.autoscaler
    lines = [f"**Autoscaler.** {a.metric} target {a.target:.3g} per pod, pods "
             f"{a.min_pods}-{a.max_pods}, ready {a.scale_up_delay:g} s after a scale-up, "
             f"scale-down stabilization {a.stabilization:g} s; the HorizontalPodAutoscaler "
             "is `hpa.yaml`.", ""]
    if plan.static is not None and plan.static.feasible:
        hours = plan.traffic.duration / 3600
        lines += [f"**Cost.** {plan.cost * hours:,.1f} GPU-hour units over the "
                  f"{hours:.3g} h traffic, against {plan.static.cost * hours:,.1f} for the "
                  f"static plan over the whole range ({plan.static.nodes} "
                  f"{'pod' if isinstance(plan.node, Ensemble) else 'node'}(s)): "
                  f"{plan.cost / plan.static.cost:.0%}.", ""]
    lines += ["| from s | ready | requested |", "|---|---|---|"]
    changes = plan.schedule.changes()
    for t, ready, requested in changes[:40]:
        lines.append(f"| {t:,.0f} | {ready} | {requested} |")
    if len(changes) > 40:
        lines.append(f"| ... {len(changes) - 40} more changes | | |")
    lines.append("")
    if plan.transients:
        lines += ["**Transients** (after a rise, before the new pods are ready and the "
                  "backlog is worked off; not required by the plan):", ""]
        lines += [f"- {t.describe()}" for t in plan.transients] + [""]
    lines += [f"**Verification.** {plan.verification}", ""]
    return lines


def plot_plan(plan, path):
    """Pods and the windowed quantile over the traffic, predicted and simulated, against the
    static plan's pods (the figure a design review wants)."""
    from ..plots import plot_timeline

    key = max(plan.slo, key=lambda k: LEVELS[k])
    level = LEVELS[key]
    series = {}
    rows = plan.windows
    series["autoscaled, predicted"] = ([r[0] for r in rows], [r[2][key] for r in rows])
    if plan.simulated is not None:
        starts, values = plan.simulated.windowed_quantiles(level, rows[1][0] - rows[0][0]
                                                           if len(rows) > 1 else 60.0)
        series["autoscaled, simulated"] = (starts, values)
    sched = plan.schedule
    pods = {"autoscaled": (np.concatenate([sched.times, [sched.end]]),
                           np.concatenate([sched.ready, sched.ready[-1:]]))}
    if plan.static is not None and plan.static.feasible:
        pods[f"static ({plan.static.nodes})"] = ([plan.traffic.start, plan.traffic.end],
                                                 [plan.static.nodes] * 2)
    t = np.linspace(plan.traffic.start, plan.traffic.end, 1000)
    return plot_timeline(series, pods, path, wall=plan.slo[key] - plan.network, key=key,
                         rate=(t, plan.traffic.rate_at(t)),
                         title=f"{knobs(plan.node)[:90]}")
