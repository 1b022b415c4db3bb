"""The ``qmodel`` command: its parser and the dispatch to one module per subcommand.

Each subcommand module (:mod:`qmodel.cli.simulate`, :mod:`~qmodel.cli.predict`, ...) gives
``HELP``, ``DESCRIPTION``, ``add_arguments(parser)`` and ``run(args) -> exit status``; the
readers they share are in :mod:`qmodel.cli.args`, which imports none of them.
"""

from __future__ import annotations

import argparse
import sys
import warnings

from . import (derive, ensemble, predict, profile, routers, simulate, size, triton_check,
               validate)
from .args import Parser
from .output import one_line_warning, say

__all__ = ["main", "build_parser", "COMMANDS"]

# the subcommands, in the order --help lists them
COMMANDS = {"simulate": simulate, "predict": predict, "routers": routers, "profile": profile,
            "size": size, "ensemble": ensemble, "triton-check": triton_check,
            "derive": derive, "validate": validate}


def build_parser() -> argparse.ArgumentParser:
    """The whole command's parser, every subcommand's flags included."""
    parser = Parser(
        prog="qmodel",
        description="Tail latency of batched inference serving (Triton-style dynamic batching).")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # the subcommands' parsers, so that an error found by the top-level parser (an unknown
    # flag after the subcommand) is reported by the subcommand it belongs to
    parser.commands = sub.choices
    for name, module in COMMANDS.items():
        module.add_arguments(sub.add_parser(name, help=module.HELP,
                                            description=module.DESCRIPTION))
    return parser


def main(argv=None) -> int:
    """Run ``qmodel`` with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    previous = warnings.formatwarning
    warnings.formatwarning = one_line_warning
    try:
        return _run(argv)
    finally:
        warnings.formatwarning = previous


def _run(argv) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["size"]:
        try:
            argv = size.expand_spec(argv)
        except ValueError as err:
            say("error", err)
            return 2
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        parser.commands[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    return COMMANDS[args.command].run(args)

