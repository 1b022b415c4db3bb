"""qm.size over a range of rates and over traffic (issue 34), and the search's defects that
issue names, each against brute force or a simulation."""

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import qmodel as qm
from qmodel.sizing import exhaustive, model_answer, trusted_quantile

SVC = qm.ServiceTime.affine(2e-3, 0.2e-3, jitter=("lognormal", 0.2))
ONE = dict(nodes=range(1, 17), gpus_per_node=1, instances_per_gpu=(1,),
           max_batch_size=(1, 4, 8, 16), max_queue_delay=(0, 1e-3, 4e-3),
           routers=("random", "round_robin"))


# ---- the range rule -------------------------------------------------------------------------
def test_a_range_plan_meets_the_slo_at_every_rate_in_an_independent_simulation():
    slo = {"p95": 9e-3}
    plan = qm.size(SVC, rate=(500.0, 6000.0), slo=slo, seed=3, **ONE)
    assert plan.feasible and plan.is_range and (plan.low, plan.load) == (500.0, 6000.0)
    assert {r for r, _ in plan.verified} >= {500.0, 6000.0, plan.binding}
    for rate in np.geomspace(500.0, 6000.0, 9):
        sim = qm.simulate(plan.system, rate=float(rate), requests=400_000, seed=17)
        assert sim.ci(0.95)[1] <= slo["p95"], rate
    # the plan for the peak alone is cheaper or the same, and misses at the low end here
    peak = qm.size(SVC, rate=6000.0, slo=slo, verify=False, **ONE)
    assert peak.cost <= plan.cost


@pytest.mark.parametrize("rates, slo", [((300.0, 3000.0), {"p99": 10e-3}),
                                        ((1000.0, 5000.0), {"p95": 7e-3}),
                                        ((200.0, 2500.0), {"p50": 4e-3, "p99": 9e-3})])
def test_a_range_plan_costs_what_brute_force_finds_with_the_same_rule(rates, slo):
    plan = qm.size(SVC, rate=rates, slo=slo, verify=False, **ONE)
    best = exhaustive(SVC, rates, slo, **ONE)
    assert (plan.cost if plan.feasible else math.inf) == best
    if plan.feasible:
        answer = plan.predicted
        for key, target in slo.items():
            assert trusted_quantile(answer, qm.sizing.LEVELS[key]) <= target


def test_one_rate_is_the_range_of_one_point():
    a = qm.size(SVC, rate=3000.0, slo={"p99": 12e-3}, verify=False, **ONE)
    b = qm.size(SVC, rate=(3000.0, 3000.0), slo={"p99": 12e-3}, verify=False, **ONE)
    assert a.system == b.system and a.cost == b.cost and not a.is_range


def test_the_grid_finds_a_maximum_inside_the_range():
    """A 10 ms delay: the tail is highest near 540 req/s, between the ends; the plan's
    binding rate lies there, within 1% of the tail a grid of 200 rates finds."""
    node = qm.Node(qm.ServiceTime.affine(1e-3, 0.1e-3), max_batch_size=8,
                   max_queue_delay=10e-3)
    dense = max(model_answer(node, float(r)).p99 for r in np.geomspace(100, 3000, 200))
    plan = qm.size(node.service, rate=(100.0, 3000.0), slo={"p99": 12.5e-3}, verify=False,
                   nodes=[1], max_batch_size=(8,), max_queue_delay=(10e-3,),
                   routers=("random",))
    assert 100 < plan.binding < 3000
    assert plan.predicted.p99 == pytest.approx(dense, rel=0.01)


