"""The sympy derivations (qmodel.derivations): every final expression, turned into numbers, against
qmodel's solvers or, for results qmodel does not implement yet, an independent computation; and
the rendered documents (qmodel.derive)."""

import math
import re
from html import unescape

import numpy as np
import pytest
import sympy as sp
from scipy import integrate, optimize, special, stats

import qmodel as qm
from qmodel.campaign.grids import GRID_SERVICE
from qmodel.derivations import MODULES, all_derivations, load
from qmodel.derivations import core as derivation_core
from qmodel.derivations.core import Mean, Prob
from qmodel.derivations.printing import to_mathml
from qmodel.cli import main as cli_main
from qmodel.derive import render
from qmodel.theory import (allen_cunneen_wait, batch_node, cramer_lundberg, gig1, gigc,
                           kingman_wait, md1, mg1, mmc)
from qmodel.theory.classical import erlang_c
from qmodel.theory.jsq import (_central_count, balanced_least_outstanding,
                               waiting_probability)

SEED = 20240611
TAU0, ALPHA = GRID_SERVICE.base, GRID_SERVICE.per_item      # Inoue (2021), V100 fit


def _rng(offset=0):
    return np.random.default_rng(SEED + offset)


def _truncated(expr, terms):
    """expr with every sum to infinity cut after ``terms`` terms."""
    return expr.replace(lambda e: isinstance(e, sp.Sum) and e.limits[0][2] == sp.oo,
                        lambda e: sp.Sum(e.function, (e.limits[0][0], e.limits[0][1],
                                                      e.limits[0][1] + terms - 1)))


def _numeric(expr, symbols, values):
    """A float from a sympy expression with the given symbols set (Sums summed)."""
    return float(sp.N(expr.subs(dict(zip(symbols, values))).doit(), 30))


# --------------------------------------------------------------------------------------------
# classical queues
# --------------------------------------------------------------------------------------------
def test_erlang_c_matches_the_erlang_b_recursion():
    d = load("mmc")
    c, a, rho = d.symbols["c"], d.symbols["a"], d.symbols["rho"]
    erlang = d.result("erlang_c").subs(rho, a / c)
    rng = _rng(1)
    for servers in range(1, 9):
        f = sp.lambdify(a, erlang.subs(c, servers).doit(), "math")
        for load_ in rng.uniform(0.05, 0.98, 3) * servers:
            assert f(load_) == pytest.approx(erlang_c(servers, load_), rel=1e-12)


def test_mmc_sojourn_cdf_and_mean_match_mmc():
    d = load("mmc")
    lam, mu, c, t = (d.symbols[k] for k in ("lam", "mu", "c", "t"))
    rng = _rng(2)
    for _ in range(6):
        servers = int(rng.integers(1, 6))
        rate_mu = rng.uniform(0.5, 2.0)
        rate = rng.uniform(0.1, 0.95) * servers * rate_mu
        exact = mmc(rate, rate_mu, servers)
        gamma = servers * rate_mu - rate
        if abs(gamma - rate_mu) < 1e-3 * rate_mu:          # removable singularity
            continue
        cdf = sp.lambdify((lam, mu, t), d.explicit("sojourn_cdf").subs(c, servers).doit(),
                          "numpy")
        times = np.array([0.1, 0.7, 2.0, 6.0]) / rate_mu
        np.testing.assert_allclose(cdf(rate, rate_mu, times), exact.cdf(times), atol=1e-12)
        mean = d.explicit("waiting_mean").subs(c, servers).doit()
        assert float(mean.subs({lam: rate, mu: rate_mu})) == pytest.approx(
            exact.waiting_mean, rel=1e-12)


def test_pollaczek_khinchine_mean_matches_mg1():
    d = load("pollaczek_khinchine")
    lam, m1, m2 = d.symbols["lam"], d.symbols["m1"], d.symbols["m2"]
    mean = sp.lambdify((lam, m1, m2), d.explicit("sojourn_mean"))
    rng = _rng(3)
    for cv in (1.0, 0.4, 1.7):
        m = rng.uniform(0.5, 3.0)
        rate = rng.uniform(0.2, 0.9) / m
        jitter = "exponential" if cv == 1.0 else ("gamma", cv)
        r = mg1(rate, qm.ServiceTime.affine(m, jitter=jitter))
        assert mean(rate, m, m * m * (1 + cv * cv)) == pytest.approx(r.mean, rel=1e-9)


def test_pollaczek_khinchine_transform_matches_mg1_waiting_time():
    # W*(s) = 1 - s int_0^inf exp(-s t) P(Wq > t) dt, the integral by quadrature of mg1's sf
    d = load("pollaczek_khinchine")
    lam, s, rho, sstar = (d.symbols[k] for k in ("lam", "s", "rho", "S_star"))
    m, cv, rate = 1.0, 0.6, 0.7
    k = 1 / cv ** 2
    transform = d.result("transform").subs(sstar(s), (1 + s * m / k) ** (-k))
    w_star = sp.lambdify((lam, rho, s), transform)
    r = mg1(rate, qm.ServiceTime.affine(m, jitter=("gamma", cv)))
    t = np.linspace(0.0, 80.0, 8001)
    sf = r.waiting_sf(t)
    for s_value in (0.2, 1.0, 3.0):
        numeric = 1 - s_value * integrate.simpson(np.exp(-s_value * t) * sf, x=t)
        assert w_star(rate, rate * m, s_value) == pytest.approx(numeric, abs=2e-6)


def test_pollaczek_khinchine_geometric_sum_is_what_the_lattice_computes():
    # the derived geometric-sum transform, with the gamma service transform, against the
    # Laplace transform of the lattice waiting-time law that gig1 uses for Poisson arrivals
    from qmodel.theory.lindley import _lindley_wait
    d = load("pollaczek_khinchine")
    lam, s, rho, m1 = (d.symbols[k] for k in ("lam", "s", "rho", "m1"))
    sstar, sestar = d.symbols["S_star"], d.symbols["Se_star"]
    m, cv, rate = 1.0, 0.6, 0.7
    k = 1 / cv ** 2
    gamma = (1 + s * m / k) ** (-k)
    geometric = d.result("geometric_sum").subs(
        sestar(s), d.result("residual_transform").subs(sstar(s), gamma))
    w_star = sp.lambdify((rho, m1, s), geometric)
    w, h, name, _ = _lindley_wait(rate, qm.ServiceTime.affine(m, jitter=("gamma", cv)), 1.0,
                                  1, 4096, 1e-9, 200_000)
    assert name == "Pollaczek-Khinchine"
    # the lattice keeps each summand's mean exact, so its transform is off at second order in
    # s h (measured: 3e-6 to 3e-5 here, against (s h)^2 = 2e-5 to 4.5e-3)
    for s_value in (0.2, 1.0, 3.0):
        lattice = float(w @ np.exp(-s_value * h * np.arange(w.size)))
        assert w_star(rate * m, m, s_value) == pytest.approx(lattice, abs=(s_value * h) ** 2)


def test_pollaczek_khinchine_exponential_case_is_mm1():
    d = load("pollaczek_khinchine")
    lam, mu, t = d.symbols["lam"], d.symbols["mu"], d.symbols["t"]
    f = sp.lambdify((lam, mu, t), d.result("mm1_waiting_sf"), "numpy")
    times = np.array([0.0, 1.0, 5.0, 20.0])
    np.testing.assert_allclose(f(0.8, 1.3, times), mmc(0.8, 1.3).waiting_sf(times), rtol=1e-12)


def test_erlang_md1_formula_matches_md1():
    d = load("md1")
    lam, D, t = d.symbols["lam"], d.symbols["D"], d.symbols["t"]
    wait = sp.lambdify((lam, D, t), d.explicit("waiting_cdf"), "math")
    sojourn = sp.lambdify((lam, D, t), d.explicit("sojourn_cdf"), "math")
    first = sp.lambdify((lam, D, t), d.explicit("first_interval"), "math")
    # published values (theory notes): D = 1, rho = 0.8
    for w, value in ((0.5, 0.298365), (2.0, 0.634520), (5.0, 0.899503)):
        assert wait(0.8, 1.0, w) == pytest.approx(value, abs=5e-7)
    rng = _rng(4)
    for _ in range(8):
        service = rng.uniform(0.5, 2.0)
        rate = rng.uniform(0.1, 0.9) / service
        exact = md1(rate, service)
        for w in rng.uniform(0.0, 6.0, 3) * service:    # float64 suffices this close to 0
            assert wait(rate, service, w) == pytest.approx(exact.waiting_cdf(w), abs=1e-9)
            assert sojourn(rate, service, w + service) == pytest.approx(
                exact.cdf(w + service), abs=1e-9)
        u = 0.5 * service
        assert first(rate, service, u) == pytest.approx(exact.waiting_cdf(u), abs=1e-12)


