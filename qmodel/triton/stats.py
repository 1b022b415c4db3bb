"""Triton's statistics API: what a model executed between two snapshots.

``GET /v2/models/<model>/stats`` returns cumulative counters: per request (success, queue,
compute_input, compute_infer, compute_output: a count and total nanoseconds) and, in
``batch_stats``, per executed batch size (executions and the total time of each compute
phase). Two snapshots, before and after a measurement, give the window's executions by batch
size and their mean times: the measured S(k) of a real deployment.

Examples
--------
>>> def snapshot(n1, ns1, n4, ns4):
...     phase = lambda n, ns: {"count": n, "ns": ns}
...     sizes = [{"batch_size": k, "compute_input": phase(n, n * 50_000),
...               "compute_infer": phase(n, ns), "compute_output": phase(n, n * 300_000)}
...              for k, n, ns in ((1, n1, ns1), (4, n4, ns4))]
...     return {"model_stats": [{"name": "m", "version": "1", "inference_count": n1 + 4 * n4,
...             "execution_count": n1 + n4, "inference_stats": {
...                 "success": phase(n1 + 4 * n4, 0), "queue": phase(n1 + 4 * n4, 0)},
...             "batch_stats": sizes}]}
>>> s = read_stats(snapshot(10, 25_000_000, 5, 20_000_000),
...                snapshot(110, 275_000_000, 105, 420_000_000))
>>> s.executions, s.compute_infer
({1: 100, 4: 100}, {1: 0.0025, 4: 0.004})
>>> s.mean_batch_size, {k: round(v, 9) for k, v in s.batch_time().items()}
(2.5, {1: 0.00285, 4: 0.00435})
"""

from __future__ import annotations

import gzip
import json
import numbers
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..checks import read_json
from .http import fetch, is_url

__all__ = ["TritonStats", "read_stats", "StatsSeries", "read_stats_series"]

PHASES = ("compute_input", "compute_infer", "compute_output")


@dataclass(frozen=True)
class TritonStats:
    """What one model executed between two statistics snapshots.

    Attributes
    ----------
    model, version : str
    executions : dict of int to int
        Batch executions by batch size.
    compute_input, compute_infer, compute_output : dict of int to float
        Mean seconds per execution of each phase, by batch size.
    requests : int
        Requests that succeeded.
    queue : float
        Mean seconds a request waited in the queue (before its batch started).
    request_compute_infer : float
        Mean compute_infer seconds per request (its batch's time: request-weighted).
    """

    model: str
    version: str
    executions: dict
    compute_input: dict
    compute_infer: dict
    compute_output: dict
    requests: int
    queue: float
    request_compute_infer: float

    @property
    def mean_batch_size(self) -> float:
        """Requests per execution in the window."""
        total = sum(self.executions.values())
        return sum(k * n for k, n in self.executions.items()) / total

    def batch_time(self, phases=PHASES) -> dict:
        """Mean seconds per execution summed over ``phases``, by batch size: what occupies an
        instance for a batch (input, infer and output by default)."""
        return {k: sum(getattr(self, p)[k] for p in phases) for k in self.executions}


def _snapshot(source, which: str) -> dict:
    """A stats snapshot from a dict, a JSON file, or an http URL."""
    if isinstance(source, dict):
        return source
    if is_url(source):
        body = fetch(source, f"read_stats: {which} snapshot")
        try:
            return json.loads(body)
        except ValueError as err:
            raise ValueError(f"read_stats: {which} snapshot {source} is not JSON: "
                             f"{err}") from None
    if isinstance(source, (str, Path)):
        return read_json(source, f"the {which} statistics snapshot",
                         "give the body of GET /v2/models/<model>/stats")
    raise ValueError(f"read_stats: the {which} snapshot must be a dict, a JSON file path or "
                     f"an http URL of /v2/models/<model>/stats, got {type(source).__name__}")


def _model_entry(snapshot: dict, model: str | None, where: str,
                 version: str | None = None) -> dict:
    try:
        entries = snapshot["model_stats"]
        names = [(e["name"], str(e.get("version", ""))) for e in entries]
    except (KeyError, TypeError):
        raise ValueError(f"{where}: no 'model_stats' list of models: give the body of "
                         f"GET /v2/models/<model>/stats") from None
    return entries[chosen_model(names, model, version, where, "model statistics", "for",
                                "the snapshot has")]


def chosen_model(pairs: list, model: str | None, version: str | None, where: str,
                 noun: str, preposition: str, listing: str) -> int:
    """The index of the one (name, version) of ``pairs`` that ``model`` and ``version``
    (None: any) name, or ValueError saying which fix to make, e.g. "before: no model
    statistics for 'm'; the snapshot has m (version 1): pass model=" (``where``, ``noun``,
    ``preposition`` and ``listing`` are its words)."""
    chosen = [i for i, (name, v) in enumerate(pairs)
              if (model is None or name == model) and (version is None or v == version)]
    if len(chosen) == 1:
        return chosen[0]
    if len(chosen) > 1 and len({pairs[i][0] for i in chosen}) == 1:
        fix = "pass version="             # one model, several versions
    elif version is not None:
        fix = "pass the model= and version= of one listed"
    else:
        fix = "pass model="
    wanted = (f"{preposition} {model!r}" if model else "to choose from") + (
        f" version {version!r}" if version is not None else "")
    listed = ", ".join(f"{n} (version {v})" for n, v in pairs) or "none"
    raise ValueError(f"{where}: {'no' if not chosen else 'several'} {noun} {wanted}; "
                     f"{listing} {listed}: {fix}")


