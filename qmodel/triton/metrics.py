"""Triton's Prometheus metrics: what a model served between two scrapes of ``/metrics``.

The counters are cumulative, so two scrapes give a window: requests, batch executions (their
ratio is the mean batch size) and the summed request, queue and compute durations. The
compute durations are request-weighted: each request adds its whole batch's time. With
``--metrics-config summary_latencies=true`` the server also keeps summaries whose quantiles
(p50 to p99.9, over its recent requests) are read from the second scrape. The text is parsed
by prometheus_client's parser (``pip install 'qmodel[triton]'``).

Examples
--------
>>> scrape = lambda n, execs, queue_us: (
...     f'nv_inference_request_success{{model="m",version="1"}} {n}\\n'
...     f'nv_inference_count{{model="m",version="1"}} {n}\\n'
...     f'nv_inference_exec_count{{model="m",version="1"}} {execs}\\n'
...     f'nv_inference_queue_duration_us{{model="m",version="1"}} {queue_us}\\n')
>>> m = read_metrics(scrape(0, 0, 0), scrape(1000, 400, 2_000_000))
>>> m.requests, m.executions, m.mean_batch_size, m.queue
(1000, 400, 2.5, 0.002)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .http import fetch, is_url
from .stats import checked_version, chosen_model

__all__ = ["TritonMetrics", "read_metrics"]

COUNTERS = {"requests": "nv_inference_request_success", "inferences": "nv_inference_count",
            "executions": "nv_inference_exec_count"}
DURATIONS = {"request": "nv_inference_request_duration_us",
             "queue": "nv_inference_queue_duration_us",
             "compute_input": "nv_inference_compute_input_duration_us",
             "compute_infer": "nv_inference_compute_infer_duration_us",
             "compute_output": "nv_inference_compute_output_duration_us"}
SUMMARIES = {"request": "nv_inference_request_summary_us",
             "queue": "nv_inference_queue_summary_us",
             "compute_input": "nv_inference_compute_input_summary_us",
             "compute_infer": "nv_inference_compute_infer_summary_us",
             "compute_output": "nv_inference_compute_output_summary_us"}


@dataclass(frozen=True)
class TritonMetrics:
    """One model's window between two metric scrapes.

    Attributes
    ----------
    model, version : str
    requests, failures, inferences, executions : int
        Successful requests, failed ones (all reasons), inferences (batch items) and batch
        executions in the window.
    request, queue, compute_input, compute_infer, compute_output : float or None
        Mean seconds per successful request (None where the server does not report it).
    quantiles : dict
        Summary quantiles in seconds as of the second scrape, ``{"request": {0.5: ..., 0.99:
        ...}, "queue": {...}, ...}``; empty without summary latencies.
    """

    model: str
    version: str
    requests: int
    failures: int
    inferences: int
    executions: int
    request: float | None
    queue: float | None
    compute_input: float | None
    compute_infer: float | None
    compute_output: float | None
    quantiles: dict = field(default_factory=dict)

    @property
    def mean_batch_size(self) -> float:
        """Inferences per execution in the window."""
        return self.inferences / self.executions


def _text(source, which: str) -> tuple[str, str]:
    if isinstance(source, bytes):
        source = source.decode()
    if is_url(source):
        return fetch(source, f"read_metrics: {which} scrape").decode(), source
    if isinstance(source, str) and "\n" in source:
        return source, f"<{which} text>"
    if isinstance(source, (str, Path)):
        try:
            return Path(source).read_text(), str(source)
        except OSError as err:
            raise ValueError(f"read_metrics: {which} scrape {source}: {err}") from None
    raise ValueError(f"read_metrics: the {which} scrape must be Prometheus text, a file path "
                     f"or an http URL of the metrics endpoint, got {type(source).__name__}")


def _samples(text: str, where: str) -> list:
    """(name, labels, value) of every sample, parsed by prometheus_client."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        raise ImportError("read_metrics parses Prometheus text with prometheus_client, which "
                          "is not installed; install it with: pip install 'qmodel[triton]'") \
            from None
    try:
        # the parser names a counter's samples <name>_total; Triton's text does not
        return [(family.name if s.name == family.name + "_total" else s.name, s.labels, s.value)
                for family in text_string_to_metric_families(text) for s in family.samples]
    except ValueError as err:
        line = _bad_line(text)
        place = f"{where}:{line}" if line else where
        raise ValueError(f"{place}: not Prometheus text ({err}); give the body of the "
                         f"server's /metrics") from None


def _bad_line(text: str) -> int:
    """The first line (from 1) that prometheus_client cannot parse, or 0."""
    from prometheus_client.parser import text_string_to_metric_families
    for number, line in enumerate(text.splitlines(), start=1):
        try:
            list(text_string_to_metric_families(line + "\n"))
        except ValueError:
            return number
    return 0


def read_metrics(before, after, model: str | None = None,
                 version: str | int | None = None) -> TritonMetrics:
    """One model's requests, executions and mean durations between two scrapes of Triton's
    metrics endpoint.

    Parameters
    ----------
    before, after : str or path
        Prometheus text, files holding it, or http URLs to scrape.
    model : str, optional
        Which model, where the server serves several.
    version : str or int, optional
        Which version of it, where the server serves several.

    Returns
    -------
    TritonMetrics
    """
    first_text, first_where = _text(before, "before")
    last_text, last_where = _text(after, "after")
    first = _samples(first_text, first_where)
    last = _samples(last_text, last_where)
    models = sorted({(labels["model"], labels.get("version", "")) for name, labels, _ in last
                     if name == COUNTERS["requests"] and "model" in labels})
    version = checked_version(version)
    name, version = models[chosen_model(models, model, version, last_where, "models",
                                        "named", "the scrape has")]

    def total(samples, metric: str, **match) -> float | None:
        values = [v for n, labels, v in samples
                  if n == metric and labels.get("model") == name
                  and labels.get("version", "") == version
                  and all(labels.get(k) == w for k, w in match.items())]
        return sum(values) if values else None

    def window(metric: str) -> float | None:
        end = total(last, metric)
        if end is None:
            return None
        start = total(first, metric) or 0.0
        if end < start:
            raise ValueError(f"read_metrics: {metric} of {name!r} fell from {start:g} to "
                             f"{end:g} between the scrapes: take both from one server run, "
                             f"before and after")
        return end - start

    counts = {key: window(metric) for key, metric in COUNTERS.items()}
    if not counts["requests"] or not counts["executions"]:
        raise ValueError(f"read_metrics: {name!r} served no request between the scrapes "
                         f"({last_where}): take them before and after the load")
    failures = window("nv_inference_request_failure") or 0.0
    means = {}
    for key, metric in DURATIONS.items():
        summed = window(metric)
        means[key] = None if summed is None else summed / 1e6 / counts["requests"]
    quantiles = {}
    for key, metric in SUMMARIES.items():
        found = {float(labels["quantile"]): v / 1e6 for n, labels, v in last
                 if n == metric and "quantile" in labels and labels.get("model") == name
                 and labels.get("version", "") == version and v == v}   # NaN: no data yet
        if found:
            quantiles[key] = dict(sorted(found.items()))
    return TritonMetrics(model=name, version=version, requests=int(counts["requests"]),
                         failures=int(failures), inferences=int(counts["inferences"] or 0),
                         executions=int(counts["executions"]), quantiles=quantiles, **means)
