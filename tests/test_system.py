"""The system description: good input builds, bad input gets an error naming field and fix."""

import numpy as np
import pytest

import qmodel as qm

SVC = qm.ServiceTime.affine(base=2.4e-3, per_item=0.54e-3)


# --- ServiceTime ------------------------------------------------------------------------------
def test_affine_mean_and_jitter():
    s = qm.ServiceTime.affine(base="3ms", per_item="250us", jitter=("lognormal", 0.3))
    assert s.mean(4) == pytest.approx(4e-3)
    assert (s.jitter, s.cv) == ("lognormal", 0.3)
    assert qm.ServiceTime.affine(1.0, jitter="exponential").cv == 1.0
    assert qm.ServiceTime.affine(1.0, jitter=("gamma", 0.5)).jitter == "gamma"


def test_table_interpolates_and_warns_when_extrapolating():
    t = qm.ServiceTime.table({1: 3.1e-3, 2: 3.6e-3, 4: 4.4e-3, 8: 6.7e-3})
    assert t.mean(3) == pytest.approx(4.0e-3)
    assert t.mean(8) == pytest.approx(6.7e-3)
    with pytest.warns(UserWarning, match="extrapolated"):
        assert t.mean(16) == pytest.approx(6.7e-3 + 8 * (6.7e-3 - 4.4e-3) / 4)
    with pytest.warns(UserWarning, match="extrapolated"):
        qm.Node(t, max_batch_size=16)


def test_empirical_resamples_measured_values():
    e = qm.ServiceTime.empirical({1: [1e-3, 3e-3], 4: [4e-3, 6e-3]})
    assert e.mean(1) == pytest.approx(2e-3)
    assert e.mean(4) == pytest.approx(5e-3)


def test_each_kind_is_a_small_subclass_with_every_field():
    from qmodel.system import AffineService, EmpiricalService, TableService
    a = qm.ServiceTime.affine(1e-3, 1e-4, jitter=("gamma", 0.5))
    t = qm.ServiceTime.table({1: 1e-3, 4: 2e-3})
    e = qm.ServiceTime.empirical({1: [1e-3, 3e-3]})
    for s, cls, kind in ((a, AffineService, "affine"), (t, TableService, "table"),
                         (e, EmpiricalService, "empirical")):
        assert isinstance(s, qm.ServiceTime) and type(s) is cls and s.kind == kind
        # the simulator and the solvers read these of any service time
        assert {"base", "per_item", "points", "samples", "jitter", "cv"} <= set(vars(s))
    assert (a.base, a.per_item, a.points, a.samples, a.jitter, a.cv) == \
        (1e-3, 1e-4, (), (), "gamma", 0.5)
    assert (t.base, t.points, t.jitter, t.cv) == (0.0, ((1, 1e-3), (4, 2e-3)), "deterministic",
                                                  0.0)
    assert e.jitter == "empirical" and e.samples == ((1, (1e-3, 3e-3)),)
    with pytest.raises(TypeError, match="ServiceTime.affine"):
        qm.ServiceTime(base=1e-3)


def test_service_times_are_equal_hashable_values():
    import dataclasses
    import pickle
    a = qm.ServiceTime.affine(1e-3, 1e-4, jitter=("gamma", 0.5))
    assert a == qm.ServiceTime.affine("1ms", 1e-4, jitter=("gamma", 0.5))
    assert hash(a) == hash(qm.ServiceTime.affine(1e-3, 1e-4, jitter=("gamma", 0.5)))
    assert a != qm.ServiceTime.affine(1e-3, 1e-4)
    # same field values, another kind: not equal
    assert qm.ServiceTime.table({1: 1e-3}) != qm.ServiceTime.empirical({1: [1e-3]})
    assert len({a, qm.ServiceTime.affine(1e-3, 1e-4, jitter=("gamma", 0.5))}) == 1
    assert pickle.loads(pickle.dumps(a)) == a
    assert dataclasses.replace(a, base=2e-3) == qm.ServiceTime.affine(2e-3, 1e-4, ("gamma", 0.5))
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.base = 2e-3


