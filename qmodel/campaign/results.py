"""The validation scripts' result files.

Each script of validation/ prints a summary and, when asked, writes its rows as JSON
(``--json FILE``) and its summary as text (``--text FILE``); the stored rows under
validation/results/ are what a later ``--refresh-models`` run (new predictions, the same
simulations), validation/measured_errors.py and :mod:`qmodel.campaign.doc_tables` read back
(:func:`stored_results`, :func:`stored_log`); the groups and figures their summaries print
come from :mod:`qmodel.campaign.summaries`. Relative errors are predicted / simulated - 1.
"""

from __future__ import annotations

import argparse
import gzip
import json
from functools import lru_cache
from pathlib import Path

__all__ = ["RESULTS", "add_output_arguments", "write_outputs", "write_rows", "stored_rows",
           "stored_results", "stored_log"]

# the checkout's stored campaign results
RESULTS = Path(__file__).resolve().parents[2] / "validation" / "results"


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


@lru_cache(maxsize=None)
def stored_results(name: str) -> list:
    """The stored rows of validation/results/``name`` (read once; do not modify them); a
    name ending in .gz is read through gzip (the large grids are stored compressed)."""
    path = RESULTS / name
    if name.endswith(".gz"):
        return json.loads(gzip.decompress(path.read_bytes()))
    return json.loads(path.read_text())


def stored_log(name: str) -> list[str]:
    """The lines of a stored campaign log, validation/results/``name``."""
    return (RESULTS / name).read_text().splitlines()
