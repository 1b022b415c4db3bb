"""The conformance suite over the issue-3 grid (three loads per configuration): slow.

Runs every solver that ``qmodel.predict`` picks on the issue-3 grid's quick form
(``qmodel.campaign.grids.issue3_grid(quick=True)``, measured as validation/predict_accuracy.py
does: 180 configurations, 1e6 simulated requests each, up to 8e6 at high load) and asserts
per family what the README states:

- exact and numerical results and one-instance approximations inside the simulator's 99%
  confidence interval widened by the result's lattice step, or within 8% plus the CI's
  half-width (the issue's worst-case bound for approximations);
- several instances: inside the range of errors their result states (its family's in
  qmodel/theory/measured_errors.json, measured over the full grid and a holdout) widened by the
  half-width (the issue's 8% is not met there yet).

Configurations outside every family's measured domain are declined (``predict`` simulates
them) and counted, not judged. Run with ``make test-slow``.
"""

import sys
from pathlib import Path

import numpy as np
import pytest

from qmodel.campaign.grids import issue3_grid
from qmodel.theory.measured import family_of, measured

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "validation"))
import predict_accuracy  # noqa: E402


# Configurations of the quick grid outside every family's measured domain since the domains
# were cut by measurement (issue 35; docs/notes/domains.md): B 32 on several instances without
# a delay, and several jittery instances with a delay at load 0.9. No model answers them
# (predict simulates); more would mean a domain shrank unnoticed.
MOST_DECLINED = 24


@pytest.mark.slow
def test_every_solver_over_the_quick_grid():
    rows, declined = [], []
    for case in issue3_grid(quick=True):
        try:
            rows.append(predict_accuracy.run_case(case, 1_000_000, seed=17, most=8_000_000))
        except NotImplementedError:          # predict(fallback="raise"): no model here
            declined.append(case)
    assert len(declined) <= MOST_DECLINED, declined
    assert len(rows) + len(declined) == len(issue3_grid(quick=True))
    single, several = [], []
    for row in rows:
        for name in ("p95", "p99"):
            q = row[name]
            lo, hi = q["ci99"]
            half = (hi - lo) / 2 / q["simulated"]
            if row["c"] == 1 or row["family"] != "approximation":
                assert q["in_ci_with_lattice"] or abs(q["error"]) <= 0.08 + half, row
                single.append(abs(q["error"]))
            else:
                fam = family_of(row["c"], row["jitter"] == "deterministic",
                                row["D_over_S1"] > 0)
                stated = getattr(measured(fam), name)
                assert stated.low - half <= q["error"] <= stated.high + half, (fam, row)
                several.append(abs(q["error"]))
    assert np.median(single) <= 0.03
    assert np.median(several) <= 0.03
