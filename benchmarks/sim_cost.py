"""How close the simulator's cost estimate comes to its measured time and memory.

:func:`qmodel.sim.cost.run_cost` sizes predict's simulation fallback within the budget before
it runs. This script runs qmodel.simulate on one node and on 4-64-node clusters under each
router, in a child process per run (for its peak memory), and prints the estimate beside the
measurement. The estimate should sit above the measurement (ratio >= 1) and not far above it:
a low ratio lets a fallback pass its budget, a high one refuses runs that would fit.

Run: ``python benchmarks/sim_cost.py`` (about 2 minutes on 2 cores; ``--smoke``: two small
runs, one per engine, in seconds, for the test suite).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CASES = [  # (nodes, router, max_batch_size, load, requests)
    (1, "round_robin", 1, 0.9, 4_000_000),
    (1, "round_robin", 8, 0.9, 4_000_000),
    (1, "round_robin", 1, 0.99, 8_000_000),
    (16, "round_robin", 8, 0.9, 4_000_000),
    (4, "least_outstanding", 8, 0.9, 1_000_000),
    (16, "least_outstanding", 1, 0.5, 4_000_000),
    (64, "least_outstanding", 8, 0.9, 1_000_000),
    (64, "least_outstanding", 8, 0.9, 4_000_000),
    (16, "power_of_two", 8, 0.9, 1_000_000),
    (64, "power_of_two", 64, 0.9, 4_000_000),
]

CHILD = r"""
import json, resource, sys, time, warnings
import qmodel as qm
from qmodel.sim.cost import run_cost
warnings.simplefilter("ignore")
N, router, B, load, requests = json.loads(sys.argv[1])
node = qm.Node(qm.ServiceTime.affine(1e-3, 1e-4, jitter=("lognormal", 0.3)),
               max_batch_size=B, max_queue_delay=2e-4)
system = node if N == 1 else qm.Cluster(node, count=N, router=router)
rate = load * system.capacity
cost = run_cost(system, qm.Poisson(rate), requests)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
qm.simulate(system, rate=rate, requests=requests, seed=1)
seconds = time.perf_counter() - start
peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
print(json.dumps(dict(estimate_s=cost.seconds, estimate_bytes=cost.nbytes, seconds=seconds,
                      bytes=peak, engine=cost.engine, replicas=cost.replicas)))
"""


SMOKE = [(1, "round_robin", 8, 0.9, 200_000), (4, "least_outstanding", 8, 0.9, 100_000)]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="two small runs (seconds)")
    args = ap.parse_args(argv)
    print(f"{'nodes':>5} {'router':<18} {'B':>3} {'load':>4} {'requests':>9} {'engine':<9} "
          f"{'reps':>4} {'est s':>6} {'meas s':>6} {'ratio':>5} {'est MiB':>7} {'meas MiB':>8} "
          f"{'ratio':>5}")
    for case in SMOKE if args.smoke else CASES:
        out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(case)], check=True,
                             capture_output=True, text=True).stdout
        r = json.loads(out)
        N, router, B, load, requests = case
        print(f"{N:5d} {router:<18} {B:3d} {load:4.2f} {requests:9,d} {r['engine']:<9} "
              f"{r['replicas']:4d} {r['estimate_s']:6.2f} {r['seconds']:6.2f} "
              f"{r['estimate_s'] / r['seconds']:5.2f} {r['estimate_bytes'] / 2**20:7.0f} "
              f"{r['bytes'] / 2**20:8.0f} {r['estimate_bytes'] / max(r['bytes'], 1):5.2f}",
              flush=True)


if __name__ == "__main__":
    main()
