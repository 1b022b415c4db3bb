"""Instances that slow each other (``Node.slowdown``): S(k) times the factor for the number of
instances busy at a batch's start, in every engine alike, and from a profile of copies run
together (``Profile.slowdown``)."""

import numpy as np
import pytest

import qmodel as qm
from qmodel.profiling import Profile

pytest.importorskip("numba")

AFF = qm.ServiceTime.affine
MS = 1e-3


def test_a_batch_starting_beside_a_busy_instance_takes_longer():
    """B 1, two instances, 2 ms alone, 1.5 times as long beside another: the first request
    runs alone (2 ms); the second starts while the first runs (3 ms); the third starts after
    both finished (2 ms again)."""
    node = qm.Node(AFF(2 * MS), instances=2, slowdown=(1.0, 1.5))
    times = [0.0, 1 * MS, 10 * MS]
    for engine in ("lookahead", "events", "compiled"):
        got = qm.replay(node, times, engine=engine)
        assert got.sojourn == pytest.approx([2 * MS, 3 * MS, 2 * MS], rel=1e-12), engine


@pytest.mark.parametrize("system", [
    qm.Node(AFF(2 * MS, 0.3 * MS), max_batch_size=4, max_queue_delay=1 * MS, instances=3,
            slowdown=(1.0, 1.3, 1.7)),
    qm.Cluster(qm.Node(AFF(1 * MS, 0.2 * MS), max_batch_size=8, instances=2,
                       slowdown=(1.0, 1.4)), count=3, router="round_robin"),
], ids=["node", "cluster"])
def test_every_engine_serves_the_same_requests_alike(system):
    cluster = system if isinstance(system, qm.Cluster) else qm.Cluster(system)
    times = np.cumsum(np.random.default_rng(3).exponential(1 / (0.8 * cluster.capacity),
                                                            4000))
    # (the look-ahead engine replays one node only)
    engines = ("lookahead", "events", "compiled") if len(cluster.nodes) == 1 else (
        "events", "compiled")
    reps = {e: qm.replay(system, times, seed=1, engine=e) for e in engines}
    for engine in engines[1:]:
        np.testing.assert_allclose(reps[engine].sojourn, reps[engines[0]].sojourn,
                                   rtol=1e-12, err_msg=engine)
    plain = qm.replay(qm.Cluster([qm.Node(n.service, max_batch_size=n.max_batch_size,
                                          max_queue_delay=n.max_queue_delay,
                                          instances=n.instances) for n in cluster.nodes],
                                 router=cluster.router), times, seed=1, engine="compiled")
    assert np.mean(reps["compiled"].sojourn) > 1.05 * np.mean(plain.sojourn)


def test_factors_of_one_change_nothing():
    node = qm.Node(AFF(2 * MS, 0.3 * MS, jitter=("lognormal", 0.3)), max_batch_size=4,
                   instances=2)
    same = qm.Node(node.service, max_batch_size=4, instances=2, slowdown=(1.0, 1.0))
    times = np.cumsum(np.random.default_rng(4).exponential(1 / (0.7 * node.capacity), 3000))
    for engine in ("lookahead", "compiled"):
        a = qm.replay(node, times, seed=5, engine=engine).sojourn
        b = qm.replay(same, times, seed=5, engine=engine).sojourn
        np.testing.assert_array_equal(a, b)


def test_capacity_counts_every_instance_slowed():
    node = qm.Node(AFF(2 * MS), max_batch_size=1, instances=4, slowdown=(1.0, 1.5, 2.0))
    assert node.slowdown_at(4) == 2.0
    assert node.capacity == pytest.approx(4 / (2 * MS * 2.0))
    assert "slowdown=(1, 1.5, 2)" in node.describe()


def test_predict_simulates_and_says_why():
    node = qm.Node(AFF(2 * MS, 0.3 * MS), max_batch_size=4, max_queue_delay=1 * MS,
                   instances=2, slowdown=(1.0, 1.3))
    with pytest.raises(NotImplementedError, match="Node.slowdown"):
        qm.predict(node, rate=0.7 * node.capacity, fallback="raise")
    got = qm.predict(node, rate=0.7 * node.capacity)
    assert got.model == "simulation" and "simulation fallback" in got.method
    plain = qm.predict(qm.Node(node.service, max_batch_size=4, max_queue_delay=1 * MS,
                               instances=2), rate=0.7 * node.capacity)
    assert got.p99 > plain.p99


def test_an_ensemble_stage_that_slows_runs_alike_in_both_ensemble_engines():
    stage = qm.Node(AFF(1 * MS, 0.2 * MS), max_batch_size=4, max_queue_delay=0.5 * MS,
                    instances=2, slowdown=(1.0, 1.6))
    ens = qm.Ensemble({"a": stage, "b": qm.Node(AFF(0.5 * MS), max_batch_size=8)},
                      [("a", "b")])
    times = np.cumsum(np.random.default_rng(6).exponential(1 / (0.7 * ens.capacity), 20_000))
    ref = qm.simulate(ens, arrivals=qm.Trace(times), engine="lookahead", replicas=1)
    got = qm.simulate(ens, arrivals=qm.Trace(times), engine="compiled", replicas=1)
    assert got.mean == pytest.approx(ref.mean, rel=1e-6)     # the reference keeps float32
    assert got.stages["a"].utilization == pytest.approx(ref.stages["a"].utilization, rel=1e-9)


@pytest.mark.parametrize("slowdown, message", [
    ((1.0, 1.2), "needs instances >= 2"),
    ((1.1, 1.2), "first factor .* must be 1"),
    ((1.0, 0.0), "positive number"),
    ((1.0, float("nan")), "positive number"),
    ((1.0,), "give 2 to instances=2"),
    ((1.0, 1.2, 1.3), "give 2 to instances=2"),
    ("fast", "factors on S\\(k\\)"),
])
def test_bad_slowdowns_name_the_fix(slowdown, message):
    instances = 1 if message.startswith("needs") else 2
    with pytest.raises(ValueError, match=message):
        qm.Node(AFF(1 * MS), instances=instances, slowdown=slowdown)


def test_a_profile_of_copies_gives_the_slowdown():
    profile = Profile("w", "cpu", {}, {1: {1: [1.0], 4: [2.0]}, 2: {1: [1.4], 4: [2.8]}})
    assert profile.slowdown(3) == pytest.approx((1.0, 1.4, 1.4))
    node = qm.Node(profile.service(1), max_batch_size=4, instances=3,
                   slowdown=profile.slowdown(3))
    assert node.slowdown_at(2) == pytest.approx(1.4)
    with pytest.raises(ValueError, match="concurrency 1 only"):
        Profile("w", "cpu", {}, {1: {1: [1.0]}}).slowdown(2)
    with pytest.raises(ValueError, match="instances=1"):
        profile.slowdown(1)


def test_a_profile_without_one_copy_alone_names_the_fix():
    with pytest.raises(ValueError, match="profile one copy alone too"):
        Profile("w", "cpu", {}, {2: {1: [1.0]}, 4: {1: [2.0]}}).slowdown(2)
    with pytest.raises(ValueError, match="must be positive"):
        Profile("w", "cpu", {}, {1: {1: [0.0]}, 2: {1: [1.0]}}).slowdown(2)
