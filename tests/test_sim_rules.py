"""Triton's batching rules on small hand-made traces, through both engines.

The rules are the project's docs/triton-semantics.md.

Times are in milliseconds in the comments; service is deterministic so every number is exact.
"""

import numpy as np
import pytest

import qmodel as qm

ms = 1e-3
ENGINES = ["lookahead", "events"]


def node(base=5.0, per_item=0.0, **kw):
    return qm.Node(qm.ServiceTime.affine(base * ms, per_item * ms), **kw)


def run(system, times_ms, engine="events", seed=0):
    return qm.replay(system, np.asarray(times_ms, dtype=float) * ms, engine=engine, seed=seed)


@pytest.mark.parametrize("engine", ENGINES)
def test_lone_request_waits_exactly_the_delay(engine):
    # B=8, D=2: a request alone waits the whole delay although the instance is idle.
    r = run(node(base=1.0, max_batch_size=8, max_queue_delay=2 * ms), [0.0, 100.0], engine)
    assert r.sojourn == pytest.approx([3 * ms, 3 * ms], abs=1e-12)
    assert r.batch_start == pytest.approx([2 * ms, 102 * ms], abs=1e-12)


@pytest.mark.parametrize("engine", ENGINES)
def test_no_delay_dispatches_at_once(engine):
    r = run(node(base=1.0, max_batch_size=8), [0.0, 100.0], engine)
    assert r.sojourn == pytest.approx([1 * ms, 1 * ms], abs=1e-12)


@pytest.mark.parametrize("engine", ENGINES)
def test_full_batch_goes_at_once(engine):
    # B=4, D=10: the 4th arrival (t=0.3) completes a batch, which leaves then, not at t=10.
    r = run(node(base=5.0, max_batch_size=4, max_queue_delay=10 * ms), [0.0, 0.1, 0.2, 0.3],
            engine)
    assert r.batch_size.tolist() == [4]
    assert r.batch_start == pytest.approx([0.3 * ms], abs=1e-12)
    assert r.sojourn == pytest.approx((5.3 - np.array([0.0, 0.1, 0.2, 0.3])) * ms, abs=1e-12)


@pytest.mark.parametrize("engine", ENGINES)
def test_six_queued_with_preferred_four_gives_four_then_two(engine):
    # B=8, P={4}, D=10, S=5. Four requests form a preferred batch at 0.3 (busy until 5.3).
    # Six more arrive at 1.0..1.5. At 5.3 the delay is not exceeded (oldest waited 4.3 < 10),
    # so the largest preferred size that fits, 4, goes; the last two wait for their own delay
    # (1.4 + 10 = 11.4), although the instance is free again at 10.3.
    t = [0.0, 0.1, 0.2, 0.3, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5]
    r = run(node(max_batch_size=8, max_queue_delay=10 * ms, preferred_batch_sizes=(4,)), t,
            engine)
    assert r.batch_size.tolist() == [4, 4, 2]
    assert r.batch_start == pytest.approx([0.3 * ms, 5.3 * ms, 11.4 * ms], abs=1e-12)


@pytest.mark.parametrize("engine", ENGINES)
def test_expired_delay_ignores_preferred_sizes(engine):
    # As above but D=1: at 5.3 the oldest of the six waited 4.3 >= 1, so all six go together
    # (min(q, B)), not the preferred 4.
    t = [0.0, 0.1, 0.2, 0.3, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5]
    r = run(node(max_batch_size=8, max_queue_delay=1 * ms, preferred_batch_sizes=(4,)), t,
            engine)
    assert r.batch_size.tolist() == [4, 6]
    assert r.batch_start == pytest.approx([0.3 * ms, 5.3 * ms], abs=1e-12)


@pytest.mark.parametrize("engine", ENGINES)
def test_instance_freeing_after_the_delay_expired_dispatches_at_once(engine):
    # D=1, S=5. A (t=0) waits its delay and runs 1..6. B (t=2) passes its deadline (3) while
    # the instance is busy; at 6 the instance frees and B leaves immediately.
    r = run(node(max_batch_size=8, max_queue_delay=1 * ms), [0.0, 2.0], engine)
    assert r.batch_start == pytest.approx([1 * ms, 6 * ms], abs=1e-12)
    assert r.sojourn[1] == pytest.approx(9 * ms, abs=1e-12)


