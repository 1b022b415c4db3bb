"""qmodel.predict: which solver answers, and the conformance suite against the simulator.

The full grid (420 configurations) is validation/predict_accuracy.py; here a fixed subset keeps
CI fast. Tolerances:

- exact and numerical solvers: inside the simulator's 99% confidence interval, widened by the
  lattice step h the result states (its discretisation error);
- approximations with one instance: within 8% (the issue's worst-case bound) plus the CI's
  relative half-width, and a subset median within 3%;
- approximations with several instances: within 12% plus the CI half-width. The full grid
  measured a worst case of 18.9% on p95 and 15.8% on p99 there, all with deterministic service
  (each family's range is in qmodel/theory/measured.py, and tests/test_predict_grid.py holds
  every grid node to it): the issue's 8% is not met there, and this test guards what is
  claimed rather than what is wanted.
"""

import numpy as np
import pytest

import qmodel as qm
from qmodel.campaign.grids import GRID_SERVICE
from qmodel.stationary import MixtureLatency
from qmodel.theory.measured import measured

TAU0, ALPHA, S1 = GRID_SERVICE.base, GRID_SERVICE.per_item, GRID_SERVICE.s1
REQUESTS = 1_000_000
_node = GRID_SERVICE.node          # (B, D / S(1), c, jitter)


# (B, D/S1, c, jitter, load)
NUMERICAL = [(8, 0, 1, "deterministic", 0.7), (32, 0, 1, "deterministic", 0.5),
             (4, 0, 1, "lognormal", 0.5), (1, 0, 2, "deterministic", 0.8)]
ONE_INSTANCE = [(8, 2, 1, "deterministic", 0.7), (4, 0.5, 1, "deterministic", 0.9),
                (8, 0.5, 1, "lognormal", 0.3), (32, 2, 1, "deterministic", 0.5)]
SEVERAL = [(8, 0, 2, "deterministic", 0.7), (8, 2, 2, "deterministic", 0.5),
           (8, 0, 4, "lognormal", 0.7), (4, 0.5, 4, "deterministic", 0.7)]


def _compare(case, seed=21):
    B, d, c, jitter, load = case
    node = _node(B, d, c, jitter)
    rate = load * node.capacity
    pred = qm.predict(node, rate=rate)
    sim = qm.simulate(node, rate=rate, requests=REQUESTS, seed=seed)
    out = []
    for p in (0.95, 0.99):
        lo, hi = sim.ci(p, level=0.99)
        out.append((float(pred.quantile(p)), float(sim.quantile(p)), lo, hi))
    return pred, out


@pytest.mark.parametrize("case", NUMERICAL)
def test_exact_and_numerical_solvers_inside_the_simulators_ci(case):
    pred, rows = _compare(case)
    assert pred.accuracy.exactness in ("exact", "numerical")
    slack = getattr(pred, "h", 0.0)
    for q, _, lo, hi in rows:
        assert lo - slack <= q <= hi + slack


def test_one_instance_approximations_within_the_target():
    errors = []
    for case in ONE_INSTANCE:
        pred, rows = _compare(case)
        assert pred.accuracy.exactness == "approximation"
        for q, s, lo, hi in rows:
            half = (hi - lo) / 2 / s
            assert abs(q / s - 1) <= 0.08 + half, case
            errors.append(abs(q / s - 1))
    assert np.median(errors) <= 0.03


@pytest.mark.parametrize("case", SEVERAL)
def test_several_instances_within_the_measured_bound(case):
    pred, rows = _compare(case)
    for q, s, lo, hi in rows:
        assert abs(q / s - 1) <= 0.12 + (hi - lo) / 2 / s


def test_front_door_picks_the_exact_solver_when_there_is_one():
    det = qm.Node(qm.ServiceTime.affine(2e-3), max_batch_size=1, instances=3)
    exp = qm.Node(qm.ServiceTime.affine(2e-3, jitter="exponential"), max_batch_size=1)
    assert qm.predict(det, rate=1000.0).model == "mdc"
    assert qm.predict(exp, rate=300.0).model == "mmc"
    assert qm.predict(_node(8, 0, 1), rate=1000.0).model == "batch_chain"


def test_random_router_is_an_exact_mixture_of_its_nodes():
    a, b = _node(8, 0, 1), _node(4, 0, 1)
    cluster = qm.Cluster([a, b], router="random", weights=[3, 1])
    mix = qm.predict(cluster, rate=2000.0)
    assert isinstance(mix, MixtureLatency)
    pa, pb = qm.predict(a, rate=1500.0), qm.predict(b, rate=500.0)
    t = np.array([3e-3, 5e-3, 8e-3])
    assert np.allclose(mix.cdf(t), 0.75 * pa.cdf(t) + 0.25 * pb.cdf(t))
    assert mix.mean == pytest.approx(0.75 * pa.mean + 0.25 * pb.mean)


