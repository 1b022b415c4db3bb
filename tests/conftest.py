"""Fixtures shared by the test modules.

- ``assert_within``: asserts that a prediction's p95 and p99 lie within a relative bound of a
  simulation's, widened by the simulation's 99% confidence half-width (the tolerance every
  model-against-simulator test uses).
- ``named_scripts``: the scripts of a folder (benchmarks, examples) that README.md, the
  Makefile or docs/ (notes included) name, so that a test can run each one.
- ``tandem``: three deterministic one-request stages in a row at 300 req/s, and the exact
  quantiles of their sojourn from the derivation "tandem" (Friedman 1965).

The accuracy grid's service family (Inoue 2021's V100 fit) is shared from the campaign
package: ``qmodel.campaign.grids.GRID_SERVICE`` (``.node(B, d, c, jitter)``).
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def named_scripts():
    def named(folder: str) -> set:
        text = "\n".join(p.read_text(encoding="utf-8") for p in
                         [ROOT / "README.md", ROOT / "Makefile",
                          *sorted((ROOT / "docs").rglob("*.md"))])
        return set(re.findall(rf"{folder}/(\w+\.py)", text))
    return named


def check_within(pred, sim, bound, levels=(0.95, 0.99)):
    """|pred / sim - 1| <= bound + the simulated quantile's 99% CI relative half-width."""
    for p in levels:
        lo, hi = sim.ci(p, level=0.99)
        s = sim.quantile(p)
        assert abs(pred.quantile(p) / s - 1) <= bound + (hi - lo) / 2 / s, p


@pytest.fixture
def assert_within():
    return check_within


@pytest.fixture
def tandem():
    """(ensemble, rate, exact) with exact(p) the tandem derivation's p-quantile."""
    import sympy as sp
    from scipy import optimize

    import qmodel as qm
    from qmodel.derivations import load

    d = load("tandem")
    lam, dstar, dtot, t = (d.symbols[k] for k in ("lam", "Dstar", "Dtot", "t"))
    rate, times = 300.0, (2e-3, 1e-3, 0.5e-3)
    cdf = sp.lambdify(t, d.result("sojourn_cdf").subs({lam: rate, dstar: max(times),
                                                       dtot: sum(times)}), "math")
    ens = qm.Ensemble({f"s{j}": qm.Node(qm.ServiceTime.affine(x)) for j, x in enumerate(times)},
                      [("s0", "s1"), ("s1", "s2")])

    def exact(p):
        # the explicit M/D/1 sum loses its digits far out: bracket where it holds (20 ms)
        return optimize.brentq(lambda x: cdf(x) - p, sum(times) + 1e-9, 0.02, xtol=1e-12)

    return ens, rate, exact
