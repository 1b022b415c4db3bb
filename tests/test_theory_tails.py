"""The Cramer-Lundberg exponential tail against exact queues (M/D/1, M/M/1, GI/M/1) and the
numerical M/G/1, and its sojourn-time convolution against direct quadrature."""

import math

import numpy as np
import pytest
from scipy import integrate, optimize, stats

from qmodel.latency import Accuracy, Latency
from qmodel.system import ServiceTime, UnstableError
from qmodel.theory import md1, mmc
from qmodel.theory.classical import mg1
from qmodel.theory.tails import (CramerLundbergLatency, ExponentialWaitLatency, cramer_lundberg,
                                 decay_rate)


def exponential(mean=1.0):
    return ServiceTime.affine(mean, jitter="exponential")


# --------------------------------------------------------------------------------------------
# exact references
# --------------------------------------------------------------------------------------------
def test_md1_rho_09_reproduces_the_exact_waiting_p99():
    # theory-notes.md: "For M/D/1 it reproduces the exact p99 to 4 decimals at rho 0.9."
    r, exact = cramer_lundberg(rate=0.9, service=1.0), md1(0.9, 1.0)
    assert round(r.waiting_quantile(0.99), 4) == round(exact.waiting_quantile(0.99), 4)
    assert r.waiting_quantile(0.99) == pytest.approx(exact.waiting_quantile(0.99), abs=5e-5)
    assert r.p99 == pytest.approx(exact.p99, abs=5e-5)                  # sojourn = wait + D
    # the asymptote itself: md1 computes the same decay rate and constant independently
    assert r.decay_rate == pytest.approx(exact.tail_rate, rel=1e-12)
    assert r.waiting_probability == pytest.approx(0.9)                  # capped at rho


def test_md1_published_oracles_in_the_tail():
    # theory-notes.md: M/D/1, D = 1, rho = 0.8: Wq p95 = 6.62032, Wq p99 = 10.35589.
    r = cramer_lundberg(0.8, "1s")
    assert r.waiting_quantile(0.99) == pytest.approx(10.35589, abs=5e-6)
    assert r.waiting_quantile(0.95) == pytest.approx(6.62032, abs=5e-5)


def test_mm1_is_exact():
    r, exact = cramer_lundberg(0.8, exponential()), mmc(0.8, 1.0)
    assert r.accuracy.exactness == "exact"
    assert r.decay_rate == pytest.approx(0.2, rel=1e-13)
    assert r.constant == pytest.approx(0.8, rel=1e-13)
    t = np.linspace(0.0, 60.0, 301)
    assert np.abs(r.sf(t) - exact.sf(t)).max() < 1e-13
    assert np.abs(r.waiting_sf(t) - exact.waiting_sf(t)).max() < 1e-13
    assert r.p99 == pytest.approx(math.log(100) / 0.2, rel=1e-12)
    assert r.mean == pytest.approx(5.0, rel=1e-13)


@pytest.mark.parametrize("arrival_scv", [0.0, 0.5, 0.25])
def test_gamma_interarrivals_exponential_service_is_gim1(arrival_scv):
    # GI/M/1: P(Wq > t) = sigma exp(-mu (1 - sigma) t), sigma = A*(mu (1 - sigma)) with A* the
    # interarrival transform: exp(-s / lambda) (c = 0) or (1 + c s / lambda)^(-1/c).
    lam, mu, c = 0.8, 1.0, arrival_scv
    a_star = ((lambda s: math.exp(-s / lam)) if c == 0
              else (lambda s: (1.0 + c * s / lam) ** (-1.0 / c)))
    sigma = optimize.brentq(lambda x: x - a_star(mu * (1.0 - x)), 1e-12, 1.0 - 1e-9,
                            xtol=1e-15)
    r = cramer_lundberg(lam, exponential(), arrival_scv=c)
    assert r.constant == pytest.approx(sigma, rel=1e-10)
    assert r.decay_rate == pytest.approx(mu * (1.0 - sigma), rel=1e-9)
    assert r.accuracy.exactness == "approximation"       # the interarrival law is assumed


@pytest.mark.parametrize("cv", [0.5, 1.5])
def test_gamma_service_matches_numerical_mg1_in_the_tail(cv):
    service = ServiceTime.affine(1.0, jitter=("gamma", cv))
    r, x = cramer_lundberg(0.8, service), mg1(0.8, service)
    # Asymptotically exact: the relative error vanishes in the tail. At p99.9 what is left is
    # the M/G/1 inversion error (3e-10 in the cdf, < 1e-6 in the quantile).
    assert r.quantile(0.999) == pytest.approx(x.quantile(0.999), rel=1e-6)
    assert r.waiting_quantile(0.999) == pytest.approx(x.waiting_quantile(0.999), rel=1e-6)
    assert r.accuracy.exactness == "approximation"


def test_empirical_service_tail_matches_numerical_mg1():
    service = ServiceTime.empirical({1: [1e-3, 1e-3, 2e-3, 4e-3]})
    r, x = cramer_lundberg(300.0, service), mg1(300.0, service)
    # p99.9 is not yet the asymptotic regime for a 3-point law; 1e-2 relative is what is
    # claimed ("accurate from the p90 on"); it is 8e-4 here.
    assert r.quantile(0.999) == pytest.approx(x.quantile(0.999), rel=1e-2)