def test_a_mixture_of_nodes_with_an_atom_answers_at_its_jump():
    # deterministic one-request nodes at light load: most requests wait for nothing, so
    # p50-p99 sit on the cdf's jump at S(1); the mixture's quantile search stopped on either
    # side of it, and predict's self-checks declined these exact answers (coverage draws)
    a = qm.Node(qm.ServiceTime.affine(3e-3), max_batch_size=1, instances=5)
    b = qm.Node(qm.ServiceTime.affine(2e-3), max_batch_size=1, instances=4)
    levels = np.array([0.5, 0.95, 0.99, 0.999])
    for cluster in (qm.Cluster([a, b], router="random"), qm.Cluster(a, count=15,
                                                                   router="random")):
        for load in (0.05, 0.14, 0.3):
            mix = qm.predict(cluster, rate=load * cluster.capacity, fallback="raise")
            q = mix.quantile(levels)
            assert np.all(np.diff(q) >= 0) and np.all(mix.cdf(q) >= levels - 1e-9)
    # ... and across calls: levels asked for later stay in order with those cached
    mix = qm.predict(qm.Cluster([qm.Node(qm.ServiceTime.affine(2e-3), max_batch_size=1),
                                 qm.Node(qm.ServiceTime.affine(3e-3), max_batch_size=1)],
                                router="random"), rate=40.0, fallback="raise")
    assert np.all(np.diff(mix.quantile(np.array([0.5, 0.75, 0.9, 0.95]))) >= 0)
    copies = qm.predict(qm.Cluster(a, count=15, router="random"), rate=0.14 * 15 * 5 / 3e-3,
                        fallback="raise")
    assert copies.p99 == qm.predict(a, rate=0.14 * 5 / 3e-3, fallback="raise").p99


def test_a_long_tailed_batch_refines_its_lattice_rather_than_decline():
    # B 12 on six instances, lognormal cv 0.4, S(12) = 4.3 S(1), load 0.12: the lattice spans
    # S(12)'s 1 - 1e-7 quantile in 200 points, a step of 15% of the median, which the
    # self-check refuses; a second solve on a step of 5% of the median answers (coverage draw)
    s1, growth = 3.2e-3, 0.3
    node = qm.Node(qm.ServiceTime.affine(s1 * (1 - growth), s1 * growth,
                                         jitter=("lognormal", 0.4)),
                   max_batch_size=12, instances=6)
    rate = 0.12 * node.capacity
    # the self-check applies inside the measured domain and outside it alike
    answer = qm.predict(node, rate=rate, fallback="raise", extrapolate=True)
    assert answer.accuracy.lattice_step <= 0.051 * answer.p50
    sim = qm.simulate(node, rate=rate, requests=400_000, seed=1)
    # its family's scale (the draw measured +0.2% on p99)
    assert abs(answer.p99 / sim.p99 - 1) < 0.2 and abs(answer.p50 / sim.p50 - 1) < 0.2


def test_what_is_not_modelled_yet_says_so():
    node = _node(8, 0, 1)
    # least outstanding over one-request nodes with long-tailed service: the balanced model's
    # count from M/D/N misses by 10-20% at cv 0.7 and more
    wild = qm.Node(qm.ServiceTime.affine(TAU0, ALPHA, jitter=("lognormal", 1.0)),
                   max_batch_size=1)
    with pytest.raises(NotImplementedError, match="jitter lognormal with cv 1"):
        qm.predict(qm.Cluster(wild, count=4, router="least_outstanding"), rate=1000.0,
                   fallback="raise")
    # a finite queue shorter than a full batch, with a delay
    with pytest.raises(NotImplementedError, match="max_queue_size=4"):
        qm.predict(qm.Node(node.service, max_batch_size=8, max_queue_size=4,
                           max_queue_delay=1e-3), rate=100.0, fallback="raise")


@pytest.mark.parametrize("preferred", [(), (2, 8)])
def test_queue_shorter_than_a_batch_without_delay(preferred, assert_within):
    # with no delay whatever waits goes at once, so batches never exceed the queue: the node
    # is the one with max_batch_size = max_queue_size (measured: p99 and rejections within
    # 0.1% and 0.3% of the simulator at 1.5x capacity)
    node = qm.Node(qm.ServiceTime.affine(2e-3, 0.3e-3), max_batch_size=8, max_queue_size=4,
                   preferred_batch_sizes=preferred)
    rate = 1.5 * 4 / 3.2e-3
    pred = qm.predict(node, rate=rate)
    sim = qm.simulate(node, rate=rate, requests=200_000, seed=3, engine="events")
    f = sim.rejection_fraction
    assert abs(pred.rejection_fraction - f) <= 4 * np.sqrt(f * (1 - f) / 200_000) + 0.01 * f
    assert_within(pred, sim, 0.02)


