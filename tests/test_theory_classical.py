"""Exact classical queues (M/M/c, M/D/1, M/D/c) against published values and each other.

Oracle values are from /work/shared/design/theory-notes.md ("Published values usable as test
oracles"); they are waiting times in queue (Wq) unless stated, and sojourn = Wq + service.
"""

import math

import mpmath
import numpy as np
import pytest
from scipy import integrate

from qmodel.latency import Accuracy, Latency
from qmodel.system import UnstableError
from qmodel.theory import md1, mdc, mmc


# --------------------------------------------------------------------------------------------
# published oracles
# --------------------------------------------------------------------------------------------
def test_mm1_p99_oracle():
    r = mmc(rate=0.8, service_rate=1.0, servers=1)
    assert r.p99 == pytest.approx(math.log(100) / 0.2, abs=1e-9)
    assert round(r.p99, 4) == 23.0259


@pytest.mark.parametrize("t, expected", [(0.5, 0.298365), (2.0, 0.634520), (5.0, 0.899503)])
def test_md1_waiting_cdf_oracle(t, expected):
    r = md1(rate=0.8, service_time=1.0)
    assert r.waiting_cdf(t) == pytest.approx(expected, abs=5e-7)
    # sojourn = Wq + D
    assert r.cdf(t + 1.0) == pytest.approx(expected, abs=5e-7)


def test_md1_waiting_quantile_oracles():
    r = md1(rate=0.8, service_time=1.0)
    assert r.waiting_quantile(0.95) == pytest.approx(6.62032, abs=5e-6)
    assert r.waiting_quantile(0.99) == pytest.approx(10.35589, abs=5e-6)
    assert r.p99 == pytest.approx(11.35589, abs=5e-6)
    assert md1(rate=0.5, service_time=1.0).waiting_quantile(0.99) == pytest.approx(3.33626,
                                                                                     abs=5e-6)


def test_md2_oracles():
    r = mdc(rate=1.6, service_time=1.0, servers=2)
    assert r.waiting_probability == pytest.approx(0.701898, abs=5e-7)
    assert r.waiting_sf(0.0) == pytest.approx(0.701898, abs=5e-7)
    assert r.waiting_mean == pytest.approx(0.903284, abs=5e-7)
    assert r.mean == pytest.approx(1.903284, abs=5e-7)
    assert r.waiting_quantile(0.99) == pytest.approx(5.06955, abs=5e-6)
    assert r.p99 == pytest.approx(6.06955, abs=5e-6)


# --------------------------------------------------------------------------------------------
# the result objects
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make, exactness, model", [
    (lambda: mmc(3.0, 1.0, 4), "exact", "mmc"),
    (lambda: md1(0.75, 1.0), "exact", "md1"),
    (lambda: mdc(3.0, 1.0, 4), "numerical", "mdc"),
])
def test_result_metadata(make, exactness, model):
    r = make()
    assert isinstance(r, Latency)
    assert isinstance(r.accuracy, Accuracy) and r.accuracy.exactness == exactness
    assert r.accuracy.statement
    assert r.method and r.model == model
    assert r.utilization == pytest.approx(0.75)
    assert r.batch_size_distribution == {1: 1.0}
    assert r.rejection_fraction == 0.0
    assert r.throughput == r.rate


def test_units_are_consistent_in_seconds():
    # 2 ms service at 400 req/s is the D = 1, rho = 0.8 queue scaled by 2e-3.
    r = md1(rate=400.0, service_time="2ms")
    assert r.waiting_quantile(0.99) == pytest.approx(10.35589 * 2e-3, abs=1e-8)
    r = mdc(rate=800.0, service_time=2e-3, servers=2)
    assert r.waiting_quantile(0.99) == pytest.approx(5.06955 * 2e-3, abs=1e-8)


# --------------------------------------------------------------------------------------------
# cross-checks
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rho", [0.3, 0.8, 0.95])
def test_mdc_with_one_server_is_md1(rho):
    a, b = mdc(rate=rho, service_time=1.0, servers=1), md1(rate=rho, service_time=1.0)
    w = np.array([0.0, 0.25, 1.0, 1.5, 3.7, 10.0, 25.0])
    np.testing.assert_allclose(a.waiting_cdf(w), b.waiting_cdf(w), atol=1e-13, rtol=0)
    np.testing.assert_allclose(a.waiting_sf(w), b.waiting_sf(w), rtol=1e-11, atol=1e-17)
    t = w + 1.0
    np.testing.assert_allclose(a.cdf(t), b.cdf(t), atol=1e-13, rtol=0)
    assert a.waiting_probability == pytest.approx(rho, rel=1e-12)
    assert a.waiting_mean == pytest.approx(b.waiting_mean, rel=1e-12)
    assert a.p99 == pytest.approx(b.p99, rel=1e-12)