# ---- the search's defects (issue 34), each failing on the search it replaces -----------------
@pytest.mark.parametrize("rate", [16_000.0, 18_000.0])
def test_feasible_counts_above_an_infeasible_one_are_not_skipped(rate):
    """With a delay the tail is U-shaped in the node count: here only one count meets the
    SLO, two above the stable minimum (galloping 1, 2, 4 steps past it jumped over it)."""
    svc = qm.ServiceTime.affine(1e-3, 0.1e-3)
    node = qm.Node(svc, max_batch_size=4, max_queue_delay=5e-3)
    space = dict(nodes=range(1, 65), max_batch_size=(4,), max_queue_delay=(5e-3,),
                 routers=("random",))
    tails = {n: trusted_quantile(model_answer(qm.Cluster(node, count=n, router="random"),
                                              rate), 0.95)
             for n in range(2, 65) if rate < n * node.capacity}
    slo = {"p95": 1.01 * min(tails.values())}
    feasible = [n for n, t in tails.items() if t <= slo["p95"]]
    assert len(feasible) == 1 and feasible[0] > min(tails) + 1
    plan = qm.size(svc, rate=rate, slo=slo, verify=False, **space)
    assert plan.feasible and plan.nodes == feasible[0]
    assert plan.cost == exhaustive(svc, rate, slo, **space)


def test_equal_cost_is_evaluated_and_an_executor_gives_the_same_plan():
    slo = {"p99": 12e-3}
    serial = qm.size(SVC, rate=3000.0, slo=slo, verify=False, **ONE)
    with ThreadPoolExecutor(2) as pool:
        parallel = qm.size(SVC, rate=3000.0, slo=slo, verify=False, executor=pool, **ONE)
    cheapest = [c for c in serial.alternatives if c.cost == serial.cost]
    # every configuration feasible at the cheapest cost, as brute force finds them
    expected = set()
    for node in qm.sizing.space.configurations({1: SVC}, qm.sizing.space.checked_space(
            slo, 3000.0, 0.0, 1.0, 0, ONE["nodes"], 1, (1,), ONE["max_batch_size"],
            ONE["max_queue_delay"], ((),), ONE["routers"], 1.0, None)):
        for router in ONE["routers"]:
            system = qm.sizing.plan.system_of(node, router, serial.nodes)
            try:
                r = model_answer(system, 3000.0)
            except (qm.UnstableError, NotImplementedError):
                continue
            if all(trusted_quantile(r, qm.sizing.LEVELS[k]) <= t for k, t in slo.items()):
                expected.add((node, router))
    assert {(c.node, c.router) for c in cheapest} == expected and len(expected) > 1
    assert parallel.system == serial.system
    assert [(c.node, c.router) for c in parallel.alternatives if c.cost == serial.cost] == \
        [(c.node, c.router) for c in cheapest]


def test_a_calibrated_node_keeps_its_prefetch_in_the_plan_and_its_simulation():
    node = qm.Node(SVC, overhead=0.2e-3, prefetch=0.17)
    plan = qm.size(node, rate=2000.0, slo={"p99": 12e-3}, nodes=range(1, 9),
                   max_batch_size=(8,), max_queue_delay=(1e-3,), routers=("round_robin",),
                   verify_requests=300_000)
    assert plan.feasible
    planned = plan.system.nodes[0] if isinstance(plan.system, qm.Cluster) else plan.system
    assert planned.prefetch == 0.17 and planned.overhead == 0.2e-3
    assert plan.simulated is not None
    assert any("prefetch share 0.17 is kept" in n for n in plan.notes)
    keys = plan.predicted.accuracy.approximation_keys
    assert "prefetch_ranked_without" in keys


