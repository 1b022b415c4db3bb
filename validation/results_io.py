"""The --json/--text outputs that the validation scripts share.

Scripts run as ``.venv/bin/python validation/<script>.py``, so this folder is on the path.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def add_output_arguments(ap: argparse.ArgumentParser) -> None:
    """--json FILE (every row) and --text FILE (the summary)."""
    ap.add_argument("--json", type=Path, default=None, help="write all rows to this file")
    ap.add_argument("--text", type=Path, default=None, help="write the summary to this file")


def write_outputs(args: argparse.Namespace, rows: list, text: str) -> None:
    """Print the summary and write the files that ``args`` asks for."""
    print(text)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if args.text:
        args.text.write_text(text + "\n")


def stored_rows(args: argparse.Namespace, option: str = "--refresh-models") -> list:
    """The rows of the existing --json file that ``option`` works on (exits if there is none)."""
    if args.json is None or not args.json.exists():
        raise SystemExit(f"{option} needs an existing --json file")
    return json.loads(args.json.read_text())


def signed_worst(errors) -> float:
    """The error of largest magnitude, with its sign."""
    errors = np.asarray(errors, float)
    return float(errors[np.argmax(np.abs(errors))])
