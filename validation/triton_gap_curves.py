"""Which curve of the mean batch size models the pickup gap best without a trace?

``qmodel.triton.calibrate`` models the pickup gap of an untraced run as a straight line in
the statistics' mean batch size (``MODELLED_GAP_*``, fitted by least squares on the gap
over the 72 traced runs of validation/reports/triton/runs). This script fits, the same
ways, an exponential and a power of the mean batch, each by least squares on the gap itself
(as the line is) and by a line through log(gap), and judges each as
validation/triton_untraced.py judges the line: the campaign's runs below 0.95 utilization
with the curve fitted leaving their batching configuration out, then the held-out runs
(runs-heldout) and the long-window runs (runs-long) with the curve fitted on all 72 runs.
It prints, per curve, the runs within 10% on p50 and 15% on p99 and the gap the curve
gives at mean batches of 15 (the largest measured), 40 and 64 (where it extrapolates).

Run: ``python validation/triton_gap_curves.py`` (about 5 minutes on 2 cores, no server).
Output: validation/results/triton_gap_curves.txt.
"""

from __future__ import annotations

import math
import sys
import warnings
from pathlib import Path

import numpy as np
from scipy.optimize import curve_fit

from qmodel.triton import read_perf_analyzer

sys.path.insert(0, str(Path(__file__).parent))
import triton_untraced as tu  # noqa: E402  (a sibling script)

SHAPES = {
    "exponential": lambda x, a, k: a * np.exp(k * (x - 1)),
    "power": lambda x, a, k: a * x ** k,
}


def curve(shape: str, campaign: dict, leave_out, least_squares: bool):
    """The gap as a function of the mean batch, fitted to the traced runs of ``campaign``
    but those of the batching configuration ``leave_out`` (None: all)."""
    if shape == "line":                 # calibrate's own, as triton_untraced.py fits it
        _, base, per_item = tu.fit(campaign, leave_out)
        return lambda x: base + per_item * (x - 1)
    kept = [v for v in campaign.values() if tu.knobs(v[0]) != leave_out]
    batch = np.array([b for _, _, _, b in kept])
    gap = np.array([g for _, _, g, _ in kept])
    f = SHAPES[shape]
    if least_squares:
        (a, k), _ = curve_fit(f, batch, gap, p0=(5e-5, 0.1), maxfev=20000)
    else:
        x = batch - 1 if shape == "exponential" else np.log(batch)
        k, log_a = np.polyfit(x, np.log(gap), 1)
        a = math.exp(log_a)
    return lambda x: float(f(x, a, k))


def judge(runs, campaign, shape, least_squares, leave_out):
    """(runs within 10% / 15%, runs below 0.95 utilization)."""
    within = steady = 0
    for run, (traced, _, _, batch) in runs.items():
        left = tu.knobs(traced) if leave_out else None
        row, = read_perf_analyzer(tu.inputs(run)[3])
        if tu.utilization(traced, row.throughput) >= 0.95:
            continue
        steady += 1
        gap = max(curve(shape, campaign, left, least_squares)(batch), 0.0)
        node = tu.modelled_node(run, gap, tu.fit(campaign, left)[0])
        p50, p99 = tu.quantiles(node, row.throughput)
        within += abs(p50 / row.p50 - 1) <= 0.10 and abs(p99 / row.p99 - 1) <= 0.15
    return within, steady


def main() -> None:
    warnings.simplefilter("ignore")
    campaign = {run: tu.measured(run) for run in tu.runs()}
    heldout = {run: tu.measured(run) for run in tu.runs(tu.HELDOUT)}
    long_runs = {run: tu.measured(run) for run in tu.runs(tu.LONG)}
    lines = ["python validation/triton_gap_curves.py", "",
             "curve, fitted by                   campaign (leave one out)  held out  long  "
             "gap at mean batch 15 / 40 / 64"]
    for least_squares in (True, False):
        for shape in ("line", *SHAPES) if least_squares else SHAPES:
            scores = [judge(campaign, campaign, shape, least_squares, True),
                      judge(heldout, campaign, shape, least_squares, False),
                      judge(long_runs, campaign, shape, least_squares, False)]
            f = curve(shape, campaign, None, least_squares)
            how = "least squares on the gap" if least_squares else "a line through log(gap)"
            lines.append(f"{shape:11} {how:24} "
                         + "  ".join(f"{w:>2} of {n:<2}" for w, n in scores)
                         + "   " + " / ".join(f"{f(x) * 1e3:.3g}" for x in (15, 40, 64))
                         + " ms")
            print(lines[-1], flush=True)
    out = Path(__file__).parent / "results" / "triton_gap_curves.txt"
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