@pytest.mark.parametrize("jitter, c, scv", [("deterministic", 2, 0.25), ("lognormal", 4, 2.0),
                                            ("lognormal", 2, 1.0)])
def test_one_request_per_batch_with_several_instances(jitter, c, scv, assert_within):
    # GI/G/c (and M/G/c for a service law without an exact solver): the fast-server
    # approximation. validation/renewal_multi_server.py measured 0.8% median and 15% worst
    # p99 error over 108 configurations, the worst at load 0.5 with bursty arrivals and
    # deterministic service; these cases at load 0.8 measured within 2%: bound 5%.
    node = _node(1, 0, c, jitter)
    arrivals = qm.Renewal(0.8 * node.capacity, scv=scv)
    pred = qm.predict(node, arrivals=arrivals)
    assert pred.model == "fast_server"
    assert pred.accuracy.exactness == "approximation"
    assert_within(pred, qm.simulate(node, arrivals=arrivals, requests=REQUESTS, seed=6), 0.05)


def test_fast_server_is_exact_for_mmc_and_gig1_for_one_server():
    exp = qm.ServiceTime.affine(2e-3, jitter="exponential")
    for c, load in ((2, 0.5), (4, 0.9)):
        rate = load * c / 2e-3
        r, exact = qm.theory.gigc(rate, exp, 1.0, c), qm.theory.mmc(rate, 500.0, c)
        for p in (0.5, 0.95, 0.99):
            assert abs(r.quantile(p) - exact.quantile(p)) <= 2 * r.h
    logn = qm.ServiceTime.affine(2e-3, jitter=("lognormal", 0.3))
    assert qm.theory.gigc(300.0, logn, 0.5, 1).p99 == qm.theory.gig1(300.0, logn, 0.5).p99
    with pytest.raises(ValueError, match="servers"):
        qm.theory.gigc(300.0, logn, 0.5, 0)


def test_one_request_per_batch_with_any_service_law_is_mg1():
    # gamma (a closed-form transform) and long-tailed lognormal go to the transform inversion
    for jitter in (("gamma", 1.5), ("gamma", 0.3), ("lognormal", 1.5)):
        node = qm.Node(qm.ServiceTime.affine(2e-3, jitter=jitter), max_batch_size=1)
        pred = qm.predict(node, rate=400.0)
        assert pred.model == "mg1_transform"
        assert pred.p99 == pytest.approx(qm.theory.mg1(400.0, node.service).p99)
    # ... lognormal up to cv 1 to the (faster) Pollaczek-Khinchine lattice, which agrees with
    # it within its lattice step
    for cv in (0.3, 1.0):
        node = qm.Node(qm.ServiceTime.affine(2e-3, jitter=("lognormal", cv)), max_batch_size=1)
        pred = qm.predict(node, rate=450.0)
        assert pred.model == "pollaczek_khinchine_lattice"
        for p in (0.5, 0.95, 0.99):
            exact = qm.theory.mg1(450.0, node.service).quantile(p)
            assert abs(pred.quantile(p) - exact) <= pred.h


def test_a_trace_is_taken_as_renewal_arrivals_with_its_rate_and_scv(assert_within):
    node = _node(8, 0.5, 1)
    rate = 0.7 * node.capacity
    gaps = np.random.default_rng(8).gamma(4.0, 1.0 / (4.0 * rate), REQUESTS)
    trace = qm.Trace(np.cumsum(gaps))
    # the trace's scv 0.25 is below the renewal family's measured 0.5-2: the model, extrapolated
    pred = qm.predict(node, arrivals=trace, extrapolate=True)
    assert pred.accuracy.exactness == "approximation"
    assert pred.accuracy.approximation_keys[:2] == ("outside_measured_domain", "trace_as_renewal")
    assert pred.p99 == qm.predict(node, arrivals=qm.Renewal(trace.rate, trace.scv),
                                  extrapolate=True).p99
    # the trace is renewal here, so the renewal model's own bound (8% + CI) applies
    assert_within(pred, qm.simulate(node, arrivals=trace, seed=8), 0.08)


