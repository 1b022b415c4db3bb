"""The jitter registry: each law is the scipy.stats distribution it claims, with unit mean, and
the simulator draws from it."""

import numpy as np
import pytest
from scipy import stats

from qmodel.jitter import JITTERS, jitter_law

CV = 0.4
REFERENCE = {
    "exponential": stats.expon(),
    "gamma": stats.gamma(1 / CV ** 2, scale=CV ** 2),
    "lognormal": stats.lognorm(np.sqrt(np.log1p(CV ** 2)), scale=np.exp(-np.log1p(CV ** 2) / 2)),
}


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_each_law_is_its_scipy_distribution(name):
    law, ref = jitter_law(name, CV if name != "exponential" else 1.0), REFERENCE[name]
    x = np.array([0.1, 0.5, 1.0, 2.0, 4.0])
    np.testing.assert_allclose(law.cdf(x), ref.cdf(x), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(law.sf(x), ref.sf(x), rtol=1e-12, atol=1e-15)
    q = np.array([0.5, 0.1, 1e-3])
    np.testing.assert_allclose(law.isf(q), ref.isf(q), rtol=1e-10)
    assert ref.mean() == pytest.approx(1.0) and ref.std() == pytest.approx(law.std())


@pytest.mark.parametrize("name", sorted(JITTERS))
def test_draws_have_unit_mean_and_the_laws_cv(name):
    law = jitter_law(name, JITTERS[name].fixed_cv if JITTERS[name].fixed_cv is not None else CV)
    x = law.sample(np, np.random.default_rng(5), (400_000,))
    # 5 standard errors of the sample mean and of the sample standard deviation
    se = max(law.cv, 1e-9) / np.sqrt(x.size)
    assert abs(x.mean() - 1.0) <= 5 * se
    assert abs(x.std() - law.cv) <= 5 * se * np.sqrt(2 + 3 * law.cv ** 2) + 1e-12