def test_md1_matches_direct_high_precision_erlang_sum():
    # Erlang's formula summed independently at 80 digits, far beyond float64's reach.
    lam, t = 0.95, 40.0
    with mpmath.workdps(80):
        s = mpmath.fsum((lam * (k - mpmath.mpf(t))) ** k / mpmath.factorial(k)
                        * mpmath.exp(-lam * (k - mpmath.mpf(t))) for k in range(int(t) + 1))
        exact = float((1 - mpmath.mpf(lam)) * s)
    assert md1(lam, 1.0).waiting_cdf(t) == pytest.approx(exact, abs=1e-15)


def test_mm1_equals_exponential_sojourn():
    lam, mu = 0.8, 1.0
    r = mmc(lam, mu, 1)
    t = np.linspace(0.0, 120.0, 241)
    np.testing.assert_allclose(r.sf(t), np.exp(-(mu - lam) * t), rtol=1e-13)
    np.testing.assert_allclose(r.cdf(t), -np.expm1(-(mu - lam) * t), atol=1e-15)
    assert r.waiting_probability == pytest.approx(lam / mu, rel=1e-14)
    assert r.mean == pytest.approx(1.0 / (mu - lam), rel=1e-14)
    p = np.array([0.1, 0.5, 0.9, 0.999])
    np.testing.assert_allclose(r.quantile(p), -np.log1p(-p) / (mu - lam), rtol=1e-12)


def _mmc_sf_by_quadrature(r, t):
    # P(Wq + X > t) = (1 - C) e^{-mu t} + C [e^{-g t} + int_0^t g e^{-g y} e^{-mu (t - y)} dy]
    c, g, mu = r.waiting_probability, r.decay, r.service_rate
    conv = integrate.quad(lambda y: g * math.exp(-g * y - mu * (t - y)), 0.0, t,
                          epsabs=0.0, epsrel=1e-13)[0]
    return (1.0 - c) * math.exp(-mu * t) + c * (math.exp(-g * t) + conv)


@pytest.mark.parametrize("rate, servers", [
    (1.0, 2),             # c mu - lambda == mu exactly
    (1.0 + 1e-9, 2),      # ... and nearly
    (1.3, 2), (2.5, 3), (7.5, 10),
])
def test_mmc_sojourn_convolution(rate, servers):
    r = mmc(rate, 1.0, servers)
    for t in (0.01, 0.5, 2.0, 10.0, 40.0):
        assert r.sf(t) == pytest.approx(_mmc_sf_by_quadrature(r, t), rel=1e-11)


def test_mmc_erlang_c_many_servers():
    def erlang_c(c, a):
        with mpmath.workdps(50):
            a = mpmath.mpf(a)
            tail = a ** c / mpmath.factorial(c) * c / (c - a)
            return float(tail / (mpmath.fsum(a ** k / mpmath.factorial(k) for k in range(c))
                                 + tail))
    for c, a in [(10, 8.0), (100, 95.0), (500, 480.0)]:
        r = mmc(a, 1.0, c)
        assert r.waiting_probability == pytest.approx(erlang_c(c, a), rel=1e-12)
        assert r.waiting_sf(1.0) == pytest.approx(r.waiting_probability * math.exp(-(c - a)),
                                                  rel=1e-12)


@pytest.mark.parametrize("make", [
    lambda: mmc(3.0, 1.0, 4),
    lambda: md1(0.9, 1.0),
    lambda: mdc(1.8, 1.0, 2),
    lambda: mdc(15.2, 1.0, 16),
])
def test_cdf_quantile_round_trip(make):
    r = make()
    p = np.array([0.05, 0.3, 0.5, 0.9, 0.99, 0.9999])
    q = r.quantile(p)
    assert np.all(np.diff(q) >= 0)
    # the smallest t with cdf(t) >= p: cdf reaches p at q, and not before
    assert np.all(r.cdf(q) >= p - 1e-12)
    assert np.all(r.cdf(q * (1 - 1e-7)) < p)
    wq = r.waiting_quantile(p)
    assert np.all(r.waiting_cdf(wq) >= p - 1e-12)
    inner = wq > 0
    assert np.all(r.waiting_cdf(wq[inner] * (1 - 1e-7)) < p[inner])


