"""``qmodel simulate``: the Monte Carlo latency distribution of a node or cluster, printed as a
table or JSON."""

from __future__ import annotations

import argparse
import json
import sys

from .args import add_system_args, arrivals_from, read_count, read_real, system_from
from .output import say, simulation_report, simulation_text

__all__ = ["HELP", "DESCRIPTION", "add_arguments", "run"]

HELP = "Monte Carlo latency distribution of a node or cluster"
DESCRIPTION = ("Simulate Triton's dynamic batcher and print p50/p95/p99 with confidence "
               "intervals. Durations take units: 2ms, 500us, 0.002 (seconds).")

# Above this many requests a progress bar is worth its line of output.
PROGRESS_FROM = 5_000_000


def add_arguments(parser) -> None:
    add_system_args(parser)
    g = parser.add_argument_group("run")
    g.add_argument("--requests", type=read_count, default=None, metavar="N",
                   help="requests to simulate (default 2e6, or the whole trace)")
    g.add_argument("--seed", type=read_count, default=1)
    g.add_argument("--replicas", type=read_count, default=None, metavar="R",
                   help="independent replicas (default: automatic)")
    g.add_argument("--warmup", type=read_real, default=0.1, metavar="FRACTION")
    g.add_argument("--backend", default="auto", choices=["auto", "numpy", "cupy", "cpu", "gpu"],
                   help="numpy/cupy: the vectorised engines on that array library; cpu/gpu: "
                        "the compiled engine (Numba) on the CPU's cores or a GPU; auto: the "
                        "GPU for runs of 50 M requests or more where one is present, else numpy")
    g.add_argument("--json", action="store_true", help="print JSON instead of a table")
    g.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help=f"progress bar (default: on from {PROGRESS_FROM:.0e} requests)")


def run(args) -> int:
    from ..sim import simulate

    try:
        system = system_from(args)
        arrivals = arrivals_from(args)
        requests = args.requests
        progress = args.progress
        if progress is None:
            progress = (requests or 2_000_000) >= PROGRESS_FROM and sys.stderr.isatty()
        result = simulate(system, arrivals=arrivals, requests=requests, seed=args.seed,
                          replicas=args.replicas, warmup=args.warmup, backend=args.backend,
                          progress=progress)
    except ValueError as err:   # includes UnstableError: say what to change, no traceback
        say("error", err)
        return 2
    rep = simulation_report(result, system, arrivals)
    print(json.dumps(rep, indent=2) if args.json else simulation_text(rep))
    return 0
