"""Predicted against measured on a real Triton server (``qmodel triton-check``).

:func:`measure` runs a real Triton 2.51 server on loopback (:mod:`qmodel.triton.server`)
serving a Python-backend model that sleeps the node's S(k) (with optional lognormal jitter),
or computes one of qmodel's NumPy profiling workloads, behind the node's batching knobs,
drives it with perf_analyzer's open-loop Poisson load at each rate, ``repeats`` times, and
keeps each run's raw files in a folder of its own:

- ``run.json``: what was run (the node, the rate, the repeat, perf_analyzer's settings);
- ``config.pbtxt``, ``stats_before.json``, ``stats_after.json``, ``metrics_before.txt``,
  ``metrics_after.txt``, ``perf_analyzer.csv``, ``perf_analyzer.txt`` and ``trace.json.gz``
  (the first ``traced`` requests of the measured window), as in tests/data/triton;
- ``stats_series.json.gz`` where the statistics were polled during the run (``poll``): the
  seconds of each poll and its snapshot (:func:`qmodel.triton.read_stats_series`).

Each run starts a fresh server, so its trace and its summary quantiles cover that run only.

:func:`compare` reads such folders (no server needed) and, per run, calibrates the node from
what the server reported (:func:`qmodel.triton.calibrate`: the trace's executions,
perf_analyzer's time outside the batcher and, where the statistics were polled, their
drift), predicts and simulates it at the measured
throughput, and sets both beside perf_analyzer's p50/p95/p99, Triton's own summary
quantiles, the node calibrated with the trace withheld (untraced: the pickup gap and prefetch
share modelled) and the mean-only model (the statistics' mean batch times alone).
:func:`report` writes the table, with the spread between repeats: the measurement's own noise.

Examples
--------
>>> from pathlib import Path
>>> rows = compare(Path(__file__).parents[2] / "tests" / "data" / "triton")  # one run
>>> len(rows), rows[0].rate
(1, 400.0)
"""

from __future__ import annotations

import gzip
import json
import math
import numbers
import shutil
import statistics
import threading
import time
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["measure", "record_run", "compare", "report", "CheckRow", "LEVELS"]

LEVELS = {"p50": 0.5, "p95": 0.95, "p99": 0.99}
# the target for one run: the calibrated prediction's |error| at most this
TARGET = {"p50": 0.10, "p99": 0.15}
BANDS = ((0.0, 0.7, "below 0.7"), (0.7, 0.9, "0.7-0.9"), (0.9, math.inf, "0.9 and above"))
MODEL = "model"


