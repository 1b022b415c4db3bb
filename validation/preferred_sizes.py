"""Preferred batch sizes below max_batch_size: predict against simulate on eight nodes.

Triton dispatches the largest preferred size that fits, so a request can be passed over by a
smaller preferred batch; the batch model approximates that (qmodel/theory/batch/). This
prints p50/p95/p99 errors and batch sizes on eight nodes with preferred sizes, and the median
and worst |error| of p95 and p99 over them.

Run from the repository root: ``python validation/preferred_sizes.py [--json FILE]
[--text FILE]`` (seconds; results in validation/results/preferred_sizes.{json,txt}).
"""

import argparse

import qmodel as qm
from qmodel.campaign.measure import QUANTILES
from qmodel.campaign.results import add_output_arguments, write_outputs
from qmodel.campaign.summaries import pooled_figures

SLOPED = qm.ServiceTime.affine(2.4e-3, 0.54e-3)
CASES = [  # (service, B, delay, preferred, instances, load)
    (qm.ServiceTime.affine(2.4e-3, 0.54e-3, jitter=("lognormal", 0.1)), 8, 2e-3, (4, 8), 2, 0.84),
    (SLOPED, 8, 2e-3, (4, 8), 2, 0.84),
    (SLOPED, 8, 2e-3, (4, 8), 1, 0.7),
    (qm.ServiceTime.affine(2e-3), 8, 5e-3, (2, 4, 8), 1, 0.5),
    (qm.ServiceTime.table({1: 3.1e-3, 2: 3.6e-3, 4: 4.4e-3, 8: 6.7e-3}), 8, 1e-3, (4,), 2, 0.5),
    (qm.ServiceTime.affine(2e-3, 0.3e-3, jitter=("gamma", 0.5)), 8, 1e-3, (4,), 2, 0.5),
    (qm.ServiceTime.affine(2e-3), 8, 1e-3, (4,), 2, 0.5),
    (SLOPED, 8, 1e-3, (4,), 1, 0.8),
]


def run_case(service, B, delay, preferred, c, load) -> dict:
    """Predict and simulate one node; its p50/p95/p99 and mean batch sizes."""
    node = qm.Node(service, max_batch_size=B, max_queue_delay=delay,
                   preferred_batch_sizes=preferred, instances=c)
    rate = load * node.capacity
    pred = qm.predict(node, rate=rate)
    sim = qm.simulate(node, rate=rate, requests=1_000_000, seed=1)
    row = {"node": node.describe(), "load": load,
           "batch": [pred.mean_batch_size, sim.mean_batch_size]}
    for name, p in QUANTILES:
        q, s = float(pred.quantile(p)), float(sim.quantile(p))
        row[name] = {"predicted": q, "simulated": s, "error": q / s - 1}
    return row


def row_line(r) -> str:
    return (f"{r['node']:75} load {r['load']:.2f}: p50 {r['p50']['error']:+.1%} "
            f"p95 {r['p95']['error']:+.1%} p99 {r['p99']['error']:+.1%}  batch "
            f"{r['batch'][0]:.2f} (sim {r['batch'][1]:.2f})")


def summarise(rows) -> str:
    f = pooled_figures(rows)
    return f"p95/p99 |error|: median {f.median:.1%}, worst {f.worst:.1%}"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    rows = []
    for case in CASES:
        rows.append(run_case(*case))
        print(row_line(rows[-1]), flush=True)
    write_outputs(args, rows, "\n".join(row_line(r) for r in rows) + "\n" + summarise(rows))


if __name__ == "__main__":
    main()
