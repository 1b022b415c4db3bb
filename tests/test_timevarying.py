"""The time-varying model (qmodel.timevarying): pointwise stationary where the pods keep up,
the fluid backlog where they do not; what it states about itself."""

import numpy as np
import pytest

import qmodel as qm
from qmodel.timeline import TrafficPrediction
from qmodel.timevarying import predict_traffic

NODE = qm.Node(qm.ServiceTime.affine(2e-3, 0.2e-3, jitter=("lognormal", 0.2)),
               max_batch_size=8, max_queue_delay=1e-3)


def test_a_constant_rate_is_the_stationary_answer_in_every_window():
    rate = 0.7 * NODE.capacity
    pred = qm.predict(NODE, arrivals=qm.Traffic.constant(rate, 300.0))
    assert isinstance(pred, TrafficPrediction)
    stationary = qm.predict(NODE, rate=rate, extrapolate=True)
    for _, _, window in pred.windows(60.0):
        np.testing.assert_allclose(window.quantile([0.5, 0.95, 0.99]),
                                   stationary.quantile([0.5, 0.95, 0.99]), rtol=1e-9)
    assert pred.accuracy.approximation_keys[0] == "pointwise_stationary"
    assert not pred.fluid.any() and not pred.backlog.any()


def test_steps_take_each_rate_s_stationary_law():
    cap = NODE.capacity
    pred = qm.predict(NODE, arrivals=qm.Traffic([0, 60, 120], [0.4 * cap, 0.8 * cap]))
    for (a, b), rate in (((0, 60), 0.4 * cap), ((60, 120), 0.8 * cap)):
        assert pred.window(a, b).p99 == pytest.approx(
            qm.predict(NODE, rate=rate, extrapolate=True).p99, rel=1e-9)
    # the whole traffic: the mixture of both, weighted by their requests
    lo = qm.predict(NODE, rate=0.4 * cap, extrapolate=True)
    hi = qm.predict(NODE, rate=0.8 * cap, extrapolate=True)
    t = 0.01
    assert pred.cdf(t) == pytest.approx((lo.cdf(t) + 2 * hi.cdf(t)) / 3, rel=1e-9)


def test_an_overload_builds_the_fluid_backlog_by_hand():
    """One deterministic server of 1,000 req/s offered 1,500 req/s for 10 s: the backlog grows
    by 500 a second, so a request arriving at 10 s waits about 5 s, then its own 1 ms."""
    node = qm.Node(qm.ServiceTime.affine(1e-3))
    pred = predict_traffic(node, qm.Traffic([0, 5, 15, 60], [500.0, 1500.0, 500.0]), pods=1,
                           resolution=0.5)
    at = lambda t: int((t - pred.edges[0]) / pred.resolution)       # noqa: E731
    # the backlog at a bin's middle: 500 a second since 5 s
    assert pred.backlog[at(14.6)] == pytest.approx(500 * 9.75, rel=1e-6)
    last = pred.window(14.5, 15)
    assert last.p50 == pytest.approx((500 * 9.75) / 1000 + 1e-3, rel=0.02)
    # it drains at 500 a second once the rate falls: gone 10 s later
    assert pred.backlog[at(24.6)] == pytest.approx(500 * (10 - 9.75), rel=1e-6)
    assert not pred.fluid[at(25.1):].any()
    assert pred.fluid[at(5.1):at(24.9)].all()
    # each window states the rule and the measured family it used
    keys = lambda w: set(w.accuracy.approximation_keys)              # noqa: E731
    families = lambda w: {m.family for m in w.accuracy.measured}     # noqa: E731
    assert "fluid_backlog" in keys(pred.window(6, 15))
    assert "traffic_fluid_backlog" in families(pred.window(6, 15))
    assert keys(pred.window(40, 60)) >= {"pointwise_stationary"}
    assert "fluid_backlog" not in keys(pred.window(40, 60))
    assert "traffic_fluid_backlog" not in families(pred.window(40, 60))


def test_the_overload_agrees_with_the_simulator_within_the_measured_error():
    """Every window's p99 bounds, as its accuracy states them (its families' measured p99
    range), meet the simulated p99's 95% CI."""
    cap = NODE.capacity
    steps = qm.Traffic([0, 60, 80, 200], [0.6 * cap, 1.15 * cap, 0.7 * cap])
    pred = qm.predict(NODE, arrivals=steps)
    sim = qm.simulate(NODE, arrivals=steps, seed=21, replicas=2)
    checked = 0
    for (a, b, s), (_, _, p) in zip(sim.windows(20), pred.windows(20)):
        low, high = p.accuracy.p99_bounds(p.p99)
        lo_ci, hi_ci = s.ci(0.99)
        assert low <= hi_ci and lo_ci <= high, (a, b, low, high, lo_ci, hi_ci)
        checked += 1
    assert checked == 10


def test_pods_joining_during_an_overload_start_empty():
    cap = NODE.capacity
    traffic = qm.Traffic.constant(1.5 * cap, 120.0)
    pods = qm.PodSchedule([0.0, 20.0], [1, 3], [3, 3], end=120.0)
    pred = qm.predict(NODE, arrivals=traffic, pods=pods)
    # the first pod's backlog after 20 s at 1.5 x capacity: 0.5 cap x 20
    assert pred.backlog[19] == pytest.approx(0.5 * cap * 19.5, rel=1e-6)
    # once three serve, the two new ones are free: two thirds of the requests are fast
    w = pred.window(21, 22)
    assert 0.6 < w.cdf(0.05) < 0.7


def test_what_no_model_covers_is_simulated_and_says_so():
    slow = qm.Node(qm.ServiceTime.affine(4e-3), max_batch_size=4)
    mixed = qm.Cluster([NODE, slow], router="random", weights=[1, 1])
    over = qm.Traffic([0, 10, 20], [0.5 * mixed.capacity, 1.3 * mixed.capacity])
    with pytest.raises(NotImplementedError, match="overloads a cluster of unlike nodes"):
        qm.predict(mixed, arrivals=over, fallback="raise")
    result = qm.predict(mixed, arrivals=over)
    assert result.accuracy.is_fallback and result.accuracy.exactness == "simulation"
    assert "unlike nodes" in result.accuracy.fallback_reason


def test_bad_input_names_the_field():
    traffic = qm.Traffic.constant(100.0, 10.0)
    with pytest.raises(ValueError, match="give rate= or arrivals=, not both"):
        qm.predict(NODE, rate=100.0, arrivals=traffic)
    with pytest.raises(ValueError, match="pods= goes with arrivals=qmodel.Traffic"):
        qm.predict(NODE, rate=100.0, pods=2)
    with pytest.raises(ValueError, match="the window .* holds no whole bin"):
        qm.predict(NODE, arrivals=traffic).window(3.01, 3.02)
