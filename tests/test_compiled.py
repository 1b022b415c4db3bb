"""The compiled engine (qmodel.sim.compiled) against the reference engines and exact results.

Three kinds of agreement (issue 36): request by request on hand-made traces, where the
reference engines and the compiled one must give the same sojourn to the last bit; in
distribution on the seeded systems of validation/answers_unchanged.py, where each quantile
must agree within the two runs' confidence intervals; and against the exact M/M/c, M/D/1 and
M/D/c quantiles. The CUDA target runs under Numba's CUDA simulator in a subprocess (no GPU
needed) and must count the same histogram as the CPU target.
"""

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from scipy import stats

import qmodel as qm
import qmodel.theory as th

pytest.importorskip("numba")

AFF = qm.ServiceTime.affine
# z for the comparisons below: 99.9% two-sided, so that the 60-odd comparisons of the suite
# fail by chance about once in 16 runs of fresh seeds (the seeds are fixed).
Z = stats.norm.ppf(0.9995)


def _half(result, p):
    lo, hi = result.ci(p, level=0.95)
    return (hi - lo) / 2 / stats.norm.ppf(0.975)        # standard error


# ---- request by request --------------------------------------------------------------------
def _trace(rate, n=400, seed=0, scv=1.0):
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1 / rate, n) if scv == 1.0 else rng.gamma(1 / scv, scv / rate, n)
    return np.cumsum(gaps)


RULES = {
    "delay": qm.Node(AFF(2e-3, 0.3e-3), max_batch_size=8, max_queue_delay=1e-3),
    "greedy": qm.Node(AFF(2e-3, 0.3e-3), max_batch_size=8),
    "preferred": qm.Node(AFF(2e-3, 0.3e-3), max_batch_size=16, max_queue_delay=2e-3,
                         preferred_batch_sizes=(3, 7, 12)),
    "preferred no delay": qm.Node(AFF(2e-3, 0.3e-3), max_batch_size=7,
                                  preferred_batch_sizes=(2, 4)),
    "instances": qm.Node(AFF(2.4e-3, 0.54e-3), max_batch_size=8, max_queue_delay=2e-3,
                         preferred_batch_sizes=(4,), instances=3),
    "overhead": qm.Node(AFF(2e-3, 0.3e-3), max_batch_size=4, max_queue_delay=0.5e-3,
                        overhead=0.7e-3, instances=2),
    "one request": qm.Node(AFF(1e-3), max_batch_size=1, instances=2),
    "table": qm.Node(qm.ServiceTime.table({1: 3.1e-3, 2: 3.6e-3, 4: 4.4e-3, 8: 6.7e-3}),
                     max_batch_size=8, max_queue_delay=1e-3),
}


@pytest.mark.parametrize("name", RULES)
@pytest.mark.parametrize("load", [0.3, 0.9])
def test_replay_matches_the_reference_engines_request_by_request(name, load):
    node = RULES[name]
    times = _trace(load * node.capacity, seed=len(name))
    ref = qm.replay(node, times, engine="lookahead")
    got = qm.replay(node, times, engine="compiled")
    np.testing.assert_array_equal(got.sojourn, ref.sojourn)
    np.testing.assert_array_equal(got.batch_size, ref.batch_size)
    np.testing.assert_array_equal(got.batch_start, ref.batch_start)


@pytest.mark.parametrize("limit", [1, 3, 12])
def test_replay_rejects_as_the_event_engine_does(limit):
    node = qm.Node(AFF(2e-3, 0.3e-3), max_batch_size=8, max_queue_delay=1e-3,
                   max_queue_size=limit, instances=2)
    times = _trace(1.3 * node.capacity, seed=limit)      # overloaded: rejections happen
    ref = qm.replay(node, times, engine="events")
    got = qm.replay(node, times, engine="compiled")
    assert np.isnan(ref.sojourn).sum() > 0
    np.testing.assert_array_equal(got.sojourn, ref.sojourn)
    np.testing.assert_array_equal(got.node, ref.node)


def _outstanding_at(rep, t, node):
    """Queued plus in-service requests of ``node`` just before time t, rebuilt from a replay's
    records: requests routed there that arrived before t and whose batch ends after t."""
    mine = (rep.node == node) & (rep.arrival < t)
    leave = rep.arrival + rep.sojourn
    return int(np.sum(mine & (leave > t)))