def test_instances_sharing_a_gpu_need_a_measurement_or_a_stated_assumption():
    with pytest.raises(ValueError, match="sharing='independent'"):
        qm.size(SVC, rate=3000.0, slo={"p99": 12e-3}, instances_per_gpu=(1, 2, 4),
                verify=False, nodes=range(1, 9))
    alone = qm.size(SVC, rate=3000.0, slo={"p99": 12e-3}, instances_per_gpu=(4,),
                    sharing="time-sliced", verify=False, nodes=range(1, 17),
                    max_batch_size=(8,), max_queue_delay=(0,), routers=("random",))
    one = qm.size(SVC, rate=3000.0, slo={"p99": 12e-3}, instances_per_gpu=(1,), verify=False,
                  nodes=range(1, 17), max_batch_size=(8,), max_queue_delay=(0,),
                  routers=("random",))
    # time-sliced: four instances on a GPU carry no more than one
    assert alone.system.nodes[0].capacity == pytest.approx(
        one.system.nodes[0].capacity if isinstance(one.system, qm.Cluster)
        else one.system.capacity, rel=1e-9)
    assert any("an assumption, not a measurement" in n for n in alone.notes)
    profile = qm.Profile("p", "cpu", {}, {1: {k: [1e-3 + 1e-4 * k] * 3 for k in (1, 2, 4)}})
    with pytest.raises(ValueError, match="the profile has no concurrency 2"):
        qm.size(profile, rate=300.0, slo={"p99": 12e-3}, instances_per_gpu=(1, 2),
                max_batch_size=(4,), verify=False)
    s = qm.ServiceTime.affine
    ens = qm.Ensemble({"a": qm.Node(s(1e-3)), "b": qm.Node(s(1e-3))}, [("a", "b")])
    with pytest.raises(ValueError, match="cannot tell how the stages slow each other"):
        qm.size(ens, rate=300.0, slo={"p99": 12e-3}, verify=False)


def test_the_report_sweeps_with_the_nodes_down_it_was_sized_with(tmp_path):
    from qmodel.sizing.report import rate_sweep

    plan = qm.size(SVC, rate=3000.0, slo={"p99": 12e-3}, failures=1, verify=False, **ONE)
    (label, (rates, values)), *_ = rate_sweep(plan).items()
    assert "1 node(s) down" in label
    sized = np.argmin(np.abs(rates - plan.load))
    assert rates[sized] == pytest.approx(plan.load)
    assert values[sized] == pytest.approx(plan.predicted.p99, rel=1e-9)


def test_pods_are_sized_by_the_same_search_and_rule():
    s = qm.ServiceTime.affine
    ens = qm.Ensemble({"user": qm.Node(s(1e-3, 0.1e-3)), "item": qm.Node(s(1.5e-3, 0.2e-3)),
                       "score": qm.Node(s(1e-3, 0.1e-3))},
                      [("user", "score"), ("item", "score")])
    space = dict(nodes=range(1, 9), instances_per_gpu=(1, 2), max_batch_size=(1, 4),
                 max_queue_delay=(0,), routers=("round_robin", "random"),
                 sharing="independent", verify_requests=300_000)
    plan = qm.size(ens, rate=3000.0, slo={"p99": 6e-3}, **space)
    assert plan.feasible and "plus the network budget" not in plan.verification
    with ThreadPoolExecutor(2) as pool:
        parallel = qm.size(ens, rate=3000.0, slo={"p99": 6e-3}, executor=pool, verify=False,
                           **space)
    assert parallel.system == plan.system or parallel.cost == plan.cost
    # the pod was ranked by the model's own answer (never a simulation)
    assert plan.predicted.accuracy.exactness != "simulation"
    assert plan.alternatives == tuple(sorted(plan.alternatives, key=lambda c: c.cost))


def test_the_report_names_the_quantile_the_cheaper_plan_missed(tmp_path):
    slo = {"p50": 50e-3, "p99": 7e-3}
    plan = qm.size(SVC, rate=3000.0, slo=slo, verify_requests=300_000, **ONE)
    assert plan.feasible and plan.rival is not None
    rival, sim = plan.rival
    assert sim.ci(0.99)[1] > slo["p99"] and sim.ci(0.5)[1] <= slo["p50"]
    report = (tmp_path / "report.md")
    plan.write(tmp_path)
    line = next(x for x in report.read_text().splitlines() if "One node cheaper" in x)
    assert "simulated p99" in line and "simulated p50" not in line


@pytest.mark.parametrize("kwargs, message", [
    (dict(rate=(5000.0, 1000.0)), r"the low end exceeds the peak; write \(1000, 5000\)"),
    (dict(rate=(-1.0, 1000.0)), "rate low must be a positive number"),
    (dict(rate=(1.0, 2.0, 3.0)), "give one rate, or a range"),
    (dict(rate=None), "needs rate="),
    (dict(preferred_batch_sizes=(4,)), "a bare 4 is not a set"),
    (dict(sharing="shared"), "sharing='shared'"),
    (dict(max_batch_size=(1,), max_queue_delay=(1e-3,)), "the space holds no configuration"),
    (dict(failures=2, nodes=[1, 2]), "failures=2 leaves no node serving"),
])
def test_bad_ranges_name_the_field(kwargs, message):
    args = dict(rate=1000.0, slo={"p99": 9e-3}, verify=False)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        qm.size(SVC, **args)