def test_deterministic_sojourn_shape():
    r = mdc(1.6, 1.0, 2)
    # sojourn = Wq + D: nothing below D, a jump of P(Wq = 0) at D
    assert r.cdf(0.999999) == 0.0
    assert r.cdf(1.0) == pytest.approx(1.0 - r.waiting_probability, abs=1e-15)
    assert r.quantile(0.2) == 1.0
    assert r.sf(-1.0) == 1.0 and r.cdf(-1.0) == 0.0
    t = np.linspace(0.0, 12.0, 49)
    np.testing.assert_allclose(r.cdf(t) + r.sf(t), 1.0, atol=1e-15)


@pytest.mark.parametrize("make", [
    lambda: mmc(2.0, 1.0, 3),
    lambda: md1(0.8, 1.0),
    lambda: mdc(1.6, 1.0, 2),
    lambda: mdc(9.0, 1.0, 10),
])
def test_mean_is_integral_of_sf(make):
    r = make()
    d = 1.0
    top = float(r.quantile(1 - 1e-14))
    # integrate piecewise between multiples of D, where the deterministic cases have kinks
    edges = np.arange(0.0, top + d, d)
    total = sum(integrate.quad(lambda t: float(r.sf(t)), lo, hi, epsabs=1e-14,
                               epsrel=1e-12)[0] for lo, hi in zip(edges[:-1], edges[1:]))
    assert r.mean == pytest.approx(total, rel=1e-9)


def test_mdc_heavy_load_many_servers_is_consistent():
    r = mdc(rate=95.0, service_time=1.0, servers=100)
    assert 0.0 < r.waiting_probability < 1.0
    assert r.truncation < 1e-15
    law = r.queue_after_epoch
    assert np.all(law >= 0) and law.sum() + r.truncation == pytest.approx(1.0, abs=1e-12)
    w = np.linspace(0.0, 5.0, 51)
    cdf = r.waiting_cdf(w)
    assert np.all(np.diff(cdf) >= -1e-14)
    np.testing.assert_allclose(cdf + r.waiting_sf(w), 1.0, atol=1e-13)


# --------------------------------------------------------------------------------------------
# bad inputs
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("call, field", [
    (lambda: mmc(0.0, 1.0, 1), "rate"),
    (lambda: mmc(-1.0, 1.0, 1), "rate"),
    (lambda: mmc(float("nan"), 1.0, 1), "rate"),
    (lambda: mmc(True, 1.0, 1), "rate"),
    (lambda: mmc(1.0, 0.0, 2), "service_rate"),
    (lambda: mmc(1.0, "fast", 2), "service_rate"),
    (lambda: mmc(1.0, 1.0, 0), "servers"),
    (lambda: mmc(1.0, 1.0, 2.5), "servers"),
    (lambda: md1(0.0, 1.0), "rate"),
    (lambda: md1(0.5, 0.0), "service_time"),
    (lambda: md1(0.5, -1.0), "service_time"),
    (lambda: md1(0.5, "soon"), "service_time"),
    (lambda: mdc(1.0, 1.0, 0), "servers"),
    (lambda: mdc(1.0, 1.0, "two"), "servers"),
    (lambda: mdc(float("inf"), 1.0, 2), "rate"),
    (lambda: mdc(1.0, 0.0, 2), "service_time"),
])
def test_bad_arguments_name_the_field(call, field):
    with pytest.raises(ValueError, match=field) as info:
        call()
    assert not isinstance(info.value, UnstableError)


def test_whole_float_servers_accepted():
    assert mmc(1.0, 1.0, 2.0).servers == 2
    assert mdc(1.0, 1.0, 2.0).servers == 2


@pytest.mark.parametrize("call", [
    lambda: mmc(1.0, 1.0, 1),
    lambda: mmc(5.0, 1.0, 4),
    lambda: md1(1.0, 1.0),
    lambda: md1(2.0, "1s"),
    lambda: mdc(2.0, 1.0, 2),
    lambda: mdc(30.0, 0.5, 8),
])
def test_unstable_load_raises(call):
    with pytest.raises(UnstableError, match="capacity") as info:
        call()
    assert "servers" in str(info.value) and "rate" in str(info.value)


def test_quantile_level_checked():
    r = md1(0.5, 1.0)
    with pytest.raises(ValueError, match="0.99"):
        r.waiting_quantile(99)
    with pytest.raises(ValueError, match="0.99"):
        r.quantile(1.0)
