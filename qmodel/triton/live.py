"""Sampling a running Triton server over a window, as a user would against production.

:func:`sample_server` reads a model's configuration from the server (``GET
/v2/models/<model>/config``, JSON, turned into config.pbtxt text), then its statistics
(``GET /v2/models/<model>/stats``) and, where given, a metrics endpoint (Prometheus text)
before and after a window of the server's own traffic. Nothing is sent to the model: the
window measures what the server is doing. :func:`qmodel.triton.calibrate` takes the result
with ``calibrate(url=..., metrics_url=..., window=...)``.

Examples
--------
>>> normal_url("localhost:8000")
'http://localhost:8000'
>>> normal_url("https://triton.internal/")
'https://triton.internal'
"""

from __future__ import annotations

import json
import math
import numbers
import time
from dataclasses import dataclass
from urllib.parse import quote

from .http import fetch
from .stats import checked_version

__all__ = ["ServerSample", "sample_server", "config_text", "normal_url"]

# A window shorter than this sees too few executions to calibrate from on most servers.
SHORTEST_WINDOW = 1.0
# the shortest interval between statistics polls (each is an HTTP request to the server)
SHORTEST_POLL = 0.01
# waiting and timing the window (replaced in tests)
_sleep = time.sleep
_clock = time.monotonic


@dataclass(frozen=True)
class ServerSample:
    """What a server reported about one model over a window.

    Attributes
    ----------
    url : str
        The server's HTTP endpoint.
    model : str
    config : str
        The model's configuration as config.pbtxt text (from the server's JSON).
    stats : (dict, dict)
        The statistics before and after the window.
    metrics : (str, str) or None
        The metrics scrapes before and after, where a metrics URL was given.
    window : float
        Seconds between the two snapshots, as timed here.
    version : str or None
        The model version sampled, where one was named.
    series : tuple of (seconds, dict) or None
        The statistics polled during the window, the first and last snapshots included
        (seconds from the first), where polling was asked for.
    """

    url: str
    model: str
    config: str
    stats: tuple
    metrics: tuple | None
    window: float
    version: str | None = None
    series: tuple | None = None