# ---- traffic and autoscaling ----------------------------------------------------------------
SALE = qm.Traffic.flash_sale(1500.0, 6000.0, ramp=30, hold=300, before=300, after=300)
DAY = qm.Traffic.diurnal(600.0, 6000.0, period=3600.0, peak_at=1800.0, step=60.0)
AUTO = dict(nodes=range(1, 17), max_batch_size=(8, 16), max_queue_delay=(0, 1e-3),
            routers=("round_robin",), verify_requests=300_000)


def test_autoscaling_takes_the_traffic_s_shape_headroom_and_no_failures():
    bursty = DAY.with_scv(4.0)
    plan = qm.size(SVC, traffic=bursty, slo={"p95": 9e-3}, verify=False, **AUTO)
    poisson = qm.size(SVC, traffic=DAY, slo={"p95": 9e-3}, verify=False, **AUTO)
    assert plan.scv == 4.0 and plan.cost >= poisson.cost
    assert plan.predicted.accuracy.approximation_keys  # ranked under renewal arrivals
    hpa = qm.Autoscaler(metric="in_flight", scale_up_delay=60)
    with pytest.raises(ValueError, match="failures= is not planned with autoscale="):
        qm.size(SVC, traffic=DAY, slo={"p95": 9e-3}, autoscale=hpa, failures=1, **AUTO)


def test_traffic_without_an_autoscaler_sizes_its_range():
    plan = qm.size(SVC, traffic=SALE, slo={"p95": 9e-3}, verify=False, **AUTO)
    assert (plan.low, plan.load) == (1500.0, 6000.0) and plan.schedule is None


def test_an_autoscaled_plan_follows_the_traffic_and_is_verified(tmp_path):
    slo = {"p95": 9e-3}
    hpa = qm.Autoscaler(metric="in_flight", scale_up_delay=60, min_pods=1, max_pods=16)
    plan = qm.size(SVC, traffic=DAY, slo=slo, autoscale=hpa, **AUTO)
    assert plan.feasible and plan.schedule is not None and plan.autoscaler.target is not None
    assert plan.schedule.ready.min() == 1 and plan.schedule.most > 1
    assert plan.static.feasible and plan.cost < plan.static.cost
    # the settled windows meet the SLO in the plan's own simulation (its verification)...
    assert "every settled 60 s window" in plan.verification
    assert plan.simulated.requests == pytest.approx(DAY.expected(), rel=0.01)
    for start, end, quantiles, settled in plan.windows:
        if settled:
            assert quantiles["p95"] <= slo["p95"]
    # ...the rises before new pods serve are transients, reported with their simulation
    assert plan.transients and all(t.simulated_over for t in plan.transients)
    ups = [t for t, ready, asked in plan.schedule.changes() if asked > ready]
    assert all(any(t.start <= u <= t.end for t in plan.transients) for u in ups)
    paths = plan.write(tmp_path, name="ranker")
    assert (tmp_path / "hpa.yaml").exists() and (tmp_path / "schedule.png").exists()
    from qmodel.autoscaler import _quantity

    assert f"averageValue: \"{_quantity(plan.autoscaler.target)}\"" in \
        (tmp_path / "hpa.yaml").read_text()
    assert "name: triton_in_flight" in (tmp_path / "hpa.yaml").read_text()
    assert (tmp_path / "report.md") in paths