# --------------------------------------------------------------------------------------------
# the sojourn convolution and the result object
# --------------------------------------------------------------------------------------------
def _direct_sojourn_sf(r, pdf, sf, t):
    """P(S > t) + int_0^t P(Wq > t - x) f_S(x) dx by adaptive quadrature."""
    out = []
    for tt in t:
        bend = [tt - r._flat_until] if 0 < tt - r._flat_until < tt else None
        conv, _ = integrate.quad(lambda x: float(r.waiting_sf(tt - x)) * pdf(x), 0.0, tt,
                                 points=bend, limit=200, epsabs=1e-14)
        out.append(sf(tt) + conv)
    return np.array(out)


def test_gamma_sojourn_convolution_is_right():
    # cv 0.5: shape 4, scale 1/4; M/G/1 constant > rho, so the tail is capped and flat near 0.
    r = cramer_lundberg(0.8, ServiceTime.affine(1.0, jitter=("gamma", 0.5)))
    assert r.constant > r.cap and r._flat_until > 0
    t = np.array([0.2, 0.5, 1.0, 2.0, 5.0, 12.0])
    direct = _direct_sojourn_sf(r, lambda x: stats.gamma.pdf(x, 4.0, scale=0.25),
                                lambda x: stats.gamma.sf(x, 4.0, scale=0.25), t)
    assert np.abs(r.sf(t) - direct).max() < 1e-10


def test_waiting_mean_and_quantiles_are_consistent():
    r = cramer_lundberg(0.8, ServiceTime.affine(1.0, jitter=("gamma", 0.5)))
    value, _ = integrate.quad(lambda t: float(r.waiting_sf(t)), 0.0, 200.0,
                              points=[r._flat_until], limit=200)
    assert value == pytest.approx(r.waiting_mean, rel=1e-9)
    assert r.mean == pytest.approx(1.0 + r.waiting_mean, rel=1e-14)
    for p in (0.5, 0.9, 0.99):
        assert r.cdf(r.quantile(p)) == pytest.approx(p, abs=1e-10)
        assert r.waiting_cdf(r.waiting_quantile(p)) == pytest.approx(p, abs=1e-12)
    assert r.waiting_quantile(0.1) == 0.0                       # inside the atom 1 - rho


def test_result_metadata():
    r = cramer_lundberg(400.0, ServiceTime.table({1: 1e-3, 4: 2.5e-3}, jitter=("gamma", 0.3)),
                        batch_size=2)
    assert isinstance(r, CramerLundbergLatency) and isinstance(r, ExponentialWaitLatency)
    assert isinstance(r, Latency) and isinstance(r.accuracy, Accuracy)
    assert r.accuracy.exactness == "approximation" and "Cramer-Lundberg" in r.accuracy.statement
    assert r.service_mean == pytest.approx(1.5e-3)
    assert r.utilization == pytest.approx(0.6) and r.throughput == pytest.approx(800.0)
    assert r.batch_size_distribution == {2: 1.0}
    renewal = cramer_lundberg(400.0, ServiceTime.affine(1e-3, jitter=("gamma", 0.5)),
                              arrival_scv=2.0)
    assert "Kingman" in renewal.accuracy.statement and renewal.cap == 1.0


# --------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------
def test_lognormal_is_refused_as_heavy_tailed():
    with pytest.raises(ValueError, match="light-tailed.*lognormal"):
        cramer_lundberg(500.0, ServiceTime.affine(1e-3, jitter=("lognormal", 0.5)))


def test_unstable():
    with pytest.raises(UnstableError, match=r"rate 1.5 req/s is 1.5 times the capacity 1 req/s"):
        cramer_lundberg(1.5, 1.0)


@pytest.mark.parametrize("kwargs, match", [
    (dict(rate=0.0, service=1.0), "rate"),
    (dict(rate=0.5, service=1.0, arrival_scv=-0.1), "arrival_scv"),
    (dict(rate=0.5, service=1.0, arrival_scv=float("inf")), "arrival_scv"),
    (dict(rate=0.5, service=None), "service"),
    (dict(rate=0.5, service=1.0, batch_size=-2), "batch_size"),
    (dict(rate=0.5, service=1.0, arrival_scv=0.0), "no job ever waits"),
])
def test_invalid_inputs(kwargs, match):
    with pytest.raises(ValueError, match=match):
        cramer_lundberg(**kwargs)


def test_decay_rate_finds_the_positive_root_and_says_when_there_is_none():
    # a lattice queue (the batch chain's long queue): Poisson(a) arrivals per step, K served,
    # log E[exp(theta (A - K))] = a (e^theta - 1) - K theta
    a, K = 3.0, 4
    theta = decay_rate(lambda t: a * math.expm1(t) - K * t, start=1.0)
    assert theta > 0.1 and a * math.expm1(theta) == pytest.approx(K * theta, rel=1e-13)
    with pytest.raises(ArithmeticError, match="never positive"):
        decay_rate(lambda t: -t, start=1.0)                      # the queue never grows
    with pytest.raises(ArithmeticError, match="too close to 0"):
        decay_rate(lambda t: 3.5 * math.expm1(t) - 3.0 * t, start=1.0)   # it never drains
