"""Start-up bias against replica length: the evidence behind simulate()'s default replicas.

Every replica starts empty, so short replicas under-estimate the tail. The transient lasts
about R = load^2 (ca^2 + load B cs^2) / (1 - load)^2 arrivals per node
(qmodel.sim.replicas.relaxation_arrivals). For one-instance nodes with no delay, whose embedded-chain
model is exact up to its lattice step (qmodel.predict says "numerical"), the script cuts the
same number of requests into replicas of 3 to 200 R arrivals and prints the simulated p99's
mean relative error over several seeds (with its standard error), the spread from run to run,
the simulator's mean 95% CI half-width of p99 and how often that CI holds the model's p99.

Run: ``.venv/bin/python validation/replica_bias.py [--quick] [--out FILE]`` (about 4 minutes;
--quick: two nodes, three lengths, under a minute)
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import qmodel as qm
from qmodel.campaign.grids import GRID_SERVICE     # the accuracy grid's nodes
from qmodel.sim.replicas import relaxation_arrivals

NODES = [  # (max_batch_size, jitter, load); lognormal jitter has cv 0.3
    (64, "lognormal", 0.95),
    (32, "lognormal", 0.95),
    (64, "deterministic", 0.95),
    (1, "deterministic", 0.95),
    (64, "lognormal", 0.90),
]
LENGTHS = (3, 6, 12, 25, 50, 100, 200)          # replica lengths in relaxations R


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="two nodes, three lengths")
    ap.add_argument("--requests", type=int, default=4_000_000, help="per run")
    ap.add_argument("--seeds", type=int, default=8, help="runs per replica length")
    ap.add_argument("--out", type=Path, help="also write the table here")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")      # short replicas draw the bias warning on purpose
    nodes = NODES[:2] if args.quick else NODES
    lengths = (6, 25, 50) if args.quick else LENGTHS
    lines = [f"{args.requests:,} requests per run, {args.seeds} runs per length; errors "
             "against the exact one-instance model"]
    print(lines[0], flush=True)
    for B, jitter, load in nodes:
        node = GRID_SERVICE.node(B, 0.0, 1, jitter)
        rate = load * node.capacity
        model = qm.predict(node, rate=rate, fallback="raise")
        assert model.accuracy.exactness == "numerical", model.accuracy
        R = relaxation_arrivals(qm.Cluster(node), rate)
        lines.append(f"\nB = {B}, {jitter}, load {load}: R = {R:,.0f} arrivals, model p99 "
                     f"{model.p99 * 1e3:.3f} ms ({model.method})")
        print(lines[-1], flush=True)
        for length in lengths:
            replicas = max(2, int(args.requests // (length * R)))
            start = time.perf_counter()
            p99, half, inside = [], [], 0
            for seed in range(args.seeds):
                sim = qm.simulate(node, rate=rate, requests=args.requests, seed=seed,
                                  replicas=replicas)
                lo, hi = sim.ci(0.99)
                p99.append(sim.p99 / model.p99 - 1)
                half.append((hi - lo) / 2 / model.p99)
                inside += lo <= model.p99 <= hi
            err = 100 * np.array(p99)
            lines.append(
                f"  {args.requests / replicas / R:6.1f} R ({replicas:5d} replicas): p99 error "
                f"{err.mean():+6.2f}% (se {err.std(ddof=1) / np.sqrt(args.seeds):4.2f}), run sd "
                f"{err.std(ddof=1):5.2f}%, 95% CI half {100 * np.mean(half):5.2f}%, CI holds "
                f"the model {inside}/{args.seeds}  ({time.perf_counter() - start:.0f} s)")
            print(lines[-1], flush=True)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
