"""How fast is qmodel.size, and what does its structure save over trying every candidate?

The issue-24 example space: one model (S(k) = 2 ms + 0.2 ms x k, lognormal jitter cv 0.2) at
10,000 req/s, p95 <= 5 ms with 0.5 ms for the network, 1-64 nodes of 2 GPUs, 1, 2 or 4
instances per GPU, max_batch_size 1-64, max_queue_delay 0-5 ms, round robin and random:
11,904 candidates. The script prints, for the search without verification and with it:

- the wall time, the predictions made and the time spent inside qmodel.predict (and the same
  search for every rate from 1,000 to 10,000 req/s);
- the brute-force baseline measured in the same run on a smaller space (every candidate
  predicted), the same optimum (the test suite checks that on three SLOs), and its time per
  candidate, which extrapolated to the full space gives what trying every candidate would cost.

Run: ``.venv/bin/python benchmarks/size_speed.py`` (about a minute; ``--smoke``: the smaller
space only, searched and brute-forced, in seconds, for the test suite).
"""

from __future__ import annotations

import argparse
import sys
import time

import qmodel as qm
from qmodel import sizing

PREDICT = sys.modules["qmodel.predict"]     # the module (qm.predict is its function)

SVC = qm.ServiceTime.affine(2e-3, 0.2e-3, jitter=("lognormal", 0.2))
FULL = dict(nodes=range(1, 65), gpus_per_node=2, instances_per_gpu=(1, 2, 4),
            max_batch_size=(1, 2, 4, 8, 16, 32, 64),
            max_queue_delay=(0, 0.5e-3, 1e-3, 2e-3, 5e-3),
            routers=("round_robin", "random"), sharing="independent")
SMALL = dict(nodes=range(1, 9), gpus_per_node=2, instances_per_gpu=(1, 2),
             max_batch_size=(1, 8, 32), max_queue_delay=(0, 1e-3),
             routers=("round_robin", "random"), sharing="independent")
SLO, NETWORK, RATE = {"p95": 5e-3}, 0.5e-3, 10_000.0


class _Timed:
    """qmodel.predict as sizing calls it, timed."""

    def __init__(self):
        self.seconds, self.calls = 0.0, 0
        self.inner = PREDICT.predict

    def __call__(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return self.inner(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start
            self.calls += 1


def timed_size(**kwargs):
    timer = _Timed()
    PREDICT.predict = timer
    try:
        start = time.perf_counter()
        plan = qm.size(SVC, rate=kwargs.pop("rate", RATE), slo=SLO, network=NETWORK, **kwargs)
        return plan, time.perf_counter() - start, timer
    finally:
        PREDICT.predict = timer.inner


def brute_force(space) -> tuple[float, int, float]:
    """Every candidate predicted (:func:`qmodel.sizing.exhaustive`): (cheapest feasible
    cost, candidates, seconds)."""
    count = sum(len(space["routers"]) * len(space["nodes"])
                for _ in space["instances_per_gpu"] for B in space["max_batch_size"]
                for D in space["max_queue_delay"] if not (B == 1 and D > 0))
    space = dict(space)
    start = time.perf_counter()
    best = sizing.exhaustive(SVC, RATE, SLO, network=NETWORK, **space)
    return best, count, time.perf_counter() - start


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="the smaller space only (seconds)")
    args = ap.parse_args(argv)
    print(f"space: {RATE:,.0f} req/s, p95 <= {SLO['p95'] * 1e3:g} ms with "
          f"{NETWORK * 1e3:g} ms network, {SVC.describe()}\n")
    runs = (("search only", False, RATE), ("search + verification", True, RATE),
            ("range 1,000-10,000 req/s", False, (1_000.0, RATE)))
    for label, verify, rate in () if args.smoke else runs:
        plan, seconds, timer = timed_size(verify=verify, rate=rate, **FULL)
        print(f"{label:24} {plan.candidates:,} candidates in {seconds:.2f} s; "
              f"{timer.calls} predictions, {timer.seconds:.2f} s of them in predict "
              f"({timer.seconds / seconds:.0%}); plan: {plan.nodes} node(s) x "
              f"{(plan.system if isinstance(plan.system, qm.Node) else plan.system.nodes[0]).describe()}, "
              f"cost {plan.cost:g}")
    small_plan, small_seconds, _ = timed_size(verify=False, **SMALL)
    best, count, seconds = brute_force(SMALL)
    print(f"\nbaseline, every candidate predicted, on a smaller space: {count} candidates in "
          f"{seconds:.2f} s ({seconds / count * 1e3:.1f} ms each); optimum cost {best:g}, "
          f"the search's {small_plan.cost:g} in {small_seconds:.2f} s "
          f"({seconds / small_seconds:.0f} x faster)")
    if args.smoke:
        return
    full = 11_904
    print(f"at that rate every candidate of the full space would take about "
          f"{seconds / count * full:.0f} s")


if __name__ == "__main__":
    main()
