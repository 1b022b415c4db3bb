"""The service-law registry: each family's class is the distribution it claims (scipy.stats where
one exists, numeric integration for the transforms), and a ServiceTime maps to its family."""

import math

import numpy as np
import pytest
from scipy import integrate, stats

import qmodel as qm
from qmodel.jitter import JITTERS
from qmodel.theory.service_law import (SERVICE_LAWS, DeterministicLaw, EmpiricalLaw,
                                       ExponentialLaw, GammaLaw, LognormalLaw, ServiceLaw,
                                       law_family, service_lattice, service_law, service_upper)

MEAN, CV = 2.0, 0.6
# each continuous family with the scipy.stats distribution it claims to be
CONTINUOUS = {
    "exponential": (ExponentialLaw(MEAN), stats.expon(scale=MEAN)),
    "gamma": (GammaLaw(MEAN, CV), stats.gamma(1 / CV ** 2, scale=MEAN * CV ** 2)),
    "lognormal": (LognormalLaw(MEAN, CV),
                  stats.lognorm(math.sqrt(math.log1p(CV ** 2)),
                                scale=MEAN * math.exp(-math.log1p(CV ** 2) / 2))),
}
VALUES, PROBS = np.array([0.5, 1.0, 4.0]), np.array([0.25, 0.5, 0.25])
X = np.array([0.0, 0.3, 1.0, 2.0, 3.5, 8.0])


def _expect(law, ref, f):
    """E[f(S)] under ``ref`` (a frozen scipy.stats distribution), by quadrature or a sum."""
    if isinstance(law, EmpiricalLaw):
        return np.dot(law.probs, f(law.values))
    # beyond the 1e-30 quantile nothing here integrates to more than e^-40
    value, _ = integrate.quad(lambda x: f(x) * ref.pdf(x), 0, ref.isf(1e-30), limit=400,
                              epsabs=1e-13, epsrel=1e-11)
    return value


def _complex_expect(law, ref, f):
    return (_expect(law, ref, lambda x: f(x).real)
            + 1j * _expect(law, ref, lambda x: f(x).imag))


def _laws(but=()):
    laws = [(name, law, ref) for name, (law, ref) in CONTINUOUS.items()]
    laws.append(("empirical", EmpiricalLaw(VALUES, PROBS),
                 stats.rv_discrete(values=(VALUES, PROBS))))
    return [pytest.param(*v, id=v[0]) for v in laws if v[0] not in but]