def checked_version(version) -> str | None:
    """A model version as Triton's reports spell it (a string of digits), or None."""
    if version is None:
        return None
    text = str(version).strip()
    if isinstance(version, bool) or not isinstance(version, (str, numbers.Integral)) or \
            not (text.isascii() and text.isdigit()):
        raise ValueError(f"version={version!r}: give the model version as a whole number, "
                         f"e.g. version=2 (Triton's versions are the model's numbered "
                         f"folders)")
    return str(int(text))


def _count_ns(entry: dict, key: str, where: str) -> tuple[int, int]:
    try:
        part = entry[key]
        return int(part.get("count", 0)), int(part.get("ns", 0))
    except (KeyError, TypeError, ValueError, AttributeError):
        raise ValueError(f"{where}: {key} has no count and ns") from None


def read_stats(before, after, model: str | None = None,
               version: str | int | None = None) -> TritonStats:
    """The executions and times of one model between two ``/v2/models/<m>/stats`` snapshots.

    Parameters
    ----------
    before, after : dict, path or str
        The snapshots: parsed JSON, JSON files, or http URLs to fetch.
    model : str, optional
        Which model, where a snapshot holds several.
    version : str or int, optional
        Which version of it, where the snapshot holds several (Triton serves every version
        its version policy names, each with statistics of its own).

    Returns
    -------
    TritonStats

    Raises
    ------
    ValueError
        A snapshot that is not Triton's statistics, or counts that fall between the two
        (snapshots of two server runs).
    """
    version = checked_version(version)
    first = _model_entry(_snapshot(before, "before"), model, "before", version)
    last = _model_entry(_snapshot(after, "after"), model, "after", version)
    name = last["name"]

    def delta(a: dict, b: dict, key: str, where: str) -> tuple[int, int]:
        n0, t0 = _count_ns(a, key, f"before: {where}")
        n1, t1 = _count_ns(b, key, f"after: {where}")
        if n1 < n0 or t1 < t0:
            raise ValueError(f"read_stats: {where}.{key} fell from {n0} to {n1} between the "
                             f"snapshots of {name!r}: take both from one server run, before "
                             f"and after")
        return n1 - n0, t1 - t0

    # the request counters first: snapshots in the wrong order show there
    inference_first = first.get("inference_stats", {})
    inference_last = last.get("inference_stats", {})
    requests, _ = delta(inference_first, inference_last, "success", "inference_stats")
    queued, queue_ns = delta(inference_first, inference_last, "queue", "inference_stats")
    infer_n, infer_ns = delta(inference_first, inference_last, "compute_infer",
                              "inference_stats") if "compute_infer" in inference_last \
        else (0, 0)
    sizes_before = {int(s["batch_size"]): s for s in first.get("batch_stats", [])}
    executions, means = {}, {p: {} for p in PHASES}
    for size in last.get("batch_stats", []):
        k = int(size["batch_size"])
        old = sizes_before.get(k, {p: {"count": 0, "ns": 0} for p in PHASES})
        count, _ = delta(old, size, "compute_infer", f"batch_stats[{k}]")
        if count == 0:
            continue
        executions[k] = count
        for p in PHASES:
            n, ns = delta(old, size, p, f"batch_stats[{k}]")
            means[p][k] = ns / n * 1e-9 if n else 0.0
    if not executions:
        raise ValueError(f"read_stats: {name!r} executed no batch between the snapshots: "
                         f"take them before and after the load")
    order = sorted(executions)
    return TritonStats(
        model=name, version=str(last.get("version", "")),
        executions={k: executions[k] for k in order},
        compute_input={k: means["compute_input"][k] for k in order},
        compute_infer={k: means["compute_infer"][k] for k in order},
        compute_output={k: means["compute_output"][k] for k in order},
        requests=requests, queue=queue_ns / queued * 1e-9 if queued else 0.0,
        request_compute_infer=infer_ns / infer_n * 1e-9 if infer_n else 0.0)


@dataclass(frozen=True)
class StatsSeries:
    """A model's statistics polled during a run, window by window.

    Attributes
    ----------
    seconds : numpy array
        The polls' times (seconds, any origin), increasing.
    sizes : tuple of int
        The batch sizes executed over the series.
    counts : numpy array (windows, sizes)
        Executions of each size that ended between successive polls.
    totals : numpy array (windows, sizes)
        Their summed compute_input + compute_infer + compute_output seconds.
    first, last : dict
        The first and last snapshots (the statistics over the whole series).
    """

    seconds: np.ndarray
    sizes: tuple
    counts: np.ndarray
    totals: np.ndarray
    first: dict
    last: dict

    @property
    def period(self) -> float:
        """The median seconds between polls."""
        return float(np.median(np.diff(self.seconds)))


