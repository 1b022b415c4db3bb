"""The numerical M/G/1 solver (Pollaczek-Khinchine + Euler inversion) against exact results,
its own service transforms, and the simulator.

Tolerances come from the stated errors: the Euler discretisation error is e^-22 = 3e-10 in the
cdf (Abate & Whitt 1995), the lognormal transform quadrature is stated to 3e-13, and each result
carries ``estimated_error``.
"""

import math

import mpmath
import numpy as np
import pytest

import qmodel as qm
from qmodel.latency import Accuracy, Latency
from qmodel.system import ServiceTime, UnstableError
from qmodel.theory import MD1Latency, md1, mmc
from qmodel.theory.classical import MG1Latency, mg1
from qmodel.theory.service_law import service_law

EULER_BOUND = 3e-10          # e^-22, the discretisation error of the inversion
ROUNDOFF = 1e-10             # margin for the float64 roundoff of the Euler sum


def exponential(mean=1.0):
    return ServiceTime.affine(mean, jitter="exponential")


# --------------------------------------------------------------------------------------------
# exact references
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rho", [0.1, 0.5, 0.8, 0.99])
def test_exponential_service_is_mm1(rho):
    r, exact = mg1(rho, exponential()), mmc(rho, 1.0)
    t = np.linspace(1e-3, 30.0 / (1.0 - rho), 400)
    tol = EULER_BOUND + ROUNDOFF
    assert np.abs(r.sf(t) - exact.sf(t)).max() < tol
    assert np.abs(r.cdf(t) - exact.cdf(t)).max() < tol
    assert np.abs(r.waiting_sf(t) - exact.waiting_sf(t)).max() < tol
    # Quantiles: a cdf error e moves a quantile by e / density; at these levels that is < 1e-8.
    for p in (0.5, 0.95, 0.99, 0.999):
        assert r.quantile(p) == pytest.approx(exact.quantile(p), rel=1e-8)
    assert r.waiting_quantile(0.99) == pytest.approx(exact.waiting_quantile(0.99), rel=1e-8)
    assert r.waiting_quantile((1.0 - rho) / 2) == 0.0    # inside the atom at 0
    assert r.estimated_error < tol
    assert r.mean == pytest.approx(exact.mean, rel=1e-13)
    assert r.waiting_mean == pytest.approx(exact.waiting_mean, rel=1e-13)


def test_mm1_published_oracle():
    # theory-notes.md: M/M/1 rho 0.8, mu 1: sojourn p99 = ln(100)/0.2 = 23.0259.
    assert round(mg1(0.8, exponential()).p99, 4) == 23.0259


def test_gamma_with_small_cv_approaches_md1():
    exact = md1(0.8, 1.0)
    for cv in (0.01, 0.003):
        r = mg1(0.8, ServiceTime.affine(1.0, jitter=("gamma", cv)))
        # The jitter itself moves the queue by O(cv^2) (E[S^2] = (1 + cv^2) D^2); the
        # inversion error (estimated_error in the cdf, over a density > 0.002 here) is smaller.
        allowed = 2.0 * cv ** 2 + r.estimated_error / 0.002 / exact.p99
        assert abs(r.p99 / exact.p99 - 1.0) < allowed
        assert abs(r.waiting_quantile(0.99) / exact.waiting_quantile(0.99) - 1.0) < allowed


def test_single_sample_empirical_is_md1_within_estimated_error():
    r, exact = mg1(0.8, ServiceTime.empirical({1: [1.0]})), md1(0.8, 1.0)
    t = np.linspace(0.05, 20.0, 200)
    # Next to the kinks at multiples of D the difference estimate undershoots by < 2x.
    assert np.abs(r.waiting_sf(t) - exact.waiting_sf(t)).max() < 2.0 * r.estimated_error
    assert np.abs(r.sf(t) - exact.sf(t)).max() < 2.0 * r.estimated_error
    assert r.p99 == pytest.approx(exact.p99, rel=1e-4)


def test_deterministic_service_delegates_to_exact_md1():
    r = mg1(0.8, ServiceTime.affine(1.0))
    assert isinstance(r, MD1Latency) and r.accuracy.exactness == "exact"
    assert r.waiting_quantile(0.99) == pytest.approx(10.35589, abs=5e-6)
    assert mg1(400.0, "2ms").p99 == pytest.approx(md1(400.0, 2e-3).p99, rel=1e-14)
    # table kind, deterministic: the mean at the batch size
    t = ServiceTime.table({1: 1.0, 4: 2.5})
    assert mg1(0.5, t, batch_size=2).service_time == pytest.approx(1.5)


# --------------------------------------------------------------------------------------------
# internal consistency
# --------------------------------------------------------------------------------------------
def _nodes(breaks, order=40):
    """Nodes and weights of Gauss-Legendre quadrature on each panel between the breaks."""
    x, w = np.polynomial.legendre.leggauss(order)
    nodes = [0.5 * (b - a) * x + 0.5 * (a + b) for a, b in zip(breaks[:-1], breaks[1:])]
    weights = [0.5 * (b - a) * w for a, b in zip(breaks[:-1], breaks[1:])]
    return np.concatenate(nodes), np.concatenate(weights)