@pytest.mark.parametrize("name, law, ref", _laws())
def test_sf_cdf_and_moments_are_the_scipy_distribution(name, law, ref):
    assert law.family == name and SERVICE_LAWS[name] is type(law)
    np.testing.assert_allclose(law.sf(X), ref.sf(X), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(law.cdf(X), ref.cdf(X), rtol=1e-12, atol=1e-15)
    assert law.mean == pytest.approx(ref.mean(), rel=1e-12)
    assert law.scv == pytest.approx(ref.var() / ref.mean() ** 2, rel=1e-12)
    assert law.second_moment == pytest.approx(ref.moment(2), rel=1e-12)


@pytest.mark.parametrize("name", sorted(CONTINUOUS))
def test_pdf_is_the_scipy_density(name):
    law, ref = CONTINUOUS[name]
    np.testing.assert_allclose(law.pdf(X[1:]), ref.pdf(X[1:]), rtol=1e-12)


@pytest.mark.parametrize("name, law, ref", _laws())
def test_lst_complement_against_numeric_integration(name, law, ref):
    s = np.array([0.3 + 0.7j, 2.0 - 5.0j])
    got = law.lst_complement(s)
    for sk, value in zip(s, got):
        expected = _complex_expect(law, ref, lambda x: -np.expm1(-sk * x))
        assert value == pytest.approx(expected, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("name, law, ref", _laws(but=("lognormal",)))
def test_log_mgf_against_numeric_integration(name, law, ref):
    theta = 0.4 * min(law.theta_max, 1.0 / law.mean)
    mgf = _expect(law, ref, lambda x: np.exp(theta * x))
    assert law.log_mgf(theta) == pytest.approx(math.log(mgf), rel=1e-9)
    slope = _expect(law, ref, lambda x: x * np.exp(theta * x)) / mgf
    assert law.dlog_mgf(theta) == pytest.approx(slope, rel=1e-9)


@pytest.mark.parametrize("name, law, ref", _laws())
def test_exp_weighted_cdf_against_numeric_integration(name, law, ref):
    # K(u) = E[exp(-theta (u - S)); S <= u]; for gamma theta = 4 / m lies beyond theta_max,
    # where the tilt does not apply and the quadrature answers
    u = np.array([-1.0, 0.7, 2.5, 6.0])
    for theta in (0.3 / law.mean, 4.0 / law.mean):
        got = law.exp_weighted_cdf(theta, u)
        assert got[0] == 0.0
        for uk, value in zip(u[1:], got[1:]):
            if isinstance(law, EmpiricalLaw):
                expected = np.dot(law.probs, np.where(law.values <= uk,
                                                      np.exp(-theta * (uk - law.values)), 0.0))
            else:                      # integrated up to u, where the indicator cuts
                expected, _ = integrate.quad(lambda x: math.exp(-theta * (uk - x)) * ref.pdf(x),
                                             0, uk, epsabs=1e-13, epsrel=1e-11)
            assert value == pytest.approx(expected, rel=1e-8, abs=1e-12)


def test_the_lognormal_law_has_no_moment_generating_function():
    law = CONTINUOUS["lognormal"][0]
    assert law.theta_max == 0.0 and law.numeric_transform
    with pytest.raises(ValueError, match="no moment generating function"):
        law.log_mgf(0.1)
    with pytest.raises(ValueError, match="no moment generating function"):
        law.dlog_mgf(0.1)


def test_deterministic_law():
    law = DeterministicLaw(MEAN)
    assert (law.scv, law.maximum, law.theta_max) == (0.0, MEAN, math.inf)
    assert law.sf(X).tolist() == (X < MEAN).astype(float).tolist()
    assert law.cdf(X).tolist() == (X >= MEAN).astype(float).tolist()
    s = np.array([0.3 + 0.7j, 1e-9 + 0j])
    got = law.lst_complement(s)
    assert got[0] == pytest.approx(1 - np.exp(-s[0] * MEAN), rel=1e-12)
    assert got[1] == pytest.approx(1e-9 * MEAN * (1 - 0.5e-9 * MEAN), rel=1e-15)   # no cancellation
    assert law.log_mgf(0.25) == 0.25 * MEAN and law.dlog_mgf(0.25) == MEAN
    u = np.array([-1.0, 1.0, MEAN, 5.0])
    np.testing.assert_allclose(law.exp_weighted_cdf(0.5, u),
                               [0.0, 0.0, 1.0, math.exp(-0.5 * (5.0 - MEAN))], rtol=1e-15)
    values, probs = law.atoms
    assert values.tolist() == [MEAN] and probs.tolist() == [1.0]
    with pytest.raises(ValueError, match="no density"):
        law.pdf(1.0)


def test_the_registry_holds_one_class_per_family():
    assert set(SERVICE_LAWS) == set(JITTERS) | {"empirical"}
    for family, cls in SERVICE_LAWS.items():
        assert issubclass(cls, ServiceLaw) and cls.family == family
    assert law_family(qm.ServiceTime.affine(1e-3, jitter=("gamma", 0.5))) is GammaLaw
    # the continuous families draw on the jitter registry's laws
    assert CONTINUOUS["gamma"][0].jitter.name == "gamma"
    assert all(CONTINUOUS[name][0].atoms[0].size == 0 for name in CONTINUOUS)


@pytest.mark.parametrize("service", [
    qm.ServiceTime.affine(1e-3, 1e-4),
    qm.ServiceTime.affine(1e-3, 1e-4, jitter="exponential"),
    qm.ServiceTime.affine(1e-3, 1e-4, jitter=("gamma", 0.5)),
    qm.ServiceTime.table({1: 1e-3, 4: 2e-3}, jitter=("lognormal", 0.3)),
    qm.ServiceTime.empirical({1: [1e-3, 2e-3], 4: [2e-3, 2e-3, 5e-3]}),
], ids=lambda s: s.jitter)
def test_service_law_of_each_family(service):
    law = service_law(service, batch_size=3)
    assert type(law) is SERVICE_LAWS[service.jitter] and law.family == service.jitter
    assert law.mean == pytest.approx(float(service.mean(3)), rel=1e-12)
    if service.jitter != "empirical":
        assert law.cv == service.cv
    assert law.label.startswith("S(3) of ServiceTime(")
    # the lattice law has the law's mean (to the lattice's resolution) and sums to 1
    h = law.mean / 200
    upper = service_upper(service, [3], 1e-12)
    pmf, overflow = service_lattice(service, [3], h, int(upper / h) + 2)
    assert pmf.sum() == pytest.approx(1.0, abs=1e-12) and overflow < 1e-9
    assert np.dot(pmf[0], np.arange(pmf.shape[1]) * h) == pytest.approx(law.mean, rel=1e-4)


def test_from_moments_picks_the_family():
    assert isinstance(ServiceLaw.from_moments(1.0, 0), DeterministicLaw)
    assert isinstance(ServiceLaw.from_moments(1.0, 1), ExponentialLaw)
    law = ServiceLaw.from_moments(2.0, 0.25)
    assert isinstance(law, GammaLaw) and (law.mean, law.scv, law.shape) == (2.0, 0.25, 4.0)


def test_fixed_cv_families_refuse_another_cv():
    with pytest.raises(ValueError, match="cv 1"):
        ExponentialLaw(1.0, 0.5)
    with pytest.raises(ValueError, match="cv 0"):
        DeterministicLaw(1.0, 0.5)
