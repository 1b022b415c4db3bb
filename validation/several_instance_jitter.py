"""Several instances with jittery service near capacity: predict against simulate, drawn at random.

A review of the several-instance families (issue 35) found answers inside their measured
domain far outside their stated error: lognormal cv 0.8, B 2, 5 instances, no delay, load
0.86 predicted p99 19.6 ms against 4.6 ms simulated. The families' domains are boxes of the
configurations measured, and few of those combined a large jitter, many instances and a high
load. This campaign draws that corner (seeded): S(k) = a + b k with a 0.5 or 2 ms and b / a
0.05, 0.28 or 0.6; deterministic, lognormal (cv 0.3, 0.5, 0.65, 0.8), gamma (cv 0.5, 0.75) or
exponential jitter; max_batch_size 2, 3, 4, 6, 8, 16 or 32; 2-8 instances; no delay (two
thirds) or a delay of 0.5 S(1); loads 0.7-0.96. A second draw (``--spread``, seed 38)
takes the jitter's cv uniform on 0.3-0.8 and the load uniform on 0.7-0.97, so that the
domains' edges fall between measured values rather than on the first list's steps (a review
found misses at cv 0.55-0.64, between the steps 0.5 and 0.65). A third (``--edge``, seed 39,
200 draws) covers where those misses lay: lognormal cv uniform on 0.45-0.7, B 2-6, 5-8
instances, loads uniform on 0.85-0.97, no delay or 0.5 S(1). Each configuration is predicted
(``extrapolate=True``) and simulated as in validation/wide_domain.py, whose rows (same
fields) feed the families' measured errors and domains (validation/measured_errors.py), so
the domains are cut where these errors say, by measurement.

Run: ``python validation/several_instance_jitter.py --workers 2``, again with ``--spread``
and with ``--edge --configs 200`` (about 5, 5 and 2 minutes on 2 cores). Results:
validation/results/several_instance_jitter.json, several_instance_jitter_spread.json and
several_instance_jitter_edge.json (and .txt).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from wide_domain import run_and_store, run_one, summarise             # noqa: E402

SEED = 37
JITTERS = (("deterministic", 0.0), ("lognormal", 0.3), ("lognormal", 0.5),
           ("lognormal", 0.65), ("lognormal", 0.8), ("gamma", 0.5), ("gamma", 0.75),
           ("exponential", 1.0))


def _affine(rng) -> dict:
    """S(k) = a + b k: a 0.5 or 2 ms, b / a 0.05, 0.28 or 0.6."""
    base = float(rng.choice([0.5e-3, 2e-3]))
    return {"base": base, "per_item": base * float(rng.choice([0.05, 0.28, 0.6]))}


def edge_draws(count: int = 200) -> list[dict]:
    """The third draw: the corner where a review found misses at the first two's edge."""
    rng = np.random.default_rng(SEED + 2)
    specs = []
    for i in range(count):
        specs.append({"index": i, **_affine(rng), "jitter": "lognormal", "cv": float(rng.uniform(0.45, 0.7)),
                      "B": int(rng.integers(2, 7)), "c": int(rng.integers(5, 9)),
                      "d": float(rng.choice([0.0, 0.0, 0.5])), "preferred": [],
                      "load": float(rng.uniform(0.85, 0.97))})
    return specs


def draws(count: int = 600, spread: bool = False) -> list[dict]:
    """The configurations, as validation/wide_domain.py's specs; ``spread``: the second
    draw, cv and load continuous."""
    rng = np.random.default_rng(SEED + spread)
    specs = []
    for i in range(count):
        jitter, cv = JITTERS[rng.integers(len(JITTERS))]
        if spread and jitter in ("lognormal", "gamma"):
            cv = float(rng.uniform(0.3, 0.8))
        specs.append({"index": i, **_affine(rng), "jitter": jitter, "cv": cv,
                      "B": int(rng.choice([2, 3, 4, 6, 8, 16, 32])),
                      "c": int(rng.choice([2, 3, 4, 5, 6, 8])),
                      "d": float(rng.choice([0.0, 0.0, 0.5])), "preferred": [],
                      "load": float(rng.choice([0.7, 0.8, 0.85, 0.9, 0.93, 0.96]))})
        if spread:
            specs[-1]["load"] = float(rng.uniform(0.7, 0.97))
    return specs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", type=int, default=600)
    ap.add_argument("--spread", action="store_true",
                    help="the second draw (seed 38): cv and load continuous, stored as "
                         "several_instance_jitter_spread")
    ap.add_argument("--workers", type=int, default=mp.cpu_count())
    ap.add_argument("--least", type=int, default=400_000)
    ap.add_argument("--most", type=int, default=4_000_000)
    ap.add_argument("--timeout", type=int, default=120, help="seconds per configuration")
    ap.add_argument("--out", type=Path,
                    default=Path("validation/results/several_instance_jitter"))
    ap.add_argument("--edge", action="store_true",
                    help="the third draw (seed 39, --configs 200): stored as "
                         "several_instance_jitter_edge")
    args = ap.parse_args(argv)
    which = "edge" if args.edge else "spread" if args.spread else ""
    if which and args.out == Path("validation/results/several_instance_jitter"):
        args.out = Path(f"validation/results/several_instance_jitter_{which}")
    specs = edge_draws(args.configs) if args.edge else draws(args.configs, args.spread)
    offset = {"": 0, "spread": 10_000, "edge": 20_000}[which]
    jobs = [(s, SEED + offset + s["index"], args.least, args.most, args.timeout)
            for s in specs]
    run_and_store(run_one, jobs, args.workers, args.out,
                  f"python validation/several_instance_jitter.py --configs {args.configs} "
                  f"--least {args.least} --most {args.most}"
                  + (f" --{which}" if which else ""), summarise)
    return 0


if __name__ == "__main__":
    sys.exit(main())
