"""How accurate are the batch model's mean batch size and utilization? Against the simulator.

p95/p99 are measured by validation/predict_accuracy.py; this script measures the other two
numbers a sizing script reads off ``qmodel.predict``: ``mean_batch_size`` (per executed batch)
and ``utilization`` (fraction of instance time spent serving). Both are means, so a simulation
of 1-4 million requests pins them to about 0.1% (the start-up transient kept out by the
simulator's replica rule). The nodes: the issue-3 grid (:func:`qmodel.campaign.grids.issue3_grid`)
with max_batch_size >= 4 (B = 1 has one request per batch and exact classical models).

The several-instance model's chain of dispatch records does not tie the time between
dispatches to the instances' service time, so its implied utilization can exceed 1 (it then
reports 1 and says so in ``accuracy``, counted in the column "capped"), and its batch sizes
come out too small there.

Run from the repository root: ``python validation/batch_size_accuracy.py [--quick]
[--json FILE] [--text FILE]`` (about 5 minutes; results in
validation/results/batch_size_accuracy.{json,txt}).
"""

from __future__ import annotations

import argparse
import warnings

import qmodel as qm
from qmodel.campaign.budget import requests_for
from qmodel.campaign.grids import GRID_SERVICE, issue3_grid
from qmodel.campaign.results import add_output_arguments, write_outputs
from qmodel.campaign.summaries import batch_size_groups, mean_errors


def run_case(case, seed: int) -> dict:
    """Predicted and simulated means of one (jitter, B, D/S(1), c, load) of the grid."""
    jitter, B, d, c, load = case
    node = GRID_SERVICE.node(B, d, c, jitter)
    rate = load * node.capacity
    pred = qm.predict(node, rate=rate, fallback="raise")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")       # means need far fewer requests than a p99
        sim = qm.simulate(node, rate=rate, requests=requests_for(node, rate, 1_000_000,
                                                                 4_000_000), seed=seed)
    return {"jitter": jitter, "B": B, "D_over_S1": d, "c": c, "load": load,
            "batch": [pred.mean_batch_size, sim.mean_batch_size],
            "utilization": [pred.utilization, sim.utilization],
            "capped": pred.accuracy.approximation("utilization_capped") is not None}


def summarise(rows) -> str:
    lines = [f"{'family':40} {'nodes':>5}  {'batch median':>12} {'worst':>7}  "
             f"{'util median':>11} {'worst':>7}  {'capped':>6}"]
    for g in batch_size_groups(rows):
        batch, util = g.figures["batch"], g.figures["utilization"]
        lines.append(f"{g.name:40} {len(g.rows):5}  {batch.median:12.1%} "
                     f"{batch.signed_worst:+7.1%}  {util.median:11.1%} "
                     f"{util.signed_worst:+7.1%}  {g.figures['capped']:6}")
    lines.append("(relative error of the prediction; worst is signed; capped: nodes whose "
                 "model utilization exceeded 1 and was reported as 1)")
    return "\n".join(lines)


def row_line(r) -> str:
    (qb, sb), (qu, su) = r["batch"], r["utilization"]
    eb, eu = mean_errors(r)
    return (f"{r['jitter'][:6]:6} {r['B']:3} {r['D_over_S1']:4.1f} {r['c']:2} {r['load']:5.2f}  "
            f"batch {qb:7.3f}/{sb:7.3f} {eb:+6.1%}  util {qu:6.3f}/{su:6.3f} "
            f"{eu:+6.1%}{'  capped' if r['capped'] else ''}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="three loads instead of seven")
    ap.add_argument("--seed", type=int, default=11)
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    rows = []
    for case in issue3_grid(args.quick):
        if case[1] == 1:
            continue
        rows.append(run_case(case, args.seed))
        print(row_line(rows[-1]), flush=True)
    write_outputs(args, rows, "\n".join(row_line(r) for r in rows) + "\n\n" + summarise(rows))


if __name__ == "__main__":
    main()