@pytest.mark.parametrize("router", ["least_outstanding", "power_of_d"])
def test_dynamic_routers_pick_a_least_outstanding_node(router):
    """Every request of a replay goes to a node with the fewest outstanding requests among
    all nodes (least outstanding) or, for power of d over all but one node, to one whose
    count is at most the second largest's (it saw d of them)."""
    node = qm.Node(AFF(1e-3, 0.2e-3), max_batch_size=4, max_queue_delay=0.5e-3)
    policy = (qm.Router("power_of_d", choices=3) if router == "power_of_d"
              else "least_outstanding")
    cluster = qm.Cluster(node, count=4, router=policy)
    times = _trace(0.8 * cluster.capacity, n=600, seed=5)
    rep = qm.replay(cluster, times, engine="compiled", seed=2)
    assert not np.isnan(rep.sojourn).any()
    for i in range(len(times)):
        counts = np.array([_outstanding_at(rep, times[i], n) for n in range(4)])
        picked = counts[rep.node[i]]
        if router == "least_outstanding":
            assert picked == counts.min(), (i, counts, rep.node[i])
        else:
            assert picked <= np.sort(counts)[1], (i, counts, rep.node[i])
    assert len(set(rep.node.tolist())) == 4


@pytest.mark.parametrize("router", ["least_outstanding", "power_of_d"])
def test_ties_go_to_a_uniformly_random_node(router):
    """Requests far apart find every node empty: each of 5 nodes takes a fifth of them (a
    chi-square test at level 0.001; 6,000 requests)."""
    node = qm.Node(AFF(1e-3), max_batch_size=4)
    policy = qm.Router("power_of_d", choices=2) if router == "power_of_d" else router
    times = np.arange(6000) * 0.01                       # 10 ms apart, 1 ms service
    rep = qm.replay(qm.Cluster(node, count=5, router=policy), times, engine="compiled", seed=8)
    counts = np.bincount(rep.node, minlength=5)
    assert stats.chisquare(counts).pvalue > 1e-3, counts


def test_replay_of_a_round_robin_cluster_takes_nodes_in_turn():
    node = qm.Node(AFF(1e-3, 0.2e-3), max_batch_size=4)
    rep = qm.replay(qm.Cluster(node, count=3, router="round_robin"), _trace(2000.0, n=30),
                    engine="compiled", seed=4)
    assert np.array_equal(np.diff(rep.node) % 3, np.ones(29))


# ---- in distribution -----------------------------------------------------------------------
def _seeded_systems():
    """The simulated systems of validation/answers_unchanged.py (every rule and router)."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "validation"))
    try:
        import answers_unchanged
    finally:
        sys.path.pop(0)
    return list(answers_unchanged.sim_systems())


SEEDED = _seeded_systems()


@pytest.mark.parametrize("name,system,kwargs", SEEDED, ids=[s[0] for s in SEEDED])
def test_compiled_agrees_with_the_reference_engines(name, system, kwargs):
    kwargs = dict(kwargs)
    engine = kwargs.pop("engine", "auto")
    ref = qm.simulate(system, requests=300_000, seed=17, engine=engine, **kwargs)
    got = qm.simulate(system, requests=300_000, seed=18, engine="compiled", **kwargs)
    assert got.model == "simulation" and got.accuracy.simulation.engine == "compiled"
    for p in (0.5, 0.95, 0.99):
        se = np.hypot(_half(ref, p), _half(got, p))
        assert abs(got.quantile(p) - ref.quantile(p)) <= Z * se + 1e-3 * ref.quantile(p), \
            (name, p, got.quantile(p), ref.quantile(p), se)
    assert got.mean == pytest.approx(ref.mean, rel=0.03)
    assert got.utilization == pytest.approx(ref.utilization, rel=0.02)
    assert got.throughput == pytest.approx(ref.throughput, rel=0.02)
    assert got.mean_batch_size == pytest.approx(ref.mean_batch_size, rel=0.02)
    assert got.rejection_fraction == pytest.approx(ref.rejection_fraction, abs=0.01)


def _covers(result, exact, p):
    se = _half(result, p)
    return abs(result.quantile(p) - exact) <= Z * se + result.resolution * exact


@pytest.mark.parametrize("case", ["mm3", "md1", "md3"])
def test_compiled_reproduces_exact_queues(case):
    if case == "mm3":
        node = qm.Node(AFF(2e-3, jitter="exponential"), instances=3)
        exact = th.mmc(1200.0, 500.0, 3)
    elif case == "md1":
        node = qm.Node(AFF(2e-3))
        exact = th.md1(400.0, 2e-3)
    else:
        node = qm.Node(AFF(2e-3), instances=3)
        exact = th.mdc(1200.0, 2e-3, 3)
    rate = 1200.0 if case != "md1" else 400.0
    got = qm.simulate(node, rate=rate, requests=3_000_000, seed=5, backend="cpu")
    for p in (0.5, 0.9, 0.99):
        assert _covers(got, exact.quantile(p), p), (case, p, got.quantile(p),
                                                   exact.quantile(p))
    assert got.utilization == pytest.approx(exact.utilization, rel=0.01)


def test_histogram_quantiles_are_the_sample_quantiles_to_the_resolution():
    """The same replay's requests counted into the histogram and kept as samples."""
    node = RULES["instances"]
    a = qm.simulate(node, rate=0.8 * node.capacity, requests=200_000, seed=3,
                    engine="compiled")
    assert a.resolution == 5e-4
    lo, hi = a.ci(0.99)
    assert lo < a.p99 < hi
    assert a.cdf(a.p99) >= 0.99 and a.cdf(a.p99 * (1 - 2 * a.resolution)) < 0.99


