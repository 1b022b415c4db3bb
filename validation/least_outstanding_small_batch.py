"""Least outstanding over nodes with small batches: how far is round robin's model from it?

``qmodel.predict`` answers least outstanding over batching nodes with the round-robin model
(level outstanding counts send requests to the nodes in turn). This script measures that
surrogate against the simulator for max_batch_size 2 and 4 (the router grid of
validation/router_accuracy.py covers 1, 8 and 32): N in {2, 8, 32}, delay 0 and S(1), loads
0.3, 0.7, 0.9; one instance per node, the issue-3 grid's deterministic service time
(:data:`qmodel.campaign.grids.GRID_SERVICE`). It prints each configuration's errors and the
worst |error| per max_batch_size; its results (validation/results/least_outstanding_small_batch.txt)
set the smallest max_batch_size at which ``predict`` uses the surrogate
(``qmodel.routers.LeastOutstanding.AS_ROUND_ROBIN_MIN_BATCH``).

Run from the repository root: ``python validation/least_outstanding_small_batch.py``
(writes the table to stdout).
"""

from __future__ import annotations

import itertools

import numpy as np

import qmodel as qm
from qmodel.campaign.grids import GRID_SERVICE
from qmodel.campaign.summaries import figures


def main() -> None:
    errors = {}
    for B, d, N, load in itertools.product((2, 4), (0.0, 1.0), (2, 8, 32), (0.3, 0.7, 0.9)):
        node = GRID_SERVICE.node(B, d)
        cluster = qm.Cluster(node, count=N, router="least_outstanding")
        rate = load * cluster.capacity
        surrogate = qm.predict(qm.Cluster(node, count=N, router="round_robin"), rate=rate)
        sim = qm.simulate(cluster, rate=rate, requests=max(600_000, 20_000 * N), seed=21)
        lo, hi = sim.ci(0.99, level=0.99)
        err = [surrogate.quantile(p) / sim.quantile(p) - 1 for p in (0.5, 0.95, 0.99)]
        errors.setdefault(B, []).append(err)
        print(f"B={B} D={d:g}xS(1) N={N:<3} load={load}  sim p99 {sim.p99 * 1e3:7.3f} ms "
              f"(99% CI +-{(hi - lo) / 2 / sim.p99:.1%})  round-robin model error: "
              f"p50 {err[0]:+.1%}  p95 {err[1]:+.1%}  p99 {err[2]:+.1%}", flush=True)
    for B, e in errors.items():
        w = [figures(column).worst for column in np.transpose(e)]
        print(f"B={B}: worst |error| p50 {w[0]:.1%}, p95 {w[1]:.1%}, p99 {w[2]:.1%}")


if __name__ == "__main__":
    main()
