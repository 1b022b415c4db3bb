"""Least outstanding over batching nodes under renewal arrivals: is round robin's model
still close?

``qmodel.predict`` answers least outstanding over single-instance batching nodes with the
round-robin model (level outstanding counts send requests to the nodes in turn; measured for
Poisson input in validation/router_accuracy.py). Round robin's model takes renewal input too:
every N-th arrival of a renewal stream with interarrival scv s has gaps of scv s / N. This
script measures that surrogate against the simulated least-outstanding cluster under renewal
(gamma) arrivals: max_batch_size 8 and 32, N in {4, 8, 32}, arrival scv 0.5 and 2, loads 0.5,
0.8, 0.9; no delay, one instance per node, the issue-3 grid's deterministic service time
(:data:`qmodel.campaign.grids.GRID_SERVICE`). Its results
(validation/results/least_outstanding_renewal.txt) set the smallest max_batch_size at which
``predict`` uses the surrogate under renewal arrivals
(``qmodel.routers.LeastOutstanding.RENEWAL_MIN_BATCH``).

Run from the repository root: ``python validation/least_outstanding_renewal.py`` (writes the
table to stdout).
"""

from __future__ import annotations

import itertools

import numpy as np

import qmodel as qm
from qmodel.campaign.grids import GRID_SERVICE
from qmodel.campaign.summaries import figures


def main() -> None:
    errors = []
    for B, N, scv, load in itertools.product((8, 32), (4, 8, 32), (0.5, 2.0), (0.5, 0.8, 0.9)):
        node = GRID_SERVICE.node(B)
        cluster = qm.Cluster(node, count=N, router="least_outstanding")
        arrivals = qm.Renewal(load * cluster.capacity, scv=scv)
        surrogate = qm.predict(qm.Cluster(node, count=N, router="round_robin"),
                               arrivals=arrivals, fallback="raise")
        sim = qm.simulate(cluster, arrivals=arrivals, requests=max(600_000, 20_000 * N), seed=3)
        lo, hi = sim.ci(0.99, level=0.99)
        err = [surrogate.quantile(p) / sim.quantile(p) - 1 for p in (0.5, 0.95, 0.99)]
        errors.append(err)
        print(f"B={B:<2} N={N:<3} scv={scv:<3} load={load}  sim p99 {sim.p99 * 1e3:7.3f} ms "
              f"(99% CI +-{(hi - lo) / 2 / sim.p99:.1%})  round-robin model error: "
              f"p50 {err[0]:+.1%}  p95 {err[1]:+.1%}  p99 {err[2]:+.1%}", flush=True)
    worst = [figures(column).worst for column in np.transpose(errors)]
    print(f"worst |error| p50 {worst[0]:.1%}, p95 {worst[1]:.1%}, p99 {worst[2]:.1%}")


if __name__ == "__main__":
    main()