def test_same_seed_same_result_and_other_seed_differs():
    node = RULES["delay"]
    runs = [qm.simulate(node, rate=0.7 * node.capacity, requests=100_000, seed=s,
                        backend="cpu") for s in (1, 1, 2)]
    assert runs[0].p99 == runs[1].p99 and runs[0].mean == runs[1].mean
    assert runs[0].mean != runs[2].mean


# ---- Triton's prefetching batcher (Node.prefetch) ---------------------------------------------
PREFETCH_RULES = {
    "delay": dict(max_batch_size=8, max_queue_delay=1e-3),
    "preferred": dict(max_batch_size=16, max_queue_delay=2e-3, preferred_batch_sizes=(3, 7, 12)),
    "instances": dict(max_batch_size=8, max_queue_delay=2e-3, preferred_batch_sizes=(4,),
                      instances=3),
    "overhead": dict(max_batch_size=4, max_queue_delay=3e-3, overhead=0.7e-3, instances=2),
}


@pytest.mark.parametrize("name", PREFETCH_RULES)
@pytest.mark.parametrize("join", [0.0, 1.0])
@pytest.mark.parametrize("load", [0.4, 0.95])
def test_prefetch_replay_matches_the_look_ahead_engine_request_by_request(name, join, load):
    """With a join probability of 0 or 1 the prefetch rule draws nothing: the compiled
    engine's batches and sojourns are the look-ahead engine's, to the bit."""
    node = qm.Node(AFF(2e-3, 0.3e-3), prefetch=join, **PREFETCH_RULES[name])
    times = _trace(load * node.capacity, n=600, seed=len(name))
    ref = qm.replay(node, times, engine="lookahead")
    got = qm.replay(node, times, engine="compiled")
    np.testing.assert_array_equal(got.sojourn, ref.sojourn)
    np.testing.assert_array_equal(got.batch_size, ref.batch_size)
    np.testing.assert_array_equal(got.batch_start, ref.batch_start)


@pytest.mark.parametrize("router", ["least_outstanding", "power_of_d"])
def test_prefetch_one_behind_a_dynamic_router_is_the_rule_at_the_freeing(router):
    """No reference engine runs prefetch behind a dynamic router; the oracle is the docs'
    identity: with p = 1 and one instance per node, prefetching is the rule at the
    instance's freeing (without preferred sizes below B), so the two clusters' replays agree
    request by request."""
    policy = qm.Router("power_of_d", choices=2) if router == "power_of_d" else router
    plain = qm.Node(AFF(2e-3, 0.3e-3, jitter=("gamma", 0.3)), max_batch_size=8,
                    max_queue_delay=1.5e-3)
    ahead = qm.Node(plain.service, max_batch_size=8, max_queue_delay=1.5e-3, prefetch=1.0)
    times = _trace(0.85 * 3 * plain.capacity, n=3000, seed=3)
    ref = qm.replay(qm.Cluster(plain, count=3, router=policy), times, engine="compiled", seed=6)
    got = qm.replay(qm.Cluster(ahead, count=3, router=policy), times, engine="compiled", seed=6)
    np.testing.assert_array_equal(got.node, ref.node)
    np.testing.assert_array_equal(got.sojourn, ref.sojourn)


