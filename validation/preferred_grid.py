"""Several instances with preferred batch sizes: predict against simulate over a grid.

The several-instance families (qmodel/theory/measured_errors.json) were measured on grids
without preferred sizes and on a few random configurations with them, so a node with two
instances and preferred sizes (4, 8), the README's example, lay outside their measured
domain. This grid measures that shape: S(k) = a + b k with a = 2.4 ms and b / a 0.05 or 0.25,
deterministic or lognormal (cv 0.2) jitter, max_batch_size 8 or 32 with preferred sizes
(B / 2, B) or (B / 4, B), 2 or 4 instances, no delay or a delay of S(1), loads 0.3, 0.6 and
0.85. Each configuration is predicted (``extrapolate=True``) and simulated as in
validation/wide_domain.py (its rows, with the same fields, feed the families' measured errors
and domains in validation/measured_errors.py).

Run: ``python validation/preferred_grid.py --workers 2`` (about 5 minutes on 2 cores).
Results: validation/results/preferred_grid.json and .txt.
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing as mp
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from wide_domain import run_and_store, run_one, summarise             # noqa: E402

BASE = 2.4e-3
SEED = 35


def grid() -> list[dict]:
    """The configurations, as validation/wide_domain.py's specs."""
    specs = []
    for i, (ratio, jitter, B, quarter, c, d, load) in enumerate(itertools.product(
            (0.05, 0.25), ("deterministic", "lognormal"), (8, 32), (False, True), (2, 4),
            (0.0, 1.0), (0.3, 0.6, 0.85))):
        specs.append({"index": i, "base": BASE, "per_item": BASE * ratio, "jitter": jitter,
                      "cv": 0.0 if jitter == "deterministic" else 0.2, "B": B, "d": d, "c": c,
                      "preferred": [B // 4 if quarter else B // 2, B], "load": load})
    return specs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=mp.cpu_count())
    ap.add_argument("--least", type=int, default=400_000)
    ap.add_argument("--most", type=int, default=4_000_000)
    ap.add_argument("--timeout", type=int, default=120, help="seconds per configuration")
    ap.add_argument("--out", type=Path, default=Path("validation/results/preferred_grid"))
    args = ap.parse_args(argv)
    jobs = [(s, SEED + s["index"], args.least, args.most, args.timeout) for s in grid()]
    run_and_store(run_one, jobs, args.workers, args.out,
                  f"python validation/preferred_grid.py --least {args.least} --most "
                  f"{args.most}", summarise)
    return 0

if __name__ == "__main__":
    sys.exit(main())