@pytest.mark.parametrize("B, d, c, load", [(8, 0.5, 1, 1.0), (8, 2, 2, 1.5), (32, 0, 1, 0.9)])
def test_finite_queue_rejections_and_latency_of_served_requests(B, d, c, load, assert_within):
    node = qm.Node(_node(B, d, c).service, max_batch_size=B, max_queue_delay=d * S1,
                   instances=c, max_queue_size=2 * B)
    rate = load * node.capacity
    # finite queues are outside every measured family's domain: the model, extrapolated
    pred = qm.predict(node, rate=rate, extrapolate=True, fallback="raise")
    sim = qm.simulate(node, rate=rate, requests=300_000, seed=9, engine="events")
    # the rejected fraction: binomial standard error of the simulated fraction, 4 sigma,
    # plus 5% of it for the model (measured within 1% on one instance, 11% at c = 2)
    f = sim.rejection_fraction
    assert abs(pred.rejection_fraction - f) <= 4 * np.sqrt(f * (1 - f) / 300_000) + 0.05 * f
    assert pred.throughput == pytest.approx(rate * (1 - pred.rejection_fraction))
    assert_within(pred, sim, 0.02 if c == 1 else 0.08)


def test_unstable_load_and_bad_input():
    node = _node(8, 0, 1)
    with pytest.raises(ValueError, match="resolution"):
        qm.predict(node, rate=100.0, resolution=0)
    # a one-node cluster keeps the renewal arrivals it was given
    arrivals = qm.Renewal(0.5 * node.capacity, scv=0.25)
    assert (qm.predict(qm.Cluster(node), arrivals=arrivals).p99
            == pytest.approx(qm.predict(node, arrivals=arrivals).p99))
    with pytest.raises(qm.UnstableError, match="capacity"):
        qm.predict(node, rate=2 * node.capacity)
    with pytest.raises(ValueError, match="rate"):
        qm.predict(node, rate=-1.0)
    with pytest.raises(ValueError, match="Node, Ensemble or Cluster"):
        qm.predict("not a node", rate=10.0)


@pytest.mark.parametrize("scv", [0.25, 2.0])
def test_renewal_arrivals(scv):
    # one request per batch: GI/G/1 by Lindley's recursion, inside the simulator's CI (+ 2h)
    node = _node(1, 0, 1, "lognormal")
    arrivals = qm.Renewal(0.7 * node.capacity, scv=scv)
    pred = qm.predict(node, arrivals=arrivals)
    sim = qm.simulate(node, arrivals=arrivals, requests=REQUESTS, seed=4)
    assert pred.model == "lindley_lattice"
    for p in (0.95, 0.99):
        lo, hi = sim.ci(p, level=0.99)
        assert lo - 2 * pred.h <= pred.quantile(p) <= hi + 2 * pred.h
    # batching node: the count-law approximation, within 8% (+ CI) at B = 8
    node = _node(8, 0.5, 1)
    arrivals = qm.Renewal(0.7 * node.capacity, scv=scv)
    pred = qm.predict(node, arrivals=arrivals, extrapolate=True, fallback="raise")
    sim = qm.simulate(node, arrivals=arrivals, requests=REQUESTS, seed=4)
    assert "renewal_counts" in pred.accuracy.approximation_keys
    for p in (0.95, 0.99):
        lo, hi = sim.ci(p, level=0.99)
        s = sim.quantile(p)
        assert abs(pred.quantile(p) / s - 1) <= 0.08 + (hi - lo) / 2 / s


@pytest.mark.parametrize("service", [
    qm.ServiceTime.affine(2e-3),                                            # flat in k
    qm.ServiceTime.table({1: 3.1e-3, 2: 3.6e-3, 4: 4.4e-3, 8: 6.7e-3}),
    qm.ServiceTime.empirical({1: [2e-3, 2.2e-3, 2.5e-3], 8: [5e-3, 5.5e-3, 7e-3]}),
    qm.ServiceTime.affine(2e-3, 0.3e-3, jitter=("gamma", 0.5)),
])
def test_preferred_sizes_below_b_with_a_delay(service):
    # A long queue with a delay dispatches B (its oldest request has waited past the delay),
    # not the largest preferred size: the model's capacity must be the node's, so it stays
    # finite up to 95% of capacity and close to the simulator at half load.
    node = qm.Node(service, max_batch_size=8, max_queue_delay=1e-3, preferred_batch_sizes=(4,),
                   instances=2)
    for load in (0.5, 0.95):
        r = qm.predict(node, rate=load * node.capacity)
        q = [r.p50, r.p95, r.p99]
        assert np.all(np.isfinite(q)) and q[0] <= q[1] <= q[2]
    rate = 0.5 * node.capacity
    sim = qm.simulate(node, rate=rate, requests=REQUESTS, seed=6)
    pred = qm.predict(node, rate=rate)
    # measured: within 7% here (preferred sizes and two instances are both approximated)
    assert abs(pred.p99 / sim.p99 - 1) <= 0.10