PREFETCH_SYSTEMS = {
    "node": qm.Node(AFF(2.4e-3, 0.54e-3, jitter=("lognormal", 0.3)), max_batch_size=16,
                    max_queue_delay=2e-3, preferred_batch_sizes=(4, 8, 16), instances=2,
                    prefetch=0.4),
    "round robin": qm.Cluster(qm.Node(AFF(2e-3, 0.3e-3, jitter="exponential"),
                                      max_batch_size=8, max_queue_delay=1e-3, prefetch=0.3),
                              count=3, router="round_robin"),
}


@pytest.mark.parametrize("name", PREFETCH_SYSTEMS)
def test_prefetch_agrees_with_the_look_ahead_engine_in_distribution(name):
    system = PREFETCH_SYSTEMS[name]
    rate = 0.85 * (system if isinstance(system, qm.Cluster) else qm.Cluster(system)).capacity
    ref = qm.simulate(system, rate=rate, requests=300_000, seed=21, engine="lookahead")
    got = qm.simulate(system, rate=rate, requests=300_000, seed=22, engine="compiled")
    for p in (0.5, 0.95, 0.99):
        se = np.hypot(_half(ref, p), _half(got, p))
        assert abs(got.quantile(p) - ref.quantile(p)) <= Z * se + 1e-3 * ref.quantile(p), \
            (name, p, got.quantile(p), ref.quantile(p), se)
    assert got.mean_batch_size == pytest.approx(ref.mean_batch_size, rel=0.02)
    assert got.utilization == pytest.approx(ref.utilization, rel=0.02)


def test_prefetch_behind_least_outstanding_runs_on_the_compiled_engine():
    """engine='auto' takes the compiled engine where only it runs the system (the event
    engine does not prefetch); backend='numpy' says which backend does."""
    node = qm.Node(AFF(2e-3, 0.3e-3), max_batch_size=8, max_queue_delay=1e-3, prefetch=0.5)
    cluster = qm.Cluster(node, count=2, router="least_outstanding")
    got = qm.simulate(cluster, rate=0.7 * cluster.capacity, requests=100_000, seed=3)
    assert got.accuracy.simulation.engine == "compiled"
    assert got.p99 > got.p50 > 0
    with pytest.raises(ValueError, match="does not run Node.prefetch.*backend='auto' or 'cpu'"):
        qm.simulate(cluster, rate=0.7 * cluster.capacity, requests=100_000, backend="numpy")


def test_a_prefetching_cluster_replays_and_refuses_a_traffic_with_the_reason():
    """Review of the prefetch change: replay with the default engine of a prefetching
    cluster behind round robin ran the event engine, which refused it naming engine='auto';
    a Traffic behind least outstanding was refused with the same self-contradicting words."""
    node = qm.Node(AFF(2e-3, 0.3e-3), max_batch_size=8, max_queue_delay=1e-3, prefetch=0.5)
    times = _trace(1000.0, n=200)
    for router in ("round_robin", "random", "least_outstanding"):
        cluster = qm.Cluster(node, count=2, router=router)
        auto = qm.replay(cluster, times, seed=3)
        np.testing.assert_array_equal(auto.sojourn,
                                      qm.replay(cluster, times, seed=3, engine="compiled").sojourn)
    traffic = qm.Traffic([0, 5, 10], [500.0, 1000.0])
    with pytest.raises(ValueError, match="Traffic of prefetching nodes .* dynamic router"):
        qm.simulate(qm.Cluster(node, count=2, router="least_outstanding"), arrivals=traffic)


