"""Issue 37: the real-server campaign calibrated with its traces withheld.

Every run of validation/reports/triton/runs is calibrated three ways and predicted at its
measured throughput, against perf_analyzer's client-side p50 and p99:

- ``traced``: statistics, metrics, perf_analyzer and the trace (``calibrate``'s full input:
  the pickup gap fitted to the statistics' queue time, as below, the rest from the trace);
- ``trace_gap``: the same with the pickup gap the trace measures
  (:func:`qmodel.triton.batcher.pickup_gap`; ``calibrate``'s default before 2026-11-29), the
  node whose prefetch share and gap the ``modelled`` column's fits read;
- ``untraced``: the same without the trace, as a production server reports (statistics API,
  Prometheus metrics, perf_analyzer), with nothing modelled in its place: batches formed
  when an instance frees, no pickup gap;
- ``modelled``: untraced, with the two quantities only a trace measures modelled from the
  other configurations' traced runs (leave one batching configuration out, its pinned and
  NumPy twins with it): the prefetch share (where
  Triton prefetches) as their median, and the pickup gap as a line in the run's mean batch
  size (from the statistics API), fitted to their gaps (``qmodel.triton.calibrate.MODELLED_*``
  hold the fit over all 72 runs, printed first; ``calibrate`` uses the line where it knows
  no rate);
- ``queue``: ``calibrate``'s own default without a trace: the pickup gap fitted so that the
  model's mean queue time equals the statistics API's at perf_analyzer's throughput, the
  prefetch share ``MODELLED_PREFETCH`` (the median over all 72 runs, this one's included).

Run: ``python validation/triton_untraced.py`` (a few minutes; no server). Prints one row per
run and the medians over the runs below 0.95 utilization; ``--write`` stores them in
validation/results/triton_untraced.json. ``--heldout`` judges calibrate's own constants on
the runs of runs-heldout/ (``validation/triton_campaign.py --heldout``), measured after they
were fitted (stored in triton_untraced_heldout.json); ``--long`` the same on runs-long/, the
configurations whose two repeats disagreed (20-73% on p99) measured again with windows four
times longer (``validation/triton_campaign.py --interval-ms 20000 --out .../runs-long``;
stored in triton_untraced_long.json). ``--polled`` the same on runs-polled/, runs whose
statistics were polled every 0.1 s (``validation/triton_campaign.py --poll 0.1``), with two
more columns: ``traced+drift`` and ``modelled+drift``, the drift fitted from the polled
statistics (``calibrate(..., series=...)``; the 1,000-request traces are too short for
their own); a drifting node is simulated (stored in triton_untraced_polled.json).
"""

import argparse
import json
import math
import statistics
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np

import qmodel as qm
from qmodel.triton import (calibrate, read_config, read_perf_analyzer, read_stats,
                           read_trace)
from qmodel.triton.batcher import pickup_gap
from qmodel.triton.calibrate import (MODELLED_GAP_BASE, MODELLED_GAP_PER_REQUEST,
                                     MODELLED_PREFETCH)

RUNS = Path(__file__).parent / "reports" / "triton" / "runs"
OUT = Path(__file__).parent / "results" / "triton_untraced.json"
HELDOUT = Path(__file__).parent / "reports" / "triton" / "runs-heldout"
OUT_HELDOUT = Path(__file__).parent / "results" / "triton_untraced_heldout.json"
LONG = Path(__file__).parent / "reports" / "triton" / "runs-long"
OUT_LONG = Path(__file__).parent / "results" / "triton_untraced_long.json"
POLLED = Path(__file__).parent / "reports" / "triton" / "runs-polled"
OUT_POLLED = Path(__file__).parent / "results" / "triton_untraced_polled.json"


def runs(folder=RUNS):
    return sorted({p.parent for p in Path(folder).rglob("perf_analyzer.csv")})


def inputs(run):
    stats = (run / "stats_before.json", run / "stats_after.json")
    metrics = (run / "metrics_before.txt", run / "metrics_after.txt")
    return run / "config.pbtxt", stats, metrics, run / "perf_analyzer.csv"