def test_any_window_lines_up_and_the_whole_traffic_is_held():
    slo = {"p95": 9e-3}
    hpa = qm.Autoscaler(metric="in_flight", scale_up_delay=60, min_pods=1, max_pods=16)
    plan = qm.size(SVC, traffic=DAY, slo=slo, autoscale=hpa, window=22, **AUTO)
    assert plan.feasible
    assert len(plan.simulated.windows(22)) == len(plan.windows)
    assert [round(w[0], 6) for w in plan.simulated.windows(22)] == \
        [round(w[0], 6) for w in plan.windows]
    # over the whole traffic, the SLO holds in the model (trusted) and in the simulation
    assert plan.simulated.within(slo)["p95"] >= 0.95
    assert qm.sizing.trusted_quantile(plan.predicted, 0.95) <= slo["p95"]
    # a target no autoscaled plan meets: the summary says so, then the static plan
    tight = qm.size(SVC, traffic=DAY, slo={"p95": 4.3e-3}, autoscale=hpa, verify=False,
                    **AUTO)
    assert not tight.feasible
    assert tight.summary().startswith("no autoscaled plan: ")
    with pytest.raises(ValueError, match="window=0 must be a positive number of seconds"):
        qm.size(SVC, traffic=DAY, slo=slo, window=0, verify=False, **AUTO)


def test_the_autoscaled_plan_is_the_cheapest_feasible_pair():
    """Every (configuration, target) evaluated by the same rule: none cheaper is feasible."""
    from qmodel.sizing import autoscale as A

    slo = {"p95": 9e-3}
    hpa = qm.Autoscaler(metric="in_flight", scale_up_delay=60, min_pods=1, max_pods=16)
    space = dict(AUTO, max_batch_size=(8, 16), max_queue_delay=(0, 1e-3))
    plan = qm.size(SVC, traffic=DAY, slo=slo, autoscale=hpa, verify=False, **space)
    assert plan.feasible
    sized = qm.sizing.space.checked_space(slo, (600.0, 6000.0), 0.0, 1.0, 0, space["nodes"],
                                          1, (1,), (8, 16), (0, 1e-3), ((),), ("round_robin",),
                                          1.0, None)
    checked = 0
    for node in qm.sizing.space.configurations({1: SVC}, sized):
        curve = A.metric_curve(node, "round_robin", "in_flight", sized)
        for load in A.TARGET_LOADS:
            scaler = hpa.with_target(curve.at(load * curve.capacity))
            schedule = scaler.run(DAY, curve, curve.capacity, step=A.LOOP_STEP)
            if schedule.pod_seconds() < plan.schedule.pod_seconds():
                found = A._evaluate(node, "round_robin", scaler, schedule, DAY, sized, 60.0,
                                    {})
                assert found is None or not found["feasible"], (node, load)
                checked += 1
    assert checked > 0


def test_qmodel_size_takes_a_range_and_a_traffic_file(tmp_path, capsys):
    from qmodel.cli import main

    args = ["size", "--service-base", "2ms", "--per-item", "0.2ms", "--jitter",
            "lognormal:0.2", "--slo", "p95=9ms", "--nodes", "1-16", "--max-batch-size", "8,16",
            "--max-queue-delay", "0,1ms", "--routers", "round_robin", "--no-verify"]
    assert main(args + ["--rate", "1500:6000", "--out", str(tmp_path / "r")]) == 0
    assert "holds at every rate in [1,500, 6,000] req/s" in capsys.readouterr().out
    csv = tmp_path / "sale.csv"
    csv.write_text("time,rate\n" + "".join(f"{t},{r}\n" for t, r in
                                           [(0, 1500), (300, 6000), (600, 1500)]))
    assert main(args + ["--traffic", str(csv), "--autoscale", "in_flight",
                        "--scale-up-delay", "1min", "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "autoscaled" in out and (tmp_path / "a" / "hpa.yaml").exists()
    assert main(args + ["--rate", "6000:1500"]) == 2
    assert "the low end exceeds the peak" in capsys.readouterr().err
    assert main(args + ["--traffic", str(csv), "--autoscale", "utilization=60"]) == 2
    assert "a utilization target is a fraction" in capsys.readouterr().err
    csv.write_text("time,rate\n0,100\n")
    assert main(args + ["--traffic", str(csv)]) == 2
    assert "needs at least two rows" in capsys.readouterr().err