@pytest.mark.parametrize("service, kinks", [
    (ServiceTime.affine(1.0, jitter=("gamma", 0.5)), []),
    (ServiceTime.affine(1.0, jitter=("gamma", 2.0)), []),
    (ServiceTime.empirical({1: [0.5, 1.0, 1.0, 2.5]}), [0.5, 1.0, 1.5, 2.0, 2.5, 3.0]),
])
def test_mean_from_the_distribution_matches_pollaczek_khinchine(service, kinks):
    r = mg1(0.7, service)
    # E[T] = int_0^inf P(T > t) dt: the inverted sf integrates to the closed-form mean.
    top = r.quantile(1 - 1e-9)
    # Panels: split at the jumps and kinks (empirical), and geometrically towards the tail.
    # Panels: geometric towards 0 (a gamma density with shape < 1 is singular there), split at
    # the jumps and kinks (empirical), and geometric towards the tail.
    breaks = sorted(set([0.0] + list(np.geomspace(1e-8, 0.5, 8)) + kinks
                        + list(np.geomspace(3.5, top, 5))))
    nodes, weights = _nodes(breaks)
    wait_sf, sojourn_sf = r._both(nodes)          # both from one inversion per node
    # Allowed: the stated cdf error over the whole range, plus 1e-7 for the quadrature itself.
    allowed = r.estimated_error * top + 1e-7 * r.mean
    assert abs(np.dot(weights, sojourn_sf) - r.mean) < allowed
    assert abs(np.dot(weights, wait_sf) - r.waiting_mean) < allowed
    # quantiles invert the cdf
    for p in (0.5, 0.99):
        assert r.cdf(r.quantile(p)) == pytest.approx(p, abs=10 * r.estimated_error)


@pytest.mark.parametrize("cv, t", [(0.5, 1.0), (6.0, 30.0)])
def test_lognormal_transform_against_mpmath(cv, t):
    law = service_law(ServiceTime.affine(1.0, jitter=("lognormal", cv)))
    # The lognormal law costs too much for the distribution-level checks above (each point is a
    # quadrature per transform value); its transform is checked here and its distribution
    # against the simulator below. s: points the Euler inversion (A = 22, 50 terms) uses at t,
    # the last one oscillating fastest.
    s = (22.0 + 2j * math.pi * np.array([3, 49])) / (2.0 * t)
    got = law.lst_complement(s[None, :])[0]
    sigma = math.sqrt(math.log1p(cv * cv))
    mu = -sigma ** 2 / 2
    with mpmath.workdps(30):
        for sk, value in zip(s, got):
            f = lambda z: (-mpmath.expm1(-mpmath.mpc(sk) * mpmath.exp(mu + sigma * z))
                           * mpmath.exp(-z * z / 2) / mpmath.sqrt(2 * mpmath.pi))
            ref = complex(mpmath.quad(f, mpmath.linspace(-12, 12, 25)))
            assert abs(value - ref) < 3e-13


def test_result_metadata():
    r = mg1(300.0, ServiceTime.table({1: 1e-3, 4: 2e-3}, jitter=("gamma", 0.3)), batch_size=2)
    assert isinstance(r, (MG1Latency, Latency))
    assert isinstance(r.accuracy, Accuracy) and r.accuracy.exactness == "numerical"
    assert "Abate & Whitt 1995" in r.accuracy.statement
    assert f"{r.estimated_error:.0e}" in r.accuracy.statement
    assert r.service_mean == pytest.approx(4e-3 / 3)
    assert r.utilization == pytest.approx(300.0 * 4e-3 / 3)
    assert r.throughput == pytest.approx(600.0)           # batches of 2 requests
    assert r.batch_size_distribution == {2: 1.0}
    assert r.waiting_probability == pytest.approx(r.utilization)
    assert r.p50 < r.p95 < r.p99


def test_empirical_unmeasured_size_is_scaled_like_the_simulator():
    svc = ServiceTime.empirical({1: [1e-3, 3e-3], 4: [4e-3, 6e-3]})
    law = service_law(svc, batch_size=2)          # nearest measured size 1, scaled to mean(2)
    assert law.mean == pytest.approx(float(svc.mean(2)))
    assert law.values / law.values[0] == pytest.approx([1.0, 3.0])
    assert mg1(100.0, svc, batch_size=2).service_mean == pytest.approx(float(svc.mean(2)))


# --------------------------------------------------------------------------------------------
# the simulator
# --------------------------------------------------------------------------------------------
def test_lognormal_mg1_inside_the_simulator_ci():
    node = qm.Node(service=qm.ServiceTime.affine(base=1e-3, jitter=("lognormal", 0.5)),
                   max_batch_size=1)
    sim = qm.simulate(node, rate=700.0, requests=2_000_000, seed=3)
    r = mg1(700.0, node.service)
    for p in (0.95, 0.99):
        low, high = sim.ci(p, level=0.99)
        assert low < r.quantile(p) < high
    assert r.mean == pytest.approx(sim.mean, rel=0.02)


# --------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------
def test_unstable_names_rate_and_capacity():
    with pytest.raises(UnstableError,
                       match=r"rate 1500 req/s is 1.5 times the capacity 1000 req/s"):
        mg1(1500.0, ServiceTime.affine(1e-3, jitter=("lognormal", 0.5)))


@pytest.mark.parametrize("kwargs, match", [
    (dict(rate=-1.0, service=1.0), "rate"),
    (dict(rate=float("nan"), service=1.0), "rate"),
    (dict(rate=0.5, service="fast"), "service"),
    (dict(rate=0.5, service=[1.0]), "service must be a qmodel.ServiceTime"),
    (dict(rate=0.5, service=-1.0), "service"),
    (dict(rate=0.5, service=exponential(), batch_size=0), "batch_size"),
    (dict(rate=0.5, service=exponential(), batch_size=1.5), "batch_size"),
])
def test_invalid_inputs(kwargs, match):
    with pytest.raises(ValueError, match=match):
        mg1(**kwargs)