# --------------------------------------------------------------------------------------------
# tails and baselines
# --------------------------------------------------------------------------------------------
def test_cramer_lundberg_closed_forms_match_tails():
    d = load("cramer_lundberg")
    lam, mu, D, rho, theta = (d.symbols[k] for k in ("lam", "mu", "D", "rho", "theta"))
    decay = sp.lambdify((rho, D), d.result("md1_decay"), "scipy")
    constant = sp.lambdify((rho, D, theta), d.result("md1_constant"))
    rng = _rng(5)
    for _ in range(5):
        service = rng.uniform(0.5, 2.0)
        rate = rng.uniform(0.2, 0.95) / service
        r = cramer_lundberg(rate, service)
        th = float(np.real(decay(rate * service, service)))
        assert th == pytest.approx(r.decay_rate, rel=1e-10)
        assert constant(rate * service, service, th) == pytest.approx(r.constant, rel=1e-9)
    r = cramer_lundberg(0.6, qm.ServiceTime.affine(1 / 1.5, jitter="exponential"))
    assert float(d.result("mm1_decay").subs({lam: 0.6, mu: 1.5})) == pytest.approx(
        r.decay_rate, rel=1e-12)
    assert float(d.result("mm1_constant").subs({lam: 0.6, mu: 1.5})) == pytest.approx(
        r.constant, rel=1e-12)


def test_cramer_lundberg_equation_and_constant_for_gamma_service():
    # the general equation, solved here by scipy with the gamma MGF (1 - theta m / k)^-k
    d = load("cramer_lundberg")
    lam, rho, theta, M = (d.symbols[k] for k in ("lam", "rho", "theta", "M"))
    m_s, k_s = sp.symbols("m k", positive=True)
    mgf = sp.Lambda(theta, (1 - theta * m_s / k_s) ** (-k_s))
    eq = d.result("equation").subs(M(theta), mgf(theta))
    h = sp.lambdify((theta, lam, m_s, k_s), eq.lhs - eq.rhs)
    const = d.result("constant").subs(M(theta), mgf(theta)).doit()
    const = sp.lambdify((theta, lam, rho, m_s, k_s), const)
    rng = _rng(6)
    for cv in (0.3, 0.7, 1.3):
        m, k = rng.uniform(0.5, 2.0), 1 / cv ** 2
        rate = rng.uniform(0.3, 0.9) / m
        top = k / m * (1 - 1e-12)
        th = optimize.brentq(h, 1e-9 * top, top, args=(rate, m, k), xtol=1e-15, rtol=1e-14)
        r = cramer_lundberg(rate, qm.ServiceTime.affine(m, jitter=("gamma", cv)))
        assert th == pytest.approx(r.decay_rate, rel=1e-9)
        assert const(th, rate, rate * m, m, k) == pytest.approx(r.constant, rel=1e-8)


def test_kingman_and_allen_cunneen_match_baselines():
    d = load("kingman")
    lam, m1, ca2, cs2, c = (d.symbols[k] for k in ("lam", "m1", "ca2", "cs2", "c"))
    kingman = sp.lambdify((lam, m1, ca2, cs2), d.explicit("kingman"))
    rng = _rng(7)
    for _ in range(6):
        m, a2, s2 = rng.uniform(0.5, 2.0), rng.uniform(0, 3), rng.uniform(0, 3)
        rate = rng.uniform(0.1, 0.95) / m
        assert kingman(rate, m, a2, s2) == pytest.approx(kingman_wait(rate, m, s2, a2),
                                                         rel=1e-12)
        servers = int(rng.integers(1, 7))
        rate_c = rate * servers
        ac = sp.lambdify((lam, m1, ca2, cs2), d.explicit("allen_cunneen").subs(
            c, servers).doit())
        assert ac(rate_c, m, a2, s2) == pytest.approx(
            allen_cunneen_wait(rate_c, m, s2, servers, a2), rel=1e-12)
    # the bound lies above the approximation (here c_a^2 = 1, rho = 0.5)
    bound = sp.lambdify((lam, m1, ca2, cs2), d.explicit("kingman_bound"))
    assert bound(0.5, 1.0, 1.0, 0.5) >= kingman(0.5, 1.0, 1.0, 0.5)


def _sojourn_quantile(cdf, p, top):
    """The p-quantile of a sojourn cdf given as a float function (brentq on [0, top])."""
    return optimize.brentq(lambda x: cdf(x) - p, 0.0, top, xtol=1e-12)


@pytest.mark.parametrize("rate, rate_mu, servers", [(1.6, 1.0, 2), (3.3, 1.0, 4), (0.9, 0.5, 3)])
def test_fast_server_is_exact_for_mmc_against_gigc(rate, rate_mu, servers):
    """The approximation with the M/M/1 fast server is the M/M/c tail (evaluated from both
    results); its sojourn cdf against gigc's lattice, quantiles within two lattice steps."""
    d = load("fast_server")
    lam, mu, c, t = (d.symbols[k] for k in ("lam", "mu", "c", "t"))
    v = {lam: rate, mu: rate_mu, c: servers}
    composed = d.result("waiting_sf").subs(d.symbols["W1_sf"], d.result("fast_mm1_waiting_sf"))
    for r in d.results:                   # the definitions: C, rho, a, gamma
        if r.name in ("erlang_c", "rho", "load", "decay"):
            composed = composed.subs(r.lhs, r.rhs)
    composed = sp.lambdify(t, composed.subs(d.symbols["rho"], d.symbols["a"] / c).subs(
        d.symbols["a"], lam / mu).subs(v).doit())
    exact = sp.lambdify(t, d.explicit("mmc_waiting_sf").subs(v).doit())
    for tv in (0.0, 0.5, 3.0, 10.0):
        assert composed(tv) == pytest.approx(exact(tv), rel=1e-12)
    assert exact(0.0) == pytest.approx(erlang_c(servers, rate / rate_mu), rel=1e-12)
    cdf = sp.lambdify(t, d.explicit("mmc_sojourn_cdf").subs(v).doit(), "math")
    r = gigc(rate, qm.ServiceTime.affine(1 / rate_mu, jitter="exponential"), 1.0, servers)
    for p in (0.5, 0.9, 0.99, 0.999):
        derived = _sojourn_quantile(cdf, p, 200.0 / rate_mu)
        assert abs(float(r.quantile(p)) - derived) < 2 * r.h, p
        assert derived == pytest.approx(mmc(rate, rate_mu, servers).quantile(p), rel=1e-9)


def test_fast_server_reduces_to_gig1_with_one_server():
    """c = 1: the scale C/rho is 1, and the M/M/1 sojourn (the derived cdf at c = 1) against
    gig1's lattice within two lattice steps; gigc(..., 1) is gig1."""
    d = load("fast_server")
    lam, mu, c, t, rho, C = (d.symbols[k] for k in ("lam", "mu", "c", "t", "rho", "C"))
    scale = sp.lambdify(lam, (C / rho).subs(C, d.explicit("erlang_c")).subs(
        rho, d.explicit("rho")).subs({c: 1, mu: 1}).doit())
    for rate in (0.1, 0.5, 0.95):
        assert scale(rate) == pytest.approx(1.0, rel=1e-12)
    rate, rate_mu = 0.7, 1.3
    cdf = sp.lambdify(t, d.explicit("mmc_sojourn_cdf").subs({lam: rate, mu: rate_mu, c: 1})
                      .doit(), "math")
    exp1 = qm.ServiceTime.affine(1 / rate_mu, jitter="exponential")
    r = gig1(rate, exp1, 1.0)
    for p in (0.5, 0.99):
        assert abs(float(r.quantile(p)) - _sojourn_quantile(cdf, p, 100.0)) < 2 * r.h
    gamma_service = qm.ServiceTime.affine(1.0, jitter=("gamma", 0.6))
    assert gigc(0.8, gamma_service, 0.4, 1).p99 == gig1(0.8, gamma_service, 0.4).p99