@pytest.mark.parametrize("N, B, d, load", [(8, 8, 0, 0.9), (2, 1, 0, 0.9), (32, 8, 1, 0.5)])
def test_round_robin_nodes_see_erlang_n_arrivals(N, B, d, load, assert_within):
    # each node gets every N-th request: renewal arrivals with scv 1/N, solved per node;
    # measured p99 within 3.6% over 24 configurations (N 2..32, B 1..32): bound 5% + CI
    cluster = qm.Cluster(_node(B, d, 1), count=N, router="round_robin")
    rate = load * cluster.capacity
    pred = qm.predict(cluster, rate=rate)
    assert pred.accuracy.basis.startswith(f"round robin over {N} nodes")
    assert measured("round_robin") in pred.accuracy.measured
    assert pred.throughput == pytest.approx(rate)
    assert_within(pred, qm.simulate(cluster, rate=rate, requests=REQUESTS, seed=5), 0.05)


def test_random_split_of_renewal_traffic_and_of_finite_queues(assert_within):
    # a thinned renewal stream is renewal with scv p * scv + 1 - p: here p = 1/2, scv 0.25
    node = _node(8, 0.5, 1)
    cluster = qm.Cluster(node, count=2)
    arrivals = qm.Renewal(0.7 * cluster.capacity, scv=0.25)
    pred = qm.predict(cluster, arrivals=arrivals)
    alone = qm.predict(node, arrivals=qm.Renewal(arrivals.rate / 2, scv=0.625))
    assert pred.p99 == pytest.approx(alone.p99)
    assert_within(pred, qm.simulate(cluster, arrivals=arrivals, requests=REQUESTS, seed=5), 0.08)
    # two nodes with finite queues, 3:1 split at 1.2x the cluster's capacity: the served
    # mixture weighs each node by what it serves, and the rejections add up
    small = qm.Node(node.service, max_batch_size=8, max_queue_size=16)
    cluster = qm.Cluster([small, small], router="random", weights=[3, 1])
    rate = 1.2 * cluster.capacity
    pred = qm.predict(cluster, rate=rate)
    a, b = qm.predict(small, rate=0.75 * rate), qm.predict(small, rate=0.25 * rate)
    assert pred.rejection_fraction == pytest.approx(
        0.75 * a.rejection_fraction + 0.25 * b.rejection_fraction)
    served = np.array([0.75 * (1 - a.rejection_fraction), 0.25 * (1 - b.rejection_fraction)])
    served /= served.sum()
    assert pred.mean == pytest.approx(served[0] * a.mean + served[1] * b.mean)


@pytest.mark.parametrize("B, load, bound", [(8, 0.7, 0.05), (1, 0.3, 0.05)])
def test_power_of_two_mean_field_inside_its_domain(B, load, bound, assert_within):
    # the cavity model (other nodes independent): validation/router_accuracy.py measured
    # -2.1% (N = 32, B = 8, load 0.7) and +0.1% (N = 32, B = 1, load 0.3) on these: bound 5%
    # plus the simulator's CI
    cluster = qm.Cluster(_node(B, 0, 1), count=32, router="power_of_two")
    rate = load * cluster.capacity
    pred = qm.predict(cluster, rate=rate)
    assert pred.model == "cavity" and pred.accuracy.exactness == "approximation"
    assert_within(pred, qm.simulate(cluster, rate=rate, requests=600_000, seed=12), bound)


@pytest.mark.parametrize("resolution, scale, M, widths", [
    (30, (0.05, 3.0), 50, (8, 16)),            # the default lattice's band
    (100, (1e-3, 1e-2), 80, (3, 5)),           # a fine lattice, low rates: few births
    (15, (20.0, 40.0), 300, (20, 300)),        # the coarse lattice, a count near its cap
    (30, (1e-16, 2e-16), 20, (0, 0)),          # rates near zero: no births in a step
])
def test_the_compiled_birth_sums_equal_numpy_s_products_bit_for_bit(resolution, scale, M,
                                                                    widths):
    # the cavity model's node law sums V_t[start] over the lattice in a compiled loop; the
    # numpy products it replaced (_Cavity._products, still used for the arrivals' view and
    # where numba cannot compile) are the oracle: equal to the last bit, so answers do not
    # move, over the band widths the models meet
    from qmodel.theory import routing
    node = qm.Node(qm.ServiceTime.affine(2e-3, 0.2e-3, jitter=("lognormal", 0.3)),
                   max_batch_size=8)
    cav = routing._Cavity(node, 0.7 * 4 * node.capacity, 4, 2, resolution, 1e-9)
    rng = np.random.default_rng(M)
    lam = rng.uniform(*scale, M) * cav.per_node
    q = np.arange(M)
    k_of, start = np.minimum(np.maximum(q, 1), cav.B), np.maximum(q, 1)
    w_end, w_surv = cav.ps[k_of - 1], cav.surv[k_of - 1] * cav.h
    after, occ = np.zeros((M, M)), np.zeros((M, M))
    for t, V in cav._steps(lam, 3.0, "oracle"):
        after += w_end[:, t][:, None] * V[start]
        occ += w_surv[:, t][:, None] * V[start]
    bands, width = cav._propagator(lam, 3.0, "compiled")
    assert widths[0] <= width <= widths[1]
    got_after, got_occ = np.zeros((M, M)), np.zeros((M, M))
    routing._birth_sums()(bands, start, np.ascontiguousarray(w_end),
                          np.ascontiguousarray(w_surv), got_after, got_occ)
    assert np.array_equal(got_after, after) and np.array_equal(got_occ, occ)
    assert after.sum() > 0.5 * M                      # the laws carry their mass
    with pytest.raises(IndexError, match="start row"):
        routing._birth_sums()(bands[:, :1], np.array([1]), w_end[:1], w_surv[:1],
                              np.zeros((1, 1)), np.zeros((1, 1)))


