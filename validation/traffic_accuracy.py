"""How far the time-varying model is from the time-varying simulator, window by window.

``qmodel.predict(system, arrivals=traffic)`` answers each second with the stationary model at
that second's rate (pointwise stationary) or, where a backlog is held, with the fluid and
diffusion backlog (:mod:`qmodel.timevarying`). This campaign runs scenarios that exercise
both: steps and ramps within capacity (one to 0.95 load), compressed days (one over 8 nodes behind
round robin), overloads that build and drain a backlog, and pod counts that an autoscaler
changes (new pods start empty), over nodes of one and several instances (deterministic or
jittery), with and without a delay, preferred sizes, and Ensemble pods. Each scenario is simulated
(``qmodel.simulate(system, arrivals=traffic, pods=...)``, four realisations) and predicted; in
every window of 20 s with at least 4,000 simulated requests the predicted p50, p95 and p99 are
compared with the simulated ones (error = predicted / simulated - 1).

A window is of family ``traffic_fluid_backlog`` where the backlog's law answered any of its
seconds (a backlog held, or a load too near capacity for a stationary law), else of family
``traffic_pointwise_stationary``; the figures of both families are
qmodel/theory/measured_errors.json's (``python validation/measured_errors.py --write``).

Run: ``python validation/traffic_accuracy.py --json validation/results/traffic_accuracy.json
--text validation/results/traffic_accuracy.txt`` (about 15 minutes here).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import qmodel as qm
from qmodel.campaign.results import add_output_arguments, write_outputs
from qmodel.theory.measured import configuration_features

WINDOW = 20.0
MIN_REQUESTS = 4_000
# independent realisations of each scenario: the windows' simulated quantiles carry little
# noise of their own into the errors
REPLICAS = 4
LEVELS = {"p50": 0.5, "p95": 0.95, "p99": 0.99}

A = qm.Node(qm.ServiceTime.affine(2e-3, 0.2e-3, jitter=("lognormal", 0.2)), max_batch_size=8,
            max_queue_delay=1e-3)
B = qm.Node(qm.ServiceTime.affine(1e-3), instances=2)
C = qm.Node(qm.ServiceTime.affine(2e-3, 0.3e-3, jitter="exponential"), max_batch_size=16,
            max_queue_delay=2e-3, instances=2)
D = qm.Node(qm.ServiceTime.affine(1.5e-3, 0.25e-3, jitter=("gamma", 0.3)), max_batch_size=4,
            preferred_batch_sizes=(2, 4), max_queue_delay=0.5e-3)
F = qm.Node(qm.ServiceTime.affine(1e-3), instances=4)
G = qm.Node(qm.ServiceTime.affine(1e-3, 0.15e-3, jitter=("lognormal", 0.3)), max_batch_size=8,
            max_queue_delay=2e-3)
E = qm.Ensemble({"pre": qm.Node(qm.ServiceTime.affine(0.5e-3, 0.05e-3), max_batch_size=4,
                                instances=2),
                 "model": qm.Node(qm.ServiceTime.affine(2e-3, 0.25e-3, jitter=("lognormal",
                                                                                 0.2)),
                                  max_batch_size=8, max_queue_delay=1e-3, instances=2)},
                [("pre", "model")])


def _cap(unit) -> float:
    return (min(n.capacity for n in unit.stages.values()) if isinstance(unit, qm.Ensemble)
            else unit.capacity)


def _autoscaled(unit, router, traffic, target, metric="utilization", delay=30.0):
    """(system, PodSchedule): the autoscaler's pods over the traffic, its metric from the
    model (as qmodel.size tabulates it)."""
    from qmodel.sizing.autoscale import metric_curve
    from qmodel.sizing.space import checked_space

    space = checked_space({"p99": 1.0}, 1.0, 0.0, 1.0, 0, (1,), 1, (1,), (1,), (0,), ((),),
                          (router,), 1.0, None)
    curve = metric_curve(unit, router, metric, space)
    hpa = qm.Autoscaler(metric=metric, target=curve.at(target * curve.capacity),
                        scale_up_delay=delay, stabilization=120.0, min_pods=1, max_pods=32,
                        metric_window=30.0)
    schedule = hpa.run(traffic, curve, curve.capacity)
    return qm.Cluster(unit, count=schedule.most, router=router), traffic, schedule


def scenarios():
    """(name, system, traffic, pods) of the campaign."""
    out = []
    cap = A.capacity
    out.append(("A steps within capacity, 2 nodes round robin",
                qm.Cluster(A, count=2, router="round_robin"),
                qm.Traffic([0, 120, 240, 360], [1.0 * cap, 1.7 * cap, 1.0 * cap]), None))
    out.append(("A overload 20 s and drain, 1 node", A,
                qm.Traffic([0, 60, 80, 240], [0.6 * cap, 1.15 * cap, 0.7 * cap]), None))
    cap = B.capacity
    out.append(("B ramp up and down, 1 node",
                B, qm.Traffic([0, 60, 180, 300, 360], [0.3 * cap, 0.3 * cap, 0.92 * cap,
                                                         0.3 * cap, 0.3 * cap], "linear"),
                None))
    cap = C.capacity
    out.append(("C compressed day, 3 nodes random", qm.Cluster(C, count=3, router="random"),
                qm.Traffic.diurnal(0.6 * cap, 2.55 * cap, period=600, peak_at=300, step=10),
                None))
    cap = D.capacity
    out.append(("D preferred sizes, overload 30 s, 2 nodes round robin",
                qm.Cluster(D, count=2, router="round_robin"),
                qm.Traffic([0, 90, 120, 300], [1.0 * cap, 2.3 * cap, 1.2 * cap]), None))
    cap = A.capacity
    sale = qm.Traffic.flash_sale(1.5 * cap, 5 * cap, ramp=60, hold=240, before=120, after=180)
    out.append(("A flash sale, autoscaled on utilization, round robin",
                *_autoscaled(A, "round_robin", sale, 0.7), ))
    cap = C.capacity
    sale = qm.Traffic.flash_sale(1.0 * cap, 4 * cap, ramp=30, hold=240, before=120, after=180)
    out.append(("C flash sale, autoscaled on requests in flight, random",
                *_autoscaled(C, "random", sale, 0.6, metric="in_flight")))
    cap = F.capacity
    out.append(("F four deterministic instances, ramp to 0.95, 1 node",
                F, qm.Traffic([0, 60, 180, 240], [0.3 * cap, 0.3 * cap, 0.95 * cap,
                                                  0.95 * cap], "linear"), None))
    cap = G.capacity
    out.append(("G compressed day, 8 nodes round robin",
                qm.Cluster(G, count=8, router="round_robin"),
                qm.Traffic.diurnal(1.6 * cap, 7.2 * cap, period=600, peak_at=300, step=10),
                None))
    cap = _cap(E)
    out.append(("E ensemble, overload 20 s, 2 pods round robin",
                qm.Cluster(E, count=2, router="round_robin"),
                qm.Traffic([0, 90, 110, 270], [1.0 * cap, 2.3 * cap, 1.3 * cap]), None))
    sale = qm.Traffic.flash_sale(1.0 * cap, 3.5 * cap, ramp=60, hold=240, before=120,
                                 after=180)
    out.append(("E ensemble flash sale, autoscaled on utilization, round robin",
                *_autoscaled(E, "round_robin", sale, 0.65)))
    return out


def _features(system, traffic, pods, start, end) -> dict:
    """The window's features: of the node (an ensemble's slowest stage) at the window's
    highest load per node."""
    cluster = system if isinstance(system, qm.Cluster) else qm.Cluster(system)
    unit = cluster.nodes[0]
    node = (min(unit.stages.values(), key=lambda n: n.capacity)
            if isinstance(unit, qm.Ensemble) else unit)
    t = np.linspace(start, end, 21)
    count = pods.ready_at(t) if pods is not None else np.full(t.size, len(cluster.nodes))
    load = float(np.max(traffic.rate_at(t) / count)) / node.capacity
    f = configuration_features(node, load)
    f["stages"] = len(unit.stages) if isinstance(unit, qm.Ensemble) else 1
    return f


def run(seed: int) -> list:
    rows = []
    for name, system, traffic, pods in scenarios():
        start = time.perf_counter()
        sim = qm.simulate(system, arrivals=traffic, pods=pods, seed=seed, replicas=REPLICAS)
        took_sim = time.perf_counter() - start
        start = time.perf_counter()
        pred = qm.predict(system, arrivals=traffic, pods=pods)
        took_pred = time.perf_counter() - start
        held = pred.fluid
        for (a, b, s), (_, _, p) in zip(sim.windows(WINDOW), pred.windows(WINDOW)):
            if s is None or p is None or s.requests < MIN_REQUESTS:
                continue
            i, j = pred._bins(a, b)
            family = ("traffic_fluid_backlog" if held[i:j].any()
                      else "traffic_pointwise_stationary")
            row = {"scenario": name, "start": a, "end": b, "family": family,
                   "requests": int(s.requests),
                   "features": _features(system, traffic, pods, a, b),
                   "seconds": {"simulate": took_sim, "predict": took_pred}}
            for key, level in LEVELS.items():
                simulated, predicted = float(s.quantile(level)), float(p.quantile(level))
                row[key] = {"simulated": simulated, "predicted": predicted,
                            "error": predicted / simulated - 1, "ci": list(s.ci(level))}
            rows.append(row)
        print(f"{name}: simulated in {took_sim:.1f} s, predicted in {took_pred:.1f} s",
              flush=True)
    return rows


def summary(rows) -> str:
    lines = [f"time-varying model against the time-varying simulator, {WINDOW:g} s windows "
             f"with >= {MIN_REQUESTS:,} simulated requests (error = predicted / simulated - 1)",
             ""]
    for family in ("traffic_pointwise_stationary", "traffic_fluid_backlog"):
        sel = [r for r in rows if r["family"] == family]
        if not sel:
            continue
        lines.append(f"{family}: {len(sel)} windows")
        for key in LEVELS:
            e = np.array([r[key]["error"] for r in sel])
            lines.append(f"  {key}: {e.min():+.1%} to {e.max():+.1%}, median |error| "
                         f"{np.median(np.abs(e)):.1%}")
    lines.append("")
    lines.append("by scenario (p99 error range; windows)")
    for name in dict.fromkeys(r["scenario"] for r in rows):
        sel = [r for r in rows if r["scenario"] == name]
        e = np.array([r["p99"]["error"] for r in sel])
        lines.append(f"  {name}: {e.min():+.1%} to {e.max():+.1%} ({len(sel)})")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=7)
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    rows = run(args.seed)
    write_outputs(args, rows, summary(rows))


if __name__ == "__main__":
    main()
