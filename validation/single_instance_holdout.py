"""The one-instance batch model off the issue grid: does its accuracy carry over?

validation/predict_accuracy.py measures qmodel.predict on the issue-3 grid (S(k) = 1.89 ms +
0.14 ms x k, B in {1, 4, 8, 32}). This script takes nodes the grid does not hold, the
one-instance holdout (:func:`qmodel.campaign.grids.single_instance_holdout`): S(k) = 4 ms
+ 0.4 ms x k, max_batch_size B in {2, 16, 64}, max_queue_delay D in {0, 0.5, 2} x S(1),
preferred sizes {B} (Triton's default) or {B/2, B}, loads 0.5, 0.8 and 0.95, deterministic and
lognormal (cv 0.2) service, one instance: 108 nodes, each simulated with 4 million requests
or more (the campaigns' budget rule, :func:`qmodel.campaign.budget.requests_for`, up to 64
million; seed 7) in the simulator's default replicas. It prints every node's p95/p99 errors
and the median and worst |error| per accuracy family (numerical: exact up to the lattice;
approximation: a delay with requests left behind, or several preferred sizes), with the share
inside the simulator's 99% CI widened by the lattice step.

Run from the repository root: ``python validation/single_instance_holdout.py [--json FILE]
[--text FILE]`` (hours; results in validation/results/single_instance_holdout.{json,txt}).
"""

from __future__ import annotations

import argparse

import qmodel as qm
from qmodel.campaign.budget import requests_for
from qmodel.campaign.grids import HOLDOUT_SERVICE, single_instance_holdout
from qmodel.campaign.measure import QUANTILES, lattice_step
from qmodel.campaign.results import add_output_arguments, write_outputs
from qmodel.campaign.summaries import single_instance_groups, worst_rows

REQUESTS, MAX_REQUESTS, SEED = 4_000_000, 64_000_000, 7


def holdout_node(B, d, preferred, jitter) -> qm.Node:
    """The holdout's node; ``preferred`` "B" (Triton's default) or "B/2,B"."""
    sizes = (B,) if preferred == "B" else (B // 2, B)
    return HOLDOUT_SERVICE.node(B, d, jitter=jitter, preferred=sizes)


def run() -> list[dict]:
    rows = []
    for B, d, preferred, load, jitter in single_instance_holdout():
        node = holdout_node(B, d, preferred, jitter)
        rate = load * node.capacity
        pred = qm.predict(node, rate=rate, fallback="raise")
        requests = requests_for(node, rate, REQUESTS, MAX_REQUESTS)
        sim = qm.simulate(node, rate=rate, requests=requests, seed=SEED)
        h = lattice_step(pred)
        row = {"B": B, "D_over_S1": d, "preferred": preferred, "load": load, "jitter": jitter,
               "family": pred.accuracy.exactness, "lattice_step": h}
        for name, p in QUANTILES[1:]:
            lo, hi = (float(x) for x in sim.ci(p, level=0.99))
            q, s = float(pred.quantile(p)), float(sim.quantile(p))
            row[name] = {"predicted": q, "simulated": s, "error": q / s - 1,
                         "in_ci_with_lattice": bool(lo - h <= q <= hi + h)}
        rows.append(row)
        print(f"B={B:<3} D={d:.1f}xS(1) preferred {preferred:6} load {load:4.2f} {jitter:13} "
              f"{row['family']:13} p95 {row['p95']['error']:+6.1%}  "
              f"p99 {row['p99']['error']:+6.1%}", flush=True)
    return rows


def summarise(rows) -> str:
    lines = [f"{len(rows)} nodes, one instance; |error| against the simulator, median / worst, "
             f"and the share inside its 99% CI +- the lattice step"]
    for g in single_instance_groups(rows):
        (p95, p99), inside = (g.figures[q] for q in ("p95", "p99")), g.figures["in_ci"]
        lines.append(f"  {g.name:13} {len(g.rows):3} nodes: p95 {p95.median:5.1%} / "
                     f"{p95.worst:5.1%}   p99 {p99.median:5.1%} / {p99.worst:5.1%}   "
                     f"in CI {inside[0]:.0%}, {inside[1]:.0%}")
    lines.append("worst p99:")
    for r in worst_rows(rows, lambda r: r["p99"]["error"], 5):
        lines.append(f"  B={r['B']} D={r['D_over_S1']}xS(1) preferred {r['preferred']} load "
                     f"{r['load']} {r['jitter']} ({r['family']}): {r['p99']['error']:+.1%}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    rows = run()
    write_outputs(args, rows, summarise(rows))


if __name__ == "__main__":
    main()
