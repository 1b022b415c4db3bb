"""The time-varying simulator (qmodel.sim.timevarying): against the stationary simulator on a
constant rate, against an exact transient (M/M/1 after a step in rate), against itself run
without chunks, and with pods that come and go."""

import functools

import numpy as np
import pytest
from scipy import integrate, optimize, special, stats

import qmodel as qm
import qmodel.sim.timevarying  # noqa: F401  (qm.sim.timevarying.simulate_traffic)

NODE = qm.Node(qm.ServiceTime.affine(2e-3, 0.2e-3, jitter=("lognormal", 0.2)),
               max_batch_size=8, max_queue_delay=1e-3)
Z = stats.norm.ppf(0.9995)          # both-sided 99.9%


def _agree(a, b, level, z=Z):
    """Two estimates of one quantile agree within their CIs (half-widths from the 95%
    intervals, widened to ``z``)."""
    ha = (a.ci(level)[1] - a.ci(level)[0]) / 2 / 1.96
    hb = (b.ci(level)[1] - b.ci(level)[0]) / 2 / 1.96
    return abs(a.quantile(level) - b.quantile(level)) <= z * np.hypot(ha, hb)


def test_a_constant_rate_reproduces_the_stationary_simulator_window_by_window():
    rate = 0.7 * NODE.capacity
    sim = qm.simulate(NODE, arrivals=qm.Traffic.constant(rate, 400.0), seed=5, replicas=4)
    stationary = qm.simulate(NODE, rate=rate, requests=2_000_000, seed=6)
    windows = sim.windows(100.0)
    assert len(windows) == 4
    for _, _, window in windows:
        for level in (0.5, 0.95, 0.99):
            assert _agree(window, stationary, level)
    for level in (0.5, 0.95, 0.99):
        assert _agree(sim, stationary, level)
    assert sim.throughput == pytest.approx(rate, rel=0.01)


# ---- an exact transient: M/M/1 from empty through a step in rate ---------------------------
MU, LAM1, LAM2, STEP, END, CAP = 1000.0, 500.0, 900.0, 2.0, 6.0, 250


@functools.lru_cache(maxsize=1)
def _mm1_solution():
    """P(n in system) over time from empty at 0: the forward (Kolmogorov) equations of the
    birth-death chain truncated at CAP states (the mass beyond is below 1e-12 here), solved
    once with a dense output."""
    def rhs(t, p):
        lam = LAM1 if t < STEP else LAM2
        dp = -(lam + MU) * p
        dp[0] += MU * p[0]                      # no departure from 0
        dp[-1] += lam * p[-1]                   # no arrival beyond the truncation
        dp[1:] += lam * p[:-1]
        dp[:-1] += MU * p[1:]
        return dp
    p0 = np.zeros(CAP)
    p0[0] = 1.0
    return integrate.solve_ivp(rhs, (0.0, END), p0, method="LSODA", rtol=1e-9, atol=1e-12,
                               max_step=0.01, dense_output=True)


def _oracle_quantile(a, b, level):
    """The level-quantile of the sojourns of requests arriving in [a, b): by PASTA an arrival
    at t finds n with P_n(t) and, FIFO with exponential service, stays Erlang(n + 1, MU)."""
    t = np.linspace(a, b, 201)
    p = _mm1_solution().sol(t).T
    lam = np.where(t < STEP, LAM1, LAM2)
    w = lam / integrate.trapezoid(lam, t)
    n = np.arange(CAP)

    def cdf(x):
        per_state = special.gammainc(n + 1, MU * x)          # P(Erlang(n + 1, MU) <= x)
        return float(integrate.trapezoid(w * (p @ per_state), t))
    return optimize.brentq(lambda x: cdf(x) - level, 1e-7, 1.0, xtol=1e-10)


def test_a_step_in_rate_gives_the_exact_mm1_transient():
    node = qm.Node(qm.ServiceTime.affine(1 / MU, jitter="exponential"))
    steps = qm.Traffic([0.0, STEP, END], [LAM1, LAM2])
    sim = qm.simulate(node, arrivals=steps, seed=11, replicas=400, resolution=0.05)
    checked = 0
    for a, b in [(0.0, 0.5), (1.0, 2.0), (2.0, 2.5), (2.5, 3.0), (3.0, 4.0), (4.0, 5.0),
                 (5.0, 6.0)]:
        window = sim.window(a, b)
        for level in (0.5, 0.95, 0.99):
            exact = _oracle_quantile(a, b, level)
            lo, hi = window.ci(level)
            half = (hi - lo) / 2 / 1.96 * Z
            assert abs(window.quantile(level) - exact) <= half, (a, b, level, exact)
            checked += 1
    assert checked == 21
    # the transient is there: in the half second after the step the tail is still well
    # short of the stationary M/M/1's at the new rate, ln(20) / (mu - lambda)
    stationary = np.log(20) / (MU - LAM2)
    assert _oracle_quantile(2.0, 2.5, 0.95) < 0.9 * stationary
    assert _oracle_quantile(5.0, 6.0, 0.95) == pytest.approx(stationary, rel=0.01)