@pytest.mark.parametrize("engine", ENGINES)
def test_greedy_batching_collects_what_queued_while_busy(engine):
    # D=0: A runs 0..5; B, C, D queue meanwhile and leave together at 5.
    r = run(node(max_batch_size=8), [0.0, 1.0, 2.0, 3.0], engine)
    assert r.batch_size.tolist() == [1, 3]
    assert r.sojourn == pytest.approx([5 * ms, 9 * ms, 8 * ms, 7 * ms], abs=1e-12)


@pytest.mark.parametrize("engine", ENGINES)
def test_max_batch_size_caps_a_long_queue(engine):
    # B=4, D=0: ten requests queue behind a running batch and leave as 4, 4, 2.
    t = [0.0] + list(np.linspace(1.0, 2.0, 10))
    r = run(node(max_batch_size=4), t, engine)
    assert r.batch_size.tolist() == [1, 4, 4, 2]
    assert r.batch_start == pytest.approx([0, 5 * ms, 10 * ms, 15 * ms], abs=1e-12)


@pytest.mark.parametrize("engine", ENGINES)
def test_instances_share_one_queue(engine):
    # c=2, B=1, S=5: A and B start at once on the two instances; C waits for the first to free.
    r = run(node(max_batch_size=1, instances=2), [0.0, 1.0, 2.0], engine)
    assert r.sojourn == pytest.approx([5 * ms, 5 * ms, 8 * ms], abs=1e-12)


@pytest.mark.parametrize("engine", ENGINES)
def test_size_dependent_service(engine):
    # S(k) = 2 + 1*k: a batch of 3 takes 5.
    r = run(node(base=2.0, per_item=1.0, max_batch_size=3, max_queue_delay=10 * ms),
            [0.0, 1.0, 2.0], engine)
    assert r.sojourn == pytest.approx([7 * ms, 6 * ms, 5 * ms], abs=1e-12)


def test_full_queue_rejects():
    # max_queue_size=2, c=1, B=1, S=5: A runs 0..5; B and C fill the queue; D (t=3) is
    # rejected; at 5 B starts, freeing a place that E (t=6) takes.
    r = run(node(max_batch_size=1, max_queue_size=2), [0.0, 1.0, 2.0, 3.0, 6.0])
    assert r.node.tolist() == [0, 0, 0, -1, 0]
    assert np.isnan(r.sojourn[3])
    assert r.sojourn[[0, 1, 2, 4]] == pytest.approx(np.array([5, 9, 13, 14]) * ms, abs=1e-12)


# short replicas at 97% load bias the tail, and simulate says so; this test compares
# rejections and the two tails' order, which that bias does not change
@pytest.mark.filterwarnings("ignore:.*replicas leave")
def test_rejections_only_with_a_finite_queue():
    base = dict(max_batch_size=8, max_queue_delay=1 * ms)
    heavy = 0.97 * node(**base).capacity
    unlimited = qm.simulate(node(**base), rate=heavy, requests=50_000, seed=2,
                            engine="events")
    limited = qm.simulate(node(max_queue_size=8, **base), rate=heavy, requests=50_000, seed=2)
    assert unlimited.rejection_fraction == 0.0
    assert limited.rejection_fraction > 0.01
    assert limited.p99 < unlimited.p99


def test_least_outstanding_picks_the_least_loaded_node():
    # Three nodes, B=1, S=5. Requests at 0, 0.1, 0.2 must land on three different nodes; the
    # fourth (t=0.3) finds one outstanding everywhere; at t=6 all are idle again.
    cluster = qm.Cluster(node(max_batch_size=1), count=3, router="least_outstanding")
    firsts = set()
    for seed in range(12):
        r = run(cluster, [0.0, 0.1, 0.2, 0.3], seed=seed)
        assert sorted(r.node[:3].tolist()) == [0, 1, 2]
        firsts.add(int(r.node[0]))
    assert firsts == {0, 1, 2}          # ties go to every node, not always the first