def measured(run):
    """What the trace measures: (node, prefetch share or None, pickup gap in seconds, the
    statistics' mean batch size)."""
    config, stats, metrics, pa = inputs(run)
    trace = read_trace(run / "trace.json.gz")          # read once, for calibrate and the gap
    gap = pickup_gap(trace, read_config(config).max_queue_delay)
    node = calibrate(config, stats, metrics, trace=trace, perf_analyzer=pa, gap=gap)
    return node, node.prefetch, gap, read_stats(*stats).mean_batch_size


def knobs(node):
    """The batching configuration a run served: runs of one configuration (pinned or not,
    sleeping or computing) are left out together."""
    return (node.max_batch_size, node.max_queue_delay, node.effective_preferred,
            node.instances)


def fit(found, leave_out=None):
    """(prefetch share, gap base, gap per extra request) from the traced runs of every
    batching configuration but ``leave_out`` (:func:`knobs`): the median share where it was
    measured, and a least squares line of the pickup gap against the mean batch size minus
    one."""
    kept = [v for v in found.values() if knobs(v[0]) != leave_out]
    share = statistics.median(p for _, p, _, _ in kept if p is not None)
    x = np.array([b - 1 for _, _, _, b in kept])
    y = np.array([g for _, _, g, _ in kept])
    per_item, base = np.polyfit(x, y, 1)
    return share, float(base), float(per_item)


def modelled_node(run, gap, share, series=None):
    """The run calibrated without its trace: pickup ``gap`` (seconds) and, where Triton
    prefetches (calibrate's rule), prefetch ``share``, both modelled; with ``series`` (the
    polled statistics), its drift."""
    cfg, stats, metrics, pa = inputs(run)
    node = calibrate(cfg, stats, metrics, perf_analyzer=pa, gap=gap, series=series)
    return replace(node, prefetch=share) if node.prefetch is not None else node


def utilization(node, rate) -> float:
    """The node's utilization at ``rate``, inf where it is unstable."""
    try:
        return float(qm.predict(node, rate=rate).utilization)
    except qm.UnstableError:
        return math.inf


def quantiles(node, rate):
    try:
        r = qm.predict(node, rate=rate)
    except qm.UnstableError:
        return math.nan, math.nan
    return r.p50, r.p99