def test_fast_server_mean_scales_the_fast_gig1_mean():
    """Renewal arrivals and gamma service: gigc's mean wait is C/rho times the mean wait of
    gig1 with service S/c (the same lattice), as the derived waiting_mean says; with Kingman
    for the fast server it is Allen-Cunneen (qmodel.theory.allen_cunneen_wait)."""
    d = load("fast_server")
    lam, mu, c, ca2, cs2, m1, rho, C = (d.symbols[k] for k in ("lam", "mu", "c", "ca2", "cs2",
                                                               "m1", "rho", "C"))
    W1_mean = d.symbols["W1_mean"]
    rng = _rng(11)
    for servers, cv, a2 in ((2, 0.6, 0.5), (3, 1.2, 2.0)):
        m = rng.uniform(0.5, 2.0)
        rate = rng.uniform(0.5, 0.9) * servers / m
        service = qm.ServiceTime.affine(m, jitter=("gamma", cv))
        many = gigc(rate, service, a2, servers)
        fast = gig1(rate, qm.ServiceTime.affine(m / servers, jitter=("gamma", cv)), a2)
        assert many.h == pytest.approx(fast.h, rel=1e-12)
        v = {lam: rate, mu: 1 / m, c: servers}
        mean = d.result("waiting_mean").subs(C, d.explicit("erlang_c")).subs(
            rho, d.explicit("rho")).subs(v).doit()
        derived = float(mean.subs(W1_mean, fast.mean - m / servers))
        assert many.mean - m == pytest.approx(derived, abs=1e-3 * many.h)
        assert abs(derived - (fast.mean - m / servers)) > 10 * many.h     # the scale matters
        v.update({ca2: a2, cs2: cv * cv})
        kingman_fast = d.result("fast_kingman").subs(rho, d.explicit("rho")).subs(
            m1, 1 / mu).subs(v)
        via_fast = float(mean.subs(W1_mean, kingman_fast))
        allen = float(d.explicit("allen_cunneen").subs(v).doit())
        reference = allen_cunneen_wait(rate, m, cv * cv, servers, a2)
        assert via_fast == pytest.approx(reference, rel=1e-12)
        assert allen == pytest.approx(reference, rel=1e-12)


# --------------------------------------------------------------------------------------------
# batching
# --------------------------------------------------------------------------------------------
def _bulk_chain(rate, batch, service, top=300):
    """Stationary law of the queue left after a completion, greedy batching (truncated)."""
    P = np.zeros((top, top))
    for x in range(top):
        k = max(1, min(x, batch))
        rest = max(x - batch, 0)
        p = stats.poisson.pmf(np.arange(top - rest), rate * service(k))
        P[x, rest:] = p
        P[x, -1] += 1 - p.sum()
    A = P.T - np.eye(top)
    A[-1, :] = 1.0
    rhs = np.zeros(top)
    rhs[-1] = 1.0
    return np.linalg.solve(A, rhs)


def test_bulk_service_pgf_and_batch_sizes():
    """The pgf and the normalisation equation against the truncated chain solved by numpy; the
    batch-size law against qmodel's batch_node (S(k) on its lattice, so both are exact)."""
    d = load("bulk_service")
    lam, z, B, pi, A, k = (d.symbols[v] for v in ("lam", "z", "B", "pi", "A", "k"))
    base, per, batch, rate = 1.0, 0.25, 4, 1.5
    service = lambda size: base + per * size                       # noqa: E731
    chain = _bulk_chain(rate, batch, service)
    values = {pi[i]: chain[i] for i in range(batch)}
    pgf = d.result("pgf").subs(B, batch).doit().replace(
        A, lambda size, zz: sp.exp(lam * (base + per * size) * (zz - 1))).subs(values)
    pgf = sp.lambdify((lam, z), pgf)
    for zv in (-0.6, 0.2, 0.5, 0.9):
        direct = np.dot(chain, float(zv) ** np.arange(chain.size))
        assert pgf(rate, zv) == pytest.approx(direct, rel=1e-9)
    norm = d.result("normalisation")
    sides = []
    for side in (norm.lhs, norm.rhs):
        side = side.subs(B, batch).doit().replace(d.symbols["S"], lambda size: base + per * size)
        sides.append(float(side.replace(Mean, lambda value: value).subs(values).subs(lam, rate)))
    assert sides[0] == pytest.approx(sides[1], rel=1e-10)
    pmf = d.result("batch_size_pmf").subs(B, batch)
    node = batch_node(qm.Node(qm.ServiceTime.affine(base, per), max_batch_size=batch), rate)
    for size, prob in node.batch_size_distribution.items():
        derived = float(pmf.subs(k, size).doit().subs(values))
        assert derived == pytest.approx(prob, abs=1e-9)


def _batch_size_chain(rate, top=250):
    """Stationary batch-size law of greedy batching with B = infinity, S(b) = TAU0 + ALPHA b."""
    sizes = np.arange(1, top + 1)
    P = np.zeros((top, top))
    for i, b in enumerate(sizes):
        mean = rate * (TAU0 + ALPHA * b)
        P[i] = stats.poisson.pmf(sizes, mean)
        P[i, 0] += math.exp(-mean)
    A = P.T - np.eye(top)
    A[-1, :] = 1.0
    rhs = np.zeros(top)
    rhs[-1] = 1.0
    return sizes, np.linalg.solve(A, rhs)


@pytest.mark.parametrize("rate", [500.0, 3000.0])
def test_inoue_mean_matches_batch_node(rate):
    """E[b], E[b^2] from the batch-size chain (numpy), Inoue's mean against batch_node with a B
    that is never reached, within one lattice step (as tests/test_batch_node.py does)."""
    d = load("inoue")
    lam, tau0, alpha, Eb, Eb2, p0 = (d.symbols[k] for k in ("lam", "tau0", "alpha", "Eb",
                                                            "Eb2", "p0"))
    sizes, law = _batch_size_chain(rate)
    eb, eb2 = law @ sizes, law @ sizes ** 2
    values = {lam: rate, tau0: TAU0, alpha: ALPHA, Eb: eb, Eb2: eb2}
    inoue = float(d.result("mean_sojourn").subs(values))
    r = batch_node(qm.Node(qm.ServiceTime.affine(TAU0, ALPHA), max_batch_size=128), rate)
    assert abs(r.mean - inoue) <= r.h
    # the intermediate results hold for the chain's law
    p_zero = law @ np.exp(-rate * (TAU0 + ALPHA * sizes))
    assert float(d.result("mean_batch").subs(values).subs(p0, p_zero)) == pytest.approx(
        eb, rel=1e-10)
    second = law @ (TAU0 + ALPHA * sizes) ** 2
    reward = d.result("renewal_reward").subs(values).subs(d.symbols["ES2"], second)
    assert float(reward) == pytest.approx(inoue, rel=1e-10)


def _formation_sample(rate, delay, n, batches, rng):
    """Batches formed by simulating the arrivals after each batch's first request directly."""
    gaps = rng.exponential(1 / rate, (batches, n))
    epochs = np.cumsum(gaps, axis=1)                         # arrivals after the first
    formation = np.minimum(epochs[:, -1], delay)
    members = epochs <= formation[:, None]
    size = 1 + members.sum(axis=1)
    waits = formation + np.where(members, formation[:, None] - epochs, 0.0).sum(axis=1)
    return formation, size, waits


def test_size_or_timeout_formation_law_against_simulation():
    """Formation time, batch size and a request's wait against a direct simulation of the
    Poisson arrivals (numpy, fixed seed), with tolerances of 5 standard errors."""
    d = load("size_or_timeout")
    lam, D, t, n, i = (d.symbols[k] for k in ("lam", "D", "t", "n", "i"))
    rate, delay, extra, batches = 1000.0, 2.5e-3, 3, 200_000
    formation, size, waits = _formation_sample(rate, delay, extra, batches, _rng(8))
    v = {lam: rate, D: delay, n: extra}
    f_mean = _numeric(d.result("formation_mean"), v.keys(), v.values())
    assert abs(formation.mean() - f_mean) < 5 * formation.std() / math.sqrt(batches)
    cdf = d.result("formation_cdf").subs(v)
    for tv in (0.5e-3, 1.5e-3, 2.4e-3, 2.5e-3):
        p = float(cdf.subs(t, tv).doit())
        assert abs((formation <= tv).mean() - p) < 5 * math.sqrt(p * (1 - p) / batches) + 1e-9
    pmf = d.result("batch_size_pmf").subs(v)
    probs = np.array([float(pmf.subs(i, k).doit()) for k in range(1, extra + 2)])
    assert probs.sum() == pytest.approx(1.0, abs=1e-12)
    for k, p in enumerate(probs, 1):
        assert abs((size == k).mean() - p) < 5 * math.sqrt(p * (1 - p) / batches)
    k_mean = _numeric(d.result("batch_mean"), v.keys(), v.values())
    assert k_mean == pytest.approx(probs @ np.arange(1, extra + 2), rel=1e-12)
    w_mean = _numeric(d.result("request_wait_mean"), v.keys(), v.values())
    ratio = waits.sum() / size.sum()                          # renewal-reward estimate
    se = (waits - ratio * size).std() / (size.mean() * math.sqrt(batches))
    assert abs(ratio - w_mean) < 5 * se


