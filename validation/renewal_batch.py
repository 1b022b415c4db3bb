"""How accurate is the batch model under renewal arrivals? Against the simulator.

``qmodel.predict`` answers a batching node fed by renewal arrivals (gamma interarrival times of
a given scv; a trace is taken as such) with the batch model, whose counts over an interval
follow the stationary renewal law and whose arriving request is taken to see the time-average
state (see qmodel/theory/batch/). This script measures that approximation on the renewal
grid (:func:`qmodel.campaign.grids.renewal_grid`, 96 nodes of the issue-3 grid's service
time): max_batch_size 4 and 16, no delay and a delay of S(1), 1 and 2 instances, arrival scv
0.5 and 2, loads 0.5, 0.8 and 0.9, deterministic and lognormal cv 0.3 service. Each node is
simulated by the campaigns' budget rule (:func:`qmodel.campaign.budget.requests_for`, here
counted with the arrivals' scv; 2 to 16 million requests).

Its rows feed the 'renewal arrivals' family of qmodel/theory/measured.py
(validation/measured_errors.py).

Run from the repository root: ``python validation/renewal_batch.py [--quick] [--json FILE]
[--text FILE]`` (about 10 minutes; results in validation/results/renewal_batch.{json,txt}).
"""

from __future__ import annotations

import argparse

import qmodel as qm
from qmodel.campaign.budget import requests_for
from qmodel.campaign.grids import GRID_SERVICE, renewal_grid
from qmodel.campaign.measure import QUANTILES
from qmodel.campaign.results import add_output_arguments, write_outputs
from qmodel.campaign.summaries import renewal_groups


def run_case(case, seed: int, least: int, most: int) -> dict:
    """Predict and simulate one (jitter, B, D/S(1), c, scv, load) of the renewal grid."""
    jitter, B, d, c, scv, load = case
    node = GRID_SERVICE.node(B, d, c, jitter)
    arrivals = qm.Renewal(load * node.capacity, scv=scv)
    pred = qm.predict(node, arrivals=arrivals, fallback="raise")
    requests = requests_for(node, arrivals.rate, least, most, arrival_scv=scv)
    sim = qm.simulate(node, arrivals=arrivals, requests=requests, seed=seed)
    row = {"jitter": jitter, "B": B, "D_over_S1": d, "c": c, "scv": scv, "load": load,
           "requests": requests, "method": pred.method, "family": pred.accuracy.exactness,
           "batch": [pred.mean_batch_size, sim.mean_batch_size],
           "utilization": [pred.utilization, sim.utilization]}
    for name, p in QUANTILES[1:]:
        lo, hi = sim.ci(p, level=0.99)
        q, s = float(pred.quantile(p)), float(sim.quantile(p))
        row[name] = {"predicted": q, "simulated": s, "ci99": [lo, hi], "error": q / s - 1}
    return row


def row_line(r) -> str:
    return (f"{r['jitter'][:6]:6} {r['B']:3} {r['D_over_S1']:4.1f} {r['c']:2} {r['scv']:4.1f} "
            f"{r['load']:5.2f}  " + "  ".join(
                f"{r[k]['predicted'] * 1e3:8.3f}/{r[k]['simulated'] * 1e3:8.3f} "
                f"{r[k]['error']:+6.1%}" for k in ("p95", "p99")))


def summarise(rows) -> str:
    lines = [f"{'nodes':38} {'n':>3}  {'p95 median':>10} {'worst':>7}  {'p99 median':>10} "
             f"{'worst':>7}"]
    for g in renewal_groups(rows):
        p95, p99 = g.figures["p95"], g.figures["p99"]
        lines.append(f"{g.name:38} {len(g.rows):3}  {p95.median:10.1%} "
                     f"{p95.signed_worst:+7.1%}  {p99.median:10.1%} {p99.signed_worst:+7.1%}")
    lines.append("(relative error of the prediction against the simulator; worst is signed)")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="load 0.8 only")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--requests", type=float, default=2e6, help="simulated requests, at least")
    ap.add_argument("--max-requests", type=float, default=16e6,
                    help="simulated requests, at most")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    rows = []
    print(f"{'jitter':6} {'B':>3} {'D/S1':>4} {'c':>2} {'scv':>4} {'load':>5}  "
          f"{'p95 pred/sim (ms)':>17}  {'err':>6}  {'p99 pred/sim (ms)':>17}  {'err':>6}")
    for case in renewal_grid(args.quick):
        rows.append(run_case(case, args.seed, int(args.requests), int(args.max_requests)))
        print(row_line(rows[-1]), flush=True)
    write_outputs(args, rows, "\n".join(row_line(r) for r in rows) + "\n\n" + summarise(rows))


if __name__ == "__main__":
    main()