# ---- ensembles -------------------------------------------------------------------------------
def _diamond(jitter="deterministic", instances=1):
    """pre fans out to a and b, which join at post: a fan-out, a fan-in, an overhead, a delay,
    preferred sizes and, optionally, jitter and instances."""
    s1 = AFF(1e-3, 0.2e-3, jitter=jitter)
    return qm.Ensemble({
        "pre": qm.Node(s1, max_batch_size=4, max_queue_delay=0.5e-3, overhead=0.3e-3),
        "a": qm.Node(AFF(2e-3, 0.1e-3, jitter=jitter), max_batch_size=8,
                     max_queue_delay=1e-3, instances=instances),
        "b": qm.Node(s1, max_batch_size=8, preferred_batch_sizes=(4, 8),
                     max_queue_delay=2e-3),
        "post": qm.Node(s1, max_batch_size=2)},
        [("pre", "a"), ("pre", "b"), ("a", "post"), ("b", "post")])


def test_ensemble_on_a_trace_is_the_reference_to_rounding():
    """Deterministic service over one trace: nothing is drawn, so the compiled engine's
    pipeline (every stage inside one replica, requests released downstream as events) and
    the reference (stage after stage over whole lanes) serve every request alike."""
    ens = _diamond()
    times = _trace(0.7 * ens.capacity, n=40_000, seed=4)
    ref = qm.simulate(ens, arrivals=qm.Trace(times), engine="lookahead", replicas=1)
    got = qm.simulate(ens, arrivals=qm.Trace(times), engine="compiled", replicas=1)
    assert got.accuracy.simulation.engine == "compiled"
    assert got.mean == pytest.approx(ref.mean, rel=1e-7)      # the reference keeps float32
    assert got.utilization == pytest.approx(ref.utilization, rel=1e-9)
    assert got.batch_size_distribution == ref.batch_size_distribution
    for p in (0.5, 0.99):
        assert got.quantile(p) == pytest.approx(ref.quantile(p), rel=2 * got.resolution)
    assert list(got.stages) == list(ref.stages)
    for name, stage in ref.stages.items():
        mine = got.stages[name]
        assert mine.mean == pytest.approx(stage.mean, rel=1e-6), name
        assert mine.utilization == pytest.approx(stage.utilization, rel=1e-9), name
        assert mine.batch_size_distribution == stage.batch_size_distribution, name


def test_ensemble_requests_ready_at_one_instant_queue_in_arrival_order():
    """Found by review: a stage of three instances fed clumps of 8 runs equal batches at
    one instant, which finish together; released by instance number, later requests
    overtook earlier ones downstream (p99 3.8% off the reference through a fan-in). Requests
    ready at one instant now queue in their arrival order, as the reference sorts them."""
    node = qm.Node
    fan = qm.Ensemble({
        "x": node(AFF(2e-3, 0.25e-3), max_batch_size=8, max_queue_delay=3e-3),
        "a": node(AFF(1e-3, 0.5e-3), max_batch_size=2, instances=3),
        "b": node(AFF(0.5e-3, 0.25e-3), max_batch_size=2),
        "c": node(AFF(0.3e-3, 0.4e-3), max_batch_size=2),
        "post": node(AFF(0.2e-3, 0.1e-3), max_batch_size=4)},
        [("x", "a"), ("a", "b"), ("b", "post"), ("x", "c"), ("c", "post")])
    times = _trace(0.6 * fan.capacity, n=20_000, seed=1)
    ref = qm.simulate(fan, arrivals=qm.Trace(times), engine="lookahead", replicas=1)
    got = qm.simulate(fan, arrivals=qm.Trace(times), engine="compiled", replicas=1)
    assert got.mean == pytest.approx(ref.mean, rel=1e-7)
    for p in (0.5, 0.99):
        assert got.quantile(p) == pytest.approx(ref.quantile(p), rel=2 * got.resolution)
    for name in fan.order:
        assert got.stages[name].mean == pytest.approx(ref.stages[name].mean, rel=1e-6)


def test_a_short_ensemble_run_warns_once():
    stage = qm.Node(AFF(1e-3), max_batch_size=256, max_queue_delay=5.0)
    ens = qm.Ensemble({"a": stage, "b": stage}, [("a", "b")])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        qm.simulate(ens, rate=20.0, requests=200, seed=1, engine="compiled", replicas=4)
    short = [w for w in caught if "no batch was dispatched" in str(w.message)]
    assert len(short) == 1


