"""Drift on the real server: what the committed full-run trace measures, and what it does.

The one run traced from start to end (validation/reports/triton/runs-fulltrace: B 8, 0.5 ms
delay, two instances, 1,370 req/s, 6,353 batches over 18 s) is calibrated with and without
its drift (``Node.drift``, fitted by ``qmodel.triton.calibrate`` from the trace), and both are
simulated at the measured throughput against perf_analyzer's percentiles. Then

- the fit at other periods, and the wander it implies over one second against the one
  measured (the per-second means' spread less their sampling noise): does one AR(1) step
  process describe the trace at both scales?
- the calibrated node with and without the drift at 50-97% of its capacity: how the
  drift's effect on p99 grows near capacity.

Run (no server; about 2 minutes on 2 cores):

    python validation/triton_drift.py            # prints the tables, writes the JSON
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import qmodel as qm  # noqa: E402
from qmodel.drift import fit_drift  # noqa: E402
from qmodel.triton.calibrate import COLD_FACTOR, calibrate  # noqa: E402
from qmodel.triton.perf_analyzer import read_perf_analyzer  # noqa: E402
from qmodel.triton.trace import read_trace  # noqa: E402

RUN = ROOT / "validation/reports/triton/runs-fulltrace/b8-d0.5-i2/1370-1"
OUT = ROOT / "validation/results/triton_drift.json"
REQUESTS = 1_000_000
SEEDS = (1, 2)
LOADS = (0.5, 0.7, 0.8, 0.9, 0.95, 0.97)


def measured_window_sd(t, seconds: float) -> float:
    """The spread of the log execution time's window means over ``seconds`` (sizes' levels
    taken out), less the windows' sampling noise."""
    logs = np.log(t.executions)
    x = logs.copy()
    for k in np.unique(t.sizes):
        x[t.sizes == k] -= logs[t.sizes == k].mean()
    w = np.floor((t.starts - t.starts[0]) / seconds).astype(int)
    ids, inv, n = np.unique(w, return_inverse=True, return_counts=True)
    means = np.bincount(inv, weights=x) / n
    within = np.bincount(inv, weights=(x - means[inv]) ** 2) / np.maximum(n - 1, 1)
    use = n >= 2
    return float(np.sqrt(max(means[use].var() - np.mean(within[use] / n[use]), 0.0)))


def main() -> None:
    stats = (RUN / "stats_before.json", RUN / "stats_after.json")
    metrics = (RUN / "metrics_before.txt", RUN / "metrics_after.txt")
    node = calibrate(RUN / "config.pbtxt", stats, metrics, RUN / "trace.json.gz",
                     perf_analyzer=RUN / "perf_analyzer.csv")
    row, = read_perf_analyzer(RUN / "perf_analyzer.csv")
    measured = {"p50": row.p50, "p95": row.p95, "p99": row.p99}
    print(f"run: {RUN.relative_to(ROOT)}, {row.throughput:.0f} req/s; "
          f"calibrated {node.drift.describe()}")
    out = {"run": str(RUN.relative_to(ROOT)), "throughput": row.throughput,
           "measured": measured, "drift": {"cv": node.drift.cv, "period": node.drift.period,
                                          "correlation": node.drift.correlation}}

    print("\nagainst perf_analyzer (error %, two seeds)")
    print("node                 p50           p95           p99")
    rows = {}
    for name, n in (("with drift", node), ("without drift", replace(node, drift=None))):
        errs = {q: [] for q in measured}
        for seed in SEEDS:
            r = qm.simulate(n, rate=row.throughput, requests=REQUESTS, seed=seed)
            for q in measured:
                errs[q].append(100 * (getattr(r, q) / measured[q] - 1))
        rows[name] = errs
        print(f"{name:15s}" + "".join(f"  {min(v):+6.1f}..{max(v):+5.1f}" for v in errs.values()))
    out["against_measured"] = rows

    t = read_trace(RUN / "trace.json.gz")
    median = {k: float(np.median(t.executions[t.sizes == k])) for k in np.unique(t.sizes)}
    keep = t.executions <= COLD_FACTOR * np.array([median[k] for k in t.sizes])
    print("\nthe fit at other periods: the wander over 1 s it implies, against the measured")
    one_second = measured_window_sd(t, 1.0)
    fits = []
    for period in (0.05, 0.1, 0.2):
        d, _ = fit_drift(t.starts, t.sizes, t.executions, period, keep=keep)
        fits.append({"period": period, "cv": d.cv, "correlation": d.correlation,
                     "one_second_sd": d.window_cv(1.0)})
        print(f"  period {period:4.2f} s: cv {d.cv:.4f}, correlation {d.correlation:.2f}, "
              f"1 s sd {d.window_cv(1.0):.4f}")
    print(f"  measured 1 s sd (less sampling noise): {one_second:.4f}")
    out["fits"] = fits
    out["measured_one_second_sd"] = one_second

    print("\nthe drift's effect by load (p99 with / without, seed 1)")
    effect = []
    for load in LOADS:
        rate = load * node.capacity
        a = qm.simulate(node, rate=rate, requests=REQUESTS, seed=1)
        b = qm.simulate(replace(node, drift=None), rate=rate, requests=REQUESTS, seed=1)
        effect.append({"load": load, "p99_drift": a.p99, "p99_steady": b.p99,
                       "ci_drift": list(a.ci(0.99)), "ci_steady": list(b.ci(0.99))})
        print(f"  load {load:.2f}: {a.p99 * 1e3:7.2f} ms / {b.p99 * 1e3:7.2f} ms "
              f"({100 * (a.p99 / b.p99 - 1):+5.1f}%)")
    out["by_load"] = effect
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(f"\nwrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