def record_run(repository, model: str, rate: float, folder, *, interval_ms: int = 5000,
               windows: int = 3, traced: int = 1500, installation=None,
               about: dict | None = None, server_cpus: str | None = None,
               client_cpus: str | None = None, poll: float | None = None) -> Path:
    """One run: a fresh server on ``repository``, perf_analyzer at ``rate`` over
    ``windows`` windows of ``interval_ms`` (after its own warm-up), the statistics and
    metrics around it and the trace of its first ``traced`` requests (0: the server runs
    untraced, as production servers do, and no trace is written), written to ``folder``.
    The server is stopped also on error. ``server_cpus`` and ``client_cpus`` pin the server
    and perf_analyzer to CPUs (taskset's list, "0" or "1"), so that they do not share a
    core. ``poll``: seconds between statistics polls while perf_analyzer runs (a thread
    beside it), written as stats_series.json.gz, the windows the drift is fitted from
    where the server is not traced (:func:`qmodel.triton.calibrate` ``series=``)."""
    from .server import TritonServer, run_perf_analyzer

    if isinstance(traced, bool) or not isinstance(traced, numbers.Integral) or traced < 0:
        raise ValueError(f"traced={traced!r}: give how many requests to trace from the start "
                         f"of the run, or 0 to run the server untraced")
    if poll is not None and (isinstance(poll, bool) or not isinstance(poll, numbers.Real)
                             or not math.isfinite(poll) or poll < SHORTEST_POLL):
        raise ValueError(f"poll={poll!r}: give the seconds between statistics polls, at "
                         f"least {SHORTEST_POLL:g} (e.g. 0.1), or None")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="qmodel-check-") as scratch:
        trace = Path(scratch) / "trace.json" if traced else None
        with TritonServer(repository, trace_file=trace, trace_count=traced if traced else -1,
                          installation=installation, cpus=server_cpus) as server:
            before = server.stats(model), server.metrics()
            if traced:
                server.trace("TIMESTAMPS")
            polls, stop, failed = [], threading.Event(), []
            poller = threading.Thread(target=_poll_stats, args=(server, model, poll, polls,
                                                                stop, failed), daemon=True)
            if poll is not None:
                poller.start()
            try:
                text = run_perf_analyzer(server, model, rate, folder / "perf_analyzer.csv",
                                         interval_ms=interval_ms, repeats=windows,
                                         cpus=client_cpus)
            finally:
                stop.set()
                if poll is not None:
                    poller.join()
            if failed:
                # measure() tries a failed run once more on a fresh server
                raise RuntimeError(f"polling the statistics failed after {len(polls)} "
                                   f"poll(s): {failed[0]}")
            if traced:
                server.trace("OFF")
            after = server.stats(model), server.metrics()
        # Triton writes the trace as trace.json.0 (.1, ... when it rotates) when it stops,
        # or as trace.json where the traced count was not reached
        events = []
        parts = Path(scratch).glob("trace.json*")
        for part in sorted(parts, key=lambda p: -1 if p.suffix == ".json" else int(p.suffix[1:])):
            events += json.loads(part.read_text())
    for name, (stats, metrics) in (("before", before), ("after", after)):
        (folder / f"stats_{name}.json").write_text(json.dumps(stats, indent=1) + "\n")
        (folder / f"metrics_{name}.txt").write_text(metrics)
    (folder / "perf_analyzer.txt").write_text(text)
    shutil.copy(Path(repository) / model / "config.pbtxt", folder / "config.pbtxt")
    if traced:
        with gzip.open(folder / "trace.json.gz", "wt") as packed:
            json.dump(events, packed, separators=(",", ":"))
    if poll is not None:
        with gzip.open(folder / "stats_series.json.gz", "wt") as packed:
            json.dump({"poll": poll, "seconds": [t for t, _ in polls],
                       "snapshots": [snap for _, snap in polls]}, packed,
                      separators=(",", ":"))
    run = dict(about or {}, model=model, rate=rate, interval_ms=interval_ms, windows=windows,
               traced=traced, server_cpus=server_cpus, client_cpus=client_cpus)
    if poll is not None:
        run["poll"] = poll
    (folder / "run.json").write_text(json.dumps(run, indent=1) + "\n")
    return folder


# the shortest interval between statistics polls (each is an HTTP request to the server)
SHORTEST_POLL = 0.01


def _poll_stats(server, model: str, poll: float, polls: list, stop, failed: list) -> None:
    """Append (seconds, statistics) every ``poll`` seconds, on a fixed grid of ticks, until
    ``stop`` is set; a failed poll ends it with the error in ``failed``."""
    start = time.monotonic()
    tick = 0
    while not stop.is_set():
        try:
            polls.append((time.monotonic() - start, server.stats(model)))
        except Exception as err:           # noqa: BLE001 (reported by the caller)
            failed.append(err)
            return
        tick = max(tick + 1, int((time.monotonic() - start) / poll) + 1)
        stop.wait(max(start + tick * poll - time.monotonic(), 0.0))


def measure(node, rates, out, *, repeats: int = 2, cv: float = 0.0, interval_ms: int = 5000,
            windows: int = 3, traced: int = 1500, seed: int = 0, installation=None,
            server_cpus: str | None = None, client_cpus: str | None = None,
            workload: str | None = None, blas_threads: int = 1,
            backend: str = "numpy", poll: float | None = None) -> list:
    """Every rate ``repeats`` times on a real server serving ``node`` as a sleeping model
    (S(k) of ``node.service``, an affine law, times a lognormal factor of cv ``cv``); the runs
    go to ``out/<rate>-<repeat>/``. Returns their folders.

    With ``workload`` (a name in :data:`qmodel.profiling.WORKLOADS`) the model computes that
    workload per batch instead (NumPy with ``blas_threads`` BLAS threads on CPU instances, or
    CuPy on GPU instances with ``backend="cupy"``), so the service law is the server's own,
    measured, not imposed; ``node`` then gives the batching knobs only.

    Rates are taken in turn within a repeat (all rates, then all again), so that a slow
    period of the machine touches a rate's repeats apart."""
    from .server import check_backend, write_sleeping_model, write_workload_model

    rates = [float(r) for r in rates]
    if not rates or min(rates) <= 0:
        raise ValueError(f"rates must be positive requests per second, got {rates!r}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a whole number >= 1, got {repeats!r}")
    check_backend(backend)
    if backend != "numpy" and workload is None:
        raise ValueError(f"backend={backend!r} needs a workload: the sleeping model runs on "
                         f"CPU instances")
    if not 0 <= cv <= 2:
        raise ValueError(f"cv={cv!r}: the sleep's lognormal jitter cv must lie in [0, 2]")
    out = Path(out)
    folders = []
    with tempfile.TemporaryDirectory(prefix="qmodel-repo-") as repo:
        if workload is None:
            write_sleeping_model(repo, MODEL, node, cv=cv, seed=seed)
            about = {"node": node.describe(), "sleep_cv": cv}
        else:
            write_workload_model(repo, MODEL, node, workload, seed=seed,
                                 blas_threads=blas_threads, backend=backend)
            about = {"node": node.describe(service=False), "workload": workload,
                     "blas_threads": blas_threads, "backend": backend}
        for repeat in range(1, repeats + 1):
            for rate in rates:
                folder = out / f"{rate:g}-{repeat}"
                for attempt in range(2):
                    # a run that fails (perf_analyzer losing its connection, seen once in
                    # 60 runs here) is tried once more on a fresh server, and says so
                    try:
                        folders.append(record_run(
                            repo, MODEL, rate, folder, interval_ms=interval_ms,
                            windows=windows, traced=traced, installation=installation,
                            about=dict(about, repeat=repeat, attempt=attempt + 1),
                            server_cpus=server_cpus, client_cpus=client_cpus, poll=poll))
                        break
                    except RuntimeError:
                        shutil.rmtree(folder, ignore_errors=True)
                        if attempt:
                            raise
    return folders