def test_the_cavity_model_without_numba_gives_the_same_bits(monkeypatch):
    # where numba is missing or its JIT is off, _solve_node takes numpy's products: a real
    # fixed point (B 32, 128 nodes, power of two) solved both ways
    from qmodel.theory import routing
    node = qm.Node(qm.ServiceTime.affine(1.8874e-3, 0.1438e-3), max_batch_size=32)
    rate = 0.7 * 128 * node.capacity
    coarse = routing._Cavity(node, rate, 128, 2, routing.COARSE_RESOLUTION, 1e-9)
    coarse.fixed_point()
    compiled = coarse._solve_node(coarse.lam)
    monkeypatch.setitem(routing._compiled, "birth_sums", None)
    plain = coarse._solve_node(coarse.lam)
    for a, b in zip(compiled, plain):
        assert np.array_equal(np.asarray(a), np.asarray(b))


def test_dynamic_routers_outside_the_model_say_why():
    node = _node(8, 0, 1)
    # max_batch_size 2: the round-robin surrogate ran up to twice the simulated p99
    with pytest.raises(NotImplementedError, match="max_batch_size >= 4"):
        qm.predict(qm.Cluster(_node(2, 0, 1), count=128, router="least_outstanding"),
                   rate=1000.0, fallback="raise")
    # jittery service: the router reacts to service times, round robin does not (+29%)
    with pytest.raises(NotImplementedError, match="cv <= 0.1"):
        qm.predict(qm.Cluster(_node(8, 0, 1, "lognormal"), count=8, router="least_outstanding"),
                   rate=1000.0, fallback="raise")
    # power of two over one-request nodes: N >= 8 and N (1 - load) >= 2.4; over batching nodes
    # N >= 4 and N (1 - load) >= 0.8
    single = _node(1, 0, 1)
    with pytest.raises(NotImplementedError, match="N >= 8"):
        qm.predict(qm.Cluster(single, count=4, router="power_of_two"), rate=1000.0,
                   fallback="raise")
    big = qm.Cluster(single, count=32, router="power_of_two")
    with pytest.raises(NotImplementedError, match=r"N x \(1 - load\)"):
        qm.predict(big, rate=0.95 * big.capacity, fallback="raise")
    small = qm.Cluster(node, count=3, router="power_of_two")
    with pytest.raises(NotImplementedError, match="N >= 4"):
        qm.predict(small, rate=0.5 * small.capacity, fallback="raise")
    four = qm.Cluster(node, count=4, router="power_of_two")
    with pytest.raises(NotImplementedError, match=r"N x \(1 - load\) >= 0.8"):
        qm.predict(four, rate=0.9 * four.capacity, fallback="raise")
    assert qm.predict(four, rate=0.8 * four.capacity).model == "cavity"
    # several instances: as round robin over 2, inside the grid's measured domain only
    with pytest.raises(NotImplementedError, match="family 'power_of_two_several_delay'"):
        qm.predict(qm.Cluster(_node(8, 1, 2), count=32, router="power_of_two"), rate=1000.0,
                   fallback="raise")
    finite = qm.Node(node.service, max_batch_size=8, max_queue_size=16, instances=2)
    with pytest.raises(NotImplementedError, match=r"a finite queue \(max_queue_size 16\)"):
        qm.predict(qm.Cluster(finite, count=8, router="power_of_two"), rate=1000.0,
                   fallback="raise")
    with pytest.raises(NotImplementedError, match="identical nodes"):
        qm.predict(qm.Cluster([node] * 15 + [_node(4, 0, 1)], router="power_of_two"),
                   rate=1000.0, fallback="raise")
    with pytest.raises(NotImplementedError, match="Poisson"):
        qm.predict(big, arrivals=qm.Renewal(1000.0, scv=0.5), fallback="raise")