def test_chunks_reproduce_one_lane_per_stream():
    """Deterministic service: a chunk's lane, started empty long enough before its arrivals,
    couples with the whole stream's run, so every sojourn is the same; jittery service
    agrees within the confidence intervals."""
    det = qm.Node(qm.ServiceTime.affine(1e-3, 0.1e-3), max_batch_size=4, max_queue_delay=1e-3)
    cap = det.capacity
    steps = qm.Traffic([0, 40, 60, 120], [0.5 * cap, 0.9 * cap, 0.6 * cap])
    chunked = qm.sim.timevarying.simulate_traffic(det, steps, seed=2)
    whole = qm.sim.timevarying.simulate_traffic(det, steps, seed=2, chunk=10 ** 9)
    assert whole.lanes == 1 and chunked.lanes > 10
    assert chunked.accuracy.simulation.engine == "lookahead"
    np.testing.assert_array_equal(chunked.samples, whole.samples)
    cap = NODE.capacity
    steps = qm.Traffic([0, 40, 60, 120], [0.5 * cap, 1.1 * cap, 0.6 * cap])
    chunked = qm.simulate(NODE, arrivals=steps, seed=3, replicas=4)
    whole = qm.sim.timevarying.simulate_traffic(NODE, steps, seed=3, replicas=4, chunk=10 ** 9)
    for (_, _, a), (_, _, b) in zip(chunked.windows(20), whole.windows(20)):
        for level in (0.5, 0.95, 0.99):
            assert _agree(a, b, level)


def test_pods_that_join_start_empty_and_share_the_rate():
    cap = NODE.capacity
    rate = 2.4 * cap
    traffic = qm.Traffic.constant(rate, 120.0)
    pods = qm.PodSchedule([0.0, 30.0], [3, 4], [4, 4], end=120.0)
    cluster = qm.Cluster(NODE, count=4, router="round_robin")
    sim = qm.simulate(cluster, arrivals=traffic, pods=pods, seed=4, replicas=4)
    four = qm.simulate(cluster, rate=rate, requests=1_000_000, seed=5)
    # once the fourth pod serves, the four pods behave as a stationary cluster of four
    late = sim.window(60, 120)
    for level in (0.5, 0.95, 0.99):
        assert _agree(late, four, level)
    # before it, three pods at 80% load: a longer tail
    assert sim.window(0, 30).p99 > late.p99
    assert sim.rejection_fraction == 0.0
    assert sim.served.sum() == pytest.approx(4 * rate * 120.0, rel=0.01)


def test_dynamic_routers_and_finite_queues_run_on_the_event_engine():
    cap = NODE.capacity
    lo = qm.Cluster(NODE, count=3, router="least_outstanding")
    traffic = qm.Traffic.constant(2.1 * cap, 60.0)
    sim = qm.simulate(lo, arrivals=traffic, seed=1, replicas=4)
    assert sim.accuracy.simulation.engine == "events"
    stationary = qm.simulate(lo, rate=2.1 * cap, requests=600_000, seed=2)
    for level in (0.5, 0.95):
        assert _agree(sim, stationary, level)
    finite = qm.Node(NODE.service, max_batch_size=8, max_queue_size=8)
    over = qm.simulate(finite, arrivals=qm.Traffic.constant(1.5 * finite.capacity, 30.0),
                       seed=1)
    assert over.rejection_fraction > 0.2
    # a rejected request is not within any target
    within = over.within({"p99": 1.0})
    assert within["p99"] == pytest.approx(1 - over.rejection_fraction, abs=1e-3)