def read_stats_series(series, model: str | None = None,
                      version: str | int | None = None) -> StatsSeries:
    """Statistics snapshots polled during a run, as windows of executions by batch size.

    Parameters
    ----------
    series : list of (seconds, snapshot), or a path
        Each poll's time and the body of ``GET /v2/models/<model>/stats`` then, in time
        order; or a JSON file (``.gz`` read compressed) holding ``{"seconds": [...],
        "snapshots": [...]}`` (:func:`qmodel.triton.check.record_run` with ``poll=`` writes
        one as stats_series.json.gz).
    model, version : optional
        Which model (and version), where a snapshot holds several.

    Examples
    --------
    >>> def snap(n, ns):
    ...     phase = {"count": n, "ns": ns}
    ...     return {"model_stats": [{"name": "m", "version": "1", "batch_stats": [
    ...         {"batch_size": 1, "compute_input": phase, "compute_infer": phase,
    ...          "compute_output": {"count": n, "ns": 0}}]}]}
    >>> s = read_stats_series([(0.0, snap(0, 0)), (0.1, snap(30, 30_000_000)),
    ...                        (0.2, snap(55, 60_000_000))])
    >>> s.sizes, s.counts[:, 0].tolist(), (s.totals[:, 0] * 1e3).round(3).tolist()
    ((1,), [30.0, 25.0], [60.0, 60.0])
    >>> round(s.period, 3)
    0.1
    """
    version = checked_version(version)
    if isinstance(series, (str, Path)):
        path = Path(series)
        try:
            opener = gzip.open if path.suffix == ".gz" else open
            with opener(path, "rt") as handle:
                data = json.load(handle)
            seconds, snapshots = data["seconds"], data["snapshots"]
            if len(seconds) != len(snapshots):
                raise ValueError(f"{len(seconds)} seconds for {len(snapshots)} snapshots")
            pairs = list(zip(seconds, snapshots))
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ValueError(f"read_stats_series: {path} is not a statistics series (a JSON "
                             f"object with 'seconds' and 'snapshots' lists of one length): "
                             f"{err}") from None
    else:
        try:
            pairs = [(float(t), snapshot) for t, snapshot in series]
        except (TypeError, ValueError):
            raise ValueError("read_stats_series takes a list of (seconds, snapshot) pairs or "
                             "the path of a stats_series.json(.gz) file") from None
    if len(pairs) < 2:
        raise ValueError(f"read_stats_series: {len(pairs)} snapshot(s); a series needs at "
                         f"least two polls (one window)")
    try:
        seconds = np.array([float(t) for t, _ in pairs])
    except (TypeError, ValueError):
        raise ValueError("read_stats_series: each poll's seconds must be a number") from None
    if not np.all(np.isfinite(seconds)) or np.any(np.diff(seconds) <= 0):
        raise ValueError("read_stats_series: the polls' seconds must be finite and increase")
    first = _model_entry(pairs[0][1], model, "series snapshot 0", version)
    # every snapshot of the one model (and version) the first names
    name, held = first["name"], str(first.get("version", ""))
    entries = [first]
    for i, (_, snapshot) in enumerate(pairs[1:], start=1):
        try:
            entries.append(_model_entry(snapshot, name, f"series snapshot {i}",
                                        held if held else None))
        except ValueError:
            raise ValueError(f"read_stats_series: snapshot {i} holds no statistics of "
                             f"{name!r} (version {held or 'unnamed'}), which snapshot 0 "
                             f"holds: take every snapshot of a series from one server run, "
                             f"and pass model= (and version=) where it serves several") from None
    try:
        sizes = sorted({int(b["batch_size"]) for e in entries
                        for b in e.get("batch_stats", [])})
    except (KeyError, TypeError, ValueError, AttributeError):
        raise ValueError("read_stats_series: a snapshot's batch_stats entry has no whole "
                         "batch_size: give the bodies of GET /v2/models/<model>/stats") from None
    column = {k: j for j, k in enumerate(sizes)}
    executions = np.zeros((len(entries), len(sizes)))
    time_ns = np.zeros((len(entries), len(sizes)))
    for i, entry in enumerate(entries):
        for b in entry.get("batch_stats", []):
            k = int(b["batch_size"])
            where = f"series snapshot {i}: batch_stats[{k}]"
            executions[i, column[k]] = _count_ns(b, "compute_infer", where)[0]
            time_ns[i, column[k]] = sum(_count_ns(b, p, where)[1] for p in PHASES)
    counts, totals = np.diff(executions, axis=0), np.diff(time_ns, axis=0) * 1e-9
    if np.any(counts < 0) or np.any(totals < 0):
        i = int(np.flatnonzero((counts < 0).any(axis=1) | (totals < 0).any(axis=1))[0])
        raise ValueError(f"read_stats_series: the counters fell between snapshots {i} and "
                         f"{i + 1}: take the series from one server run, in time order")
    return StatsSeries(seconds, tuple(sizes), counts, totals, pairs[0][1], pairs[-1][1])