def test_size_or_timeout_batch_size_against_qmodel_simulator():
    """Mean batch size and mean wait against qmodel's simulator with a 0.1 us service time
    (the instance is always free); tolerance 5 standard errors over independent seeds."""
    d = load("size_or_timeout")
    lam, D, n = (d.symbols[k] for k in ("lam", "D", "n"))
    rate, delay, pmin = 1000.0, 2.5e-3, 4
    v = {lam: rate, D: delay, n: pmin - 1}
    node = qm.Node(qm.ServiceTime.affine(1e-7), max_batch_size=pmin, max_queue_delay=delay)
    runs = [qm.simulate(node, rate=rate, requests=60_000, seed=s) for s in range(1, 9)]
    sizes = np.array([r.mean_batch_size for r in runs])
    waits = np.array([r.mean - 1e-7 for r in runs])
    for sample, name in ((sizes, "batch_mean"), (waits, "request_wait_mean")):
        derived = _numeric(d.result(name), v.keys(), v.values())
        se = sample.std(ddof=1) / math.sqrt(sample.size)
        assert abs(sample.mean() - derived) < 5 * se


# --------------------------------------------------------------------------------------------
# routing and pipelines (not in qmodel.theory yet: independent computations)
# --------------------------------------------------------------------------------------------
def _splitting_values(name, **values):
    """A splitting result as a float."""
    d = load("splitting")
    return float(d.result(name).subs({d.symbols[k]: v for k, v in values.items()}))


@pytest.mark.parametrize("c, rate_s", [(2, 2.0), (3, 0.7), (4, 4.0)])
def test_staggered_instances_against_monte_carlo(c, rate_s):
    """Exponential gaps drawn with numpy: the others all busy at v given the reused instance
    free, within a 4-sigma binomial band of the conditional sample; the unconditioned law too."""
    d = load("staggered_instances")
    sub = {d.symbols["c"]: c, d.symbols["lam"]: rate_s, d.symbols["s"]: 1.0}
    given = sp.lambdify(d.symbols["v"], d.result("others_busy_given_free").subs(sub).doit())
    plain = sp.lambdify(d.symbols["v"], d.result("others_busy").subs(sub).doit())
    starts = np.cumsum(_rng(40 + c).exponential(1.0 / rate_s, (400_000, c)), axis=1)  # G_j
    free = starts[:, c - 1] >= 1.0
    for v in (0.0, 0.3, 0.8):
        busy = starts[:, c - 2] < 1.0 - v
        for law, sample in ((given, busy[free]), (plain, busy)):
            p = float(law(v))
            assert abs(sample.mean() - p) <= 4 * math.sqrt(p * (1 - p) / sample.size) + 1e-12


@pytest.mark.parametrize("c", [2, 3, 4, 5, 6])
def test_instance_phases_roots_against_numpy(c):
    """numpy's roots of P(z) = z + ... + z^c - g: c - 1 of them outside the unit circle for every
    gain (the patterns grow), one inside (near g); at a small gain their squared moduli match
    the first-order result to O(g^2); for c = 2 the exact root matches."""
    d = load("instance_phases")
    g, c_sym, theta = d.symbols["g"], d.symbols["c"], d.symbols["theta"]
    first_order = sp.lambdify((g, theta), d.result("growth_first_order").subs(c_sym, c))
    for gain in (0.01, 0.3, 0.85, 1.5):
        roots = np.roots([1.0] * c + [-gain])            # z^c + ... + z - gain
        outside = np.abs(roots) > 1.0
        assert outside.sum() == c - 1, (gain, roots)
        if gain == 0.01:
            for z in roots[outside]:
                expected = first_order(gain, np.angle(z))
                assert abs(z) ** 2 == pytest.approx(expected, abs=10 * gain ** 2)
        if c == 2:
            exact = float(d.result("two_instances").subs(g, gain))
            assert min(roots.real) == pytest.approx(exact, rel=1e-12)
            assert exact < -1.0