def test_ensemble_pods_follow_the_traffic():
    s = qm.ServiceTime.affine
    ens = qm.Ensemble({"a": qm.Node(s(1e-3, 0.1e-3), max_batch_size=4, instances=2),
                       "b": qm.Node(s(2e-3, 0.2e-3), max_batch_size=8, max_queue_delay=1e-3,
                                    instances=2)}, [("a", "b")])
    pods = qm.Cluster(ens, count=2, router="round_robin")
    rate = 0.6 * 2 * min(n.capacity for n in ens.stages.values())
    sim = qm.simulate(pods, arrivals=qm.Traffic.constant(rate, 60.0), seed=1, replicas=4)
    stationary = qm.simulate(pods, rate=rate, requests=1_000_000, seed=2)
    for level in (0.5, 0.95, 0.99):
        assert _agree(sim, stationary, level)


def test_one_realisation_has_no_confidence_interval():
    """Stretches of one run are not independent enough for a tail quantile's interval: the
    realisations are its sections."""
    one = qm.simulate(NODE, arrivals=qm.Traffic.constant(0.5 * NODE.capacity, 20.0), seed=1)
    assert one.sections == 1 and one.accuracy.simulation.p99_half_width is None
    with pytest.raises(ValueError, match="simulate with replicas >= 2"):
        one.window(0, 10).ci(0.99)
    three = qm.simulate(NODE, arrivals=qm.Traffic.constant(0.5 * NODE.capacity, 20.0), seed=1,
                        replicas=3)
    assert three.sections == 3 and three.window(0, 10).sections == 3


def test_within_counts_the_requests_under_each_target():
    cap = NODE.capacity
    sim = qm.simulate(NODE, arrivals=qm.Traffic.constant(0.6 * cap, 30.0), seed=1)
    target = sim.p95
    share = sim.within({"p95": target})["p95"]
    assert share == pytest.approx(np.mean(sim.samples <= np.float32(target)), abs=1e-12)
    assert share >= 0.95
    assert sim.meets({"p95": target}) and not sim.meets({"p95": 0.9 * sim.p50})


@pytest.mark.parametrize("kwargs, message", [
    (dict(rate=100.0), "leave out rate= and requests="),
    (dict(requests=1000), "leave out rate= and requests="),
    (dict(replicas=0), "replicas=0 must be a whole number in 1-1000"),
    (dict(resolution=-1.0), "resolution=-1.0 must be seconds"),
])
def test_bad_input_names_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        qm.simulate(NODE, arrivals=qm.Traffic.constant(100.0, 10.0), **kwargs)


def test_a_pod_asked_for_again_starts_empty():
    """Pod 2 leaves at 10 s holding a queue and is asked for again at 20 s: it comes back
    empty, as a new pod does (the model's rule too)."""
    node = qm.Node(qm.ServiceTime.affine(1e-3))
    cluster = qm.Cluster(node, count=2, router="round_robin")
    traffic = qm.Traffic([0, 10, 20, 30], [2400.0, 1000.0, 1000.0])
    pods = qm.PodSchedule([0.0, 10.0, 20.0], [2, 1, 2], [2, 1, 2], end=30.0)
    sim = qm.simulate(cluster, arrivals=traffic, pods=pods, seed=1)
    pred = qm.predict(cluster, arrivals=traffic, pods=pods)
    # both pods carry 1,200 req/s for 10 s: a backlog of 2,000 each; then pod 1 alone takes
    # 1,000 req/s (its backlog stays) and pod 2 leaves. From 20 s each takes 500 req/s:
    # pod 1 works its backlog off by 24 s, so in [21, 30) a sixth of the requests wait
    # (3 s of pod 1's 500 req/s); had pod 2 come back with its backlog, a third would
    late = sim.window(21, 30)
    assert 0.80 < late.cdf(0.01) < 0.87
    assert pred.window(21, 30).cdf(0.01) == pytest.approx(late.cdf(0.01), abs=0.03)


def test_pods_need_a_static_unweighted_router():
    traffic = qm.Traffic.constant(100.0, 10.0)
    with pytest.raises(ValueError, match="'least_outstanding' over a changing pod count"):
        qm.simulate(qm.Cluster(NODE, count=2, router="least_outstanding"), arrivals=traffic,
                    pods=qm.PodSchedule.constant(2, 0.0, 10.0))
    with pytest.raises(ValueError, match="pods= and resolution= go with arrivals=qm"):
        qm.simulate(NODE, rate=100.0, pods=2)
    with pytest.raises(ValueError, match=r"the schedule covers \[0, 5\] s, not the whole"):
        qm.simulate(NODE, arrivals=traffic, pods=qm.PodSchedule.constant(1, 0.0, 5.0))
    with pytest.raises(ValueError, match="leave out engine=, warmup= and progress="):
        qm.simulate(NODE, arrivals=traffic, engine="events")