def test_describe_and_spread_of_each_kind():
    a = qm.ServiceTime.affine(1e-3, 1e-4, jitter=("gamma", 0.5))
    assert a.describe() == "1 ms + 0.1 ms x k, gamma jitter cv 0.5"
    assert qm.ServiceTime.affine(1e-3).describe() == "1 ms + 0 ms x k"
    t = qm.ServiceTime.table({1: 1e-3, 4: 2e-3}, jitter="exponential")
    assert t.describe() == "table 1:1ms, 4:2ms, exponential jitter cv 1"
    e = qm.ServiceTime.empirical({1: [1e-3, 3e-3], 4: [4e-3, 6e-3, 5e-3]})
    assert e.describe() == "empirical, k 1,4 (2-3 samples), mean 2-5 ms"
    f = qm.ServiceTime.empirical({k: [k * 1e-3] * 3 for k in range(1, 17)})
    assert f.describe() == "empirical, k 1-16 (3 samples each), mean 1-16 ms"
    assert (a.scv(8), t.scv(1)) == (0.25, 1.0)
    assert e.scv(1) == pytest.approx(0.25) and e.scv(3) == pytest.approx(2 / 3 / 25)
    assert e.scaled_samples(2) == pytest.approx([1.5e-3, 4.5e-3])    # mean(2) = 3 ms
    assert a.jitter_law.name == "gamma" and e.jitter_law is None


@pytest.mark.parametrize("kwargs, field", [
    (dict(base=-1e-3), "base"),
    (dict(base=0.0), "base"),
    (dict(base=1e-3, per_item=-1e-4), "per_item"),
    (dict(base=float("nan")), "base"),
    (dict(base=2400), "base"),                       # microseconds passed as seconds
    (dict(base="2 minutes"), "base"),
    (dict(base=1e-3, jitter="uniform"), "jitter"),
    (dict(base=1e-3, jitter="lognormal"), "lognormal"),   # cv missing
    (dict(base=1e-3, jitter=("gamma", -0.2)), "cv"),
    (dict(base=1e-3, jitter=("gamma", 300)), "cv"),
])
def test_bad_service_time(kwargs, field):
    with pytest.raises(ValueError, match=field):
        qm.ServiceTime.affine(**kwargs)


def test_wrong_unit_message_suggests_the_conversion():
    with pytest.raises(ValueError, match=r"0\.002.*from ms|'2ms'"):
        qm.Node(SVC, max_batch_size=8, max_queue_delay=2000)


@pytest.mark.parametrize("table, match", [
    ({}, "non-empty"),
    ({0: 1e-3, 2: 2e-3}, "batch size"),
    ({1: -1e-3, 2: 2e-3}, r"table\[1\]"),
    ({4: 1e-3}, "at least two"),
])
def test_bad_table(table, match):
    with pytest.raises(ValueError, match=match):
        qm.ServiceTime.table(table)


def test_bad_empirical():
    with pytest.raises(ValueError, match="no samples"):
        qm.ServiceTime.empirical({1: []})
    with pytest.raises(ValueError, match="positive"):
        qm.ServiceTime.empirical({1: [1e-3, -1e-3]})


# --- Node --------------------------------------------------------------------------------------
def test_node_defaults_and_units():
    n = qm.Node(SVC)
    assert (n.max_batch_size, n.max_queue_delay, n.preferred_batch_sizes, n.instances,
            n.max_queue_size) == (1, 0.0, (), 1, 0)
    n = qm.Node(SVC, max_batch_size=8, max_queue_delay="500us", preferred_batch_sizes=[8, 4])
    assert n.max_queue_delay == pytest.approx(5e-4)
    assert n.preferred_batch_sizes == (4, 8)
    assert qm.Node(SVC, max_batch_size=8).effective_preferred == (8,)


def test_capacity_uses_the_saturated_batch():
    # With a delay, an overloaded queue dispatches full batches of B.
    n = qm.Node(SVC, max_batch_size=8, max_queue_delay=1e-3, preferred_batch_sizes=(4,),
                instances=2)
    assert n.capacity == pytest.approx(2 * 8 / float(SVC.mean(8)))
    # Without one, it dispatches the largest preferred size.
    n = qm.Node(SVC, max_batch_size=8, preferred_batch_sizes=(4,))
    assert n.capacity == pytest.approx(4 / float(SVC.mean(4)))


