"""Fixtures shared by the test modules.

- ``grid_node``: a node of the accuracy grid's service family (Inoue 2021's V100 fit,
  S(k) = 1.8874 ms + 0.1438 ms x k; "lognormal" jitter has cv 0.3), as
  ``grid_node(B, d, c, jitter)`` with the delay ``d`` in units of S(1);
- ``assert_within``: asserts that a prediction's p95 and p99 lie within a relative bound of a
  simulation's, widened by the simulation's 99% confidence half-width (the tolerance every
  model-against-simulator test uses).
"""

import pytest

from qmodel.campaign.grids import GRID_SERVICE


@pytest.fixture
def grid_node():
    return GRID_SERVICE.node


def check_within(pred, sim, bound, levels=(0.95, 0.99)):
    """|pred / sim - 1| <= bound + the simulated quantile's 99% CI relative half-width."""
    for p in levels:
        lo, hi = sim.ci(p, level=0.99)
        s = sim.quantile(p)
        assert abs(pred.quantile(p) / s - 1) <= bound + (hi - lo) / 2 / s, p


@pytest.fixture
def assert_within():
    return check_within