def medians(rows, kind) -> dict:
    """Median |error| on p50 and p99 of ``kind`` over ``rows`` (NaN, an unstable node, left
    out) and how many rows lie within 10% on p50 and 15% on p99."""
    e50 = [abs(r[kind][0]) for r in rows if not math.isnan(r[kind][0])]
    e99 = [abs(r[kind][1]) for r in rows if not math.isnan(r[kind][1])]
    return {"median_p50": statistics.median(e50), "median_p99": statistics.median(e99),
            "within_10_15": sum(1 for r in rows if abs(r[kind][0]) <= 0.10
                                and abs(r[kind][1]) <= 0.15),
            "runs": len(rows)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--heldout", action="store_true",
                        help="judge calibrate's own constants (fitted on runs/) on the runs "
                             "of runs-heldout/, measured after the fit")
    parser.add_argument("--long", action="store_true",
                        help="the same on the runs of runs-long/ (four times longer windows)")
    parser.add_argument("--polled", action="store_true",
                        help="the same on the runs of runs-polled/, with the drift fitted "
                             "from their polled statistics")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    found = {run: measured(run) for run in runs()}
    share, base, per_item = fit(found)
    fitted = {"prefetch": share, "gap_base": base, "gap_per_request": per_item,
              "runs": len(found)}
    print(f"over all {len(found)} traced runs: prefetch share {share:.3f} (median), pickup "
          f"gap {base * 1e3:.4f} ms + {per_item * 1e3:.4f} ms x (mean batch - 1)")
    judged = HELDOUT if args.heldout else LONG if args.long else POLLED if args.polled \
        else None
    if judged is not None:
        found = {run: measured(run) for run in runs(judged)}
    rows = []
    for run, (traced, share, gap, batch) in found.items():
        if judged is not None:       # calibrate's constants, as a user gets them
            model_share, base, per_item = (MODELLED_PREFETCH, MODELLED_GAP_BASE,
                                           MODELLED_GAP_PER_REQUEST)
        else:
            model_share, base, per_item = fit(found, leave_out=knobs(traced))
        model_gap = base + per_item * (batch - 1)
        cfg, stats, metrics, pa = inputs(run)
        row, = read_perf_analyzer(pa)
        rate = row.throughput
        plain = calibrate(cfg, stats, metrics, perf_analyzer=pa, prefetch=False, gap=0.0)
        # calibrate models the prefetch share where Triton prefetches (its rule); here with
        # the share of the other configurations' runs
        modelled = modelled_node(run, model_gap, model_share)
        out = {"run": str(run.relative_to(run.parent.parent)), "rate": rate,
               "measured": [row.p50, row.p99], "share": share, "gap": gap,
               "model_share": modelled.prefetch, "model_gap": model_gap}
        # calibrate's own default without a trace: the gap fitted to the statistics' mean
        # queue time (its prefetch share MODELLED_PREFETCH, the median over all 72 runs)
        queue = calibrate(cfg, stats, metrics, perf_analyzer=pa)
        out["queue_gap"] = float(queue.service.mean(1) - plain.service.mean(1))
        full = calibrate(cfg, stats, metrics, trace=run / "trace.json.gz", perf_analyzer=pa)
        kinds = [("traced", full), ("trace_gap", traced), ("untraced", plain),
                 ("modelled", modelled), ("queue", queue)]
        if args.polled:
            series = run / "stats_series.json.gz"
            drifting = calibrate(cfg, stats, metrics, trace=run / "trace.json.gz",
                                 perf_analyzer=pa, series=series)
            kinds += [("traced+drift", drifting),
                      ("modelled+drift", modelled_node(run, model_gap, model_share, series)),
                      ("queue+drift", calibrate(cfg, stats, metrics, perf_analyzer=pa,
                                                series=series))]
            out["drift"] = drifting.calibration.drift
        for name, node in kinds:
            p50, p99 = quantiles(node, rate)
            out[name] = [p50 / row.p50 - 1, p99 / row.p99 - 1]
        out["utilization"] = utilization(traced, rate)
        rows.append(out)
        print(f"{out['run']:32} util {out['utilization']:.2f}  "
              + "  ".join(f"{k} {out[k][0]:+.1%}/{out[k][1]:+.1%}"
                          for k, _ in kinds), flush=True)
        if args.polled:
            print(f"    {out['drift']}", flush=True)
    steady = [r for r in rows if r["utilization"] < 0.95]
    summary = {}
    for k in [k for k in ("traced", "trace_gap", "untraced", "modelled", "queue",
                          "traced+drift", "modelled+drift", "queue+drift") if k in rows[0]]:
        summary[k] = medians(steady, k)
        print(f"{k:9} over {len(steady)} runs below 0.95 utilization: median |error| p50 "
              f"{summary[k]['median_p50']:.1%}, p99 {summary[k]['median_p99']:.1%}; "
              f"{summary[k]['within_10_15']} within 10% / 15%")
    if args.polled:              # every run, those at capacity included
        for k in ("modelled", "queue", "modelled+drift", "queue+drift"):
            summary[f"all {k}"] = got = medians(rows, k)
            print(f"{k:9} over all {len(rows)} runs: median |error| p50 "
                  f"{got['median_p50']:.1%}, p99 {got['median_p99']:.1%}; "
                  f"{got['within_10_15']} within 10% / 15%")
    if args.write:
        out = OUT_HELDOUT if args.heldout else OUT_LONG if args.long else \
            OUT_POLLED if args.polled else OUT
        out.write_text(json.dumps({"fit": fitted, "summary": summary, "rows": rows}, indent=1)
                       + "\n")
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
