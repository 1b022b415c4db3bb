"""The batch-node model against exact results: M/D/1, M/M/1, Inoue's mean, its own bookkeeping."""

import math

import numpy as np
import pytest
import sympy as sp
from scipy import optimize, stats

import qmodel as qm
from qmodel.campaign.grids import GRID_SERVICE
from qmodel.derivations import load as load_derivation
from qmodel.theory import batch_node, md1, mg1, mmc
from qmodel.theory.lindley import gig1

TAU0, ALPHA = GRID_SERVICE.base, GRID_SERVICE.per_item      # Inoue (2021), V100 fit


@pytest.mark.parametrize("rho", [0.5, 0.8])
def test_one_request_per_batch_is_md1(rho):
    # B = 1 with deterministic service is M/D/1: quantiles agree within the lattice step h
    node = qm.Node(qm.ServiceTime.affine(base=1.0), max_batch_size=1)
    r, exact = batch_node(node, rho), md1(rho, 1.0)
    for p in (0.5, 0.95, 0.99, 0.999):
        assert abs(r.quantile(p) - exact.quantile(p)) <= r.h
    assert abs(r.mean - exact.mean) <= r.h


def test_exponential_service_is_mm1():
    node = qm.Node(qm.ServiceTime.affine(base=1.0, jitter="exponential"), max_batch_size=1)
    r, exact = batch_node(node, 0.7), mmc(0.7, 1.0, 1)
    for p in (0.5, 0.95, 0.99):
        assert abs(r.quantile(p) - exact.quantile(p)) <= r.h


@pytest.mark.parametrize("rate", [500.0, 3000.0])
def test_mean_agrees_with_inoue_for_unbounded_batches(rate):
    # Inoue (2021): greedy batching, unlimited B, S(b) = tau0 + alpha b:
    # E[T] = alpha + tau0 + (1 + 2 lambda alpha)(E[b^2] - E[b]) / (2 lambda E[b]),
    # with b the batch size of the embedded chain. B = 128 is never reached here.
    node = qm.Node(qm.ServiceTime.affine(TAU0, ALPHA), max_batch_size=128)
    r = batch_node(node, rate)
    k = np.array(list(r.batch_size_distribution), float)
    p = np.array(list(r.batch_size_distribution.values()))
    eb, eb2 = k @ p, (k * k) @ p
    inoue = ALPHA + TAU0 + (1 + 2 * rate * ALPHA) * (eb2 - eb) / (2 * rate * eb)
    assert abs(r.mean - inoue) <= r.h


def test_bookkeeping_is_consistent():
    node = qm.Node(qm.ServiceTime.affine(TAU0, ALPHA, jitter=("lognormal", 0.3)),
                   max_batch_size=8, max_queue_delay=1e-3, instances=2)
    rate = 0.6 * node.capacity
    r = batch_node(node, rate)
    sizes = np.array(list(r.batch_size_distribution))
    probs = np.array(list(r.batch_size_distribution.values()))
    assert probs.sum() == pytest.approx(1.0)
    # utilisation = rate * E[S(b)] / (c E[b]) with b per batch
    busy = rate * (probs @ node.service.mean(sizes)) / (2 * (probs @ sizes))
    assert r.utilization == pytest.approx(busy, rel=1e-9)
    t = np.linspace(0, 0.05, 200)
    assert np.all(np.diff(r.cdf(t)) >= 0)
    for p in (0.5, 0.9, 0.99):
        assert r.cdf(r.quantile(p)) == pytest.approx(p, abs=1e-9)


def test_what_the_result_claims():
    svc = qm.ServiceTime.affine(TAU0, ALPHA)
    greedy = batch_node(qm.Node(svc, max_batch_size=8), 2000.0)
    assert greedy.accuracy.exactness == "numerical"
    assert greedy.accuracy.lattice_step == greedy.h and greedy.accuracy.approximations == ()
    delayed = batch_node(qm.Node(svc, max_batch_size=8, max_queue_delay=2e-3), 2000.0)
    assert delayed.accuracy.exactness == "approximation"
    assert delayed.accuracy.approximation_keys == ("left_behind_age",)
    pooled = batch_node(qm.Node(svc, max_batch_size=8, instances=2), 2000.0)
    assert "staggered_instances" in pooled.accuracy.approximation_keys


