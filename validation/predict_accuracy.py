"""How accurate is qmodel.predict? Every solver against the simulator over the issue-3 grid.

Grid: :func:`qmodel.campaign.grids.issue3_grid`, 420 nodes of S(k) = 1.8874 ms + 0.1438 ms x k
(the V100 fit of Inoue 2021): max_batch_size B in {1, 4, 8, 32}; max_queue_delay D in
{0, 0.5, 2} x S(1) (B = 1 takes D = 0 only); instances c in {1, 2, 4}; load 0.1 to 0.95 of
capacity; deterministic and lognormal (cv 0.3) jitter. ``--quick``: loads 0.3, 0.7, 0.9.

Each configuration is simulated with at least ``--requests`` requests (2 M), more at high load
by the campaigns' budget rule (:func:`qmodel.campaign.budget.requests_for`, up to
``--max-requests``, 64 M), which holds the simulated p99's run-to-run spread near 1.5%.

For each configuration the script prints the predicted and simulated p50/p95/p99, the relative
errors, whether the prediction lies in the simulator's 99% confidence interval, the time the
prediction took, and the error of the textbook baseline on the same configuration
(:func:`qmodel.campaign.measure.baseline`: full batches as the customers of a GI/G/c queue,
Kingman or Allen-Cunneen, plus the time to fill a batch). The summary gives median and worst
|error| of p95 and p99 per solver family.

Run from the repository root: ``python validation/predict_accuracy.py [--quick] [--requests N]
[--json FILE] [--text FILE] [--only-b B] [--refresh-models]`` (hours; the stored results are
validation/results/predict_accuracy.{json,txt}).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import qmodel as qm
from qmodel.campaign.budget import requests_for
from qmodel.campaign.grids import GRID_SERVICE, issue3_grid
from qmodel.campaign.measure import QUANTILES, baseline, lattice_step
from qmodel.campaign.results import add_output_arguments, stored_rows, write_rows
from qmodel.campaign.summaries import baseline_group, grid_groups


def run_case(case, requests: int, seed: int, most: int = 64_000_000) -> dict:
    """Predict, simulate and baseline one (jitter, B, D/S(1), c, load) of the grid."""
    jitter, B, d, c, load = case
    node = GRID_SERVICE.node(B, d, c, jitter)
    rate = load * node.capacity
    t0 = time.perf_counter()
    pred = qm.predict(node, rate=rate, fallback="raise")
    seconds = time.perf_counter() - t0
    requests = requests_for(node, rate, requests, most)
    sim = qm.simulate(node, rate=rate, requests=requests, seed=seed)
    row = {"jitter": jitter, "B": B, "D_over_S1": d, "c": c, "load": load, "rate": rate,
           "requests": requests,
           "family": pred.accuracy.exactness, "method": pred.method,
           "predict_seconds": seconds, "lattice_step": lattice_step(pred)}
    for name, p in QUANTILES:
        lo, hi = sim.ci(p, level=0.99)
        q, s = float(pred.quantile(p)), float(sim.quantile(p))
        h = row["lattice_step"]
        row[name] = {"predicted": q, "simulated": s, "ci99": [lo, hi], "error": q / s - 1,
                     "in_ci": bool(lo <= q <= hi),
                     "in_ci_with_lattice": bool(lo - h <= q <= hi + h)}
    try:
        base = baseline(node, rate)
        row["baseline"] = {name: base(p) / row[name]["simulated"] - 1
                           for name, p in QUANTILES[1:]}
    except ValueError as err:        # e.g. the baseline's own stability check
        row["baseline"] = {"error": str(err)}
    return row


def refresh_model(row) -> dict:
    """Recompute a stored row's prediction (after a model change); the simulation stays. The
    model's answer also where its measured domain now declines the node (``extrapolate``):
    the grid is one of the campaigns those domains are measured on."""
    node = GRID_SERVICE.node(row["B"], row["D_over_S1"], row["c"], row["jitter"])
    t0 = time.perf_counter()
    pred = qm.predict(node, rate=row["rate"], fallback="raise", extrapolate=True)
    seconds = time.perf_counter() - t0
    row = dict(row, family=pred.accuracy.exactness, method=pred.method,
               predict_seconds=seconds, lattice_step=lattice_step(pred))
    h = row["lattice_step"]
    for name, p in QUANTILES:
        lo, hi = row[name]["ci99"]
        q, s = float(pred.quantile(p)), row[name]["simulated"]
        row[name] = dict(row[name], predicted=q, error=q / s - 1, in_ci=bool(lo <= q <= hi),
                         in_ci_with_lattice=bool(lo - h <= q <= hi + h))
    return row


def summarise(rows) -> str:
    """Median and worst |error| of p95 and p99 per family, per instance count, and baselines."""
    lines = ["", f"{'group':34} {'configs':>7}  {'p95 median':>10} {'worst':>6}  "
                 f"{'p99 median':>10} {'worst':>6}  {'in 99% CI +- h (p95, p99)':>26}"]
    for g in grid_groups(rows):
        (p95, p99), inside = (g.figures[q] for q in ("p95", "p99")), g.figures["in_ci"]
        lines.append(f"{g.name:34} {len(g.rows):7}  {p95.median:10.1%} {p95.worst:6.1%}  "
                     f"{p99.median:10.1%} {p99.worst:6.1%}  "
                     f"{f'{inside[0]:.0%}, {inside[1]:.0%}':>26}")
    base = baseline_group(rows)
    if base is not None:
        p95, p99 = (base.figures[q] for q in ("p95", "p99"))
        lines.append(f"{base.name:34} {len(base.rows):7}  {p95.median:10.1%} {p95.worst:6.1%}  "
                     f"{p99.median:10.1%} {p99.worst:6.1%}")
    times = np.array([r["predict_seconds"] for r in rows]) * 1e3
    lines.append(f"\npredict() time per configuration: median {np.median(times):.1f} ms, "
                 f"worst {times.max():.1f} ms (first call in the process, warm-up included; "
                 f"benchmarks/predict_speed.py times warm calls)")
    return "\n".join(lines)


HEADER = (f"{'jitter':6} {'B':>3} {'D/S1':>4} {'c':>2} {'load':>5}  {'family':13} "
          f"{'p95 pred/sim (ms)':>19} {'err':>6}  {'p99 pred/sim (ms)':>19} {'err':>6}  "
          f"{'base p99':>8}  {'ms':>6}")


def row_line(row) -> str:
    p95, p99 = row["p95"], row["p99"]
    flag = lambda x: " " if x["in_ci"] else "*"  # noqa: E731
    base = row["baseline"].get("p99")
    return (f"{row['jitter'][:6]:6} {row['B']:3} {row['D_over_S1']:4.1f} {row['c']:2} "
            f"{row['load']:5.2f}  {row['family']:13} "
            f"{p95['predicted'] * 1e3:8.3f}/{p95['simulated'] * 1e3:8.3f}"
            f"{flag(p95)} {p95['error']:+6.1%}  {p99['predicted'] * 1e3:8.3f}/"
            f"{p99['simulated'] * 1e3:8.3f}{flag(p99)} {p99['error']:+6.1%}  "
            f"{'' if base is None else f'{base:+8.1%}'}  "
            f"{row['predict_seconds'] * 1e3:6.1f}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="three loads instead of seven")
    ap.add_argument("--requests", type=float, default=2e6,
                    help="simulated requests per config, at least (more at high load)")
    ap.add_argument("--max-requests", type=float, default=64e6,
                    help="simulated requests per config, at most")
    ap.add_argument("--seed", type=int, default=11)
    add_output_arguments(ap)
    ap.add_argument("--only-b", type=int, default=None, metavar="B",
                    help="rerun only the configurations with this max_batch_size and merge "
                         "them into the rows already in --json (after a model change)")
    ap.add_argument("--refresh-models", action="store_true",
                    help="recompute the predictions of the rows in --json, keep their "
                         "simulations (with --only-b: only that max_batch_size)")
    args = ap.parse_args(argv)
    cases = issue3_grid(args.quick)
    kept = []
    if args.refresh_models:
        stored = stored_rows(args)
        kept = [r for r in stored if args.only_b not in (None, r["B"])]
        fresh = [refresh_model(r) for r in stored if args.only_b in (None, r["B"])]
        cases = []
    elif args.only_b is not None:
        kept = [r for r in stored_rows(args, "--only-b") if r["B"] != args.only_b]
        cases = [c for c in cases if c[1] == args.only_b]
    print(HEADER)
    fresh = fresh if args.refresh_models else []
    for case in cases:
        row = run_case(case, int(args.requests), args.seed, int(args.max_requests))
        fresh.append(row)
        print(row_line(row), flush=True)
    order = {case: i for i, case in enumerate(issue3_grid(args.quick))}
    key = lambda r: (r["jitter"], r["B"], r["D_over_S1"], r["c"], r["load"])  # noqa: E731
    rows = sorted(kept + fresh, key=lambda r: order.get(key(r), len(order)))
    text = "\n".join([HEADER] + [row_line(r) for r in rows]) + "\n" + summarise(rows) \
        + "\n(* = outside the simulator's 99% confidence interval)"
    print(summarise(rows))
    print("(* = outside the simulator's 99% confidence interval)")
    if args.json:
        write_rows(args.json, rows)
    if args.text:
        args.text.write_text(text + "\n")


if __name__ == "__main__":
    main()