@dataclass
class CheckRow:
    """One run: measured, predicted and simulated quantiles (seconds) by key p50/p95/p99.

    Attributes
    ----------
    run : str
        The run's folder.
    config : str
        The run's configuration (its parent folder's name, or the node it served).
    rate, throughput : float
        perf_analyzer's offered rate and measured throughput (requests per second).
    measured : dict
        perf_analyzer's client-side percentiles.
    triton : dict
        Triton's summary quantiles of the request duration (server side, no network).
    calibrated, simulated, mean_only : dict
        ``predict`` of the calibrated node at the measured throughput, its simulation, and
        ``predict`` of the node calibrated from the statistics' mean batch times alone (no
        pickup gap, no prefetching).
    untraced : dict
        ``predict`` of the node calibrated with the trace withheld (statistics, metrics and
        perf_analyzer; the pickup gap and prefetch share modelled), as a production server
        that is not traced reports.
    method : str
        What answered the calibrated prediction.
    mean_batch : float
        Measured inferences per execution.
    utilization : float
        The calibrated node's predicted utilization at the measured throughput.
    prefetch : float or None
        The calibrated node's ``Node.prefetch`` (None: batches formed when an instance
        frees).
    overloaded : bool
        The server could not carry the offered rate: the calibrated node's capacity is below
        it, or the throughput fell 5% short of it. Such a run measures the backlog of its
        window, not a steady state, and is left out of the error statistics.
    """

    run: str
    config: str
    rate: float
    throughput: float
    measured: dict
    triton: dict
    calibrated: dict
    simulated: dict
    mean_only: dict
    method: str
    mean_batch: float
    utilization: float = float("nan")
    prefetch: float | None = None
    overloaded: bool = False
    repeat: int = 1
    notes: dict = field(default_factory=dict)
    untraced: dict = field(default_factory=dict)

    def error(self, which: str, key: str) -> float:
        """Relative error of ``which`` ("calibrated", "simulated", "mean_only", "untraced")
        against perf_analyzer at ``key`` (NaN where it was not predicted)."""
        return getattr(self, which).get(key, math.nan) / self.measured[key] - 1.0


def _quantiles(result) -> dict:
    if result is None:
        return dict.fromkeys(LEVELS, math.nan)
    return {k: float(result.quantile(q)) for k, q in LEVELS.items()}


