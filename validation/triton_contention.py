"""Do the two instances of the committed Triton runs slow each other?

For every traced run of two instances in validation/reports/triton (runs and runs-heldout):
each batch's execution is grouped by the instances busy at its start (itself included, as
``Node.slowdown`` counts them); the factor for two busy is the executions that started beside
a busy instance over the mean execution of their size among those that started alone (sizes
with at least 5 such). The run's calibrated node (trace given) is then simulated as it is
and with ``slowdown=(1, factor)``, its service scaled so that the mean execution over the
run's mix of starts is unchanged, against the measured p99 (perf_analyzer's).

Run: ``python validation/triton_contention.py`` (about 3 minutes on 2 cores).
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np

import qmodel as qm
from qmodel.triton import calibrate, read_config, read_perf_analyzer, read_trace
from qmodel.triton.batcher import pickup_gap

ROOT = Path(__file__).parent / "reports" / "triton"
REQUESTS, SEED, MIN_ALONE = 300_000, 1, 5


def busy_at_start(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Instances busy when each batch starts, itself included."""
    return np.array([int(np.sum((starts <= s) & (ends > s))) for s in starts])


def factor_two_busy(trace) -> tuple[float, float]:
    """(the factor for two busy instances, the share of batches that started so)."""
    busy = np.minimum(busy_at_start(trace.starts, trace.starts + trace.executions), 2)
    num = den = 0.0
    for k in np.unique(trace.sizes):
        alone = trace.executions[(trace.sizes == k) & (busy == 1)]
        beside = trace.executions[(trace.sizes == k) & (busy == 2)]
        if alone.size >= MIN_ALONE and beside.size:
            num += beside.sum()
            den += alone.mean() * beside.size
    return (num / den if den else float("nan")), float(np.mean(busy == 2))


def main() -> int:
    warnings.simplefilter("ignore")
    runs = sorted(p.parent for base in ("runs", "runs-heldout")
                  for p in (ROOT / base).rglob("run.json")
                  if "count: 2" in (p.parent / "config.pbtxt").read_text()
                  and (p.parent / "trace.json.gz").exists())
    print(f"{len(runs)} traced runs of two instances\n")
    print(f"{'run':34} {'beside':>7} {'factor':>7} {'p99 measured':>13} {'as is':>8} "
          f"{'slowed':>8}")
    further = closer = 0
    factors = []
    for run in runs:
        stats = (run / "stats_before.json", run / "stats_after.json")
        metrics = (run / "metrics_before.txt", run / "metrics_after.txt")
        pa = run / "perf_analyzer.csv"
        row, = read_perf_analyzer(pa)
        # the trace's own pickup gap, as the docs' figures were measured (calibrate fits
        # it to the statistics' queue time where the rate is known)
        gap = pickup_gap(read_trace(run / "trace.json.gz"),
                         read_config(run / "config.pbtxt").max_queue_delay)
        node = calibrate(run / "config.pbtxt", stats, metrics, run / "trace.json.gz",
                         perf_analyzer=pa, gap=gap)
        factor, share = factor_two_busy(read_trace(run / "trace.json.gz"))
        name = f"{run.parent.name}/{run.name}"
        try:
            plain = qm.simulate(node, rate=row.throughput, requests=REQUESTS, seed=SEED).p99
        except qm.UnstableError:
            print(f"{name:34} {share:7.2f} {factor:7.3f}  unstable at the measured rate")
            continue
        line = (f"{name:34} {share:7.2f} {factor:7.3f} {row.p99 * 1e3:10.2f} ms "
                f"{(plain / row.p99 - 1) * 100:+7.1f}%")
        if factor == factor:
            factors.append(factor)
            mix = 1 + share * (factor - 1)
            slowed = replace(node, service=node.service.scaled(1 / mix),
                             slowdown=(1.0, float(factor)))
            p99 = qm.simulate(slowed, rate=row.throughput, requests=REQUESTS, seed=SEED).p99
            line += f" {(p99 / row.p99 - 1) * 100:+7.1f}%"
            if abs(p99 / row.p99 - 1) > abs(plain / row.p99 - 1):
                further += 1
            else:
                closer += 1
        print(line, flush=True)
    print(f"\nfactor for two busy instances over {len(factors)} runs: "
          f"{min(factors):.3f}-{max(factors):.3f} (median {np.median(factors):.3f}); "
          f"the slowdown moved p99 further from the measured one in {further} runs, closer "
          f"in {closer}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