def test_instance_phases_bunching_in_the_simulator():
    """What the instability predicts, on qmodel's own batcher (qmodel.replay, 4 instances,
    max_batch_size 8, no delay, 50% load, 100,000 Poisson arrivals): with deterministic service
    the pattern of dispatch spacings persists from one round to the next (correlation of
    spacings 4 dispatches apart 0.88) and is uneven (spacing scv above the 0.6 of uniformly
    random phases); lognormal cv 0.3 jitter mixes it (0.26). Mean and standard error over 20
    blocks; the bounds are 4 standard errors."""
    c = 4

    def spacing_stats(jitter):
        node = qm.Node(qm.ServiceTime.affine(TAU0, ALPHA, jitter=jitter), max_batch_size=8,
                       instances=c)
        rate = 0.5 * node.capacity
        times = np.cumsum(_rng(60).exponential(1.0 / rate, 100_000))
        spacing = np.diff(qm.replay(node, times).batch_start)
        spacing = spacing[spacing.size // 10:]                  # without the empty start
        corr, scv = [], []
        for part in np.array_split(spacing, 20):
            x = part - part.mean()
            corr.append((x[:-c] * x[c:]).mean() / x.var())
            scv.append(x.var() / part.mean() ** 2)
        return [(np.mean(v), np.std(v, ddof=1) / math.sqrt(len(v))) for v in (corr, scv)]

    (det_corr, det_se), (det_scv, scv_se) = spacing_stats("deterministic")
    (mixed_corr, mixed_se), _ = spacing_stats(("lognormal", 0.3))
    assert det_corr - 4 * det_se > 0.5
    assert mixed_corr + 4 * mixed_se < det_corr - 4 * det_se
    assert det_scv - 4 * scv_se > (c - 1) / (c + 1)      # spacings of c uniform phases


def test_splitting_random_router_in_predict():
    """A random router over identical nodes under Renewal arrivals: predict's cluster answer is
    the mixture of predict(node, Renewal(rate p, p scv + 1 - p)), the scv from the derived
    result; a stream with the input's scv would give a different answer."""
    node = qm.Node(qm.ServiceTime.affine(1.0, jitter=("gamma", 0.5)))
    rate, scv = 1.4, 2.0
    cluster = qm.predict(qm.Cluster(node, count=2, router="random"),
                         arrivals=qm.Renewal(rate, scv))
    node_scv = _splitting_values("thinned_scv", p=sp.Rational(1, 2), ca2=scv)
    assert node_scv == pytest.approx(1.5, rel=1e-15)
    alone = qm.predict(node, arrivals=qm.Renewal(rate / 2, node_scv))
    assert cluster.p99 == pytest.approx(alone.p99, rel=1e-9)
    assert cluster.p50 == pytest.approx(alone.p50, rel=1e-9)
    unchanged = qm.predict(node, arrivals=qm.Renewal(rate / 2, scv))
    assert abs(unchanged.p99 - alone.p99) > 0.05 * alone.p99
    # unequal weights, two instances per node (gigc): the request-weighted mixture
    node2 = qm.Node(qm.ServiceTime.affine(1.0, jitter=("gamma", 0.5)), instances=2)
    rate = 2.4
    cluster = qm.predict(qm.Cluster(node2, count=2, router="random", weights=[3, 1]),
                         arrivals=qm.Renewal(rate, scv))
    parts = []
    for share in (sp.Rational(3, 4), sp.Rational(1, 4)):
        mean_gap = _splitting_values("thinned_mean", p=share, m=1 / rate)
        node_scv = _splitting_values("thinned_scv", p=share, ca2=scv)
        parts.append((float(share), qm.predict(node2, arrivals=qm.Renewal(1 / mean_gap,
                                                                          node_scv))))
    times = np.array([0.5, 1.0, 2.0, 4.0, 8.0])
    mixture = sum(w * r.cdf(times) for w, r in parts)
    np.testing.assert_allclose(cluster.cdf(times), mixture, atol=1e-9)


@pytest.mark.parametrize("nodes", [2, 4])
def test_splitting_round_robin_in_predict(nodes):
    """Round robin under Renewal arrivals: each node alone with rate / N and the derived scv
    c_a^2 / N; the thinning scv would give a different answer."""
    node = qm.Node(qm.ServiceTime.affine(1.0, jitter=("gamma", 0.5)))
    rate, scv = 0.7 * nodes, 3.0
    # the model's mechanics, so also outside its measured domain (arrival scv 3)
    cluster = qm.predict(qm.Cluster(node, count=nodes, router="round_robin"),
                         arrivals=qm.Renewal(rate, scv), extrapolate=True, fallback="raise")
    node_scv = _splitting_values("round_robin_scv", ca2=scv, N=nodes)
    mean_gap = _splitting_values("round_robin_mean", m=1 / rate, N=nodes)
    alone = qm.predict(node, arrivals=qm.Renewal(1 / mean_gap, node_scv), extrapolate=True,
                       fallback="raise")
    assert cluster.p99 == pytest.approx(alone.p99, rel=1e-9)
    assert cluster.p50 == pytest.approx(alone.p50, rel=1e-9)
    thinned = _splitting_values("thinned_scv", p=sp.Rational(1, nodes), ca2=scv)
    other = qm.predict(node, arrivals=qm.Renewal(1 / mean_gap, thinned), extrapolate=True,
                       fallback="raise")
    assert abs(other.p99 - alone.p99) > 0.05 * alone.p99


def _batch_se(x, f, batches=40):
    """f over the whole sample and its standard error from batch means."""
    parts = np.array([f(b) for b in np.array_split(x, batches)])
    return f(x), parts.std(ddof=1) / math.sqrt(batches)


def test_splitting_monte_carlo():
    """Gamma renewal input (numpy, fixed seed): the thinned and round-robin gaps' mean, scv and
    Laplace transform against the derived results, within 5 standard errors; the thinned scv
    is far from the input's."""
    d = load("splitting")
    p_, m_, ca2_, s_, k_, N_, A = (d.symbols[v] for v in ("p", "m", "ca2", "s", "k", "N", "A"))
    rng = _rng(12)
    m, scv, share, nodes = 1.0, 2.5, 0.3, 4
    k = 1 / scv
    gaps = rng.gamma(k, m / k, 600_000)
    times = np.cumsum(gaps)
    thinned = np.diff(times[rng.random(times.size) < share])
    robin = gaps[: gaps.size // nodes * nodes].reshape(-1, nodes).sum(axis=1)
    scv_of = lambda x: x.var() / x.mean() ** 2                            # noqa: E731
    values = {p_: share, m_: m, ca2_: scv, k_: k, N_: nodes}
    gamma_lst = sp.Lambda(s_, (1 + m_ * s_ / k_) ** (-k_))
    checks = (
        (thinned, "thinned_mean", "thinned_scv", d.result("thinned_lst").replace(A, gamma_lst)),
        (robin, "round_robin_mean", "round_robin_scv", d.result("round_robin_gamma_lst")),
    )
    for sample, mean_name, scv_name, lst in checks:
        mean, se = _batch_se(sample, np.mean)
        assert abs(mean - float(d.result(mean_name).subs(values))) < 5 * se
        value, se = _batch_se(sample, scv_of)
        assert abs(value - float(d.result(scv_name).subs(values))) < 5 * se
        assert abs(value - scv) > 20 * se                                   # not the input's
        lst = sp.lambdify(s_, lst.subs(values))
        for sv in (0.2, 1.0, 3.0):
            est, se = _batch_se(sample, lambda x: np.exp(-sv * x).mean())
            assert abs(est - lst(sv)) < 5 * se + 1e-12
    # Poisson input: the thinned gaps are Exp(p theta)
    theta = 2.0
    poisson = np.cumsum(rng.exponential(1 / theta, 200_000))
    kept = np.diff(poisson[rng.random(poisson.size) < share])
    lst = sp.lambdify(s_, d.result("thinned_poisson_lst").subs({p_: share,
                                                                 d.symbols["theta"]: theta}))
    for sv in (0.3, 1.5):
        est, se = _batch_se(kept, lambda x: np.exp(-sv * x).mean())
        assert abs(est - lst(sv)) < 5 * se
    assert abs(stats.kstest(kept, "expon", args=(0, 1 / (share * theta))).statistic) < 0.01


def test_splitting_third_moment_gap():
    """The third-moment difference against numerical moments of the geometric sum of gamma
    gaps (exact series in the number of gaps) and of the matched gamma law (scipy)."""
    d = load("splitting")
    m, scv, share = 0.8, 0.4, 0.35
    k = 1 / scv
    js = np.arange(1, 400)
    weights = share * (1 - share) ** (js - 1)
    third = weights @ stats.gamma(js * k, scale=m / k).moment(3)
    mean, node_scv = m / share, share * scv + 1 - share
    matched = stats.gamma(1 / node_scv, scale=mean * node_scv).moment(3)
    derived = float(d.result("thinned_third_moment").subs(
        {d.symbols["p"]: share, d.symbols["m"]: m, d.symbols["ca2"]: scv}))
    assert third - matched == pytest.approx(derived, rel=1e-9)
    assert abs(derived) > 0.01 * matched


def test_round_robin_root_against_scipy():
    """Not implemented in qmodel yet: the N = 2 closed form and the general equation against
    scipy's root finder."""
    d = load("round_robin")
    lam, mu, sigma, N = (d.symbols[k] for k in ("lam", "mu", "sigma", "N"))
    eq = d.result("sigma_equation")
    h = sp.lambdify((sigma, lam, mu, N), eq.lhs - eq.rhs)
    two = sp.lambdify((lam, mu), d.result("sigma_two_nodes"))
    rng = _rng(9)
    for nodes in (2, 3, 5):
        rate_mu = rng.uniform(0.5, 2.0)
        rate = rng.uniform(0.2, 0.95) * nodes * rate_mu
        root = optimize.brentq(h, 1e-12, 1 - 1e-9, args=(rate, rate_mu, nodes), xtol=1e-15)
        assert 0 < root < 1
        if nodes == 2:
            assert two(rate, rate_mu) == pytest.approx(root, rel=1e-10)


def test_round_robin_sojourn_against_qmodel_simulator():
    """Not implemented in qmodel yet: the exponential sojourn Exp(mu (1 - sigma)) against the
    simulator's round-robin cluster; tolerance 3 half-widths of the 95% confidence interval,
    which is tight enough to reject the Poisson-split (M/M/1) answer."""
    d = load("round_robin")
    lam, mu, sigma, N, t = (d.symbols[k] for k in ("lam", "mu", "sigma", "N", "t"))
    nodes, rate_mu, rate = 3, 1.0, 2.1
    eq = d.result("sigma_equation").subs({lam: rate, mu: rate_mu, N: nodes})
    root = optimize.brentq(sp.lambdify(sigma, eq.lhs - eq.rhs), 1e-9, 1 - 1e-9, xtol=1e-15)
    cdf = sp.lambdify(t, d.result("sojourn_cdf").subs({mu: rate_mu, sigma: root}))
    node = qm.Node(qm.ServiceTime.affine(1 / rate_mu, jitter="exponential"))
    r = qm.simulate(qm.Cluster(node, count=nodes, router="round_robin"), rate=rate,
                    requests=600_000, seed=3)
    for p in (0.5, 0.95, 0.99):
        predicted = optimize.brentq(lambda x: cdf(x) - p, 0.0, 100.0)
        lo, hi = r.ci(p)
        tol = 1.5 * (hi - lo)
        assert abs(r.quantile(p) - predicted) < tol
        poisson_split = -math.log(1 - p) / (rate_mu - rate / nodes)
        assert abs(poisson_split - predicted) > 2 * tol


def test_power_of_d_fixed_point_against_the_mean_field_ode():
    """Not implemented in qmodel yet: s_i and the sojourn time against the mean-field ODE
    integrated to equilibrium by scipy (40 levels)."""
    d = load("power_of_d")
    lam, mu, dd, i, t = (d.symbols[k] for k in ("lam", "mu", "d", "i", "t"))
    levels = 40
    for choices, rate in ((2, 0.9), (3, 0.7)):
        def rhs(_, s):
            full = np.concatenate(([1.0], s, [0.0]))
            return rate * (full[:-2] ** choices - full[1:-1] ** choices) - (full[1:-1]
                                                                           - full[2:])
        sol = integrate.solve_ivp(rhs, (0, 400), np.zeros(levels), method="LSODA",
                                  rtol=1e-10, atol=1e-13)
        s_ode = sol.y[:, -1]
        frac = sp.lambdify(i, d.explicit("tail_fraction").subs({lam: rate, mu: 1,
                                                                dd: choices}))
        for level in range(1, 9):
            assert frac(level) == pytest.approx(s_ode[level - 1], abs=1e-7)
        v = {lam: rate, mu: 1, dd: choices}
        mean = float(_truncated(d.explicit("mean_sojourn").subs(v), levels).doit())
        assert mean == pytest.approx(s_ode.sum() / rate, rel=1e-6)       # Little's law
        full = np.concatenate(([1.0], s_ode))
        joins = full[:-1] ** choices - full[1:] ** choices
        sf = sp.lambdify(t, _truncated(d.explicit("sojourn_sf").subs(v), levels).doit())
        for tv in (0.5, 2.0, 6.0):
            direct = joins @ stats.gamma.sf(tv, np.arange(1, levels + 1))
            assert sf(tv) == pytest.approx(direct, abs=1e-7)


def _least_outstanding_labels(d, count, nodes):
    """The central queue's P(q_c > 0) and E[max(q_c - 1, 0)] from the derived sums over a count
    law p(k) (numpy)."""
    N, k, p = d.symbols["N"], d.symbols["k"], d.symbols["p"]
    pk = sp.Symbol("p_k")
    values = []
    for name in ("central_waiting", "central_excess"):
        total = d.result(name)                              # a sum over k from N to infinity
        assert total.limits[0][1:] == (N, sp.oo)
        term = sp.lambdify((k, pk), total.function.subs(p(k), pk).subs(N, nodes), "numpy")
        ks = np.arange(nodes, count.size)
        values.append(float(np.sum(term(ks, count[nodes:]) * np.ones(ks.size))))
    return values


def _least_outstanding_waiting(d, central, nodes, offered):
    """P(q > 0) by the derived rule, with the chain's P(b = N) from
    qmodel.theory.jsq.waiting_probability and Erlang C from qmodel.theory.classical.erlang_c."""
    return float(d.result("waiting_probability").subs({
        d.symbols["w_c"]: central,
        d.symbols["busy"]: waiting_probability(nodes, offered / nodes),
        d.symbols["C"]: erlang_c(nodes, offered)}))


@pytest.mark.parametrize("jitter, second", [("deterministic", 1.0), ("exponential", 2.0)])
def test_least_outstanding_mean_matches_balanced_model(jitter, second):
    """The derived mean in the central queue's labels, with E[R] = E[S^2]/(2m), the labels
    summed over the count law qmodel uses (_central_count: M/D/N or M/M/N) and P(q > 0) by the
    derived correction, against balanced_least_outstanding's lattice mean at seeded random
    points; the same mean through excess_mean and latency_mean."""
    d = load("least_outstanding")
    m_, m2, w_, wc_ = (d.symbols[v] for v in ("m", "m2", "w", "w_c"))
    waiting, excess, central_excess = (d.symbols[v] for v in ("waiting", "excess",
                                                              "central_excess"))
    mean = d.explicit("latency_mean_central")              # E[R] substituted
    mean_q = d.explicit("latency_mean")
    m = 2e-3
    node = qm.Node(qm.ServiceTime.affine(m, 0.0, jitter=jitter), max_batch_size=1)
    rng = _rng(13)
    for _ in range(4):
        nodes = int(rng.integers(1, 17))
        rate = rng.uniform(0.3, 0.95) * nodes / m
        count = _central_count(node.service, rate, nodes)
        wc, xc = _least_outstanding_labels(d, count, nodes)
        w = _least_outstanding_waiting(d, wc, nodes, rate * m)
        if nodes == 1:                                      # the chain is M/M/1: no correction
            assert w == pytest.approx(wc, rel=1e-9)
        labels = {w_: w, wc_: wc, central_excess: xc, m2: second * m * m, m_: m}
        derived = float(mean.subs(labels))
        e = float(d.result("excess_mean").subs(labels))      # the same mean in the labels of q
        assert float(mean_q.subs(labels).subs({excess: e, waiting: w})) == \
            pytest.approx(derived, rel=1e-12)
        r = balanced_least_outstanding(node, rate, nodes)
        # Tolerance: the lattice puts the residual on cells i >= 1 with weight P(S > i h),
        # whose mean is E[R] + h/2 to first order, so the lattice mean lies about
        # P(q > 0) h / 2 above the formula (< h); the count is cut at 1e-14, the chain's
        # extras where their tail is below 1e-12, and the service tail beyond the lattice is
        # below 1e-9, hence the small relative slack.
        assert abs(r.mean - derived) <= r.h + 1e-9 * derived
        assert r.mean - derived == pytest.approx(w * r.h / 2, abs=0.02 * r.h)


def test_least_outstanding_mmn_closed_forms():
    """Exponential service: the central geometric count and Erlang C against _central_count and
    erlang_c; w = P(b = N) from waiting_probability is the derived P(q > 0) (P(q_c > 0) = C);
    the rescaled geometric P(q = j), the mean (closed form against the general mean with the
    summed labels) and the latency cdf against balanced_least_outstanding's lattice (quantiles
    within two lattice steps)."""
    d = load("least_outstanding")
    lam, m_, N, j, t = (d.symbols[v] for v in ("lam", "m", "N", "j", "t"))
    m2, w_, wc_, busy = (d.symbols[v] for v in ("m2", "w", "w_c", "busy"))
    central_excess = d.symbols["central_excess"]
    erlang_c_closed, waiting_b, share, mean_central, mean_closed, latency_cdf = (
        d.explicit(name) for name in ("erlang_c", "mmn_waiting", "mmn_share_pmf",
                                      "latency_mean_central", "mmn_latency_mean",
                                      "mmn_latency_cdf"))
    m = 2e-3
    node = qm.Node(qm.ServiceTime.affine(m, 0.0, jitter="exponential"), max_batch_size=1)
    rng = _rng(14)
    for _ in range(3):
        nodes = int(rng.integers(2, 9))
        rate = rng.uniform(0.5, 0.95) * nodes / m
        chain = waiting_probability(nodes, rate * m / nodes)
        v = {lam: rate, m_: m, N: nodes, busy: chain, w_: chain}
        count = _central_count(node.service, rate, nodes)
        per_node = np.bincount(np.arange(count.size) // nodes, weights=count)
        erlang = float(erlang_c_closed.subs(v).doit())
        assert erlang == pytest.approx(erlang_c(nodes, rate * m), rel=1e-12)
        assert erlang == pytest.approx(1 - per_node[0], rel=1e-9)
        wc, xc = _least_outstanding_labels(d, count, nodes)
        w = _least_outstanding_waiting(d, wc, nodes, rate * m)
        assert w == pytest.approx(chain, rel=1e-9)          # P(q > 0) = P(b = N) = w
        assert float(waiting_b.subs(v)) == chain
        assert chain < erlang                               # least outstanding waits less
        corrected = per_node[1:8] * w / (1 - per_node[0])   # as balanced_least_outstanding
        pmf = sp.lambdify(j, share.subs(v).doit(), "numpy")
        np.testing.assert_allclose(pmf(np.arange(1, 8)), corrected, rtol=1e-9)
        general = float(mean_central.subs({w_: w, wc_: wc, central_excess: xc, m2: 2 * m * m,
                                           m_: m}))
        closed = float(mean_closed.subs(v).doit())
        assert closed == pytest.approx(general, rel=1e-9)
        r = balanced_least_outstanding(node, rate, nodes)
        # the lattice mean lies about w h / 2 above (see the test above)
        assert abs(r.mean - closed) <= r.h
        cdf = sp.lambdify(t, latency_cdf.subs(v).doit(), "math")
        for p in (0.5, 0.9, 0.99, 0.999):
            derived = _sojourn_quantile(cdf, p, 500 * m)
            assert abs(float(r.quantile(p)) - derived) < 2 * r.h, p


def _busy_extras_chain(d, nodes, load, extras):
    """P(b = N) of the busy-nodes/extras chain built from the derivation's rate table (mu = 1):
    states (0, 0) and (b, e) for b = 1..N, e = 0..extras (no move leads to (0, e > 0); arrivals
    beyond ``extras`` are dropped), Q dense, pi Q = 0 with one equation replaced by
    sum(pi) = 1, solved by numpy."""
    b, e, N, lam, mu = (d.symbols[v] for v in ("b", "e", "N", "lam", "mu"))
    moves = []
    for name in ("chain_idle", "chain_join", "chain_extra", "chain_single"):
        lhs = next(r.lhs for r in d.results if r.name == name)
        assert tuple(lhs.args[:2]) == (b, e)
        rate = sp.lambdify((b, e), d.result(name).subs({N: nodes, lam: load * nodes, mu: 1}),
                           "math")
        target = sp.lambdify((b, e), lhs.args[2:], "math")
        moves.append((rate, target))
    states = [(0, 0)] + [(bb, ee) for bb in range(1, nodes + 1) for ee in range(extras + 1)]
    index = {state: i for i, state in enumerate(states)}
    Q = np.zeros((len(states), len(states)))
    for (bb, ee), i in index.items():
        for rate, target in moves:
            value = float(rate(bb, ee))
            to = tuple(int(v) for v in target(bb, ee))
            if value > 0:
                if to not in index:                         # only the cut: an arrival
                    assert (bb, to) == (nodes, (nodes, extras + 1)), (bb, ee, to)
                    continue
                Q[i, index[to]] += value
        Q[i, i] = -Q[i].sum()
    A = Q.T.copy()
    A[-1] = 1.0
    rhs = np.zeros(len(states))
    rhs[-1] = 1.0
    pi = np.linalg.solve(A, rhs)
    return sum(pi[index[(nodes, ee)]] for ee in range(extras + 1))


def test_least_outstanding_waiting_chain():
    """waiting_probability against the derivation's chain: one node is M/M/1, P(b = 1) = rho
    (the derivation's N = 1 step; the chain from the rate table cut at 800 extras, tail
    0.95^800 < 1e-17); for two nodes an independent dense solve of the chain from the derived
    rate table, cut at 400 extras (tail 0.9^400 < 1e-18), to 1e-9."""
    d = load("least_outstanding")
    for rho in (0.3, 0.7, 0.95):
        assert waiting_probability(1, rho) == pytest.approx(rho, abs=1e-12)
        assert _busy_extras_chain(d, 1, rho, 800) == pytest.approx(rho, abs=1e-9)
    for rho in (0.3, 0.6, 0.9):
        direct = _busy_extras_chain(d, 2, rho, 400)
        assert waiting_probability(2, rho) == pytest.approx(direct, abs=1e-9)
        assert direct < erlang_c(2, 2 * rho)               # below the central queue's


def test_least_outstanding_residual_and_transform():
    """R*(s) = (1 - S*(s))/(ms) against quadrature of exp(-sx) P(S > x)/m for gamma service
    (scipy); its mean and the two special cases symbolically; the mean of L*(s) at s = 0
    against latency_mean for a small random law of q; the M/D/N pgf against the count of
    _central_count."""
    d = load("least_outstanding")
    m_, s_, z_, N, k = (d.symbols[v] for v in ("m", "s", "z", "N", "k"))
    Sst, Rst, p = d.symbols["S_star"], d.symbols["R_star"], d.symbols["p"]
    m2, m3 = d.symbols["m2"], d.symbols["m3"]
    residual = d.result("residual_lst")
    moments = 1 - m_ * s_ + m2 * s_ ** 2 / 2 - m3 * s_ ** 3 / 6
    series = sp.series(residual.subs(Sst(s_), moments), s_, 0, 2).removeO()
    assert sp.simplify(-series.coeff(s_, 1) - d.result("residual_mean")) == 0
    det = residual.subs(Sst(s_), sp.exp(-m_ * s_))
    assert sp.simplify(det - d.result("deterministic_residual_lst")) == 0
    assert -sp.series(det, s_, 0, 2).removeO().coeff(s_, 1) == m_ / 2     # uniform(0, m)
    exp_s = 1 / (1 + m_ * s_)
    assert sp.simplify(residual.subs(Sst(s_), exp_s) - exp_s) == 0         # memoryless
    assert sp.simplify(d.result("exponential_residual_lst") - exp_s) == 0
    m, cv = 1.3, 0.6
    shape = 1 / cv ** 2
    lst = sp.lambdify(s_, residual.subs(Sst(s_), (1 + m_ * s_ / shape) ** -shape).subs(m_, m))
    for sv in (0.2, 1.0, 4.0):
        quad, _ = integrate.quad(lambda x: math.exp(-sv * x)
                                 * special.gammaincc(shape, shape * x / m) / m, 0, np.inf)
        assert lst(sv) == pytest.approx(quad, rel=1e-9)
    # the mean of L*(s) for constant service and a random law of q on 0..4
    weights = _rng(15).dirichlet(np.ones(5))
    law = [sp.Rational(int(round(w * 10 ** 6)), 10 ** 6) for w in weights[:4]]
    law.append(1 - sum(law))
    q = d.symbols["q"]
    lst = d.result("latency_lst").subs(Rst(s_), d.result("deterministic_residual_lst"))
    lst = lst.subs(Sst(s_), sp.exp(-m_ * s_))
    lst = lst.replace(lambda e: isinstance(e, sp.Sum), lambda e: sp.Sum(
        e.function, (e.limits[0][0], 1, 4)).doit())
    for value, prob in enumerate(law):
        lst = lst.subs(Prob(sp.Eq(q, value)), prob)
    from_lst = -sp.series(lst, s_, 0, 2).removeO().coeff(s_, 1)
    labels = {d.symbols["waiting"]: 1 - law[0],
              d.symbols["excess"]: sum(max(v - 1, 0) * pr for v, pr in enumerate(law))}
    direct = d.explicit("latency_mean").subs(labels).subs(m2, m_ ** 2)
    assert sp.simplify(from_lst - direct) == 0
    # the M/D/N count's generating function, with p(0..N-1) from qmodel's count
    node = qm.Node(qm.ServiceTime.affine(1.0, 0.0), max_batch_size=1)
    for nodes, rate in ((1, 0.7), (3, 2.4)):
        count = _central_count(node.service, rate, nodes)
        pgf = d.result("md_count_pgf").subs({N: nodes, d.symbols["a"]: rate}).doit()
        pgf = sp.lambdify(z_, pgf.subs({p(i): count[i] for i in range(nodes)}))
        for zv in (-0.5, 0.3, 0.8):
            direct = np.dot(count, zv ** np.arange(count.size))
            assert pgf(zv) == pytest.approx(direct, rel=1e-9)


def _tandem_sojourns(arrivals, times):
    dep = np.array(arrivals, float)
    for stage in times:
        out = np.empty_like(dep)
        last = -np.inf
        for idx, ready in enumerate(dep):
            last = max(ready, last) + stage
            out[idx] = last
        dep = out
    return dep - arrivals


def test_tandem_identity_customer_by_customer():
    """Not implemented in qmodel yet: the tandem recursion computed directly for bursty
    (lognormal) arrivals equals the bottleneck queue's sojourn plus the other stage times, for
    every customer and every order of the stations."""
    rng = _rng(10)
    for _ in range(3):
        arrivals = np.cumsum(rng.lognormal(0.0, 1.2, 3000))
        times = rng.uniform(0.2, 1.2, int(rng.integers(2, 6)))
        tandem = _tandem_sojourns(arrivals, times)
        single = _tandem_sojourns(arrivals, [times.max()])
        np.testing.assert_allclose(tandem, single + times.sum() - times.max(), atol=1e-9)
        np.testing.assert_allclose(_tandem_sojourns(arrivals, times[::-1]), tandem, atol=1e-9)


def test_tandem_poisson_sojourn_cdf():
    """The Poisson case against the published p99 (theory notes) and md1 shifted."""
    d = load("tandem")
    lam, Ds, Dt, t = (d.symbols[k] for k in ("lam", "Dstar", "Dtot", "t"))
    cdf = sp.lambdify(t, d.result("sojourn_cdf").subs({lam: 0.8, Ds: 1.0, Dt: 2.2}), "math")
    p99 = optimize.brentq(lambda x: cdf(x) - 0.99, 12.0, 13.0, xtol=1e-12)
    assert p99 == pytest.approx(12.5559, abs=1e-4)
    exact = md1(0.8, 1.0)
    for tv in (2.2, 3.0, 5.5, 9.0):
        assert cdf(tv) == pytest.approx(exact.waiting_cdf(tv - 2.2), abs=1e-9)


def test_pipeline_fan_in_is_what_combine_computes():
    """Two exponential branches side by side (M/M/1 stages, exact): the model's end-to-end
    cdf is the derivation's product and its mean the derivation's mean of the maximum."""
    d = load("pipeline")
    t, mu1, mu2 = (d.symbols[k] for k in ("t", "mu1", "mu2"))
    rate, m1, m2 = 300.0, 1000.0, 700.0
    ens = qm.Ensemble({"a": qm.Node(qm.ServiceTime.affine(1 / m1, jitter="exponential")),
                       "b": qm.Node(qm.ServiceTime.affine(1 / m2, jitter="exponential"))})
    # the model's own answer (exponential service lies beyond the measured jitter)
    r = qm.predict(ens, rate=rate, extrapolate=True, fallback="raise")
    # an M/M/1 sojourn is exponential with rate mu - lambda
    rates = {mu1: m1 - rate, mu2: m2 - rate}
    cdf = sp.lambdify(t, ((1 - sp.exp(-mu1 * t)) * (1 - sp.exp(-mu2 * t))).subs(rates))
    for tv in (1e-3, 3e-3, 8e-3, 20e-3):
        assert float(r.cdf(tv)) == pytest.approx(cdf(tv), abs=2e-3)
    assert r.mean == pytest.approx(float(d.result("max_exp_mean").subs(rates)), rel=2e-3)
    assert d.result("fan_in_cdf").has(sp.Product)


def test_pipeline_clump_dispersion_is_what_departure_scv_uses_and_what_clumps_show():
    from qmodel.theory.pipeline import departure_scv

    d = load("pipeline")
    EK, VK, ce2 = (d.symbols[k] for k in ("EK", "VK", "ce2"))
    sizes = {2: 0.25, 4: 0.5, 8: 0.25}
    mean = sum(k * p for k, p in sizes.items())
    var = sum((k - mean) ** 2 * p for k, p in sizes.items())
    requests, epochs = departure_scv(0.6, sizes, 2, 0.1, 1.0, epochs_too=True)
    formula = float(d.result("clump_dispersion").subs({EK: mean, VK: var, ce2: epochs}))
    assert requests == pytest.approx(formula, rel=1e-12)
    # and the counts of a simulated stream of clumps over long windows: gamma epochs of scv
    # 0.5, clump sizes drawn from ``sizes``; the index of dispersion over 2,000 windows
    rng = _rng(11)
    gaps = rng.gamma(2.0, 0.5, 2_000_000)                 # mean 1, scv 0.5
    clumps = rng.choice(list(sizes), gaps.size, p=list(sizes.values()))
    times = np.cumsum(gaps)
    window = 1000.0
    counts = np.bincount((times // window).astype(int), weights=clumps)[:-1]
    measured = counts.var(ddof=1) / counts.mean()
    expected = float(d.result("clump_dispersion").subs({EK: mean, VK: var, ce2: 0.5}))
    # the sample variance of 2,000 counts is within about 3 x sqrt(2 / 2000) of the truth
    assert measured == pytest.approx(expected, rel=0.1)


# --------------------------------------------------------------------------------------------
# the documents
# --------------------------------------------------------------------------------------------
def test_every_derivation_is_documented():
    for d in all_derivations():
        assert d.key in MODULES
        assert d.title and d.summary and d.assumptions and d.steps and d.results
        assert all(re.search(r"\b(1[89]|20)\d\d\b", s) for s in d.sources), d.key
        assert all(step.text for step in d.steps)
        assert d.implemented_by


def test_render_writes_markdown_and_self_contained_html(tmp_path):
    md = render(tmp_path, "md")
    html = render(tmp_path, "html")
    for fmt, written in (("md", md), ("html", html)):
        names = {p.name for p in written}
        assert names == {f"{key}.{fmt}" for key in MODULES} | {f"index.{fmt}"}
    for path in md:
        text = path.read_text(encoding="utf-8")
        assert path.name == "index.md" or "$$" in text
    for path in html:
        text = path.read_text(encoding="utf-8")
        assert text.startswith("<!DOCTYPE html>")
        assert path.name == "index.html" or "<math" in text
        assert "<script" not in text and "<link" not in text
        assert "http://" not in text and "https://" not in text
    index = (tmp_path / "index.html").read_text(encoding="utf-8")
    for key in MODULES:
        assert f'href="{key}.html"' in index


# sympy's MathML printer falls back to the class name in lower case for what it cannot print
# (LaplaceTransform(f, t, s) as "laplacetransform(f, t, s)", O(x**5) as "order(x^5, (x, 0))");
# conventional function names are fine.
_CONVENTIONAL = {"sin", "cos", "tan", "cot", "sec", "csc", "sinh", "cosh", "tanh", "coth", "sech",
                 "csch", "asin", "acos", "atan", "exp", "log", "ln", "max", "min", "arg", "sign",
                 "gamma", "beta", "zeta", "erf", "erfc", "re", "im", "mod"}
_SYMPY_NAMES = {name.lower() for module in (sp, derivation_core) for name in dir(module)
                if isinstance(getattr(module, name), type)
                and issubclass(getattr(module, name), sp.Basic)} - _CONVENTIONAL


def _raw_sympy(page: str) -> list:
    """Tokens of a page's MathML that are sympy syntax rather than mathematics: a class name in
    lower case or None, a name with brackets, braces, carets or underscores left in (X_{n+1}
    as "{n+1}", N(D) as one identifier) or a hyphen for a minus sign."""
    bad = []
    for block in re.findall(r"<math\b.*?</math>", page, re.S):
        for tag, token in re.findall(r"<(mi|mo|mn|mtext)\b[^>]*>([^<]*)</\1>", block):
            token = unescape(token).strip()
            named = (len(token) > 1 and token in _SYMPY_NAMES) or token == "None"
            if ((tag in ("mi", "mo") and named)
                    or (re.search(r"\w", token) and re.search(r"[()\[\]{}^_,]", token))
                    or (tag == "mn" and token.startswith("-"))):
                bad.append(f"<{tag}>{token}</{tag}>")
    return bad


def test_html_math_has_no_raw_sympy_names(tmp_path):
    assert {"laplacetransform", "order", "subs", "piecewise", "derivative", "integral",
            "sum", "mean"} <= _SYMPY_NAMES
    for path in render(tmp_path, "html"):
        assert _raw_sympy(path.read_text(encoding="utf-8")) == [], path.name
    # the cases that printed as names: script L, O, scripts, primes, a true minus
    t, s, x = sp.symbols("t s x")
    W = sp.Function("W")
    cases = {
        sp.LaplaceTransform(W(t), t, s): "<msub><mi>&#8466;</mi><mi>t</mi></msub><mo",
        sp.InverseLaplaceTransform(W(s), s, t, None):
            "<msubsup><mi>&#8466;</mi><mi>s</mi><mrow><mo>&#x2212;</mo><mn>1</mn></mrow>",
        sp.Order(x ** 5): "<mi>O</mi><mrow><mo stretchy=\"false\">(</mo><mrow><msup><mi>x</mi>"
                          "<mn>5</mn></msup></mrow>",
        sp.Symbol("X_{n+1}"): "<msub><mi>X</mi><mrow><mi>n</mi><mo>+</mo><mn>1</mn></mrow>",
        sp.Symbol("N(D)"): "<mi>N</mi><mrow><mo stretchy=\"false\">(</mo><mi>D</mi>",
        sp.LambertW(x, -1): "<msub><mi>W</mi><mrow><mo>&#x2212;</mo><mn>1</mn></mrow></msub>",
    }
    for expr, expected in cases.items():
        out = to_mathml(expr)
        assert expected in out, out
        assert _raw_sympy(out) == [], out
    for out in ("<math><mrow><mi>laplacetransform</mi></mrow></math>", "<math><mi>None</mi></math>",
                "<math><msub><mi>X</mi><mi>{n+1}</mi></msub></math>", "<math><mn>-1</mn></math>"):
        assert _raw_sympy(out), out


def test_derive_command(tmp_path, capsys):
    assert cli_main(["derive", "--out", str(tmp_path / "docs"), "--format", "md"]) == 0
    assert (tmp_path / "docs" / "index.md").exists()
    assert not (tmp_path / "docs" / "index.html").exists()
    assert f"wrote {len(MODULES) + 1} md files" in capsys.readouterr().out
    with pytest.raises(SystemExit) as err:
        cli_main(["derive", "--format", "pdf"])
    assert err.value.code == 2
    assert cli_main(["derive", "--out", str(tmp_path / "cli"), "--format", "html"]) == 0
    assert (tmp_path / "cli" / "md1.html").exists()
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert cli_main(["derive", "--out", str(blocker / "sub")]) == 2
    assert "qmodel: error:" in capsys.readouterr().err


def test_the_committed_documents_are_the_rendered_ones(tmp_path):
    """docs/derivations is what `qmodel derive` writes today (one named a moved function)."""
    from pathlib import Path

    docs = Path(__file__).resolve().parents[1] / "docs" / "derivations"
    for path in render(tmp_path, "md"):
        committed = docs / path.name
        assert committed.read_text(encoding="utf-8") == path.read_text(encoding="utf-8"), (
            f"{committed} is stale: run qmodel derive --out docs/derivations --format both")
