"""The several-instance batch model off the issue grid: a holdout for its pass count.

The c > 1 approximation of qmodel.theory.batch iterates the gaps between dispatches a fixed
number of times (part of the model; ``batch_node(..., passes=n)`` runs it n times).
That number was chosen on the issue-3 grid (validation/predict_accuracy.py), so this
script measures it on nodes the grid does not hold, the several-instance holdout
(:func:`qmodel.campaign.grids.multi_instance_holdout`): another service time, S(k) = 4 ms +
0.4 ms x k (the grid's is 1.89 ms + 0.14 ms x k), max_batch_size B in {2, 16, 64}, instances
c in {2, 3, 8}, max_queue_delay D in {0, 1} x S(1), loads 0.5, 0.8 and 0.95, deterministic and
lognormal (cv 0.2) service: 108 nodes, each simulated with 4 million requests or more (the
campaigns' budget rule, :func:`qmodel.campaign.budget.requests_for`, up to 64 million; seed
5) in the simulator's default replicas. For each pass count it prints the median and worst
|error| of p95 and p99 against the simulator, overall and per c, and the worst nodes of the
model as shipped.

Run from the repository root: ``python validation/multi_instance_holdout.py [--passes 1 2 3]
[--json FILE] [--text FILE]`` (hours; results in
validation/results/multi_instance_holdout.{json,txt}); after a model change,
``--refresh-models --json FILE`` recomputes the predictions and keeps the stored simulations
(minutes).
"""

from __future__ import annotations

import argparse

import qmodel as qm
from qmodel.campaign.budget import requests_for
from qmodel.campaign.grids import HOLDOUT_SERVICE, multi_instance_holdout
from qmodel.theory.batch import PASSES
from qmodel.campaign.results import add_output_arguments, stored_rows, write_outputs
from qmodel.campaign.summaries import (HOLDOUT_MISS, several_instance_error,
                                       several_instance_groups, worst_rows)
from qmodel.theory.batch import batch_node
from qmodel.theory.batch.bunched import bunches

REQUESTS, MAX_REQUESTS, SEED = 4_000_000, 64_000_000, 5


def predictions(row, passes) -> dict:
    """The model's p95 and p99 for the holdout row's node, with each pass count.

    ``predict`` answers these nodes (c > 1, Poisson arrivals) with ``batch_node`` at its
    default resolution, so calling it with each pass count gives what ``predict`` would with
    that count; a node whose instances bunch (qmodel.theory.batch.bunched) has no passes, and
    each count gets predict's answer.
    """
    node = HOLDOUT_SERVICE.node(row["B"], row["D_over_S1"], row["c"], row["jitter"])
    rate = row["load"] * node.capacity
    out = {}
    for n in passes:
        pred = (qm.predict(node, rate=rate, fallback="raise", extrapolate=True)
                if bunches(node, rate)
                else batch_node(node, rate, passes=n))
        out[str(n)] = [float(pred.quantile(p)) for p in (0.95, 0.99)]
    return out


def report(row, passes) -> None:
    print(f"B={row['B']:<3} c={row['c']} D={row['D_over_S1']:.0f}xS(1) load {row['load']:4.2f} "
          f"{row['jitter']:13} p99 sim {row['simulated'][1] * 1e3:8.3f} ms  " + "  ".join(
              f"{n} passes {row['predicted'][str(n)][1] / row['simulated'][1] - 1:+6.1%}"
              for n in passes), flush=True)


def run(passes) -> list[dict]:
    rows = []
    for B, c, d, load, jitter in multi_instance_holdout():
        node = HOLDOUT_SERVICE.node(B, d, c, jitter)
        rate = load * node.capacity
        requests = requests_for(node, rate, REQUESTS, MAX_REQUESTS)
        sim = qm.simulate(node, rate=rate, requests=requests, seed=SEED)
        row = {"B": B, "c": c, "D_over_S1": d, "load": load, "jitter": jitter,
               "simulated": [float(sim.quantile(p)) for p in (0.95, 0.99)],
               "ci99": [[float(x) for x in sim.ci(p, level=0.99)] for p in (0.95, 0.99)]}
        row["predicted"] = predictions(row, passes)
        rows.append(row)
        report(row, passes)
    return rows


def refresh(rows, passes) -> list[dict]:
    """The stored rows with the model's predictions recomputed (after a model change)."""
    for row in rows:
        row["predicted"] = predictions(row, passes)
        report(row, passes)
    return rows


def summarise(rows, passes) -> str:
    shipped = PASSES
    lines = [f"{len(rows)} nodes; |error| against the simulator, median / worst "
             f"(the model ships with {shipped} passes)"]
    for g in several_instance_groups(rows, passes):
        p95, p99 = g.figures["p95"], g.figures["p99"]
        lines.append(f"  {g.name:7} {g.figures['passes']} passes: "
                     f"p95 {p95.median:5.1%} / {p95.worst:5.1%}   "
                     f"p99 {p99.median:5.1%} / {p99.worst:5.1%}   "
                     f"p99 beyond {HOLDOUT_MISS:.0%}: {g.figures['beyond']}")
    if str(shipped) in rows[0]["predicted"]:
        lines.append(f"worst p99 with {shipped} passes:")
        for r in worst_rows(rows, lambda r: several_instance_error(r, "p99"), 5):
            lines.append(f"  B={r['B']} c={r['c']} D={r['D_over_S1']:.0f}xS(1) load "
                         f"{r['load']} {r['jitter']}: {several_instance_error(r, 'p99'):+.1%}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passes", type=int, nargs="+", default=[1, 2, 3],
                    help="gap-iteration pass counts to compare (default 1 2 3)")
    ap.add_argument("--refresh-models", action="store_true",
                    help="recompute the predictions of the rows in --json, keep their "
                         "simulations")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    if args.refresh_models:
        rows = refresh(stored_rows(args), args.passes)
    else:
        rows = run(args.passes)
    write_outputs(args, rows, summarise(rows, args.passes))


if __name__ == "__main__":
    main()
