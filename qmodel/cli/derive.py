"""``qmodel derive``: render the sympy derivations of qmodel's closed forms as Markdown and/or
self-contained HTML (:func:`qmodel.derive.render`)."""

from __future__ import annotations

import argparse

from ..derive import DEFAULT_OUT, FORMATS, render
from .output import say

__all__ = ["HELP", "DESCRIPTION", "add_arguments", "run"]

HELP = "render the sympy derivations of qmodel's closed forms"
DESCRIPTION = ("Write the derivations of qmodel/derivations as Markdown (LaTeX math) and/or "
               "self-contained HTML (MathML).")


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``derive`` options to a parser (``qmodel derive``)."""
    parser.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                        help=f"output folder (default {DEFAULT_OUT})")
    parser.add_argument("--format", default="both", choices=[*FORMATS, "both"],
                        help="md (Markdown + LaTeX), html (self-contained, MathML) or both "
                             "(default)")
    return parser


def run(args) -> int:
    """Render as parsed by :func:`add_arguments`; print the files written. Exit status."""
    formats = FORMATS if args.format == "both" else (args.format,)
    try:
        for fmt in formats:
            written = render(args.out, fmt)
            print(f"wrote {len(written)} {fmt} files to {args.out}")
    except (OSError, ValueError) as err:
        say("error", err)
        return 2
    return 0
