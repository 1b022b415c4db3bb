"""The textbook baselines (Kingman, Allen-Cunneen, exponential tail) against exact queues."""

import math

import numpy as np
import pytest
from scipy import integrate, stats

from qmodel.system import ServiceTime, UnstableError
from qmodel.theory import md1, mdc, mmc
from qmodel.theory.baselines import (allen_cunneen_wait, baseline_latency, exponential_tail,
                                     kingman_wait)
from qmodel.theory.tails import ExponentialWaitLatency


# --------------------------------------------------------------------------------------------
# mean waits
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rho", [0.3, 0.8, 0.95])
def test_kingman_is_exact_for_mm1_and_md1(rho):
    assert kingman_wait(rho, 1.0, service_scv=1.0) == pytest.approx(
        mmc(rho, 1.0).waiting_mean, rel=1e-13)
    # with Poisson arrivals Kingman's formula is the Pollaczek-Khinchine mean
    assert kingman_wait(rho, 1.0, service_scv=0.0) == pytest.approx(
        md1(rho, 1.0).waiting_mean, rel=1e-13)


@pytest.mark.parametrize("servers", [1, 2, 5, 20])
@pytest.mark.parametrize("rho", [0.5, 0.9])
def test_allen_cunneen_is_exact_for_mmc(servers, rho):
    rate = rho * servers / 2e-3
    exact = mmc(rate, 1.0 / 2e-3, servers).waiting_mean
    assert allen_cunneen_wait(rate, "2ms", 1.0, servers) == pytest.approx(exact, rel=1e-12)


def test_allen_cunneen_on_one_server_is_kingman():
    assert allen_cunneen_wait(0.7, 1.0, 0.4, 1, arrival_scv=2.0) == pytest.approx(
        kingman_wait(0.7, 1.0, 0.4, arrival_scv=2.0), rel=1e-13)


# --------------------------------------------------------------------------------------------
# exponential tails
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("servers", [1, 2, 5])
@pytest.mark.parametrize("rho", [0.7, 0.8, 0.9])
def test_exponential_tail_overstates_the_md_c_p99(servers, rho):
    # theory-notes.md: on M/D/c the exponential tail overstates p99 (by 3-17%); even fed the
    # exact P(Wq > 0) and E[Wq]. Only the sign is asserted.
    exact = mdc(rho * servers, 1.0, servers)
    r = exponential_tail(exact.waiting_probability, exact.waiting_mean, 1.0)
    assert r.waiting_quantile(0.99) > exact.waiting_quantile(0.99)
    assert r.p99 > exact.p99


@pytest.mark.parametrize("servers", [1, 3, 10])
def test_exponential_tail_is_exact_for_mmc(servers):
    # M/M/c waiting time is exactly Erlang C exp(-(c mu - lambda) t): the baseline is exact,
    # and its sojourn convolution (theta > mu for c > 1) must be too.
    rate = 0.8 * servers
    exact = mmc(rate, 1.0, servers)
    for r in (baseline_latency(rate, 1.0, 1.0, servers=servers),
              exponential_tail(exact.waiting_probability, exact.waiting_mean,
                               ServiceTime.affine(1.0, jitter="exponential"))):
        t = np.linspace(0.0, 40.0, 201)
        assert np.abs(r.sf(t) - exact.sf(t)).max() < 1e-13
        assert r.p99 == pytest.approx(exact.p99, rel=1e-11)
        assert r.mean == pytest.approx(exact.mean, rel=1e-13)
    assert baseline_latency(0.8, 1.0, 1.0, method="kingman").p99 == pytest.approx(
        math.log(100) / 0.2, rel=1e-11)


