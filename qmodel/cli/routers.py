"""``qmodel routers``: the same nodes and load under each router, predicted (and simulated
with ``--simulate``), with the batch size and utilization that explain the difference."""

from __future__ import annotations

import argparse
import json

from ..routers import COMPARED_ROUTERS
from .args import add_system_args, read_count, system_from
from .output import say

__all__ = ["HELP", "DESCRIPTION", "add_arguments", "run"]

HELP = "compare routers for the same nodes and load"
DESCRIPTION = ("Predict p50/p95/p99 of --nodes copies of the node under each router "
               f"({', '.join(COMPARED_ROUTERS)}), with the mean batch size and utilization "
               "that explain the difference.")


def add_arguments(parser) -> None:
    add_system_args(parser)
    g = parser.add_argument_group("output")
    g.add_argument("--simulate", type=read_count, nargs="?", const=1_000_000, default=None,
                   metavar="REQUESTS", help="also simulate each router (default 1e6 requests); "
                                            "routers without a model are then simulated")
    g.add_argument("--seed", type=read_count, default=1, help="seed of the simulations")
    g.add_argument("--plot", default=None, metavar="FILE", help="write a bar chart (PNG/SVG)")
    g.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args) -> int:
    from ..compare import compare_routers, router_table

    try:
        if args.router != "random" or args.weights is not None or args.choices is not None:
            raise ValueError("qmodel routers compares the routers itself; drop --router, "
                             "--weights and --choices")
        node = system_from(argparse.Namespace(**{**vars(args), "nodes": 1}))
        if args.rate is None or args.trace is not None or args.arrival_scv != 1.0:
            raise ValueError("qmodel routers takes Poisson arrivals: give --rate REQ/S")
        rows = compare_routers(node, args.nodes, args.rate, requests=args.simulate,
                               seed=args.seed)
        if args.plot:
            from ..plots import plot_router_comparison
            plot_router_comparison(rows, args.plot,
                                   title=f"{args.nodes} x {node.describe()} at "
                                         f"{args.rate:,.0f} req/s")
    except ValueError as err:   # includes UnstableError: say what to change, no traceback
        say("error", err)
        return 2
    if args.json:
        out = []
        for r in rows:
            item = {"router": r.router, "note": r.note}
            for key, res in (("predicted", r.predicted), ("simulated", r.simulated)):
                item[key] = None if res is None else res.summary()
            out.append(item)
        print(json.dumps({"node": node.describe(), "nodes": args.nodes,
                          "arrival_rate": args.rate, "routers": out}, indent=2))
    else:
        print(f"{args.nodes} x {node.describe()}, {args.rate:,.1f} req/s\n")
        print(router_table(rows))
    return 0
