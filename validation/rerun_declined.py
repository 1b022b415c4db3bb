"""Measure again the stored random configurations that the model's self-check refused.

A batching node whose S(B) has a long tail was refused by the self-check on its lattice step
(a step past 10% of the median it reported) or on its mass; since the batch node solves such
a node once more on a finer lattice (qmodel.theory.batch.node.REFINED_STEP_FRACTION) the
model answers most of them, in a region the campaigns had not measured: their rows were
"declined", neither good points nor misses of any family, so a family's domain could call
them inside on the strength of its neighbours (a review found 6 of 7 such answers at loads
of 0.7 and more 23-42% low). This script predicts and simulates those rows again, with
validation/wide_domain.py's ``run_one`` (``extrapolate=True``; 400,000 to 4,000,000 requests,
seed 4900 + the row's index), and puts the new rows in place of the old in the stored
results, so that validation/measured_errors.py counts them as the families' points or misses.

Run: ``python validation/rerun_declined.py --workers 2`` (the four stored files of
wide_domain.py --ordinary, wide_domain.py and several_instance_jitter.py; about 10 minutes on
2 cores).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from wide_domain import _init_worker, run_one  # noqa: E402  (a sibling script)

RESULTS = Path(__file__).parent / "results"
FILES = ("ordinary_domain", "ordinary_domain_2", "wide_domain", "several_instance_jitter",
         "several_instance_jitter_spread")
SEED, LEAST, MOST, TIMEOUT = 4900, 400_000, 4_000_000, 180
# what the self-check said of the rows measured again
REFUSED = ("lattice step", "missed 1 by")
# what run_one adds to a configuration
RESULT_KEYS = ("declined", "kind", "features", "predict_seconds", "method", "exactness",
               "families", "outside", "lattice_step", "simulate_seconds", "requests", "p50",
               "p95", "p99", "timeout", "memory_error", "exception")


def refused(row: dict) -> bool:
    return "declined" in row and any(r in row["declined"] for r in REFUSED)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=mp.cpu_count())
    ap.add_argument("--files", nargs="*", default=FILES)
    args = ap.parse_args(argv)
    for name in args.files:
        path = RESULTS / f"{name}.json"
        rows = json.loads(path.read_text())
        todo = [i for i, r in enumerate(rows) if refused(r)]
        jobs = [({k: v for k, v in rows[i].items() if k not in RESULT_KEYS},
                 SEED + rows[i]["index"], LEAST, MOST, TIMEOUT) for i in todo]
        start = time.perf_counter()
        with mp.get_context("fork").Pool(args.workers, _init_worker, (6.0,),
                                         maxtasksperchild=20) as pool:
            new = pool.map(run_one, jobs, chunksize=1)
        for i, row in zip(todo, new):
            row["remeasured"] = "validation/rerun_declined.py"
            rows[i] = row
        path.write_text(json.dumps(rows, indent=0) + "\n")
        answered = sum("p99" in r for r in new)
        still = sum(refused(r) for r in new)
        line = (f"python validation/rerun_declined.py: {len(todo)} rows the self-check had "
                f"refused measured again in {time.perf_counter() - start:.0f} s on "
                f"{args.workers} workers: {answered} answered and simulated, {still} refused "
                f"again, {len(todo) - answered - still} otherwise")
        with (RESULTS / f"{name}.txt").open("a") as out:
            out.write("\n" + line + "\n")
        print(f"{name}: {line}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
