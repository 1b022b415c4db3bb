"""How accurate is qmodel.predict? Every solver against the simulator over the issue-3 grid.

Grid: max_batch_size B in {1, 4, 8, 32}; max_queue_delay D in {0, 0.5, 2} x S(1) (B = 1 takes
D = 0 only: with one request per batch the delay never binds); instances c in {1, 2, 4};
load 0.1 to 0.95 of capacity; deterministic and lognormal (cv 0.3) jitter. The service time is
the V100 fit of Inoue (2021), S(k) = 1.8874 ms + 0.1438 ms x k.

Each configuration is simulated with at least ``--requests`` requests (2 M), more at high load:
54,000 relaxation lengths R (validation/sim_budget.py; up to ``--max-requests``, 64 M), which
holds the simulated p99's run-to-run spread near 1.5%: 19.5 M requests for B = 1 at 95% load,
64 M for B = 32 with lognormal jitter there.

For each configuration the script prints the predicted and simulated p50/p95/p99, the relative
errors, whether the prediction lies in the simulator's 99% confidence interval, the time the
prediction took, and the errors of two textbook baselines on the same configuration. The
summary gives median and worst |error| of p95 and p99 per solver family.

Baselines (qmodel.theory.baselines), the back-of-envelope a capacity planner would write: full
batches (b = the node's saturated batch size, the one its capacity assumes) are the customers
of a GI/G/c queue (batch interarrival scv 1/b), with the Kingman (c = 1) or Allen-Cunneen mean
wait and the exponential tail, plus the mean time a request waits for its batch to fill,
(b - 1) / (2 rate), capped at the delay (0 without a delay).

Run: ``.venv/bin/python validation/predict_accuracy.py [--quick] [--requests N] [--json FILE]
[--text FILE] [--only-b B] [--refresh-models]``
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import qmodel as qm
from qmodel.theory.baselines import baseline_latency
from results_io import stored_rows
from sim_budget import requests_for

BASE, PER_ITEM = 1.8874e-3, 0.1438e-3       # Inoue (2021), V100 fit
S1 = BASE + PER_ITEM
LOADS = (0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95)
QUICK_LOADS = (0.3, 0.7, 0.9)


def grid(quick: bool = False):
    """(jitter, B, D/S1, c, load) tuples of the grid."""
    out = []
    for jitter in ("deterministic", "lognormal"):
        for B in (1, 4, 8, 32):
            for d in ((0.0,) if B == 1 else (0.0, 0.5, 2.0)):
                for c in (1, 2, 4):
                    for load in (QUICK_LOADS if quick else LOADS):
                        out.append((jitter, B, d, c, load))
    return out


def node_of(jitter, B, d, c) -> qm.Node:
    j = "deterministic" if jitter == "deterministic" else ("lognormal", 0.3)
    return qm.Node(qm.ServiceTime.affine(BASE, PER_ITEM, jitter=j), max_batch_size=B,
                   max_queue_delay=d * S1, instances=c)


def family(result) -> str:
    return result.accuracy.exactness


def baseline(node: qm.Node, rate: float, method: str):
    """Quantile function of the textbook baseline for this node (see module docstring)."""
    b = float(node.saturated_batch_size)
    mean_s = float(node.service.mean(b))
    scv_s = 0.0 if node.service.jitter == "deterministic" else node.service.cv ** 2
    lat = baseline_latency(rate / b, mean_s, scv_s, servers=node.instances, arrival_scv=1.0 / b,
                           method=method)
    fill = min((b - 1) / (2 * rate), node.max_queue_delay) if node.max_queue_delay > 0 else 0.0
    return lambda p: lat.quantile(p) + fill


def run_case(case, requests: int, seed: int, most: int = 64_000_000) -> dict:
    jitter, B, d, c, load = case
    node = node_of(jitter, B, d, c)
    rate = load * node.capacity
    t0 = time.perf_counter()
    pred = qm.predict(node, rate=rate, fallback="raise")
    seconds = time.perf_counter() - t0
    requests = requests_for(node, rate, requests, most)
    sim = qm.simulate(node, rate=rate, requests=requests, seed=seed)
    row = {"jitter": jitter, "B": B, "D_over_S1": d, "c": c, "load": load, "rate": rate,
           "requests": requests,
           "family": family(pred), "method": pred.method, "predict_seconds": seconds,
           "lattice_step": getattr(pred, "h", 0.0)}
    for name, p in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
        lo, hi = sim.ci(p, level=0.99)
        q, s = float(pred.quantile(p)), float(sim.quantile(p))
        h = row["lattice_step"]
        row[name] = {"predicted": q, "simulated": s, "ci99": [lo, hi], "error": q / s - 1,
                     "in_ci": bool(lo <= q <= hi),
                     "in_ci_with_lattice": bool(lo - h <= q <= hi + h)}
    c_method = "kingman" if c == 1 else "allen_cunneen"
    try:
        base = baseline(node, rate, c_method)
        row["baseline"] = {name: float(base(p)) / row[name]["simulated"] - 1
                           for name, p in (("p95", 0.95), ("p99", 0.99))}
    except ValueError as err:        # e.g. the baseline's own stability check
        row["baseline"] = {"error": str(err)}
    return row


def refresh_model(row) -> dict:
    """Recompute a stored row's prediction (after a model change); the simulation stays."""
    node = node_of(row["jitter"], row["B"], row["D_over_S1"], row["c"])
    t0 = time.perf_counter()
    pred = qm.predict(node, rate=row["rate"], fallback="raise")
    seconds = time.perf_counter() - t0
    row = dict(row, family=family(pred), method=pred.method, predict_seconds=seconds,
               lattice_step=getattr(pred, "h", 0.0))
    h = row["lattice_step"]
    for name, p in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
        lo, hi = row[name]["ci99"]
        q, s = float(pred.quantile(p)), row[name]["simulated"]
        row[name] = dict(row[name], predicted=q, error=q / s - 1, in_ci=bool(lo <= q <= hi),
                         in_ci_with_lattice=bool(lo - h <= q <= hi + h))
    return row