@pytest.mark.parametrize("pods,router", [(1, "random"), (3, "round_robin"), (2, "random")])
def test_ensemble_pods_agree_with_the_reference_in_distribution(pods, router):
    ens = _diamond(jitter=("lognormal", 0.4), instances=2)
    system = qm.Cluster(ens, count=pods, router=router)
    rate = 0.75 * system.capacity
    ref = qm.simulate(system, rate=rate, requests=300_000, seed=31, engine="lookahead")
    got = qm.simulate(system, rate=rate, requests=300_000, seed=32, engine="compiled")
    for a, b, name in [(got, ref, "end to end")] + [
            (got.stages[n], ref.stages[n], n) for n in ens.order]:
        for p in (0.5, 0.99):
            se = np.hypot(_half(a, p), _half(b, p))
            assert abs(a.quantile(p) - b.quantile(p)) <= Z * se + 1e-3 * b.quantile(p), \
                (name, p, a.quantile(p), b.quantile(p), se)
        assert a.utilization == pytest.approx(b.utilization, rel=0.02), name
        assert a.mean_batch_size == pytest.approx(b.mean_batch_size, rel=0.02), name
    assert got.throughput == pytest.approx(ref.throughput, rel=0.02)


def test_ensemble_batches_waiting_to_be_released_outgrow_their_room(monkeypatch):
    """An overhead that outlasts several batches of an instance keeps them unreleased; past
    the room the run repeats with four times as much, and counts as a roomy first run."""
    slow_exit = qm.Node(AFF(0.2e-3, 0.05e-3), max_batch_size=2, overhead=5e-3)
    ens = qm.Ensemble({"a": slow_exit, "b": qm.Node(AFF(1e-3), max_batch_size=4)},
                      [("a", "b")])
    roomy = qm.simulate(ens, rate=0.6 * ens.capacity, requests=20_000, seed=3,
                        engine="compiled")
    import qmodel.sim.compiled_ensemble as ce
    monkeypatch.setattr(ce, "FIRST_RELEASE_DEPTH", 1)
    tight = qm.simulate(ens, rate=0.6 * ens.capacity, requests=20_000, seed=3,
                        engine="compiled")
    assert tight.mean == roomy.mean and tight.p99 == roomy.p99
    assert roomy.stages["b"].mean > 0 and roomy.p50 > 5e-3     # the overhead is in the path


def test_ensembles_run_on_the_cpu_backend_and_refuse_replay():
    ens = _diamond()
    got = qm.simulate(ens, rate=0.5 * ens.capacity, requests=20_000, seed=1, backend="cpu")
    assert got.accuracy.simulation.engine == "compiled" and set(got.stages) == set(ens.order)
    with pytest.raises(ValueError, match="not an Ensemble"):
        qm.sim.compiled.replay_compiled(qm.Cluster(ens), [0.0, 1.0])


# ---- what it refuses -----------------------------------------------------------------------
def test_unknown_backend_names_the_choices():
    with pytest.raises(ValueError, match="backend='tpu' is unknown.*gpu"):
        qm.simulate(RULES["delay"], rate=100.0, requests=10_000, backend="tpu")


def test_gpu_backend_without_a_gpu_says_how_to_get_one():
    from qmodel.sim.compiled import gpu_present
    if gpu_present():
        pytest.skip("a GPU (or the CUDA simulator) is present")
    with pytest.raises(ValueError, match="NUMBA_ENABLE_CUDASIM"):
        qm.simulate(RULES["delay"], rate=100.0, requests=10_000, backend="gpu")


