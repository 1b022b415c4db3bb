"""Drift on the real server: what the committed full-run traces measure, and what it does.

The runs traced from start to end (validation/reports/triton/runs-fulltrace: B 8 with a
0.5 ms delay on two instances at 1,370 req/s, three times; B 16 with a 0.5 ms delay on two
instances at 1,690 req/s and B 8 without a delay pinned at 880 req/s, twice each; B 1 on
two instances with a lognormal cv of 0.2 at 550 req/s, once, with 20 s windows) are each
calibrated with and without their drift (``Node.drift``, fitted by
``qmodel.triton.calibrate`` from the trace), and both are simulated at the measured
throughput against perf_analyzer's percentiles. Then, for each,

- the fit at other periods, and the wander it implies over one second against the one
  measured (the per-second means' spread less their sampling noise): does one AR(1) step
  process describe the trace at both scales?

and for the first run the calibrated node with and without the drift at 50-97% of its
capacity: how the drift's effect on p99 grows near capacity.

Run (no server; about 5 minutes on 2 cores):

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
from qmodel.triton import read_config  # noqa: E402
from qmodel.triton.batcher import pickup_gap  # noqa: E402
from qmodel.triton.calibrate import COLD_FACTOR, calibrate  # noqa: E402
from qmodel.triton.perf_analyzer import read_perf_analyzer  # noqa: E402
from qmodel.triton.trace import read_trace  # noqa: E402

FULLTRACE = ROOT / "validation/reports/triton/runs-fulltrace"
RUN = FULLTRACE / "b8-d0.5-i2/1370-1"
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


def one_run(run: Path) -> dict:
    """The run calibrated with and without its drift against perf_analyzer, and its fits."""
    stats = (run / "stats_before.json", run / "stats_after.json")
    metrics = (run / "metrics_before.txt", run / "metrics_after.txt")
    # the trace's own pickup gap, as the docs' figures were measured (calibrate fits it to
    # the statistics' queue time where the rate is known)
    gap = pickup_gap(read_trace(run / "trace.json.gz"),
                     read_config(run / "config.pbtxt").max_queue_delay)
    node = calibrate(run / "config.pbtxt", stats, metrics, run / "trace.json.gz",
                     perf_analyzer=run / "perf_analyzer.csv", gap=gap)
    row, = read_perf_analyzer(run / "perf_analyzer.csv")
    measured = {"p50": row.p50, "p95": row.p95, "p99": row.p99}
    name = str(run.relative_to(FULLTRACE))
    out = {"run": name, "throughput": row.throughput, "measured": measured,
           "drift": None if node.drift is None else {
               "cv": node.drift.cv, "period": node.drift.period,
               "correlation": node.drift.correlation}}
    print(f"\n{name}: {row.throughput:.0f} req/s; "
          f"{node.drift.describe() if node.drift else 'no drift'}")
    print("  node                 p50             p95             p99   (error %, two seeds)")
    rows = {}
    for label, n in (("with drift", node), ("without drift", replace(node, drift=None))):
        errs = {q: [] for q in measured}
        try:
            for seed in SEEDS:
                r = qm.simulate(n, rate=row.throughput, requests=REQUESTS, seed=seed)
                for q in measured:
                    errs[q].append(100 * (getattr(r, q) / measured[q] - 1))
        except (ValueError, qm.UnstableError) as err:
            print(f"  {label}: not simulated ({err})")
            continue
        rows[label] = errs
        print(f"  {label:15s}" + "".join(f"  {min(v):+6.1f}..{max(v):+6.1f}"
                                         for v in errs.values()))
    out["against_measured"] = rows
    t = read_trace(run / "trace.json.gz")
    median = {k: float(np.median(t.executions[t.sizes == k])) for k in np.unique(t.sizes)}
    keep = t.executions <= COLD_FACTOR * np.array([median[k] for k in t.sizes])
    fits = []
    for period in (0.05, 0.1, 0.2):
        d, _ = fit_drift(t.starts, t.sizes, t.executions, period, keep=keep)
        fits.append({"period": period, "cv": d.cv, "correlation": d.correlation,
                     "one_second_sd": d.window_cv(1.0)})
    out["fits"] = fits
    out["measured_one_second_sd"] = measured_window_sd(t, 1.0)
    print("  fits (period: cv, correlation, implied 1 s sd): "
          + "; ".join(f"{f['period']:g} s: {f['cv']:.4f}, {f['correlation']:.2f}, "
                      f"{f['one_second_sd']:.4f}" for f in fits)
          + f"; measured 1 s sd {out['measured_one_second_sd']:.4f}")
    return out, node


def main() -> None:
    runs = sorted({p.parent for p in FULLTRACE.rglob("trace.json.gz")})
    results = []
    node = None
    for run in runs:
        got, calibrated = one_run(run)
        results.append(got)
        if run == RUN:
            node = calibrated
    out = {"runs": results}

    print(f"\nthe drift's effect by load on {RUN.relative_to(FULLTRACE)} (p99 with / without, "
          "seed 1)")
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