def test_no_model_falls_back_to_the_simulator_and_says_so():
    """Least outstanding over single-instance nodes of max_batch_size 2 has no model: predict
    answers by simulation, labelled as such, reproducibly (fixed seed), and matches a
    simulation of its own."""
    cluster = qm.Cluster(_node(2, 0, 1), count=4, router="least_outstanding")
    rate = 0.7 * cluster.capacity
    with pytest.raises(NotImplementedError, match="least_outstanding"):
        qm.predict(cluster, rate=rate, fallback="raise")
    pred = qm.predict(cluster, rate=rate)
    assert pred.accuracy.is_fallback and pred.accuracy.exactness == "simulation"
    assert "least_outstanding" in pred.accuracy.fallback_reason     # the reason, from the model
    assert pred.accuracy.simulation.requests == pred.requests
    lo, hi = pred.ci(0.99)
    assert (hi - lo) / 2 <= 0.02 * pred.p99                          # the fallback's CI target
    assert qm.predict(cluster, rate=rate).p99 == pred.p99            # fixed seed
    # against an independent run: both are estimates, so the bound is the sum of their 99%
    # intervals' half-widths (wider than the interval of the difference)
    sim = qm.simulate(cluster, rate=rate, requests=600_000, seed=12)
    for p in (0.95, 0.99):
        (a, b), (c, d) = pred.ci(p, level=0.99), sim.ci(p, level=0.99)
        assert abs(pred.quantile(p) - sim.quantile(p)) <= (b - a) / 2 + (d - c) / 2, p
    with pytest.raises(ValueError, match="fallback='maybe'"):
        qm.predict(cluster, rate=rate, fallback="maybe")
    # a single node no model covers (a queue shorter than a batch, with a delay) falls back too
    short = qm.Node(_node(8, 0, 1).service, max_batch_size=8, max_queue_size=4,
                    max_queue_delay=1e-3)
    node_pred = qm.predict(short, rate=500.0)
    assert node_pred.accuracy.is_fallback
    assert "max_queue_size=4" in node_pred.accuracy.fallback_reason
    with pytest.raises(qm.UnstableError):                          # checked before any model
        qm.predict(cluster, rate=1.01 * cluster.capacity)


def test_power_of_two_with_a_delay_calibrates_a_renewal_stream(assert_within):
    # the node with its delay under the renewal stream whose scv makes the no-delay node match
    # the cavity model: measured within 2.4% of the simulator (N = 32, B = 8, D = S(1), load
    # 0.7: +0.1%); bound 5% + CI
    cluster = qm.Cluster(_node(8, 1, 1), count=32, router="power_of_two")
    rate = 0.7 * cluster.capacity
    pred = qm.predict(cluster, rate=rate)
    scv = pred.accuracy.approximation("calibrated_stream").value
    assert 0.005 <= scv < 1.0                  # the routed stream is smoother than Poisson
    assert_within(pred, qm.simulate(cluster, rate=rate, requests=600_000, seed=12), 0.05)


@pytest.mark.parametrize("B, N, load, bound", [(8, 8, 0.7, 0.06), (8, 32, 0.9, 0.06),
                                               (4, 8, 0.7, 0.13)])
def test_least_outstanding_with_batching_is_close_to_round_robin(B, N, load, bound,
                                                                 assert_within):
    # level outstanding counts send requests to the nodes in turn: the round-robin model was
    # 0.2% above to 5.6% below the simulated least-outstanding p99 for B >= 8 on the quick
    # router grid (these two measured -1.5% and -2.0%), within 12.8% at B = 4
    # (validation/least_outstanding_small_batch.py); bound 6% (B = 8) or 13% (B = 4) + CI
    cluster = qm.Cluster(_node(B, 0, 1), count=N, router="least_outstanding")
    rate = load * cluster.capacity
    pred = qm.predict(cluster, rate=rate)
    assert pred.model == "least_outstanding_as_round_robin"
    assert_within(pred, qm.simulate(cluster, rate=rate, requests=600_000, seed=13), bound)


def test_least_outstanding_with_batching_under_renewal_arrivals(assert_within):
    # the round-robin surrogate under renewal input (every N-th arrival: gaps of scv s / N):
    # validation/least_outstanding_renewal.py measured p99 within 7.4% at B = 8 and 32, N = 4-32,
    # scv 0.5 and 2 (this one -1.3%); bound 8% + CI. Below B = 8 it is not measured: declined.
    cluster = qm.Cluster(_node(8, 0, 1), count=8, router="least_outstanding")
    arrivals = qm.Renewal(0.8 * cluster.capacity, scv=2.0)
    pred = qm.predict(cluster, arrivals=arrivals)
    assert pred.model == "least_outstanding_as_round_robin"
    assert measured("least_outstanding_as_round_robin_renewal") in pred.accuracy.measured
    assert_within(pred, qm.simulate(cluster, arrivals=arrivals, requests=600_000, seed=13), 0.08)
    small = qm.Cluster(_node(4, 0, 1), count=8, router="least_outstanding")
    with pytest.raises(NotImplementedError, match="max_batch_size >= 8"):
        qm.predict(small, arrivals=qm.Renewal(0.5 * small.capacity, scv=2.0), fallback="raise")