# ---- the CUDA target -----------------------------------------------------------------------
CUDA_SCRIPT = textwrap.dedent("""
    import json, warnings
    import numpy as np
    import qmodel as qm
    warnings.simplefilter("ignore")
    aff = qm.ServiceTime.affine
    node = qm.Node(aff(2e-3, 0.3e-3, jitter=("gamma", 0.4)), max_batch_size=8,
                   max_queue_delay=1e-3, preferred_batch_sizes=(4, 8), instances=2,
                   max_queue_size=20)
    cluster = qm.Cluster(node, count=3, router="least_outstanding")
    ahead = qm.Node(node.service, max_batch_size=8, max_queue_delay=1e-3,
                    preferred_batch_sizes=(4, 8), instances=2, prefetch=0.5,
                    drift=qm.Drift(0.05, 0.01, 0.5))     # drift's steps on both targets too
    prefetch = qm.Cluster(ahead, count=2, router="least_outstanding")
    plain = qm.Node(node.service, max_batch_size=4, overhead=0.2e-3)
    ensemble = qm.Cluster(qm.Ensemble({"pre": plain, "model": ahead, "post": plain},
                                      [("pre", "model"), ("model", "post")]),
                          count=2, router="round_robin")
    out = {}
    for name, system in (("node", node), ("cluster", cluster), ("prefetch", prefetch),
                         ("ensemble", ensemble)):
        capacity = (qm.Cluster(system) if name == "node" else system).capacity
        runs = [qm.simulate(system, rate=0.8 * capacity, requests=REQUESTS, replicas=3,
                            seed=9, backend=b)
                for b in ("cpu", "gpu")]
        out[name] = {b: [r.p50, r.p99, r.mean, r.utilization, r.rejection_fraction,
                         r.accuracy.simulation.backend, r._counts.tolist()]
                         + [s.p99 for s in (r.stages or {}).values()]
                     for b, r in zip(("cpu", "gpu"), runs)}
    times = np.cumsum(np.random.default_rng(1).exponential(1 / 3000.0, 150))
    reps = [qm.sim.compiled.replay_compiled(cluster, times, 3, b)
            for b in ("cpu", "gpu")]
    out["replay"] = [np.nan_to_num(r["sojourn"], nan=-1).tolist() for r in reps]
    print(json.dumps(out))
""")


def _run_cuda(requests, env_extra):
    env = {**os.environ, **env_extra}
    script = "import qmodel.sim.compiled\n" + CUDA_SCRIPT.replace("REQUESTS", str(requests))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    import json
    return json.loads(done.stdout.strip().splitlines()[-1])


def _check_cuda(out, exact):
    """One rule, one generator: the same replicas count the same histogram. On a real GPU
    the device's log, exp and cos may differ from the CPU's in the last bit, so there the
    figures agree to rounding rather than bit for bit."""
    for name in ("node", "cluster", "prefetch", "ensemble"):
        cpu, gpu = out[name]["cpu"], out[name]["gpu"]
        assert cpu[5] == "cpu" and gpu[5] == "gpu"
        assert len(cpu) == (10 if name == "ensemble" else 7), name      # the stages' p99
        values = cpu[:5] + cpu[7:], gpu[:5] + gpu[7:]
        if exact:
            assert gpu[6] == cpu[6], name
            assert values[1] == pytest.approx(values[0], rel=1e-12), name
        else:
            assert values[1] == pytest.approx(values[0], rel=2e-3, abs=1e-4), name
    if exact:
        assert out["replay"][0] == out["replay"][1]
    else:
        np.testing.assert_allclose(out["replay"][0], out["replay"][1], rtol=1e-9)


def test_cuda_target_under_the_simulator_counts_what_the_cpu_counts():
    _check_cuda(_run_cuda(1_500, {"NUMBA_ENABLE_CUDASIM": "1"}), exact=True)


@pytest.mark.gpu
def test_cuda_target_on_a_gpu_counts_what_the_cpu_counts():
    from qmodel.sim.compiled import gpu_present
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" or not gpu_present():
        pytest.skip("no GPU: the CUDA target runs under the simulator in the test above")
    _check_cuda(_run_cuda(300_000, {}), exact=False)


# ---- defects found by review -----------------------------------------------------------------
def test_a_trace_replayed_in_part_is_planned_on_the_part():
    """A Trace longer than ``requests``: the replicas, phase and cool-down come from the
    arrivals replayed, as in the reference engines (planned on the whole trace's rate, the
    compiled engine cut 100 short replicas where the reference cut 8, and read p99 10% low)."""
    node = qm.Node(AFF(2e-3, 0.3e-3), max_batch_size=8, max_queue_delay=1e-3)
    head = np.arange(60_000) / (0.8 * node.capacity)          # deterministic, then a long gap
    times = np.concatenate([head, head[-1] + 1.0 + np.arange(5) * 100.0])
    got = qm.simulate(node, arrivals=qm.Trace(times), requests=60_000, engine="compiled")
    ref = qm.simulate(node, arrivals=qm.Trace(times), requests=60_000, engine="lookahead")
    assert got.accuracy.simulation.replicas == ref.accuracy.simulation.replicas
    assert got.p99 == pytest.approx(ref.p99, rel=2 * got.resolution)
    assert got.mean == pytest.approx(ref.mean, rel=1e-6)      # the reference keeps float32


