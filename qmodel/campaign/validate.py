"""``qmodel validate``: run a campaign, write its report and print its summary."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .configs import load_configs
from .grids import plan
from .runner import DEFAULT_REQUESTS, run_campaign
from .verdicts import Tolerance

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``validate`` options to a parser (used by ``qmodel validate``)."""
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--quick", action="store_true",
                       help="the quick grid, routers and lab (default; minutes on 2 cores)")
    which.add_argument("--full", action="store_true",
                       help="the whole issue-3 grid, routers and lab (tens of minutes on 2 "
                            "cores)")
    which.add_argument("--configs", default=None, metavar="FILE",
                       help="your own configurations, TOML ([[config]] tables) or JSON")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="output folder (default validation/reports/quick, .../full, or "
                             ".../<FILE stem>); results are cached in DIR/cache")
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help="local processes (default: all cores; 1 runs in this process)")
    parser.add_argument("--requests", type=float, default=None, metavar="N",
                        help="simulated requests per configuration (default 4e5 quick, 2e6 "
                             "full, 1e6 configs)")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--tolerance", type=float, default=Tolerance.approx, metavar="REL",
                        help="relative tolerance of approximations on p95/p99 (default 0.08)")
    parser.add_argument("--fresh", action="store_true", help="ignore cached results")
    parser.add_argument("--strict", action="store_true",
                        help="exit with status 1 if any modelled configuration fails")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                        help="progress bar on stderr (default on)")
    return parser


def run(args) -> int:
    """``qmodel validate``: run the campaign, write the report, print the summary."""
    from .report import summary_text, write_report

    try:
        if args.configs:
            level, configs, extras = "configs", load_configs(args.configs), None
            out = args.out or f"validation/reports/{Path(args.configs).stem}"
        else:
            level = "full" if args.full else "quick"
            extras = plan(level)
            configs, out = extras.configs, args.out or f"validation/reports/{level}"
        requests = DEFAULT_REQUESTS[level] if args.requests is None else args.requests
        if not float(requests).is_integer() or requests < 1000:
            raise ValueError(f"--requests={requests:g} must be a whole number >= 1000")
        if args.workers is not None and args.workers < 1:
            raise ValueError(f"--workers={args.workers} must be at least 1")
        if not 0 <= args.tolerance < 1:
            raise ValueError(f"--tolerance={args.tolerance} must be a fraction in [0, 1), "
                             "e.g. 0.08")
        campaign = run_campaign(configs, out, requests=int(requests), seed=args.seed,
                                workers=args.workers, tolerance=Tolerance(approx=args.tolerance),
                                progress=args.progress, fresh=args.fresh, extras=extras,
                                level=level)
        if args.configs:
            campaign.settings["source"] = str(args.configs)
        report = write_report(campaign, out)
    except (OSError, ValueError) as err:
        print(f"qmodel: error: {err}", file=sys.stderr)
        return 2
    print(summary_text(campaign.rows))
    verdicts = [r["verdict"] for r in campaign.rows + campaign.routers]
    print(f"\n{verdicts.count('pass')} passed, {verdicts.count('fail')} failed, "
          f"{verdicts.count('not modelled')} not modelled, {verdicts.count('error')} errors; "
          f"{campaign.stats.get('cached', 0)} results from the cache; "
          f"{campaign.wall_seconds:.1f} s")
    print(f"report: {report}")
    return 1 if args.strict and "fail" in verdicts else 0