def compare(folder, *, requests: int = 400_000, seed: int = 1,
            prefetch: bool | None = None) -> list:
    """Every run under ``folder`` (a folder holding ``run.json``, or the files of
    tests/data/triton), calibrated, predicted and simulated against what was measured.
    ``prefetch`` goes to :func:`qmodel.triton.calibrate` (None: its default rule)."""
    from ..checks import UnstableError
    from ..predict import predict
    from ..sim import simulate
    from .calibrate import calibrate
    from .metrics import read_metrics
    from .perf_analyzer import read_perf_analyzer
    from .stats import read_stats

    folder = Path(folder)
    runs = sorted({p.parent for p in folder.rglob("perf_analyzer.csv")})
    if not runs:
        raise ValueError(f"{folder}: no run found (a run folder holds perf_analyzer.csv, "
                         "config.pbtxt, stats_*.json, metrics_*.txt and trace.json.gz); "
                         "write some with qmodel triton-check --out DIR")
    rows = []
    for run in runs:
        about = json.loads((run / "run.json").read_text()) if (run / "run.json").exists() \
            else {}
        stats = (run / "stats_before.json", run / "stats_after.json")
        metrics = (run / "metrics_before.txt", run / "metrics_after.txt")
        pa = run / "perf_analyzer.csv"
        row, = read_perf_analyzer(pa)
        # a run recorded untraced (traced=0) is calibrated as a production server is: from
        # its statistics, metrics and perf_analyzer, the gap and prefetch share modelled (with
        # a trace, the metrics add nothing the trace and perf_analyzer do not give)
        trace = run / "trace.json.gz"
        # statistics polled during the run (record_run's poll): the drift, where no trace
        # long enough measures it
        series = run / "stats_series.json.gz"
        series = series if series.exists() else None
        # every file a run needs is read here: what is missing or malformed is named with
        # the run it belongs to
        try:
            node = calibrate(run / "config.pbtxt", stats, metrics,
                             trace if trace.exists() else None, perf_analyzer=pa,
                             prefetch=prefetch, series=series)
            mean_only = calibrate(run / "config.pbtxt", stats, prefetch=False, gap=0.0)
            untraced = calibrate(run / "config.pbtxt", stats, metrics, perf_analyzer=pa,
                                 series=series)
            m = read_metrics(*metrics, model=read_stats(*stats).model)
        except (ValueError, OSError) as err:
            raise ValueError(f"run {run}: {err}") from None
        summary = m.quantiles.get("request", {})
        rate = float(about.get("rate", row.rate or row.throughput))
        try:
            pred = predict(node, rate=row.throughput)
            sim = simulate(node, rate=row.throughput, requests=requests, seed=seed)
            mean_only_q = _quantiles(predict(mean_only, rate=row.throughput))
        except UnstableError:
            # the server carried more than the calibrated node can: a saturated run whose
            # executions slowed under the load; nothing steady to compare
            pred = sim = None
            mean_only_q = dict.fromkeys(LEVELS, math.nan)
        try:
            untraced_q = _quantiles(predict(untraced, rate=row.throughput))
        except UnstableError:
            untraced_q = dict.fromkeys(LEVELS, math.nan)
        rows.append(CheckRow(
            run=str(run.relative_to(folder)) if run != folder else run.name,
            config=run.parent.name if run != folder else about.get("node", run.name),
            rate=rate,
            throughput=row.throughput,
            measured={k: getattr(row, k) for k in LEVELS},
            triton={k: summary[q] for k, q in LEVELS.items() if q in summary},
            calibrated=_quantiles(pred), simulated=_quantiles(sim), mean_only=mean_only_q,
            untraced=untraced_q,
            method=pred.method if pred is not None else "unstable: throughput above the "
                                                        "calibrated capacity",
            mean_batch=m.mean_batch_size,
            utilization=float(pred.utilization) if pred is not None else math.nan,
            prefetch=node.prefetch,
            overloaded=bool(pred is None or row.throughput < 0.95 * rate
                            or rate >= node.capacity),
            repeat=int(about.get("repeat", 1)),
            notes={"service": node.calibration.service,
                   "overhead": node.calibration.overhead,
                   "batcher": node.calibration.batcher}))
    return sorted(rows, key=lambda r: (r.config, r.rate, r.repeat))


def _spread(rows) -> dict:
    """(config, rate) -> the relative spread of the measured p99 between its repeats."""
    groups: dict = {}
    for r in rows:
        groups.setdefault((r.config, r.rate), []).append(r.measured["p99"])
    return {key: (max(v) / min(v) - 1.0 if len(v) > 1 else None) for key, v in groups.items()}