@pytest.mark.parametrize("jitter, N, load", [("deterministic", 4, 0.8), ("exponential", 2, 0.9),
                                             ("lognormal", 8, 0.8), ("deterministic", 32, 0.95)])
def test_least_outstanding_without_batching_is_the_balanced_model(jitter, N, load, assert_within):
    # central-queue count, the shortest node holds floor(n / N), equilibrium residual, and
    # how often a request waits from the busy-nodes/extras chain: these measured -6.4% to
    # -0.9% on p95 and p99 (seed 14, 600,000 requests); over the router grid (1 million
    # requests or more) p99 within 5.0% and p95 within 4.5%; bound 6% + CI
    j = {"deterministic": "deterministic", "exponential": "exponential",
         "lognormal": ("lognormal", 0.3)}[jitter]
    node = qm.Node(qm.ServiceTime.affine(TAU0, ALPHA, jitter=j), max_batch_size=1)
    cluster = qm.Cluster(node, count=N, router="least_outstanding")
    rate = load * cluster.capacity
    # jittery nodes lie outside the family's measured domain (deterministic): extrapolated
    pred = qm.predict(cluster, rate=rate, extrapolate=True, fallback="raise")
    assert pred.model == "balanced_queues"
    assert pred.accuracy.exactness == "approximation"
    assert_within(pred, qm.simulate(cluster, rate=rate, requests=600_000, seed=14), 0.06)


def test_power_of_n_is_least_outstanding(assert_within):
    # power of two over two nodes samples both and breaks ties at random, as least outstanding
    # does (the simulator's rule): the same model answers; bound 6% + CI as above
    cluster = qm.Cluster(_node(1, 0, 1), count=2, router="power_of_two")
    rate = 0.8 * cluster.capacity
    pred = qm.predict(cluster, rate=rate)
    # power of N samples every node: least outstanding's balanced-queue model answers
    assert pred.model == "balanced_queues"
    assert [m.family for m in pred.accuracy.measured] == ["least_outstanding_balanced"]
    assert_within(pred, qm.simulate(cluster, rate=rate, requests=600_000, seed=15), 0.06)


def test_what_the_dynamic_router_model_cannot_take_is_refused_before_it():
    # the description and predict check once; the model (qmodel.theory.routing) trusts them
    node = _node(8, 0, 1)
    with pytest.raises(ValueError, match="choices"):
        qm.Cluster(node, count=4, router="power_of_d", choices=5)
    with pytest.raises(ValueError, match="count"):
        qm.Cluster(node, count=0, router="power_of_two")
    cluster = qm.Cluster(node, count=16, router="power_of_two")
    with pytest.raises(ValueError, match="rate"):
        qm.predict(cluster, rate=-1.0)
    with pytest.raises(qm.UnstableError, match="capacity"):
        qm.predict(cluster, rate=5 * cluster.capacity)
    two = qm.Cluster(qm.Node(node.service, max_batch_size=8, instances=2, max_queue_size=64),
                     count=16, router="power_of_two")
    with pytest.raises(NotImplementedError, match="a finite queue"):
        qm.predict(two, rate=0.5 * two.capacity, fallback="raise")


def test_waiting_probability_names_bad_input():
    from qmodel.theory.jsq import waiting_probability
    with pytest.raises(ValueError, match="nodes must be a whole number"):
        waiting_probability(0, 0.5)
    with pytest.raises(ValueError, match="load must lie strictly between 0 and 1"):
        waiting_probability(4, 1.2)


def test_a_cluster_family_checks_every_node_not_only_the_first():
    """Cluster([a, b]) was answered and Cluster([b, a]) declined: only the first node's
    features were checked against the cluster family's measured domain (issue 35, defect 4)."""
    s = qm.ServiceTime.affine(1e-3, 1e-4)
    a = qm.Node(s, max_batch_size=8)
    b = qm.Node(s, max_batch_size=8, instances=4, max_queue_size=20)
    for nodes in ([a, b], [b, a]):
        cluster = qm.Cluster(nodes, router="round_robin")
        # b lies outside both round-robin families (one instance; several instances,
        # measured with jitter and an unlimited queue), whichever is checked first
        with pytest.raises(NotImplementedError, match=r"is outside .*, where family 'round_robin"):
            qm.predict(cluster, rate=0.5 * cluster.capacity, fallback="raise")
    alike = qm.Cluster([a, a], router="round_robin")
    assert qm.predict(alike, rate=0.5 * alike.capacity, fallback="raise").model == "mixture"