@pytest.mark.parametrize("jitter, pdf, sf", [
    # gamma cv 2 (shape 1/4): theta = 1.6 exceeds the MGF's domain (1/4): quadrature path
    (("gamma", 2.0), lambda x: stats.gamma.pdf(x, 0.25, scale=4.0),
     lambda x: stats.gamma.sf(x, 0.25, scale=4.0)),
    (("lognormal", 0.5), lambda x: stats.lognorm.pdf(x, math.sqrt(math.log(1.25)),
                                                     scale=math.exp(-math.log(1.25) / 2)),
     lambda x: stats.lognorm.sf(x, math.sqrt(math.log(1.25)),
                                scale=math.exp(-math.log(1.25) / 2))),
])
def test_sojourn_convolution_by_quadrature(jitter, pdf, sf):
    r = exponential_tail(0.8, 0.5, ServiceTime.affine(1.0, jitter=jitter))
    for t in (0.3, 2.0, 6.0):
        conv, _ = integrate.quad(lambda x: float(r.waiting_sf(t - x)) * pdf(x), 0.0, t,
                                 limit=200, epsabs=1e-14)
        assert float(r.sf(t)) == pytest.approx(sf(t) + conv, abs=1e-11)


def test_exponential_tail_with_empirical_service():
    r = exponential_tail(0.5, 2e-3, ServiceTime.empirical({1: [1e-3, 3e-3]}))
    # P(T > t) = P(S > t) + E[P(Wq > t - S); S <= t], S uniform on the two samples
    t = 2e-3
    w = lambda u: 0.5 * math.exp(-0.5 * u / 2e-3)
    assert float(r.sf(t)) == pytest.approx(0.5 + 0.5 * w(t - 1e-3), rel=1e-13)
    assert r.mean == pytest.approx(2e-3 + 2e-3, rel=1e-13)
    assert r.cdf(r.quantile(0.99)) == pytest.approx(0.99, abs=1e-10)


def test_baseline_metadata():
    r = baseline_latency(1.6, 1.0, 0.0, servers=2)
    assert isinstance(r, ExponentialWaitLatency)
    assert r.accuracy.exactness == "approximation"
    assert r.accuracy.approximation_keys == ("exponential_tail_baseline",)
    assert "baseline, error not bounded" in r.accuracy.statement
    assert r.model == "allen_cunneen"
    assert r.throughput == 1.6 and r.utilization == pytest.approx(0.8)
    k = baseline_latency(0.8, 1.0, 0.5, arrival_scv=0.5, method="kingman")
    assert k.waiting_probability == pytest.approx(0.8)
    assert k.waiting_mean == pytest.approx(kingman_wait(0.8, 1.0, 0.5, arrival_scv=0.5))
    e = exponential_tail(0.5, 1e-3, 1e-3)
    assert e.throughput == 0.0 and e.utilization == 0.0          # unknown without rate
    e = exponential_tail(0.5, 1e-3, 1e-3, rate=400.0, servers=2)
    assert e.throughput == 400.0 and e.utilization == pytest.approx(0.2)
    assert "error not bounded" in e.accuracy.statement


# --------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------
def test_unstable():
    with pytest.raises(UnstableError, match="arrival rate 3 req.s is 1.5 times the capacity"):
        kingman_wait(3.0, 0.5, 1.0)
    with pytest.raises(UnstableError, match="capacity 4"):
        allen_cunneen_wait(5.0, 0.5, 1.0, servers=2)


@pytest.mark.parametrize("call, match", [
    (lambda: baseline_latency(1.0, 1.0, 1.0, servers=2, method="kingman"), "one server"),
    (lambda: baseline_latency(0.5, 1.0, 1.0, method="whitt"), "method"),
    (lambda: baseline_latency(0.5, 1.0, 0.0, arrival_scv=0.0), "no request waits"),
    (lambda: kingman_wait(0.5, 1.0, -1.0), "service_scv"),
    (lambda: kingman_wait(0.5, 0.0, 1.0), "mean_service"),
    (lambda: allen_cunneen_wait(0.5, 1.0, 1.0, servers=0), "servers"),
    (lambda: exponential_tail(0.0, 1.0, 1.0), "p_wait"),
    (lambda: exponential_tail(1.5, 1.0, 1.0), "p_wait"),
    (lambda: exponential_tail(0.5, -1.0, 1.0), "mean_wait"),
    (lambda: exponential_tail(0.5, 1.0, "soon"), "service"),
])
def test_invalid_inputs(call, match):
    with pytest.raises(ValueError, match=match):
        call()