def report(rows) -> str:
    """The comparison as Markdown: one line per run, then the medians and worst errors over
    runs whose repeats agree within 10% on p99."""
    spread = _spread(rows)
    pct = lambda x: "-" if math.isnan(x) else f"{x:+.1%}"          # noqa: E731
    share = lambda p: "-" if p is None else f"{p:.2f}"             # noqa: E731
    ms = lambda x: f"{x * 1e3:.2f}"       # noqa: E731
    lines = ["| config | rate | repeat | batch | prefetch | measured p50 / p95 / p99 ms | Triton "
             "p50 / p99 ms | calibrated p50 / p95 / p99 | simulated p99 | untraced p50 / p99 "
             "| mean-only p50 / p99 | repeat spread p99 |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        s = spread[(r.config, r.rate)]
        triton = (" / ".join(ms(r.triton[k]) for k in ("p50", "p99") if k in r.triton)
                  or "-")
        lines.append(
            f"| {r.config} | {r.rate:g} | {r.repeat} | {r.mean_batch:.2f} | "
            + share(r.prefetch) + " | "
            + " / ".join(ms(r.measured[k]) for k in LEVELS) + f" | {triton} | "
            + " / ".join(pct(r.error("calibrated", k)) for k in LEVELS)
            + f" | {pct(r.error('simulated', 'p99'))} | "
            + f"{pct(r.error('untraced', 'p50'))} / {pct(r.error('untraced', 'p99'))} | "
            + f"{pct(r.error('mean_only', 'p50'))} / {pct(r.error('mean_only', 'p99'))} | "
            + ("-" if s is None else f"{s:.1%}") + (" (overloaded)" if r.overloaded else "")
            + " |")
    steady = [r for r in rows if not r.overloaded]
    agreed = [r for r in steady if (spread[(r.config, r.rate)] or 0.0) <= 0.10]
    if len(steady) < len(rows):
        lines += ["", f"{len(rows) - len(steady)} run(s) overloaded the server (the offered "
                      "rate above the calibrated capacity, or the throughput 5% short of it) "
                      "and are left out below."]
    lines += ["", f"{len(agreed)} of {len(steady)} steady runs have repeats that agree within "
                  "10% on p99 (a run without a repeat counts as agreeing)."]
    if agreed:
        lines += ["", "| errors over those runs | p50 median / worst | p99 median / worst |",
                  "|---|---|---|"]
        for which, label in (("calibrated", "calibrated prediction"),
                             ("simulated", "calibrated simulation"),
                             ("untraced", "untraced prediction (trace withheld; the "
                                          "gap fitted to the statistics' queue time, the "
                                          "share calibrate's constant)"),
                             ("mean_only", "mean-only prediction")):
            cells = []
            for key in ("p50", "p99"):
                errs = [e for e in (r.error(which, key) for r in agreed) if not math.isnan(e)]
                if not errs:
                    cells.append("-")
                    continue
                worst = max(errs, key=abs)
                cells.append(f"{statistics.median(abs(e) for e in errs):.1%} / {pct(worst)}")
            lines.append(f"| {label} | {cells[0]} | {cells[1]} |")
        within = [r for r in agreed if abs(r.error("calibrated", "p50")) <= TARGET["p50"]
                  and abs(r.error("calibrated", "p99")) <= TARGET["p99"]]
        lines += ["", f"{len(within)} of those {len(agreed)} runs have the calibrated "
                      f"prediction within {TARGET['p50']:.0%} on p50 and {TARGET['p99']:.0%} "
                      f"on p99."]
        missed = [r for r in agreed if r not in within]
        if missed:
            lines += ["", "The others, with the calibrated node's utilization at the measured "
                          "rate (docs/triton-server.md says what is known of why):", "",
                      "| config | rate | repeat | calibrated p50 | calibrated p99 | "
                      "utilization | prefetch |", "|---|---|---|---|---|---|---|"]
            lines += [f"| {r.config} | {r.rate:g} | {r.repeat} | "
                      f"{pct(r.error('calibrated', 'p50'))} | "
                      f"{pct(r.error('calibrated', 'p99'))} | {r.utilization:.3f} | "
                      f"{share(r.prefetch)} |"
                      for r in missed]
    if not steady:
        return "\n".join(lines) + "\n"
    lines += ["", "Median |error| over all steady runs, by the calibrated node's utilization:",
              "", "| utilization | runs | calibrated p50 | calibrated p99 | simulated p99 | "
                  "untraced p50 | untraced p99 | mean-only p99 |",
              "|---|---|---|---|---|---|---|---|"]
    for low, high, label in BANDS:
        band = [r for r in steady if low <= r.utilization < high]
        if not band:
            continue
        def med(which, key):
            errs = [abs(e) for e in (r.error(which, key) for r in band) if not math.isnan(e)]
            return f"{statistics.median(errs):.1%}" if errs else "-"
        lines.append(f"| {label} | {len(band)} | {med('calibrated', 'p50')} | "
                     f"{med('calibrated', 'p99')} | {med('simulated', 'p99')} | "
                     f"{med('untraced', 'p50')} | {med('untraced', 'p99')} | "
                     f"{med('mean_only', 'p99')} |")
    return "\n".join(lines) + "\n"