def normal_url(url: str) -> str:
    """``url`` with a scheme (http:// where it has none) and no trailing slash."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"url={url!r}: give the server's HTTP endpoint, e.g. localhost:8000")
    url = url.strip().rstrip("/")
    if "?" in url or "#" in url:
        raise ValueError(f"url={url!r}: give the endpoint without a query or fragment, e.g. "
                         f"localhost:8000")
    scheme, sep, rest = url.partition("://")
    if sep and scheme.lower() in ("http", "https"):
        return f"{scheme.lower()}://{rest}"
    return f"http://{url}"


def config_text(config: dict) -> str:
    """The server's JSON model configuration as config.pbtxt text.

    Examples
    --------
    >>> print(config_text({"name": "m", "max_batch_size": 8,
    ...                    "dynamic_batching": {"max_queue_delay_microseconds": "500"}}))
    name: "m"
    max_batch_size: 8
    dynamic_batching {
      max_queue_delay_microseconds: 500
    }
    <BLANKLINE>
    """
    from google.protobuf import json_format

    from .pbtxt import proto

    text_format, model_config_pb2 = proto()
    message = model_config_pb2.ModelConfig()
    try:
        json_format.ParseDict(config, message, ignore_unknown_fields=True)
    except json_format.ParseError as err:
        raise ValueError(f"the server's model configuration is not a Triton ModelConfig: "
                         f"{err}") from None
    return text_format.MessageToString(message)


def _json(url: str, what: str) -> dict:
    body = fetch(url, what)
    try:
        return json.loads(body)
    except ValueError as err:
        raise ValueError(f"{what} {url} is not JSON: {err}") from None


def _served_model(url: str) -> str:
    """The one model the server has run inferences on, or a ValueError naming them."""
    stats = _json(f"{url}/v2/models/stats", "the server's statistics")
    entries = stats.get("model_stats", [])
    names = sorted({e.get("name", "") for e in entries})
    busy = sorted({e.get("name", "") for e in entries
                   if int(e.get("inference_count", 0) or 0) > 0})
    if len(busy) == 1:
        return busy[0]
    if len(names) == 1:
        return names[0]
    if not names:
        raise ValueError(f"the server at {url} serves no model: load one, or check the URL")
    raise ValueError(f"the server at {url} serves {len(names)} models "
                     f"({', '.join(names) or 'none'}): name one with model=")


def _versions_note(url: str, model: str) -> str:
    """Which versions of ``model`` the server reports, in words (for an error message)."""
    try:
        entries = _json(f"{url}/v2/models/stats", "the server's statistics")["model_stats"]
        versions = sorted({str(e.get("version", "")) for e in entries
                           if e.get("name") == model} - {""}, key=lambda v: (len(v), v))
    except (ValueError, KeyError, TypeError, AttributeError):
        return "the server's statistics could not say which versions it serves"
    if not versions:
        return f"the server reports no version of {model!r}"
    return f"the server serves {model!r} at versions {', '.join(versions)}"


def sample_server(url: str, model: str | None = None, *, version: str | int | None = None,
                  metrics_url: str | None = None, window: float = 60.0,
                  poll: float | None = None) -> ServerSample:
    """A model's configuration, and its statistics and metrics around ``window`` seconds of
    the server's own traffic.

    Parameters
    ----------
    url : str
        The server's HTTP endpoint, e.g. ``"localhost:8000"``.
    model : str, optional
        Which model; by default the one the server has run inferences on.
    version : str or int, optional
        Which version of it (``GET /v2/models/<model>/versions/<version>/...``), where the
        server serves several; without it a model served at several versions is refused,
        naming them.
    metrics_url : str, optional
        The metrics endpoint, e.g. ``"localhost:8002/metrics"`` (Triton's default port);
        without it no metrics are read (no jitter from summary quantiles, no time outside
        the batcher).
    window : float
        Seconds between the snapshots (at least 1; a minute or more on a server of
        moderate load, so that every common batch size runs often).
    poll : float, optional
        Seconds between statistics polls within the window (``series``), at most a tenth of
        the window; None (default): only the two snapshots. The statistics API answers from
        counters, so a poll every tenth of a second costs the server little.
    """
    if isinstance(window, bool) or not isinstance(window, numbers.Real) or \
            not math.isfinite(window) or window < SHORTEST_WINDOW:
        raise ValueError(f"window={window!r}: give the seconds to sample the server over, "
                         f"at least {SHORTEST_WINDOW:g} (a minute or more is typical)")
    if poll is not None and (isinstance(poll, bool) or not isinstance(poll, numbers.Real)
                             or not math.isfinite(poll)
                             or not SHORTEST_POLL <= poll <= window / 10):
        raise ValueError(f"poll={poll!r}: give the seconds between statistics polls, at "
                         f"least {SHORTEST_POLL:g} and at most a tenth of the window "
                         f"({window:g} s), e.g. 0.1; or None")
    url = normal_url(url)
    metrics_url = normal_url(metrics_url) if metrics_url is not None else None
    version = checked_version(version)
    if model is None:
        model = _served_model(url)
    path = quote(str(model), safe="")
    what = f"model {model!r}"
    if version is not None:
        path = f"{path}/versions/{version}"
        what = f"model {model!r} version {version}"
    try:
        served = _json(f"{url}/v2/models/{path}/config", f"the configuration of {what}")
    except ValueError as err:
        if version is None:
            raise
        raise ValueError(f"{err} ({_versions_note(url, model)})") from None
    if served.get("platform") == "ensemble" or "ensemble_scheduling" in served:
        raise ValueError(f"model {model!r} is an ensemble: calibrate(url=...) calibrates one "
                         f"model; name a composing model with model=, or read the ensemble's "
                         f"config.pbtxt from its repository with qmodel.triton.read_config")
    config = config_text(served)
    stats_url = f"{url}/v2/models/{path}/stats"

    def stats_now():
        return _json(stats_url, f"the statistics of {what}")

    def snapshot():
        scrape = None
        if metrics_url:
            scrape = fetch(metrics_url, "metrics").decode(errors="replace")
            if "\n" not in scrape:
                raise ValueError(f"the metrics endpoint {metrics_url} returned no Prometheus "
                                 f"text (check the URL: Triton serves it at "
                                 f"<host>:8002/metrics)")
        return stats_now(), scrape

    stats_before, metrics_before = snapshot()
    # Triton answers /v2/models/<model>/stats with every version it serves, one entry each
    entries = [e for e in stats_before.get("model_stats", []) if e.get("name") == model]
    if version is None and len(entries) > 1:
        versions = sorted({str(e.get("version", "")) for e in entries} - {""},
                          key=lambda v: (len(v), v))
        raise ValueError(f"the server at {url} serves model {model!r} at "
                         f"{'versions ' + ', '.join(versions) if versions else 'several versions'}"
                         f": name one with version=")
    start = _clock()
    series = [(0.0, stats_before)] if poll is not None else None
    if poll is not None:
        # polls on a fixed grid of ticks (a slow answer does not shift the later ones)
        tick = 1
        while tick * poll < window:
            wait = start + tick * poll - _clock()
            if wait > 0:
                _sleep(wait)
            series.append((_clock() - start, stats_now()))
            tick = max(tick + 1, int((_clock() - start) / poll) + 1)
    left = start + float(window) - _clock()
    if left > 0:
        _sleep(left)
    elapsed = _clock() - start      # timed before the call, as every poll is
    stats_after, metrics_after = snapshot()
    if series is not None:
        if elapsed <= series[-1][0]:       # the last poll was the window's end
            series.pop()
        series.append((elapsed, stats_after))
    return ServerSample(url, model, config, (stats_before, stats_after),
                        (metrics_before, metrics_after) if metrics_url else None, elapsed,
                        version, tuple(series) if series is not None else None)
