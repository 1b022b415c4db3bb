"""The router registry: every policy carries its simulator dispatch, its predict model and
that model's domain, and everything that lists routers reads them from here."""

import numpy as np
import pytest

import qmodel as qm
from qmodel.cli import build_parser
from qmodel.stationary import CLUSTER_MODELS
from qmodel.routers import COMPARED_ROUTERS, ROUTER_NAMES, ROUTERS, router_policy

NODE = qm.Node(qm.ServiceTime.affine(1e-3, 0.2e-3), max_batch_size=8)


@pytest.mark.parametrize("name", ROUTER_NAMES)
def test_every_name_builds_a_cluster_and_has_a_model(name):
    cluster = qm.Cluster(NODE, count=4, router=name, choices=3 if name == "power_of_d" else None)
    policy = cluster.router.kind
    assert policy is router_policy(name)
    assert policy.model in CLUSTER_MODELS
    assert (cluster.shares is not None) == policy.static


@pytest.mark.parametrize("policy", ROUTERS.values(), ids=list(ROUTERS))
def test_every_policy_dispatches_in_the_simulator(policy):
    router = qm.Cluster(NODE, count=4, router=policy.example).router
    rng = np.random.default_rng(0)
    if policy.static:
        nodes = policy.assign(router, np, rng, 4, (3, 50))
        assert nodes.shape == (3, 50) and nodes.min() >= 0 and nodes.max() < 4
    else:
        outstanding = np.array([[3, 0, 5, 2], [1, 1, 1, 1]])
        ties = rng.integers(0, 1 << 16, (2, policy.tie_width(router, 4)))
        chosen = policy.choose(router, np, rng, outstanding, ties)
        assert chosen.shape == (2,) and 0 <= chosen.min() and chosen.max() < 4
        if policy.name == "least_outstanding":
            assert chosen[0] == 1                      # the node with nothing outstanding


def test_the_domain_says_why_predict_declines():
    two = qm.Node(NODE.service, max_batch_size=8, instances=2, max_queue_size=16)
    cluster = qm.Cluster(two, count=4, router="least_outstanding")
    why = cluster.router.kind.unmodelled(cluster, 0.5, 1.0)
    assert "over nodes of several instances" in why and "max_queue_size 16" in why
    with pytest.raises(NotImplementedError) as err:
        qm.predict(cluster, rate=0.5 * cluster.capacity, fallback="raise")
    assert str(err.value) == why
    few = qm.Cluster(NODE, count=4, router="power_of_two")
    assert ROUTERS["power_of_d"].unmodelled(few, 0.9, 1.0) is not None
    assert ROUTERS["round_robin"].unmodelled(few, 0.9, 1.0) is None


def test_the_cli_and_compare_read_the_registry():
    action = next(a for a in build_parser()._subparsers._group_actions[0].choices["simulate"]
                  ._actions if "--router" in a.option_strings)
    assert tuple(action.choices) == ROUTER_NAMES
    rows = qm.compare_routers(NODE, 4, rate=0.5 * 4 * NODE.capacity)
    assert tuple(r.router for r in rows) == COMPARED_ROUTERS
    assert all(r.note == router_policy(r.router).summary for r in rows if r.predicted)


def test_an_unknown_router_names_the_known_ones():
    with pytest.raises(ValueError, match="'round_robin'"):
        qm.Cluster(NODE, count=2, router="fastest")


def test_power_of_d_beyond_two_is_outside_the_measured_domain():
    """Issue 35, defect 3: the mean-field family was measured at d = 2 only, so d = 7 of 8
    (-17.8% on p95 against 2 M-request simulations) and d = 15 of 16 (-43.3%) are answered
    only as extrapolations, and by default predict simulates them."""
    node = qm.Node(qm.ServiceTime.affine(1e-3), max_batch_size=1)
    two = qm.Cluster(node, count=8, router=qm.Router("power_of_d", choices=2))
    inside = qm.predict(two, rate=0.7 * two.capacity)
    assert inside.model == "cavity"
    assert inside.accuracy.approximation("outside_measured_domain") is None
    for d, n in ((7, 8), (15, 16)):
        cluster = qm.Cluster(node, count=n, router=qm.Router("power_of_d", choices=d))
        far = qm.predict(cluster, rate=0.7 * cluster.capacity, extrapolate=True)
        outside = far.accuracy.approximation("outside_measured_domain")
        assert outside is not None and f"choices {d} is outside 2-2" in outside.text
        with pytest.raises(NotImplementedError, match=f"choices {d} is outside"):
            qm.predict(cluster, rate=0.7 * cluster.capacity, fallback="raise")
