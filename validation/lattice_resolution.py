"""How much do the batch model's quantiles depend on its lattice, and what would a coarser one save?

For every batch-model node of the issue-3 grid (:func:`qmodel.campaign.grids.issue3_grid`,
B > 1: 378 nodes) the script solves the node with the shipped lattice (``resolution`` 100
steps per S(1), at most 200 points across the longest service time and 50 across the delay),
with a fine reference (300 / 600 / 150) and with two coarser ones (50 / 100 / 25 and
25 / 50 / 12), and prints how far p95 and p99 move from the reference and the time per solve
(warm, one call). This is the measurement behind keeping the shipped lattice.

Run from the repository root: ``python validation/lattice_resolution.py [--quick] [--out FILE]``
(about five minutes; --quick: the grid's three quick loads; results in
validation/results/lattice_resolution.txt).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from qmodel.campaign.grids import GRID_SERVICE, issue3_grid
from qmodel.campaign.summaries import figures
from qmodel.theory import batch as batch_module
from qmodel.theory.batch import lattice as batch_lattice

# name: (resolution, lattice points across the longest service, across the delay)
LATTICES = {"reference": (300, 600, 150), "shipped": (100, 200, 50),
            "half": (50, 100, 25), "quarter": (25, 50, 12)}


def solve(node, rate, lattice):
    """(p95, p99, seconds) of the batch model on ``lattice`` (warm: the second of two calls)."""
    resolution, service_points, delay_points = lattice
    # the lattice budgets are module constants of qmodel.theory.batch.lattice, read per call
    model = batch_lattice
    saved = model.MAX_SERVICE_POINTS, model.MAX_DELAY_POINTS
    model.MAX_SERVICE_POINTS, model.MAX_DELAY_POINTS = service_points, delay_points
    try:
        batch_module.batch_node(node, rate, resolution=resolution)
        t0 = time.perf_counter()
        result = batch_module.batch_node(node, rate, resolution=resolution)
        seconds = time.perf_counter() - t0
    finally:
        model.MAX_SERVICE_POINTS, model.MAX_DELAY_POINTS = saved
    return float(result.quantile(0.95)), float(result.quantile(0.99)), seconds


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="three loads instead of seven")
    ap.add_argument("--out", type=Path, default=None, help="also write the table here")
    args = ap.parse_args(argv)
    rows = []
    for case in issue3_grid(args.quick):
        jitter, B, d, c, load = case
        if B == 1:
            continue                      # predict answers B = 1 with exact M/D/c, M/G/1
        node = GRID_SERVICE.node(B, d, c, jitter)
        rate = load * node.capacity
        rows.append((case, {name: solve(node, rate, lattice)
                            for name, lattice in LATTICES.items()}))
    lines = [f"{len(rows)} batch-model nodes of the accuracy grid; quantiles against the "
             f"reference lattice {LATTICES['reference']}",
             f"{'lattice':10} {'(res, svc, delay)':>18} {'p95 median':>11} {'worst':>7} "
             f"{'p99 median':>11} {'worst':>7} {'time: median':>13} {'total':>8}"]
    for name, lattice in LATTICES.items():
        p95, p99 = (figures([r[name][i] / r["reference"][i] - 1 for _, r in rows])
                    for i in (0, 1))
        t = np.array([r[name][2] for _, r in rows]) * 1e3
        lines.append(f"{name:10} {str(lattice):>18} {p95.median:10.3%} {p95.worst:7.2%} "
                     f"{p99.median:10.3%} {p99.worst:7.2%} {np.median(t):10.1f} ms "
                     f"{t.sum() / 1e3:6.2f} s")
    for name in ("half", "quarter"):
        worst = max(rows, key=lambda row: abs(row[1][name][1] / row[1]["reference"][1] - 1))
        lines.append(f"largest p99 move, {name}: {worst[0]} "
                     f"{worst[1][name][1] / worst[1]['reference'][1] - 1:+.2%}")
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