def test_bad_input_is_named():
    # the rate is checked once, by predict, before any solver; batch_node trusts it
    node = qm.Node(qm.ServiceTime.affine(TAU0, ALPHA), max_batch_size=8)
    with pytest.raises(qm.UnstableError, match="capacity"):
        qm.predict(node, rate=2 * node.capacity)
    with pytest.raises(ValueError, match="rate"):
        qm.predict(node, rate=-5.0)
    with pytest.raises(NotImplementedError, match="max_queue_size=6 < max_batch_size=8"):
        batch_node(qm.Node(node.service, max_batch_size=8, max_queue_size=6), 100.0)
    with pytest.raises(NotImplementedError, match="max_queue_size=5000"):   # a model limit
        batch_node(qm.Node(node.service, max_batch_size=8, max_queue_size=5000), 100.0)


@pytest.mark.parametrize("queue, load", [(4, 0.7), (10, 1.3)])
def test_finite_queue_one_request_per_batch_is_mm1k(queue, load):
    # M/M/1/K with K = queue + 1 in the system: P(n) proportional to rho^n, an arrival is
    # rejected when it finds K, and one that finds n < K stays Erlang(n + 1, mu) in total
    mu = 500.0
    node = qm.Node(qm.ServiceTime.affine(1 / mu, jitter="exponential"), max_batch_size=1,
                   max_queue_size=queue)
    r = batch_node(node, load * mu)
    K = queue + 1
    p_n = load ** np.arange(K + 1)
    p_n /= p_n.sum()
    # the lattice step here is set by the exponential law's long tail (200 points up to its
    # 1e-10 quantile: h = 0.115 / mu); measured 0.02% and 0.2% off at that step
    assert r.rejection_fraction == pytest.approx(p_n[K], rel=5e-3)
    served = p_n[:K] / p_n[:K].sum()
    t = np.linspace(0.5, 12, 24) / mu
    exact = sum(w * stats.gamma.cdf(t, n + 1, scale=1 / mu) for n, w in enumerate(served))
    assert np.max(np.abs(r.cdf(t) - exact)) < 2e-3
    for p in (0.5, 0.95, 0.99):
        q = optimize.brentq(lambda x: sum(w * stats.gamma.cdf(x, n + 1, scale=1 / mu)
                                          for n, w in enumerate(served)) - p, 0, 100 / mu)
        assert abs(r.quantile(p) - q) <= r.h


@pytest.mark.parametrize("rho", [0.5, 0.8, 0.95])
def test_pollaczek_khinchine_lattice_matches_mm1_md1_and_mg1(rho):
    # GI/G/1 with Poisson arrivals is M/G/1, solved by the Pollaczek-Khinchine formula on the
    # lattice: against the exact M/M/1, M/D/1 and the transform inversion of M/G/1 (lognormal)
    exp = gig1(rho, qm.ServiceTime.affine(1.0, jitter="exponential"), arrival_scv=1.0)
    det = gig1(rho, qm.ServiceTime.affine(1.0), arrival_scv=1.0)
    logn_service = qm.ServiceTime.affine(1.0, jitter=("lognormal", 0.5))
    logn = gig1(rho, logn_service, arrival_scv=1.0)
    assert exp.model == "pollaczek_khinchine_lattice"
    for p in (0.5, 0.95, 0.99):
        assert abs(exp.quantile(p) - mmc(rho, 1.0, 1).quantile(p)) <= 2 * exp.h
        assert abs(det.quantile(p) - md1(rho, 1.0).quantile(p)) <= 2 * det.h
        assert abs(logn.quantile(p) - mg1(rho, logn_service).quantile(p)) <= 2 * logn.h