def test_least_outstanding_counts_queued_and_in_service():
    # Two nodes, B=2 (a batch leaves when 2 are queued), long delay. At t=0.3 one node has a
    # batch of 2 in service and the other 1 queued: counting in-service requests sends the
    # request to the second node. Every later choice is forced the same way, so each node gets
    # three; a router blind to in-service requests would pile onto the busy node.
    cluster = qm.Cluster(node(max_batch_size=2, max_queue_delay=50 * ms), count=2,
                         router="least_outstanding")
    r = run(cluster, [0.0, 0.1, 0.2, 0.3, 0.4, 0.5])
    # Each node receives alternately while counts tie or differ by one.
    counts = np.bincount(r.node, minlength=2)
    assert counts.tolist() == [3, 3]


@pytest.mark.parametrize("router", ["power_of_d", "least_outstanding"])
def test_power_of_d_with_d_equal_n_is_least_outstanding(router):
    kw = dict(choices=3) if router == "power_of_d" else {}
    cluster = qm.Cluster(node(max_batch_size=1), count=3, router=router, **kw)
    for seed in range(5):
        r = run(cluster, [0.0, 0.1, 0.2], seed=seed)
        assert sorted(r.node.tolist()) == [0, 1, 2]


def test_power_of_d_samples_d_distinct_nodes_uniformly():
    """Node 0 alone is idle: it is chosen exactly when it is among the d sampled, with
    probability d / N for d distinct nodes (1 - (1 - 1/N)^d were they drawn with
    replacement: 0.4375 against 0.5 for d = 2 of 4)."""
    from qmodel.routers import ROUTERS
    from qmodel.sim.backend import get_backend

    bk = get_backend("numpy", 7)
    replicas, N = 200_000, 4
    outstanding = np.ones((replicas, N), dtype=np.int64)
    outstanding[:, 0] = 0
    for d in (1, 2, 3):
        router = qm.Router("power_of_d", choices=d)
        ties = bk.random_bits16((replicas, d)).astype(np.int64)
        chosen = ROUTERS["power_of_d"].choose(router, np, bk.rng, outstanding, ties)
        share = np.mean(chosen == 0)
        sd = np.sqrt(d / N * (1 - d / N) / replicas)
        assert abs(share - d / N) < 4 * sd, (d, share)
        # the others, when chosen, equally often
        others = np.bincount(chosen[chosen != 0], minlength=N)[1:]
        assert np.ptp(others) < 4 * np.sqrt(others.mean())


def test_round_robin_cycles():
    cluster = qm.Cluster(node(max_batch_size=1), count=3, router="round_robin")
    r = run(cluster, np.arange(9) * 10.0)
    assert np.all(np.diff(r.node) % 3 == 1)


def test_weighted_random_split_follows_the_weights():
    cluster = qm.Cluster(node(base=0.1, max_batch_size=1), count=2, router="random",
                         weights=[9, 1])
    r = run(cluster, np.arange(20_000) * 1.0, seed=4)
    share = np.mean(r.node == 0)
    sd = np.sqrt(0.9 * 0.1 / 20_000)
    assert abs(share - 0.9) < 4 * sd