@pytest.mark.parametrize("kwargs, field", [
    (dict(max_batch_size=0), "max_batch_size"),
    (dict(max_batch_size=2.5), "max_batch_size"),
    (dict(max_batch_size=True), "max_batch_size"),
    (dict(max_queue_delay=-1e-3), "max_queue_delay"),
    (dict(max_queue_delay="2 ms later"), "max_queue_delay"),
    (dict(max_batch_size=8, preferred_batch_sizes=(4, 16)), "preferred_batch_sizes"),
    (dict(max_batch_size=8, preferred_batch_sizes=(4, 4)), "repeats"),
    (dict(max_batch_size=8, preferred_batch_sizes=(0,)), "preferred_batch_sizes"),
    (dict(instances=0), "instances"),
    (dict(max_queue_size=-1), "max_queue_size"),
])
def test_bad_node(kwargs, field):
    with pytest.raises(ValueError, match=field):
        qm.Node(SVC, **kwargs)


def test_node_needs_a_service_time():
    with pytest.raises(ValueError, match="ServiceTime"):
        qm.Node(2e-3)


# --- Cluster -----------------------------------------------------------------------------------
def test_cluster_forms():
    node = qm.Node(SVC, max_batch_size=8)
    c = qm.Cluster(node, count=3, router="random", weights=[9, 1, 0])
    assert c.weights == pytest.approx((0.9, 0.1, 0.0))
    assert c.capacity == pytest.approx(node.capacity / 0.9)
    assert qm.Cluster(node, count=4, router="power_of_d", choices=3).router.name == "power_of_3"
    assert qm.Cluster([node, node], router="least_outstanding").capacity == \
        pytest.approx(2 * node.capacity)
    assert qm.Cluster(node, count=4, router="round_robin").shares.tolist() == [0.25] * 4


@pytest.mark.parametrize("kwargs, match", [
    (dict(nodes=[]), "empty"),
    (dict(nodes=["a"]), "qmodel.Node"),
    (dict(count=0), "count"),
    (dict(router="fastest"), "router"),
    (dict(router="round_robin", weights=[1, 1, 1]), "weights only apply"),
    (dict(weights=[1, 2]), "3 nodes"),
    (dict(weights=[0, 0, 0]), "positive"),
    (dict(weights=[1, -1, 1]), ">= 0"),
    (dict(router="power_of_d"), "choices"),
    (dict(router="power_of_d", choices=5), "exceeds"),
    (dict(router="random", choices=2), "choices only"),
    (dict(router="power_of_two", choices=3), "power_of_d"),
])
def test_bad_cluster(kwargs, match):
    node = qm.Node(SVC, max_batch_size=8)
    args = dict(nodes=node, count=3)
    args.update(kwargs)
    if isinstance(args["nodes"], list):
        args.pop("count")
    with pytest.raises(ValueError, match=match):
        qm.Cluster(**args)


def test_listed_nodes_and_count_must_agree():
    node = qm.Node(SVC)
    with pytest.raises(ValueError, match="disagrees"):
        qm.Cluster([node, node], count=3)