@pytest.mark.parametrize("scv", [0.5, 2.0])
@pytest.mark.parametrize("rho", [0.5, 0.9])
def test_lindley_recursion_matches_gim1(scv, rho):
    # Renewal (gamma) arrivals and exponential service: GI/M/1, whose sojourn time is exactly
    # exponential with rate mu (1 - sigma), sigma the root in (0, 1) of
    # sigma = A*(mu (1 - sigma)), A*(s) = (1 + s scv / rate)^(-1 / scv) the gamma transform
    mu, rate = 1.0, rho
    sigma = optimize.brentq(lambda z: z - (1 + mu * (1 - z) * scv / rate) ** (-1 / scv),
                            1e-12, 1 - 1e-12)
    r = gig1(rate, qm.ServiceTime.affine(1 / mu, jitter="exponential"), arrival_scv=scv)
    assert r.model == "lindley_lattice"
    for p in (0.5, 0.95, 0.99):
        assert abs(r.quantile(p) - (-math.log(1 - p) / (mu * (1 - sigma)))) <= 2 * r.h


def _dense_stationary(T):
    """Reference: the left eigenvector of T for eigenvalue 1, normalised."""
    w, v = np.linalg.eig(T.T)
    pi = np.real(v[:, np.argmin(abs(w - 1))])
    return pi / pi.sum()


def _banded_stationary(T, order, left_out=()):
    """The banded solver on the chain T, its states numbered ``order``; ``left_out`` states
    are not in the system."""
    from qmodel.theory.batch.banded import BandedChain
    live = np.ones(len(T), bool)
    live[list(left_out)] = False
    index = np.full(len(T), -1)
    index[live] = live.sum() - 1 - np.argsort(np.argsort(np.asarray(order)[live]))
    system = BandedChain(index)
    frm, to = np.nonzero(T * live[:, None])        # a state left out has no transitions
    system.add(frm, to, T[frm, to])
    return system.stationary()