def test_replicas_are_longer_for_large_jittery_batches():
    # R = load^2 (ca^2 + load B cs^2) / (1 - load)^2: 361 for M/D/1 at 95% load, and B = 64
    # with lognormal cv 0.3 relaxes 6.5 times slower (measured in validation/replica_bias.py)
    from qmodel.sim.replicas import arrivals_per_replica_node, relaxation_arrivals
    det = qm.Node(qm.ServiceTime.affine(2e-3, 1e-4), max_batch_size=64)
    jittery = qm.Node(qm.ServiceTime.affine(2e-3, 1e-4, jitter=("lognormal", 0.3)),
                      max_batch_size=64)
    assert relaxation_arrivals(qm.Cluster(det), 0.95 * det.capacity) == pytest.approx(361.0)
    slow = relaxation_arrivals(qm.Cluster(jittery), 0.95 * jittery.capacity)
    assert slow == pytest.approx(0.95 ** 2 * (1 + 0.95 * 64 * 0.09) / 0.05 ** 2)
    assert arrivals_per_replica_node(qm.Cluster(jittery), 0.95 * jittery.capacity) \
        == pytest.approx(100 * slow)
    # smoother arrivals relax faster; light load keeps the floor of 2,000
    assert relaxation_arrivals(qm.Cluster(det), 0.95 * det.capacity, arrival_scv=0.5) \
        == pytest.approx(361.0 / 2)
    assert arrivals_per_replica_node(qm.Cluster(det), 0.3 * det.capacity) == 2_000
    # a finite queue of Q bounds it by Q^2 / spread, also overloaded; a dynamic router pools
    # the N nodes into one queue: R / N per node
    lossy = qm.Node(qm.ServiceTime.affine(2e-3, 1e-4), max_batch_size=64, max_queue_size=16)
    assert relaxation_arrivals(qm.Cluster(lossy), 1.5 * lossy.capacity) == pytest.approx(9.0)
    assert relaxation_arrivals(qm.Cluster(lossy), 0.95 * lossy.capacity) == pytest.approx(256)
    pooled = qm.Cluster(det, count=4, router="least_outstanding")
    assert relaxation_arrivals(pooled, 0.95 * pooled.capacity) == pytest.approx(361.0 / 4)
    with pytest.raises(ValueError, match="rate must be a positive number"):
        relaxation_arrivals(qm.Cluster(det), -1.0)
    with pytest.raises(ValueError, match="arrival_scv must be a finite number >= 0"):
        relaxation_arrivals(qm.Cluster(det), 100.0, arrival_scv=float("nan"))
    r = qm.simulate(jittery, rate=0.95 * jittery.capacity, requests=2_000_000, seed=1)
    sim = r.accuracy.simulation                                   # 100 R ~ 234,000 arrivals
    assert (sim.engine, sim.backend, sim.replicas) == ("lookahead", "numpy", 8)


def test_too_few_requests_for_the_transient_warn_and_say_how_many():
    node = qm.Node(qm.ServiceTime.affine(2e-3, 1e-4, jitter=("lognormal", 0.3)),
                   max_batch_size=64)
    with pytest.warns(qm.ShortRunWarning, match=r"requests=100000 is too short: 8 replicas "
                      r"leave 12,500 arrivals .* ask for at least 1,869,"):
        qm.simulate(node, rate=0.95 * node.capacity, requests=100_000, seed=1)
    with pytest.warns(qm.ShortRunWarning, match="lower replicas to 4 or ask for at least "
                      "7,476,480 requests"):
        qm.simulate(node, rate=0.95 * node.capacity, requests=1_000_000, seed=1, replicas=32)


def test_mixed_cluster_samples_each_node_only_up_to_its_own_batch():
    """A node whose table is measured at size 1 only (max_batch_size 1) beside a node of
    batches of 8: the sampler's tables span 8, but the first node's law is never evaluated
    past its own batch size (it raised "S(k) for k = 2..8 is unknown" for the whole run)."""
    one = qm.Node(qm.ServiceTime.table({1: 2e-3}))
    batching = qm.Node(qm.ServiceTime.affine(1e-3, 1e-4), max_batch_size=8,
                       max_queue_delay=1e-3)
    cluster = qm.Cluster([one, batching], router="least_outstanding")
    rate = 0.5 * cluster.capacity
    r = qm.simulate(cluster, rate=rate, requests=50_000, seed=3)
    assert r.throughput == pytest.approx(rate, rel=0.05) and r.rejection_fraction == 0
    assert 1 <= r.mean_batch_size <= 8 and 0 < r.utilization < 1
    # no request is served faster than its fastest batch: the batching node's S(1) = 1.1 ms
    assert r.quantile(1e-6) >= 1.1e-3 * (1 - 1e-6)
    # both nodes serve: batches of one (the table's node, and the batcher's singles) and larger
    assert r.batch_size_distribution[1] > 0 and max(r.batch_size_distribution) > 1