def test_a_large_queue_limit_costs_no_memory_until_the_queue_grows():
    node = qm.Node(AFF(2e-3, 0.3e-3), max_batch_size=8, max_queue_size=100_000_000)
    got = qm.simulate(node, rate=0.3 * node.capacity, requests=50_000, seed=1,
                      engine="compiled")
    ref = qm.simulate(node, rate=0.3 * node.capacity, requests=50_000, seed=1, engine="events")
    assert got.p99 == pytest.approx(ref.p99, rel=0.05)


def test_queues_that_outgrow_their_room_are_rerun_with_more(monkeypatch):
    """Queues that outgrow the first room (made small here) repeat the run with four times
    the room, until they fit, and give the same answer as with room to spare."""
    from qmodel.sim import compiled

    node = qm.Node(AFF(1e-3, 0.1e-3), max_batch_size=4, instances=2)
    kw = dict(rate=0.9 * node.capacity, requests=200_000, seed=2, engine="compiled")
    roomy = qm.simulate(node, **kw)
    calls = []
    run = compiled._run
    monkeypatch.setattr(compiled, "FIRST_QUEUE_ROOM", 2)
    monkeypatch.setattr(compiled, "_run", lambda *a, **k: calls.append(a[-1]) or run(*a, **k))
    tight = qm.simulate(node, **kw)
    assert calls[0] == 16 and len(calls) >= 2 and calls[1] == 64     # 4 B, then grown
    assert tight.p99 == roomy.p99 and tight.mean == roomy.mean


def test_one_section_beyond_the_bins_does_not_lose_the_run():
    """A section's p99 past the last bin (1e5 s) leaves the CI half-width out; the pooled
    quantiles inside the bins are still answered."""
    node = qm.Node(AFF(60.0, jitter="exponential"))
    with pytest.warns(qm.ShortRunWarning):
        r = qm.simulate(node, rate=0.99995 / 60.0, requests=2_000_000, seed=1,
                        engine="compiled")
    assert r.p50 > 0 and r.accuracy.simulation.p99_half_width is None


def test_histogram_cdf_and_quantile_invert_each_other_at_every_level():
    node = qm.Node(AFF(1e-3, jitter="exponential"))
    r = qm.simulate(node, rate=800.0, requests=200_000, seed=4, engine="compiled")
    levels = np.linspace(0.001, 0.999, 999)
    assert np.all(r.cdf(r.quantile(levels)) >= levels)


def test_deterministic_arrivals_and_service_with_a_queue_limit_plan_their_replicas():
    node = qm.Node(qm.ServiceTime.table({1: 3.85527e-3, 9: 10.0237e-3}), max_batch_size=8,
                   max_queue_delay=1e-4, preferred_batch_sizes=(2, 4), instances=2,
                   max_queue_size=32)
    for engine in ("compiled", "events"):
        r = qm.simulate(node, arrivals=qm.Renewal(1.3 * node.capacity, 0.0),
                        requests=100_000, seed=8, engine=engine)
        assert 0.2 < r.rejection_fraction < 0.3


@pytest.mark.parametrize("kwargs,message", [
    (dict(engine="lookahead", backend="cpu"), "backend='cpu' runs the compiled engine; "
                                              "engine='lookahead' runs on backend='numpy'"),
    (dict(engine="compiled", backend="numpy"), "engine='compiled' runs on backend='cpu'"),
])
def test_engine_and_backend_that_do_not_go_together_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        qm.simulate(RULES["delay"], rate=100.0, requests=10_000, **kwargs)


def test_traffic_on_the_compiled_backends_is_refused_by_name():
    with pytest.raises(ValueError, match="does not simulate a Traffic yet"):
        qm.simulate(RULES["delay"], arrivals=qm.Traffic.constant(100.0, 10.0), backend="cpu")


def test_replay_of_an_ensemble_says_what_runs_it():
    ens = qm.Ensemble({"a": RULES["delay"], "b": RULES["greedy"]})
    with pytest.raises(ValueError, match="not an Ensemble"):
        qm.replay(ens, [0.0, 0.001])
