"""Least outstanding over nodes with small batches: how far is round robin's model from it?

``qmodel.predict`` answers least outstanding over batching nodes with the round-robin model
(level outstanding counts send requests to the nodes in turn). This script measures that
surrogate against the simulator for max_batch_size 2 and 4 (the router grid of
validation/router_accuracy.py covers 1, 8 and 32): N in {2, 8, 32}, delay 0 and S(1), loads
0.3, 0.7, 0.9; one instance per node, deterministic S(k) = 1.8874 ms + 0.1438 ms x k.
Measured (validation/results/least_outstanding_small_batch.txt): B = 4 within 12.8% on p99
and 3.7% on p95, which is where ``predict`` starts using it (LEAST_MIN_BATCH); B = 2 up to
+103% on p99, so ``predict`` declines it.

Run: ``.venv/bin/python validation/least_outstanding_small_batch.py``
"""

from __future__ import annotations

import itertools

import numpy as np

import qmodel as qm

BASE, PER_ITEM = 1.8874e-3, 0.1438e-3
S1 = BASE + PER_ITEM


def main() -> None:
    worst = {}
    for B, d, N, load in itertools.product((2, 4), (0.0, 1.0), (2, 8, 32), (0.3, 0.7, 0.9)):
        node = qm.Node(qm.ServiceTime.affine(BASE, PER_ITEM), max_batch_size=B,
                       max_queue_delay=d * S1)
        cluster = qm.Cluster(node, count=N, router="least_outstanding")
        rate = load * cluster.capacity
        surrogate = qm.predict(qm.Cluster(node, count=N, router="round_robin"), rate=rate)
        sim = qm.simulate(cluster, rate=rate, requests=max(600_000, 20_000 * N), seed=21)
        lo, hi = sim.ci(0.99, level=0.99)
        err = [surrogate.quantile(p) / sim.quantile(p) - 1 for p in (0.5, 0.95, 0.99)]
        w = worst.setdefault(B, np.zeros(3))
        worst[B] = np.maximum(w, np.abs(err))
        print(f"B={B} D={d:g}xS(1) N={N:<3} load={load}  sim p99 {sim.p99 * 1e3:7.3f} ms "
              f"(99% CI +-{(hi - lo) / 2 / sim.p99:.1%})  round-robin model error: "
              f"p50 {err[0]:+.1%}  p95 {err[1]:+.1%}  p99 {err[2]:+.1%}", flush=True)
    for B, w in worst.items():
        print(f"B={B}: worst |error| p50 {w[0]:.1%}, p95 {w[1]:.1%}, p99 {w[2]:.1%}")


if __name__ == "__main__":
    main()
