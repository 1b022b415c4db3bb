"""Least outstanding and power of two over batching nodes of several instances (issue 35):
the round-robin surrogate, its measured families and where they answer."""

import pytest

import qmodel as qm
from qmodel.theory.batch import batch_node

# S(k) = 1.9 + 0.1 k ms: growth 0.05 S(1) per request, inside both families' domains
SVC = qm.ServiceTime.affine(1.9e-3, 0.1e-3)


def _cluster(router, nodes, instances, B, delay):
    node = qm.Node(SVC, max_batch_size=B, max_queue_delay=delay, instances=instances)
    return qm.Cluster(node, count=nodes, router=router)


@pytest.mark.parametrize("router, nodes, instances, B, family", [
    ("least_outstanding", 6, 4, 4, "least_outstanding_several_delay"),
    ("power_of_two", 8, 4, 16, "power_of_two_several_delay"),
    ("round_robin", 4, 4, 16, "round_robin_several_delay")])
def test_routers_over_several_instances_are_predicted_within_stated_error(
        router, nodes, instances, B, family):
    """Before, predict had no model here (dynamic routers) or none inside a measured domain
    (round robin) and simulated; now each answers inside its family's domain, and its
    stated p99 range meets the simulated p99's 95% CI."""
    cluster = _cluster(router, nodes, instances, B, 2e-3)
    rate = 0.6 * cluster.capacity
    r = qm.predict(cluster, rate=rate, fallback="raise")
    assert r.accuracy.exactness == "approximation"
    assert [m.family for m in r.accuracy.measured][0] == family
    if router != "round_robin":
        assert r.model == "levelled_as_round_robin"
        assert r.accuracy.approximation("levelled_as_round_robin") is not None
    assert r.throughput == pytest.approx(rate)
    low, high = r.accuracy.p99_bounds(r.p99)
    sim = qm.simulate(cluster, rate=rate, requests=1_000_000, seed=2, backend="cpu")
    s_low, s_high = sim.ci(0.99)
    assert s_low <= high and s_high >= low, (r.p99, (low, high), sim.p99, (s_low, s_high))


def test_the_surrogate_is_the_node_under_round_robin_over_the_nodes_looked_at():
    for router, over in (("least_outstanding", 6), ("power_of_two", 2)):
        cluster = _cluster(router, 6, 4, 16, 2e-3)
        rate = 0.5 * cluster.capacity
        r = qm.predict(cluster, rate=rate, fallback="raise", extrapolate=True)
        alone = batch_node(cluster.nodes[0], rate / 6, arrival_scv=1 / over)
        assert r.p99 == pytest.approx(alone.p99, rel=1e-12)
        assert r.accuracy.approximation("levelled_as_round_robin").value == \
            pytest.approx(1 / over)


def test_where_the_router_reacts_to_the_nodes_the_surrogate_does_not_answer():
    """Service that grows fast with the batch, behind least outstanding with a delay: the grid
    measured the surrogate up to 70% low there, so it lies outside the peeled domain."""
    node = qm.Node(qm.ServiceTime.affine(1.2e-3, 0.8e-3), max_batch_size=64,
                   max_queue_delay=2e-3, instances=8)
    cluster = qm.Cluster(node, count=8, router="least_outstanding")
    with pytest.raises(NotImplementedError, match="least_outstanding_several_delay"):
        qm.predict(cluster, rate=0.6 * cluster.capacity, fallback="raise")
    kept = qm.predict(cluster, rate=0.6 * cluster.capacity, fallback="raise",
                      extrapolate=True)
    assert kept.accuracy.approximation("outside_measured_domain") is not None


def test_power_of_d_for_other_d_stays_outside_the_measured_domain():
    node = qm.Node(SVC, max_batch_size=16, max_queue_delay=2e-3, instances=4)
    cluster = qm.Cluster(node, count=8, router="power_of_d", choices=3)
    with pytest.raises(NotImplementedError, match="choices 3"):
        qm.predict(cluster, rate=0.6 * cluster.capacity, fallback="raise")


def test_size_considers_least_outstanding_over_nodes_of_several_instances():
    """The search ranked least outstanding over nodes of several instances by no model and
    left it out; it is now a candidate, and the plan names it."""
    plan = qm.size(SVC, rate=30_000, slo={"p99": 4e-3}, nodes=range(6, 9),
                   instances_per_gpu=(2, 4), max_batch_size=(4,),
                   max_queue_delay=(2e-3,), routers=("least_outstanding",), verify=False,
                   sharing="independent")
    assert plan.feasible, plan.reason
    assert plan.system.router.kind.name == "least_outstanding"
    assert plan.node.instances > 1
    assert "least_outstanding" in plan.summary()
    assert not any("no model answers" in n for n in plan.notes)
    assert not any("outside the measured domain" in n for n in plan.notes), plan.notes
    assert plan.predicted.model == "levelled_as_round_robin"
    assert not plan.alternatives[0].extrapolated
