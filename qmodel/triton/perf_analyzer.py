"""perf_analyzer's CSV (``-f out.csv``): one row per load level, in seconds.

Its columns are microseconds: the client's send and receive, "Network+Server Send/Recv", the
server's queue and compute phases (means), and the client-side latency percentiles. A row is
one request rate (``--request-rate-range``) or one concurrency.

Examples
--------
>>> text = ("Request Rate,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,"
...         "Server Compute Input,Server Compute Infer,Server Compute Output,Client Recv,"
...         "p50 latency,p90 latency,p95 latency,p99 latency\\n"
...         "400,392.678,5,373,2410,45,3585,137,1,6279,8305,9255,11171\\n")
>>> row, = read_perf_analyzer(text)
>>> row.rate, row.throughput, row.network, row.p99
(400.0, 392.678, 0.000373, 0.011171)
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PerfAnalyzerRow", "read_perf_analyzer"]

# attribute: perf_analyzer's column (microseconds, except the first two)
MEANS = {"client_send": "Client Send", "network": "Network+Server Send/Recv",
         "queue": "Server Queue", "compute_input": "Server Compute Input",
         "compute_infer": "Server Compute Infer", "compute_output": "Server Compute Output",
         "client_recv": "Client Recv"}
PERCENTILES = {"p50": "p50 latency", "p90": "p90 latency", "p95": "p95 latency",
               "p99": "p99 latency"}


@dataclass(frozen=True)
class PerfAnalyzerRow:
    """One load level of perf_analyzer's CSV; times in seconds (None: column absent).

    ``rate`` (requests per second) or ``concurrency`` is set, whichever the run varied.
    The means (client_send, network, queue, compute_*, client_recv) are perf_analyzer's
    per-request averages; p50-p99 its client-side latency percentiles.
    """

    rate: float | None
    concurrency: int | None
    throughput: float
    client_send: float | None
    network: float | None
    queue: float | None
    compute_input: float | None
    compute_infer: float | None
    compute_output: float | None
    client_recv: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None


def read_perf_analyzer(source) -> list[PerfAnalyzerRow]:
    """The rows of a perf_analyzer CSV file (a path, or its text).

    Raises
    ------
    ValueError
        Naming the file and line: no "Request Rate"/"Concurrency" or "Inferences/Second"
        column, or a value that is not a number.
    """
    if isinstance(source, str) and "\n" in source:
        text, where = source, "<text>"
    else:
        try:
            text, where = Path(source).read_text(), str(source)
        except (OSError, TypeError) as err:
            raise ValueError(f"read_perf_analyzer: cannot read {source!r}: {err}") from None
    reader = csv.DictReader(io.StringIO(text))
    columns = reader.fieldnames or []
    load = next((c for c in ("Request Rate", "Concurrency") if c in columns), None)
    if load is None or "Inferences/Second" not in columns:
        raise ValueError(f"{where}:1: no 'Request Rate' (or 'Concurrency') and "
                         f"'Inferences/Second' columns (found {columns[:4]}...): give the "
                         f"file perf_analyzer writes with -f")
    rows = []
    for number, record in enumerate(reader, start=2):
        def value(column, per_second=1.0):
            cell = record.get(column)
            if cell is None or cell == "":
                return None
            try:
                return float(cell) / per_second
            except ValueError:
                raise ValueError(f"{where}:{number}: {column} is {cell!r}, not a "
                                 f"number") from None

        rows.append(PerfAnalyzerRow(
            rate=value(load) if load == "Request Rate" else None,
            concurrency=int(value(load)) if load == "Concurrency" else None,
            throughput=value("Inferences/Second"),
            **{key: value(column, 1e6) for key, column in MEANS.items()},
            **{key: value(column, 1e6) for key, column in PERCENTILES.items()}))
    if not rows:
        raise ValueError(f"{where}: no rows below the header")
    return rows