# --- arrivals and stability --------------------------------------------------------------------
@pytest.mark.parametrize("make, match", [
    (lambda: qm.Poisson(-5.0), "rate"),
    (lambda: qm.Poisson(0.0), "rate"),
    (lambda: qm.Poisson(float("inf")), "rate"),
    (lambda: qm.Renewal(100.0, scv=-1), "scv"),
    (lambda: qm.Trace([0.0, 2.0, 1.0]), "sorted"),
    (lambda: qm.Trace([0.0, float("nan")]), "NaN"),
    (lambda: qm.Trace([1.0]), "at least 2"),
])
def test_bad_arrivals(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_trace_rate_and_scv():
    tr = qm.Trace(np.arange(11) * 0.1)
    assert tr.rate == pytest.approx(10.0)
    assert tr.scv == pytest.approx(0.0, abs=1e-12)


def test_unstable_load_names_capacity_and_fix():
    node = qm.Node(SVC, max_batch_size=8, max_queue_delay=1e-3)
    cap = node.capacity
    with pytest.raises(qm.UnstableError, match=r"capacity 1190\.48 req/s.*Lower rate"):
        qm.simulate(node, rate=1.01 * cap, requests=1000)
    with pytest.raises(qm.UnstableError):
        qm.simulate(qm.Cluster(node, count=2, weights=[3, 1]), rate=1.5 * cap, requests=1000)
    # A finite queue sheds the excess instead: not unstable.
    lossy = qm.Node(SVC, max_batch_size=8, max_queue_delay=1e-3, max_queue_size=16)
    r = qm.simulate(lossy, rate=1.5 * cap, requests=20_000, seed=1)
    assert r.rejection_fraction > 0.2


@pytest.mark.parametrize("kwargs, match", [
    (dict(), "exactly one of rate"),
    (dict(rate=100.0, arrivals=qm.Poisson(100.0)), "exactly one of rate"),
    (dict(rate=-3.0), "rate"),
    (dict(rate=100.0, requests=0), "requests"),
    (dict(rate=100.0, replicas=0), "replicas"),
    (dict(rate=100.0, warmup=0.95), "warmup"),
    (dict(rate=100.0, engine="gpu"), "engine"),
    (dict(rate=100.0, backend="torch"), "backend"),
    (dict(rate=100.0, seed=-1), "seed"),
    (dict(rate=100.0, requests=1000, replicas=1000), "fewer than 2"),
    (dict(arrivals=[0.1, 0.2]), "arrivals must be"),
])
def test_bad_simulate_arguments(kwargs, match):
    node = qm.Node(SVC, max_batch_size=8)
    with pytest.raises(ValueError, match=match):
        qm.simulate(node, **kwargs)


def test_lookahead_engine_refuses_what_it_cannot_do():
    node = qm.Node(SVC, max_batch_size=8)
    with pytest.raises(ValueError, match="engine='events'"):
        qm.simulate(qm.Cluster(node, count=2, router="least_outstanding"), rate=100.0,
                    requests=1000, engine="lookahead")


def test_parse_duration():
    assert qm.parse_duration("2ms") == pytest.approx(2e-3)
    assert qm.parse_duration("1.5 s") == 1.5
    assert qm.parse_duration("250ns") == pytest.approx(2.5e-7)
    with pytest.raises(ValueError, match="unit"):
        qm.parse_duration("2 hours")


def test_nearest_measured_size_of_empirical_service():
    s = qm.ServiceTime.empirical({1: [1e-3, 2e-3], 8: [5e-3]})
    assert [s.nearest_measured(k) for k in (1, 4, 5, 64)] == [1, 1, 8, 8]
    with pytest.raises(ValueError, match="batch size k=0 must be >= 1"):
        s.nearest_measured(0)
    with pytest.raises(ValueError, match="for empirical service times; this one is 'affine'"):
        qm.ServiceTime.affine(1e-3).nearest_measured(2)


def test_a_cluster_of_many_nodes_has_a_short_repr():
    cluster = qm.Cluster(qm.Node(SVC, max_batch_size=8), count=128, router="round_robin")
    assert repr(cluster) == cluster.describe()
    assert repr(cluster).startswith("Cluster(128 x Node(B=8") and len(repr(cluster)) < 120


def test_one_stability_rule_one_message():
    # every entry point that can meet an overload words it the same way (qmodel.checks)
    from qmodel.theory import kingman_wait, mg1, mmc
    overloads = [
        lambda: qm.check_stable(qm.Node(SVC, max_batch_size=8), 1e6),
        lambda: mmc(3000.0, 1000.0, 2),
        lambda: mg1(1500.0, qm.ServiceTime.affine(1e-3, jitter=("gamma", 0.5))),
        lambda: kingman_wait(3.0, 0.5, 1.0),
    ]
    for overload in overloads:
        with pytest.raises(qm.UnstableError) as err:
            overload()
        assert str(err.value).startswith("arrival rate ")
        assert "times the capacity" in str(err.value) and ">= 1): queues grow without bound" \
            in str(err.value)
