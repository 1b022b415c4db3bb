"""The validation scripts' result files and the error summaries they print.

Each script of validation/ prints a summary and, when asked, writes its rows as JSON
(``--json FILE``) and its summary as text (``--text FILE``); the stored rows under
validation/results/ are what a later ``--refresh-models`` run (new predictions, the same
simulations) and validation/measured_errors.py read back. Relative errors are predicted /
simulated - 1 throughout.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

__all__ = ["add_output_arguments", "write_outputs", "write_rows", "stored_rows",
           "median_worst", "signed_worst"]


def add_output_arguments(ap: argparse.ArgumentParser) -> None:
    """--json FILE (every row) and --text FILE (the summary)."""
    ap.add_argument("--json", type=Path, default=None, help="write all rows to this file")
    ap.add_argument("--text", type=Path, default=None, help="write the summary to this file")


def write_rows(path: Path, rows: list) -> None:
    """Write rows as the stored results hold them (JSON, one level of indentation)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=1))


def write_outputs(args: argparse.Namespace, rows: list, text: str) -> None:
    """Print the summary and write the files that ``args`` asks for."""
    print(text)
    if args.json:
        write_rows(args.json, rows)
    if args.text:
        args.text.write_text(text + "\n")


def stored_rows(args: argparse.Namespace, option: str = "--refresh-models") -> list:
    """The rows of the existing --json file that ``option`` works on (exits if there is none)."""
    if args.json is None or not args.json.exists():
        raise SystemExit(f"{option} needs an existing --json file")
    return json.loads(args.json.read_text())


def median_worst(errors) -> tuple[float, float]:
    """Median and worst |error| (or magnitude of any values, e.g. seconds).

    Examples
    --------
    >>> median_worst([0.01, -0.03, 0.02])
    (0.02, 0.03)
    """
    errors = np.abs(np.asarray(errors, float))
    return float(np.median(errors)), float(errors.max())


def signed_worst(errors) -> float:
    """The error of largest magnitude, with its sign.

    Examples
    --------
    >>> signed_worst([0.01, -0.03, 0.02])
    -0.03
    """
    errors = np.asarray(errors, float)
    return float(errors[np.argmax(np.abs(errors))])