def _errors(sel, key):
    return np.abs([r[key]["error"] for r in sel])


def summarise(rows) -> str:
    """Median and worst |error| of p95 and p99 per family, per instance count, and baselines."""
    lines = ["", f"{'group':34} {'configs':>7}  {'p95 median':>10} {'worst':>6}  "
                 f"{'p99 median':>10} {'worst':>6}  {'in 99% CI +- h (p95, p99)':>26}"]
    groups = []
    for fam in sorted({r["family"] for r in rows}):
        groups.append((fam, [r for r in rows if r["family"] == fam]))
        if fam == "approximation":
            for c in (1, 2, 4):
                groups.append((f"  approximation, {c} instance(s)",
                               [r for r in rows if r["family"] == fam and r["c"] == c]))
    for name, sel in groups:
        if not sel:
            continue
        e95, e99 = _errors(sel, "p95"), _errors(sel, "p99")
        inci = (f"{np.mean([r['p95']['in_ci_with_lattice'] for r in sel]):.0%}, "
                f"{np.mean([r['p99']['in_ci_with_lattice'] for r in sel]):.0%}")
        lines.append(f"{name:34} {len(sel):7}  {np.median(e95):10.1%} {e95.max():6.1%}  "
                     f"{np.median(e99):10.1%} {e99.max():6.1%}  {inci:>26}")
    sel = [r for r in rows if "p95" in r.get("baseline", {})]
    if sel:
        b95 = np.abs([r["baseline"]["p95"] for r in sel])
        b99 = np.abs([r["baseline"]["p99"] for r in sel])
        lines.append(f"{'baseline (Kingman/Allen-Cunneen)':34} {len(sel):7}  "
                     f"{np.median(b95):10.1%} {b95.max():6.1%}  {np.median(b99):10.1%} "
                     f"{b99.max():6.1%}")
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
    ap.add_argument("--json", type=Path, default=None, help="write all rows to this file")
    ap.add_argument("--only-b", type=int, default=None, metavar="B",
                    help="rerun only the configurations with this max_batch_size and merge "
                         "them into the rows already in --json (after a model change)")
    ap.add_argument("--refresh-models", action="store_true",
                    help="recompute the predictions of the rows in --json, keep their "
                         "simulations (with --only-b: only that max_batch_size)")
    ap.add_argument("--text", type=Path, default=None,
                    help="also write the table and summary to this file")
    args = ap.parse_args(argv)
    cases = list(grid(args.quick))
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
    order = {case: i for i, case in enumerate(grid(args.quick))}
    key = lambda r: (r["jitter"], r["B"], r["D_over_S1"], r["c"], r["load"])  # noqa: E731
    rows = sorted(kept + fresh, key=lambda r: order.get(key(r), len(order)))
    text = "\n".join([HEADER] + [row_line(r) for r in rows]) + "\n" + summarise(rows) \
        + "\n(* = outside the simulator's 99% confidence interval)"
    print(summarise(rows))
    print("(* = outside the simulator's 99% confidence interval)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=1))
    if args.text:
        args.text.write_text(text + "\n")


if __name__ == "__main__":
    main()