@pytest.mark.parametrize("groups", [1, 2])
def test_banded_stationary_solver_matches_dense(groups):
    # a skip-free-to-the-left chain like the batch chain's: down by at most 3, up by up to 7
    rng = np.random.default_rng(5)
    n = 60
    T = np.zeros((n, n))
    for i in range(n):
        lo, hi = max(i - 3, 0), min(i + 8, n)
        T[i, lo:hi] = rng.random(hi - lo)
        T[i] /= T[i].sum()
    within = np.arange(n)
    order = within if groups == 1 else (within % (n // 2)) * 2 + within // (n // 2)
    pi = _banded_stationary(T, order)
    np.testing.assert_allclose(pi, _dense_stationary(T), atol=1e-12)
    np.testing.assert_allclose(pi @ T, pi, atol=1e-12)


@pytest.mark.parametrize("small_block", [True, False])
@pytest.mark.parametrize("per_row", [False, True])
def test_banded_solver_takes_the_long_queue_part_as_a_block(small_block, per_row, monkeypatch):
    # a batch-like chain: states 0..3 are "nobody left" records, state 3 + m (m = 1..N) left
    # m waiting; from those, x arrivals (law a, one for all rows or one per row) make n = m +
    # x, and a batch of K = 3 leaves n - K (or goes to record n - 1 when n <= K; to state 0
    # when n < 3). The long-queue rows with n >= 3 go in as one block, the rest as triplets;
    # both ways of writing the block (one bincount, one slice per x) must give the dense
    # answer.
    from qmodel.theory.batch import banded
    rng = np.random.default_rng(8)
    K, N, J = 3, 40, 7
    a = rng.random((N, J) if per_row else J)            # arrival law, the same or per row
    a /= a.sum(axis=-1, keepdims=True)
    law = a if per_row else np.broadcast_to(a, (N, J))
    size = 1 + K + N
    n_all = np.arange(N + J)
    to_of_n = np.where(n_all > K, K + np.minimum(n_all - K, N), np.maximum(n_all, 1) - 1)
    T = np.zeros((size, size))
    for m in range(1, N + 1):
        for x in range(J):                # fewer than n_min = 3 waiting: to state 0 instead
            T[K + m, to_of_n[m + x] if m + x >= 3 else 0] += law[m - 1, x]
    for k in range(K + 1):
        T[k, to_of_n[1:J + 1]] += law[0] * 0.5 + 0.5 / J
        T[k] /= T[k].sum()
    monkeypatch.setattr(banded.BandedChain, "SMALL_BLOCK", 10**9 if small_block else 0)
    system = banded.BandedChain(size - 1 - np.arange(size))
    system.add_block(K + 1 + np.arange(N), to_of_n, a, n_min=3)
    frm, to = np.nonzero(T[:K + 1])
    system.add(frm, to, T[frm, to])
    # (m, x) = (1, 0), (1, 1), (2, 0): to state 0
    system.add(K + 1 + np.array([0, 0, 1]), 0, law[[0, 0, 1], [0, 1, 0]])
    pi = system.stationary()
    np.testing.assert_allclose(pi, _dense_stationary(T), atol=1e-12)
    i, j, v = system.transitions()
    rebuilt = np.zeros((size, size))
    np.add.at(rebuilt, (size - 1 - j, size - 1 - i), v)
    np.testing.assert_allclose(rebuilt, T, atol=1e-15)


def test_banded_solver_leaves_out_the_states_it_is_told_to():
    # states 5-9 are never entered: without them the system is smaller, same answer
    rng = np.random.default_rng(6)
    n = 30
    T = rng.random((n, n)) * (np.abs(np.subtract.outer(np.arange(n), np.arange(n))) < 4)
    T[:, 5:10] = 0.0
    T /= T.sum(axis=1, keepdims=True)
    pi = _banded_stationary(T, np.arange(n), left_out=range(5, 10))
    assert np.all(pi[5:10] == 0.0)
    np.testing.assert_allclose(pi, _dense_stationary(T), atol=1e-12)
    # a transition into a state left out is a mistake, not a silent renumbering
    from qmodel.theory.batch.banded import BandedChain
    index = np.where((np.arange(n) >= 5) & (np.arange(n) < 10), -1, np.arange(n))
    with pytest.raises(ValueError, match="left out"):
        BandedChain(index).add(np.array([0]), np.array([7]), np.array([1.0]))


def test_banded_stationary_solver_where_the_first_states_are_transient():
    # states 0-29 lead away for good: the normalisation row of state 0 sees no mass, so the
    # solver must fall back to the row of the most likely state
    n = 80
    T = np.zeros((n, n))
    for i in range(30):
        T[i, i + 1] = 1.0
    for i in range(30, n):
        T[i, max(i - 1, 30)] += 0.6
        T[i, min(i + 1, n - 1)] += 0.4
    pi = _banded_stationary(T, np.arange(n))
    assert pi[:30].sum() < 1e-12
    np.testing.assert_allclose(pi @ T, pi, atol=1e-12)
    assert abs(pi.sum() - 1) < 1e-12


@pytest.mark.parametrize("k", [1, 3, 8])
def test_erlang_counts_match_their_definition(k):
    # N(t) = floor((P + U) / k), P ~ Poisson(k rate t), U uniform on 0..k-1: the definition,
    # summed over U with Poisson cdfs, against the triangular-weight computation
    from qmodel.theory.batch.arrivals import erlang_counts
    rate, times, count = 50.0, np.linspace(0.0, 0.4, 9), 80
    n = np.arange(count)[None, :]
    mean = k * rate * times[:, None]
    cdf = stats.poisson.cdf
    direct = sum(cdf(n * k + k - 1 - u, mean) - cdf(n * k - u - 1, mean) for u in range(k)) / k
    got = erlang_counts(rate, k, times, count)
    np.testing.assert_allclose(got, direct, atol=1e-13)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, atol=1e-12)
    # mean count rate t (stationary renewal process)
    np.testing.assert_allclose(got @ np.arange(count), rate * times, atol=1e-9)


def test_batch_node_limits_blas_to_one_thread_for_the_call_only():
    from threadpoolctl import threadpool_info, threadpool_limits
    from qmodel.theory import blas

    def blas_threads():
        return sorted(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")

    with threadpool_limits(limits=2, user_api="blas"):      # a caller's setting to restore
        before = blas_threads()
        seen = []
        blas.one_blas_thread(lambda: seen.append(blas_threads()))()
        batch_node(qm.Node(qm.ServiceTime.affine(1e-3, 1e-4), max_batch_size=4), rate=1000.0)
        assert before == [2] * len(before)
        assert seen == [[1] * len(before)]
        assert blas_threads() == before


def test_banded_stationary_solver_when_the_first_window_is_transient_but_not_singular():
    # states 0-29 are transient but lead on at random, so the system whose normalisation sits
    # on them is nearly (not exactly) singular and LAPACK returns a wrong answer without
    # complaint: an overloaded finite queue that never empties did this. The residual check
    # must catch it and the solver renormalise elsewhere.
    rng = np.random.default_rng(11)
    n = 80
    T = np.zeros((n, n))
    for i in range(30):
        T[i, i + 1:i + 8] = rng.random(7)
        T[i] /= T[i].sum()
    for i in range(30, n):
        lo, hi = max(i - 3, 30), min(i + 8, n)
        T[i, lo:hi] = rng.random(hi - lo)
        T[i] /= T[i].sum()
    pi = _banded_stationary(T, np.arange(n))
    assert pi[:30].sum() < 1e-12
    np.testing.assert_allclose(pi @ T, pi, atol=1e-12)
    np.testing.assert_allclose(pi, _dense_stationary(T), atol=1e-10)


def test_overloaded_finite_queue_with_renewal_arrivals_matches_a_dense_solve():
    # the node that exposed the case above (B = 32, queue 64, Erlang-2 arrivals at 1.3x
    # capacity): its p99 with the chain solved densely instead
    from qmodel.theory.batch.banded import BandedChain
    node = qm.Node(qm.ServiceTime.affine(2e-3, 0.3e-3), max_batch_size=32, max_queue_size=64)
    rate = 1.3 * node.capacity
    banded = batch_node(node, rate, arrival_scv=0.5)

    def dense(system):
        i, j, v = system.transitions()              # T' in the system's numbering
        T = np.zeros((system.size, system.size))
        np.add.at(T, (j, i), v)
        pi = np.zeros(system.index.size)
        live = system.index >= 0
        pi[live] = np.clip(_dense_stationary(T), 0.0, None)[system.index[live]]
        return pi

    original = BandedChain.stationary
    BandedChain.stationary = dense
    try:
        reference = batch_node(node, rate, arrival_scv=0.5)
    finally:
        BandedChain.stationary = original
    for p in (0.5, 0.95, 0.99):
        assert banded.quantile(p) == pytest.approx(reference.quantile(p), rel=1e-9)
    assert banded.rejection_fraction == pytest.approx(reference.rejection_fraction, rel=1e-9)


_SEVERAL = [(2, "deterministic", 0.0, 0.9), (4, ("lognormal", 0.3), 0.5, 0.7),
            (4, "deterministic", 2.0, 0.95)]


def _several(c, jitter, delay, load):
    """A B = 8 node with c instances and its rate at ``load``."""
    node = qm.Node(qm.ServiceTime.affine(2e-3, 0.15e-3, jitter=jitter), max_batch_size=8,
                   max_queue_delay=delay * 2.15e-3, instances=c)
    return node, load * node.capacity


@pytest.mark.parametrize("c, jitter, delay, load", _SEVERAL)
def test_several_instances_chain_without_its_unreached_records_matches_the_full_chain(
        c, jitter, delay, load, monkeypatch):
    # group 0's records that left requests behind are reached only through a zero blocking
    # after such a record; left out of the system, the answer must be the full system's
    from qmodel.theory.batch import chain
    node, rate = _several(c, jitter, delay, load)
    pruned = batch_node(node, rate)
    monkeypatch.setattr(chain, "PRUNE_UNREACHED", False)
    full = batch_node(node, rate)
    assert full.h == pruned.h
    np.testing.assert_allclose(pruned.pmf, full.pmf, atol=1e-12)


@pytest.mark.parametrize("c, jitter, delay, load", _SEVERAL)
def test_looser_truncation_of_the_passes_before_the_last_moves_the_answer_little(
        c, jitter, delay, load):
    # those passes give the next one only the batch-size law and the gaps' mean and scv
    from qmodel.theory.batch import DEFAULT_TAIL, PASSES
    from qmodel.theory.batch.arrivals import Arrivals
    from qmodel.theory.batch.node import solve_batch_node
    from qmodel.theory.batch.rules import Rules
    node, rate = _several(c, jitter, delay, load)
    loose = batch_node(node, rate)
    strict = solve_batch_node(Rules.of(node), Arrivals(rate), 100, DEFAULT_TAIL, PASSES,
                              pass_tail=DEFAULT_TAIL)
    assert loose.h == strict.h
    np.testing.assert_allclose(loose.pmf, strict.pmf, atol=1e-7)
    for p in (0.5, 0.95, 0.99):
        assert abs(loose.quantile(p) / strict.quantile(p) - 1) < 1e-5


@pytest.mark.parametrize("jitter, c", [("deterministic", 1), (("lognormal", 0.3), 4)])
def test_arrival_counts_beyond_the_cut_are_lumped_not_lost(jitter, c):
    # the counts past the cut carry less than 1e-3 of the truncation under every blocking
    # law, and go to the last count kept, so that every law's counts still sum to its mass
    from qmodel.theory.batch import DEFAULT_TAIL
    from qmodel.theory.batch.arrivals import Arrivals
    from qmodel.theory.batch.blocking import arrivals_during_blocking
    from qmodel.theory.batch.instances import blocking_laws
    from qmodel.theory.batch.lattice import first_step, lattice
    from qmodel.theory.batch.rules import Rules
    node = qm.Node(qm.ServiceTime.affine(2e-3, 0.15e-3, jitter=jitter), max_batch_size=32,
                   instances=c)
    rules, arrivals = Rules.of(node), Arrivals(0.9 * node.capacity)
    grid = lattice(rules, arrivals, first_step(rules, 100, DEFAULT_TAIL), DEFAULT_TAIL)
    blocking = blocking_laws(rules, grid, None)
    counts = arrivals_during_blocking(blocking, grid, arrivals.rate, rules.pmin, rules.B,
                                      DEFAULT_TAIL)
    beyond = blocking.ps @ grid.pois_lattice[:, counts.J:].sum(axis=1)
    assert 0 < beyond.max() <= DEFAULT_TAIL * 1e-3
    assert counts.J < grid.pois_lattice.shape[1]
    np.testing.assert_allclose(counts.A.sum(axis=1), blocking.ps.sum(axis=1), atol=1e-12)


def _group0_survival(c, busy_gaps, resolution):
    """P(V > v) of group 0's blocking for deterministic S = 1 ms, batches of one and
    exponential gaps of mean 1 ms / busy_gaps, on the model's lattice."""
    from qmodel.theory.batch import DEFAULT_TAIL
    from qmodel.theory.batch.arrivals import Arrivals
    from qmodel.theory.batch.instances import Gaps, staggered_law
    from qmodel.theory.batch.lattice import first_step, lattice
    from qmodel.theory.batch.rules import Rules
    s = 1e-3
    node = qm.Node(qm.ServiceTime.affine(s), max_batch_size=4, instances=c)
    rules = Rules.of(node)
    grid = lattice(rules, Arrivals(0.5 * node.capacity),
                   first_step(rules, resolution, DEFAULT_TAIL), DEFAULT_TAIL)
    gaps = Gaps(np.array([1.0, 0.0, 0.0, 0.0]), s / busy_gaps, 1.0)
    v = np.arange(grid.Ls) * grid.h
    inside = v < s - 1e-12
    # the c - 1 others busy at v given that the instance taken c dispatches ago was free:
    # qmodel/derivations/staggered_instances.py
    d = load_derivation("staggered_instances")
    law = d.result("others_busy_given_free").subs(
        {d.symbols["c"]: c, d.symbols["lam"]: busy_gaps / s, d.symbols["s"]: s}).doit()
    exact = sp.lambdify(d.symbols["v"], law, "numpy")(v[inside])
    survival = 1.0 - np.cumsum(staggered_law(grid.ps_own, gaps, c, grid.h)[0])
    return survival[inside], exact, grid.h / s


@pytest.mark.parametrize("c", [2, 3, 4, 8])
@pytest.mark.parametrize("busy_gaps", [0.5, 2.0, 6.0])
def test_group0_blocking_given_the_reused_instance_free_matches_the_closed_form(c, busy_gaps):
    # deterministic service and exponential gaps of rate r: P(others busy at v | reused free)
    # = (r (S - v))^(c-1) / (c-1)! / sum_{j<c} (r S)^j / j!. The lattice rounds each of the
    # c gaps by at most h/2 and the gap density is at most r, so the error is below c r h / 2
    model, exact, h_over_s = _group0_survival(c, busy_gaps, 100)
    assert np.abs(model - exact).max() <= c * busy_gaps * h_over_s / 2


def test_group0_blocking_converges_as_the_lattice_refines():
    coarse, exact_coarse, _ = _group0_survival(3, 2.0, 50)
    fine, exact_fine, _ = _group0_survival(3, 2.0, 200)
    assert np.abs(fine - exact_fine).max() < np.abs(coarse - exact_coarse).max() / 3


def test_passes_is_the_shipped_gap_iteration_unless_a_study_asks_for_another():
    from qmodel.theory.batch import PASSES
    node, rate = _several(4, "deterministic", 0.0, 0.7)
    shipped = batch_node(node, rate)
    np.testing.assert_array_equal(batch_node(node, rate, passes=PASSES).pmf, shipped.pmf)
    one = batch_node(node, rate, passes=1)
    assert one.h == shipped.h and not np.array_equal(one.pmf, shipped.pmf)
    # one instance has no gap iteration: passes changes nothing
    single = qm.Node(qm.ServiceTime.affine(2e-3, 0.15e-3), max_batch_size=8)
    np.testing.assert_array_equal(batch_node(single, 2000.0, passes=0).pmf,
                                  batch_node(single, 2000.0).pmf)
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="passes"):
            batch_node(node, rate, passes=bad)


def test_light_load_gap_lattice_stops_at_twice_the_service_lattice(monkeypatch):
    """At 0.02 req/s a gap spans millions of lattice steps: the staggered-instances law reads
    gaps only below 2 Ls, so its lattice stops there (the fuzz's predict-913 allocated 969 MiB
    for 127M cells and ended in MemoryError); the answer matches the simulator."""
    from qmodel.theory.batch import instances

    lengths = []
    cells = instances.lattice_cells

    def spy(law, scales, h, length):
        lengths.append(length)
        return cells(law, scales, h, length)

    monkeypatch.setattr(instances, "lattice_cells", spy)
    node = qm.Node(qm.ServiceTime.affine(4e-4, 2e-5, jitter=("lognormal", 0.1)),
                   max_batch_size=8, max_queue_delay=5e-4, instances=6)
    r = batch_node(node, 0.02)
    assert lengths and max(lengths) < 10_000
    # against the simulator's 95% intervals, widened by the model's lattice error
    s = qm.simulate(node, rate=0.02, requests=200_000, seed=1)
    err = r.accuracy.quantile_error or r.accuracy.lattice_step
    for p in (0.5, 0.99):
        lo, hi = s.ci(p)
        assert lo - err <= r.quantile(p) <= hi + err
