"""Fixtures shared by the test modules.

- ``assert_within``: asserts that a prediction's p95 and p99 lie within a relative bound of a
  simulation's, widened by the simulation's 99% confidence half-width (the tolerance every
  model-against-simulator test uses).

The accuracy grid's service family (Inoue 2021's V100 fit) is shared from the campaign
package: ``qmodel.campaign.grids.GRID_SERVICE`` (``.node(B, d, c, jitter)``).
"""

import pytest


def check_within(pred, sim, bound, levels=(0.95, 0.99)):
    """|pred / sim - 1| <= bound + the simulated quantile's 99% CI relative half-width."""
    for p in levels:
        lo, hi = sim.ci(p, level=0.99)
        s = sim.quantile(p)
        assert abs(pred.quantile(p) / s - 1) <= bound + (hi - lo) / 2 / s, p


@pytest.fixture
def assert_within():
    return check_within
