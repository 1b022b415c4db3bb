"""``qmodel validate``: a validation campaign, theory against simulation, with a report
(:func:`qmodel.campaign.validate.run_validation`)."""

from __future__ import annotations

import argparse

from ..campaign.verdicts import Tolerance
from .output import say

__all__ = ["HELP", "DESCRIPTION", "add_arguments", "run"]

HELP = "validation campaign: theory against simulation, with a report"
DESCRIPTION = ("Predict and simulate a grid of configurations (or your own, --configs) in "
               "parallel, judge the models against stated tolerances, and write a Markdown "
               "report with figures, into a new folder unless --out names one. Results are "
               "cached there, so --resume continues an interrupted run.")


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``validate`` options to a parser (``qmodel validate``)."""
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--quick", action="store_true",
                       help="the quick grid, routers and lab (default; minutes on 2 cores)")
    which.add_argument("--full", action="store_true",
                       help="the whole issue-3 grid, routers and lab (tens of minutes on 2 "
                            "cores)")
    which.add_argument("--configs", default=None, metavar="FILE",
                       help="your own configurations, TOML ([[config]] tables) or JSON")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="output folder (default: a new folder validate-<quick, full or "
                             "FILE stem>-<date>-<time> in the current directory); results are "
                             "cached in DIR/cache. A DIR that already holds files is refused "
                             "unless --resume or --fresh")
    again = parser.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true",
                       help="write into an existing --out DIR, reusing the results cached "
                            "there (an interrupted or earlier campaign's); the report is "
                            "rewritten")
    again.add_argument("--fresh", action="store_true",
                       help="recompute every result, ignoring cached ones (into an existing "
                            "--out DIR too, overwriting its results and report)")
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help="local processes (default: all cores; 1 runs in this process)")
    parser.add_argument("--requests", type=float, default=None, metavar="N",
                        help="simulated requests per configuration (default 4e5 quick, 2e6 "
                             "full, 1e6 configs)")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--tolerance", type=float, default=Tolerance.approx, metavar="REL",
                        help="relative tolerance of approximations on p95/p99 (default 0.08)")
    parser.add_argument("--strict", action="store_true",
                        help="exit with status 1 if any modelled configuration fails")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                        help="progress bar on stderr (default on)")
    return parser


def run(args) -> int:
    """``qmodel validate``: run the campaign, write the report, print the summary."""
    from ..campaign.report import summary_text
    from ..campaign.validate import run_validation

    try:
        campaign, report = run_validation(
            "full" if args.full else "quick", configs=args.configs, out=args.out,
            resume=args.resume, fresh=args.fresh, requests=args.requests, seed=args.seed,
            workers=args.workers, tolerance=args.tolerance, progress=args.progress)
    except (OSError, ValueError) as err:
        say("error", err)
        return 2
    print(summary_text(campaign.rows))
    verdicts = [r["verdict"] for r in campaign.rows + campaign.routers]
    print(f"\n{verdicts.count('pass')} passed, {verdicts.count('fail')} failed, "
          f"{verdicts.count('not modelled')} not modelled, {verdicts.count('error')} errors; "
          f"{campaign.stats.get('cached', 0)} results from the cache; "
          f"{campaign.wall_seconds:.1f} s")
    print(f"report: {report}")
    return 1 if args.strict and "fail" in verdicts else 0
