"""Preferred batch sizes below max_batch_size: predict against simulate on eight nodes.

Triton dispatches the largest preferred size that fits, so a request can be passed over by a
smaller preferred batch; the batch model approximates that (qmodel/theory/batch.py). This
prints p50/p95/p99 errors and batch sizes on eight nodes with preferred sizes, and the median
and worst |error| of p95 and p99 over them.

Run from the repository root: ``python validation/preferred_sizes.py`` (a few minutes).
"""

import numpy as np

import qmodel as qm

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


def main():
    errors = []
    for service, B, delay, preferred, c, load in CASES:
        node = qm.Node(service, max_batch_size=B, max_queue_delay=delay,
                       preferred_batch_sizes=preferred, instances=c)
        rate = load * node.capacity
        pred = qm.predict(node, rate=rate)
        sim = qm.simulate(node, rate=rate, requests=1_000_000, seed=1)
        err = [pred.quantile(p) / sim.quantile(p) - 1 for p in (0.5, 0.95, 0.99)]
        errors += [abs(err[1]), abs(err[2])]
        print(f"{node.describe():75} load {load:.2f}: p50 {err[0]:+.1%} p95 {err[1]:+.1%} "
              f"p99 {err[2]:+.1%}  batch {pred.mean_batch_size:.2f} (sim "
              f"{sim.mean_batch_size:.2f})")
    print(f"p95/p99 |error|: median {np.median(errors):.1%}, worst {max(errors):.1%}")


if __name__ == "__main__":
    main()
