"""Triton's request trace (``--trace-config level=TIMESTAMPS``): every batch execution and
every request's time outside the batcher.

The trace file is one JSON list of events: per traced request an entry naming its model,
then its timestamps (ns): REQUEST_START, QUEUE_START, COMPUTE_START, COMPUTE_INPUT_END,
COMPUTE_OUTPUT_START, COMPUTE_END, REQUEST_END, and from the gRPC front end
GRPC_WAITREAD_END (request read), INFER_RESPONSE_COMPLETE and GRPC_SEND_END (response sent).
The requests of one batch share COMPUTE_START and COMPUTE_END: grouping by them gives the
batch, its size (requests of one item each) and its execution time, the time the instance
was held.

A request's time outside the batcher is its span in the server (request read to response
sent, or REQUEST_START to REQUEST_END without the gRPC events) less its queue wait and its
batch's execution: parsing, scheduling and sending the response. It can be below zero by a
little: the Python backend sends the responses before the execution ends.

Examples
--------
>>> def request(i, queued, start, end, k_id):
...     stamps = {"QUEUE_START": queued, "COMPUTE_START": start, "COMPUTE_END": end,
...               "REQUEST_START": queued - 10_000, "REQUEST_END": end + 40_000}
...     return [{"id": i, "model_name": "m", "model_version": 1}] + [
...         {"id": i, "timestamps": [{"name": n, "ns": ns}]} for n, ns in stamps.items()]
>>> events = (request(1, 0, 100, 2_000_100, 0) + request(2, 50, 2_100_000, 4_700_000, 1)
...           + request(3, 60, 2_100_000, 4_700_000, 1) + request(4, 2_200_000, 4_800_000,
...           6_900_000, 2))
>>> t = read_trace(events, edges=False)
>>> t.sizes.tolist(), t.executions.tolist()
([1, 2, 1], [0.002, 0.0026, 0.0021])
>>> t.samples()
{1: [0.002, 0.0021], 2: [0.0026]}
>>> t.samples(skip=1)                # without the first batch
{1: [0.0021], 2: [0.0026]}
>>> t.outside.round(6).tolist()
[5e-05, 5e-05, 5e-05, 5e-05]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import read_json

__all__ = ["TritonTrace", "read_trace"]

NEEDED = ("QUEUE_START", "COMPUTE_START", "COMPUTE_END")


@dataclass(frozen=True, eq=False)
class TritonTrace:
    """The batches and requests of one model's trace, in execution order.

    Attributes
    ----------
    model : str
    starts : ndarray
        Each batch's COMPUTE_START, seconds from the first batch's.
    sizes : ndarray of int
        Requests in each batch.
    executions : ndarray
        Each batch's execution time (COMPUTE_START to COMPUTE_END), seconds.
    waits : ndarray
        Each request's queue wait (QUEUE_START to COMPUTE_START), seconds.
    outside : ndarray
        Each request's time in the server outside queue and execution, seconds.
    queued : ndarray
        Each request's QUEUE_START, seconds from the first batch's COMPUTE_START, in the
        order of ``waits``.
    batch : ndarray of int
        Each request's batch (an index into ``starts``), in the order of ``waits``.
    dropped : int
        Batches left out at the edges of the traced window (see :func:`read_trace`).
    """

    model: str
    starts: np.ndarray
    sizes: np.ndarray
    executions: np.ndarray
    waits: np.ndarray
    outside: np.ndarray
    queued: np.ndarray
    batch: np.ndarray
    dropped: int

    def samples(self, skip: int = 0) -> dict:
        """Execution times by batch size, in execution order: ``ServiceTime.empirical``'s
        input. ``skip`` leaves out the first batches (an instance's first execution on a
        fresh server is a cold start)."""
        sizes, executions = self.sizes[skip:], self.executions[skip:]
        return {int(k): executions[sizes == k].round(12).tolist() for k in np.unique(sizes)}


def _events(source) -> tuple[list, str]:
    if isinstance(source, list):
        return source, "<events>"
    return read_json(source, "the trace", "give the file Triton writes with --trace-config "
                                          "triton,file=..."), str(source)


def read_trace(source, model: str | None = None, *, edges: bool = True,
               version: str | int | None = None) -> TritonTrace:
    """Batches and per-request times from a Triton trace file (JSON, or gzipped JSON).

    Parameters
    ----------
    source : path or list
        The trace file (``.gz`` is read gzipped) or its parsed events.
    model : str, optional
        Which model, where the trace holds several.
    edges : bool
        Drop the first and the last batch (default): a trace switched on or off, or cut by
        its count, while requests wait may miss some of their requests, so those batches'
        sizes are not known.
    version : str or int, optional
        Which version of the model, where the trace holds several (each request names its
        ``model_version``).

    Returns
    -------
    TritonTrace
    """
    from .stats import checked_version

    version = checked_version(version)
    events, where = _events(source)
    requests: dict = {}
    names: dict = {}
    versions: dict = {}
    try:
        for event in events:
            stamps = requests.setdefault(event["id"], {})
            if "model_name" in event:
                names[event["id"]] = event["model_name"]
                versions[event["id"]] = str(event.get("model_version", ""))
            for stamp in event.get("timestamps", ()):
                stamps[stamp["name"]] = int(stamp["ns"])
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{where}: not a Triton trace (a list of events with id and "
                         f"timestamps)") from None
    models = sorted(set(names.values()))
    if model is None and len(models) > 1:
        raise ValueError(f"{where}: the trace holds models {', '.join(models)}: pass model=")
    chosen = model or (models[0] if models else None)
    if chosen not in models:
        raise ValueError(f"{where}: no requests of model {chosen!r} (the trace holds "
                         f"{', '.join(models) or 'none'})")
    served = sorted({versions[i] for i in names if names[i] == chosen})
    if version is None and len(served) > 1:
        raise ValueError(f"{where}: the trace holds versions {', '.join(served)} of "
                         f"{chosen!r}: pass version=")
    if version is not None and version not in served:
        raise ValueError(f"{where}: no requests of {chosen!r} version {version} (the trace "
                         f"holds versions {', '.join(served) or 'none'})")
    complete = [s for i, s in requests.items()
                if names.get(i) == chosen and (version is None or versions[i] == version)
                and all(n in s for n in NEEDED)]
    if not complete:
        raise ValueError(f"{where}: no request of {chosen!r} has {', '.join(NEEDED)}: trace "
                         f"with level=TIMESTAMPS")
    batches: dict = {}
    for s in complete:
        batches.setdefault((s["COMPUTE_START"], s["COMPUTE_END"]), []).append(s)
    order = sorted(batches)
    dropped = 0
    if edges and len(order) > 2:
        order, dropped = order[1:-1], 2
    kept = [s for key in order for s in batches[key]]
    first = order[0][0]

    def span(s):
        begin = s.get("GRPC_WAITREAD_END", s.get("REQUEST_START", s["QUEUE_START"]))
        end = s.get("GRPC_SEND_END", s.get("REQUEST_END", s["COMPUTE_END"]))
        return end - begin

    return TritonTrace(
        model=chosen,
        starts=np.array([(a - first) / 1e9 for a, _ in order]),
        sizes=np.array([len(batches[key]) for key in order]),
        executions=np.array([(b - a) / 1e9 for a, b in order]),
        waits=np.array([(s["COMPUTE_START"] - s["QUEUE_START"]) / 1e9 for s in kept]),
        outside=np.array([(span(s) - (s["COMPUTE_END"] - s["QUEUE_START"])) / 1e9
                          for s in kept]),
        queued=np.array([(s["QUEUE_START"] - first) / 1e9 for s in kept]),
        batch=np.repeat(np.arange(len(order)), [len(batches[key]) for key in order]),
        dropped=dropped)
