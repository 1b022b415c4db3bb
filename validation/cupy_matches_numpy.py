"""Does the CuPy backend of the simulator give NumPy's answers? (Run on a machine with a GPU.)

Simulates the same systems on both backends (same seeds; the random streams differ, so the
comparison is statistical) and prints, per system, the p50/p99 of each with their 99%
confidence intervals, utilization and mean batch size. A system fails when the two p99
intervals do not overlap, when a utilization lies outside [0, 1], or when a run that served
requests reports a mean batch size below 1. Exit status 1 if any fails.

Run: ``PYTHONPATH=$PWD python validation/cupy_matches_numpy.py`` (about a minute on an H100).
"""

from __future__ import annotations

import sys
import warnings

import qmodel as qm

AFF = qm.ServiceTime.affine


def systems():
    node = qm.Node(AFF(2e-3, 0.25e-3), max_batch_size=8, max_queue_delay=1e-3)
    yield "node B=8 delay", node, 0.7, "lookahead"
    yield "node B=32 D=20ms (cool-down)", qm.Node(AFF(2e-3, 1e-4), max_batch_size=32,
                                                  max_queue_delay=20e-3), 0.49, "lookahead"
    yield "node c=4 lognormal 0.5", qm.Node(AFF(2e-3, 0.25e-3, jitter=("lognormal", 0.5)),
                                            max_batch_size=16, instances=4), 0.9, "lookahead"
    yield "node events", node, 0.7, "events"
    yield "preferred sizes", qm.Node(AFF(2e-3, 0.3e-3), max_batch_size=8, max_queue_delay=1e-3,
                                     preferred_batch_sizes=(4, 8), instances=2), 0.7, "lookahead"
    for router in ("round_robin", "least_outstanding", "power_of_two"):
        yield f"cluster {router}", qm.Cluster(node, count=8, router=router), 0.8, "auto"


def main() -> int:
    warnings.simplefilter("ignore", qm.ShortRunWarning)
    failed = 0
    print(f"{'system':32} {'backend':7} {'p50 ms':>8} {'p99 ms':>8} {'p99 99% CI':>20} "
          f"{'util':>6} {'batch':>6}")
    for name, system, load, engine in systems():
        rate = load * system.capacity
        runs = {}
        for backend in ("numpy", "cupy"):
            r = qm.simulate(system, rate=rate, requests=400_000, seed=5, engine=engine,
                            backend=backend)
            runs[backend] = r
            lo, hi = r.ci(0.99, level=0.99)
            print(f"{name:32} {backend:7} {r.p50 * 1e3:8.3f} {r.p99 * 1e3:8.3f} "
                  f"[{lo * 1e3:8.3f}, {hi * 1e3:8.3f}] {r.utilization:6.3f} "
                  f"{r.mean_batch_size:6.2f}")
        (a_lo, a_hi), (b_lo, b_hi) = (runs[b].ci(0.99, level=0.99) for b in ("numpy", "cupy"))
        bad = [b for b, r in runs.items()
               if not 0.0 <= r.utilization <= 1.0 or r.mean_batch_size < 1.0]
        if a_hi < b_lo or b_hi < a_lo or bad:
            failed += 1
            print(f"  FAIL: p99 intervals apart or figures out of range ({bad})")
    print(f"{failed} of {sum(1 for _ in systems())} systems differ")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
