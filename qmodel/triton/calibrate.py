"""A Node calibrated from what a Triton server reported.

:func:`calibrate` reads the knobs from the model's config.pbtxt, the batch execution time of
each batch size from the statistics API (input + infer + output, the time an instance is
held) or, with a trace, every traced execution (its spread kept, its mean the statistics'),
plus the pickup gap (fitted to the statistics' mean queue time where the rate is known,
else the trace's, :mod:`qmodel.triton.batcher`, or a line in the mean batch size) and
Triton's prefetching (from the trace, else the campaign's median share), and the time a
request spends outside the batcher (:attr:`qmodel.Node.overhead`) from perf_analyzer's
per-component means, the trace, or the metrics, and the drift of the executions' speed from
a long trace or from the statistics polled during the run. perf_analyzer's latency
percentiles are never used: they are what the calibrated node is compared with. The node's :class:`Calibration`
says which source gave each quantity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy import optimize, stats as sps

from ..checks import parse_duration
from ..drift import (MAX_CORRELATION, MIN_DRIFT_WINDOWS, Drift, fit_drift,
                     fit_drift_windows)
from ..profiling import fit_line
from ..system import Node, ServiceTime
from .config import TritonConfig, read_config
from .metrics import read_metrics
from .perf_analyzer import read_perf_analyzer
from .batcher import MIN_LATE, pickup_gap, prefetch_join
from .stats import read_stats, read_stats_series
from .trace import TritonTrace, read_trace

__all__ = ["Calibration", "calibrate", "MIN_EXECUTIONS", "MODELLED_PREFETCH",
           "MODELLED_GAP_BASE", "MODELLED_GAP_PER_REQUEST", "DRIFT_PERIOD"]

# batch sizes executed fewer times than this are left to the service law's extrapolation
MIN_EXECUTIONS = 5
# the largest jitter cv the summary fit searches (the largest a jitter law takes)
MAX_JITTER_CV = 10.0
# a size's first execution on an instance longer than this times its median is a cold start
# (a fresh server's first executions ran 10-19 times the median; a GPU backend compiles per
# batch shape, so each size has its own)
COLD_FACTOR = 3.0
# Without a trace, the two quantities only a trace measures are modelled from the committed
# campaign's 72 traced runs (validation/reports/triton/runs; validation/triton_untraced.py
# prints the fit; the gap only where no rate is known to fit it to the queue time): the
# share of requests queued behind a batch formed ahead that join it, the median of the 47
# runs where Triton prefetched (0.09-0.66), and the pickup gap, a line in
# the mean batch size (the Python backend takes in a batch's requests one by one: 0.06-0.09
# ms at mean batches near 1, 0.2-0.3 ms near 6). Calibrated so, with the trace withheld, the
# campaign's 32 runs below 0.95 utilization came within a median 2.0% on p50 and 4.4% on
# p99 (leaving out each batching configuration's runs), against 7.7% and 13.1% without them.
MODELLED_PREFETCH = 0.405
# The step at which a trace's drift (Node.drift) is fitted: a tenth of a second holds 10-60
# executions at the campaign's loads, and the committed full-run trace's executions were
# still correlated 5-50 executions (15-150 ms) apart. A trace must cover MIN_DRIFT_WINDOWS
# steps (5 s); the campaign's 1,000-request traces cover 0.7-2 s and get none.
DRIFT_PERIOD = 0.1
MODELLED_GAP_BASE = 0.0488e-3
MODELLED_GAP_PER_REQUEST = 0.0405e-3


@dataclass(frozen=True)
class Calibration:
    """Where a calibrated node's numbers come from: one sentence per quantity."""

    knobs: str
    service: str
    jitter: str
    overhead: str
    batcher: str = "batches formed when an instance frees (no trace to say otherwise)"
    origins: tuple = ()
    drift: str = "none (no trace to measure it)"

    def lines(self) -> list[str]:
        return [f"{name}: {getattr(self, name)}" for name in ("knobs", "service", "jitter",
                                                              "drift", "overhead", "batcher")]

    def origin(self, quantity: str) -> tuple:
        """(how, source) of one quantity: how is "measured", "modelled", "given" or
        "assumed"; the quantities are "execution means", "jitter", "drift", "pickup gap",
        "prefetch" and "overhead".

        Examples
        --------
        >>> c = Calibration("k", "s", "j", "o", origins=(("prefetch", "modelled", "the campaign"),))
        >>> c.origin("prefetch")
        ('modelled', 'the campaign')
        """
        for name, how, source in self.origins:
            if name == quantity:
                return how, source
        raise KeyError(f"no quantity {quantity!r}; the calibration names "
                       f"{', '.join(n for n, _, _ in self.origins) or 'none'}")


def _fill(measured: dict, counts: dict, B: int, samples: bool,
          shape: ServiceTime | None = None) -> tuple[dict, str]:
    """``measured`` (means, or samples, by batch size) completed up to B, and the sentence
    that says how. Each missing size gets the mean of the weighted line through the measured
    means (:func:`qmodel.profiling.fit_line`), or of ``shape`` scaled to them where given
    (samples: the nearest measured size's, scaled to that mean). One measured size and no
    ``shape`` is a ValueError: a line through one point is flat, every batch as fast as that
    size, which no batching server is."""
    means = {k: float(np.mean(v)) if samples else v for k, v in measured.items()}
    sizes = sorted(means)
    missing = [k for k in range(1, B + 1) if k not in measured]
    if not missing:
        return dict(sorted(measured.items())), ""
    weights = np.array([counts[k] for k in sizes], float)
    if shape is not None:
        # one factor: the weighted least squares scale of the shape onto the measured means
        ref = np.array([float(shape.mean(k)) for k in sizes])
        y = np.array([means[k] for k in sizes])
        factor = float(np.sum(weights * ref * y) / np.sum(weights * ref * ref))
        target = {k: factor * float(shape.mean(k)) for k in missing}
        how = (f"the given service law's shape, scaled by {factor:.4g} to the measured "
               f"means of sizes {sizes}")
    elif len(sizes) < 2:
        raise ValueError(
            f"only batch size {sizes[0]} was executed at least {MIN_EXECUTIONS} times, so "
            f"S(k) of sizes {_span(missing)} is unknown (one size cannot give how a batch's "
            f"time grows with its size): measure at a second load, where other sizes run "
            f"(perf_analyzer at a lower or higher concurrency), or give calibrate(service=...) "
            f"the shape of S(k), e.g. qmodel.profile(...).fit()[0] or a kernel profile's law, "
            f"which is scaled to the measured size")
    else:
        a, b = fit_line(sizes, [means[k] for k in sizes], weights)
        target = {k: a + b * k for k in missing}
        beyond = [k for k in missing if k < sizes[0] or k > sizes[-1]]
        how = (f"a line fitted to the {len(sizes)} measured means, weighted by their "
               f"executions" + (f" (sizes {_span(beyond)} extrapolated beyond the measured "
                                f"{sizes[0]}-{sizes[-1]})" if beyond else ""))
    out = dict(measured)
    for k in missing:
        near = min(measured, key=lambda m: (abs(m - k), -m))
        out[k] = ([x * target[k] / means[near] for x in measured[near]] if samples
                  else target[k])
    return dict(sorted(out.items())), (f"; sizes {_span(missing)} (too rarely executed) "
                                       f"from {how}")


def _span(sizes: list) -> str:
    """Sizes as runs: [1, 2, 3, 7, 9, 10] -> '1-3, 7, 9-10'."""
    runs, start = [], None
    for i, k in enumerate(sizes):
        if start is None:
            start = k
        if i + 1 == len(sizes) or sizes[i + 1] != k + 1:
            runs.append(f"{start}-{k}" if k > start else f"{start}")
            start = None
    return ", ".join(runs)


def _summary_jitter(executions: dict, infer: dict, quantiles: dict) -> float:
    """The lognormal cv c whose request-weighted mixture of compute_infer means I_k times
    J (mean 1, cv c) best matches the server's compute_infer summary quantiles (least
    squares in log time); 0 where none helps."""
    sizes = np.array(sorted(executions))
    weight = np.array([k * executions[k] for k in sizes], float)
    weight /= weight.sum()
    means = np.array([infer[k] for k in sizes])
    levels = np.array([p for p in quantiles if 0.5 <= p <= 0.99])
    target = np.log([quantiles[p] for p in levels])

    def mixture_quantiles(cv):
        sigma = math.sqrt(math.log1p(cv * cv))
        mu = -sigma * sigma / 2

        def cdf(x):
            if sigma == 0:
                return float(weight[means <= x].sum())
            return float(weight @ sps.norm.cdf((np.log(x / means) - mu) / sigma))
        lo, hi = means.min() * 1e-3, means.max() * 1e3
        return np.log([optimize.brentq(lambda x: cdf(x) - p, lo, hi) if sigma else
                       means[np.searchsorted(np.cumsum(weight), p)] for p in levels])

    def best(grid):
        errors = [float(np.sum((mixture_quantiles(c) - target) ** 2)) for c in grid]
        return float(grid[int(np.argmin(errors))])

    cv = best(np.arange(0.0, 1.501, 0.01))
    if cv >= 1.5:
        # the best at the first grid's edge: search on, up to the largest cv a jitter takes
        cv = best(np.linspace(1.5, MAX_JITTER_CV, int(round((MAX_JITTER_CV - 1.5) / 0.05)) + 1))
    return cv


def _summary_service(s, m, cfg: TritonConfig, shape: ServiceTime | None, gap: float,
                     gap_note: str, drift: Drift | None = None
                     ) -> tuple[ServiceTime, str, str, tuple]:
    """(service law, its note, the jitter's note, the jitter's (how, source)) from the
    statistics' means per size and,
    where the metrics have them, compute_infer's summary quantiles; each execution plus the
    pickup gap ``gap`` (``gap_note`` says where it comes from). The quantiles' spread holds
    the ``drift`` too: the jitter keeps the rest (lognormal factors: 1 + cv² divides)."""
    means = {k: v for k, v in s.batch_time().items() if s.executions[k] >= MIN_EXECUTIONS}
    if not means:
        raise ValueError(f"no batch size was executed {MIN_EXECUTIONS} times between the "
                         f"statistics snapshots: measure longer")
    service_note = (f"the statistics API's mean compute_input + compute_infer + "
                    f"compute_output of batch sizes {sorted(means)} "
                    f"({sum(s.executions[k] for k in means)} executions)")
    infer_q = (m.quantiles.get("compute_infer") if m is not None else None) or {}
    if len(infer_q) >= 2:
        cv = _summary_jitter({k: s.executions[k] for k in means}, s.compute_infer, infer_q)
        whole = cv
        if drift is not None and cv > 0:
            cv = math.sqrt(max((1.0 + cv * cv) / (1.0 + drift.cv ** 2) - 1.0, 0.0))
        jitter = ("lognormal", cv) if cv > 0 else "deterministic"
        if cv > 0:
            jitter_note = (f"lognormal cv {cv:.2f}, fitted to the server's compute_infer "
                           f"summary quantiles {sorted(infer_q)} as a mixture over the "
                           f"executed batch sizes")
        elif whole > 0:
            jitter_note = (f"none: the compute_infer summary quantiles' spread beyond the "
                           f"batch sizes (cv {whole:.2f}) is no more than the drift's")
        else:
            jitter_note = ("none: the compute_infer summary quantiles are explained by the "
                           "batch sizes alone")
        if drift is not None and cv > 0:
            jitter_note += (f", less the drift's cv {drift.cv:.3f} the quantiles also hold "
                            f"(cv {whole:.2f} in all)")
        if whole >= MAX_JITTER_CV:
            jitter_note += (f" (at the search's bound: the quantiles call for more spread "
                            f"than a lognormal of cv {MAX_JITTER_CV:g} gives; a trace "
                            f"would measure it)")
        jitter_origin = ("measured", "the metrics' compute_infer summary quantiles")
    else:
        jitter = "deterministic"
        jitter_note = "unknown (no trace, no summary quantiles): taken as none"
        jitter_origin = ("assumed", "none (no trace, no summary quantiles)")
    table, filled_note = _fill(means, s.executions, cfg.max_batch_size, samples=False,
                               shape=shape)
    service_note += filled_note
    if gap > 0:
        table = {k: v + gap for k, v in table.items()}
        service_note += f", each plus the pickup gap {gap * 1e3:.3f} ms ({gap_note})"
    service = ServiceTime.table(table, jitter=jitter)
    return service, service_note, jitter_note, jitter_origin


def _overhead(rows, t: TritonTrace | None, m) -> tuple[float, str, tuple]:
    """(seconds, note, (how, source)): the time a request spends outside the batcher, from
    perf_analyzer's client means, else the trace, else the metrics."""
    if rows:
        parts = [(r.client_send or 0) + (r.network or 0) + (r.client_recv or 0) for r in rows]
        overhead = float(np.mean(parts))
        overhead_note = (f"perf_analyzer's client send + network + client receive means, "
                         f"{overhead * 1e3:.3f} ms (over {len(rows)} row(s))")
        origin = ("measured", "perf_analyzer")
    elif t is not None:
        overhead = max(float(np.mean(t.outside)), 0.0)
        overhead_note = (f"the trace's mean time in the server outside queue and execution, "
                         f"{overhead * 1e3:.3f} ms (network and client not included)")
        origin = ("measured", "the trace")
    elif m is not None and m.request is not None and m.queue is not None:
        inside = m.queue + (m.compute_input or 0) + (m.compute_infer or 0) + \
            (m.compute_output or 0)
        overhead = max(m.request - inside, 0.0)
        overhead_note = (f"the metrics' mean request duration less queue and compute, "
                         f"{overhead * 1e3:.3f} ms (network and client not included)")
        origin = ("measured", "the metrics")
    else:
        overhead = 0.0
        overhead_note = "unknown (no perf_analyzer file, trace or metrics): taken as 0"
        origin = ("assumed", "0")
    return overhead, overhead_note, origin


def _cold_starts(executions: list, instances: int) -> int:
    """How many of a batch size's first executions are cold starts: the leading ones, up to
    one per instance, longer than COLD_FACTOR times the size's median."""
    median = float(np.median(executions))
    lead = 0
    while lead < min(instances, len(executions)) and \
            executions[lead] > COLD_FACTOR * median:
        lead += 1
    return lead


def _traced_service(t: TritonTrace, s, cfg: TritonConfig, gap: float,
                    shape: ServiceTime | None, gap_note: str = "") -> tuple[ServiceTime, str,
                                                                           str]:
    """(service law, its note, the jitter's note) from a trace's executions: each size's
    spread from the trace, its mean from the statistics over the whole run where they have
    it, plus the pickup gap (``gap_note`` says where it comes from; by default the
    trace)."""
    samples, cold = {}, 0
    for k, runs in t.samples().items():
        lead = _cold_starts(runs, cfg.instances)
        cold += lead
        if len(runs) - lead >= MIN_EXECUTIONS:
            samples[k] = runs[lead:]
    if not samples:
        raise ValueError(f"the trace has fewer than {MIN_EXECUTIONS} executions of every "
                         f"batch size: trace more requests")
    traced = sorted(samples)
    # the trace holds the run's first requests only; the statistics cover all of it, so
    # each size's traced executions keep their spread but take the statistics' mean, and a
    # size the statistics saw often but the trace rarely takes the spread of the nearest
    # traced size at its own mean (not the fitted line)
    whole = s.batch_time()
    often = [k for k in sorted(whole) if s.executions.get(k, 0) >= MIN_EXECUTIONS
             and k <= cfg.max_batch_size]
    scaled = [k for k in often if k in samples]
    borrowed = [k for k in often if k not in samples]
    for k in scaled:
        factor = whole[k] / float(np.mean(samples[k]))
        samples[k] = [x * factor for x in samples[k]]
    for k in borrowed:
        near = min(traced, key=lambda m: (abs(m - k), -m))
        samples[k] = [x * whole[k] / float(np.mean(samples[near])) for x in samples[near]]
    counts = {k: len(v) if k in traced else s.executions[k] for k, v in samples.items()}
    table, filled_note = _fill(samples, counts, cfg.max_batch_size, samples=True, shape=shape)
    # The gap holds the instance, so it joins every execution. It also lengthens each
    # request's time in the node, though a batch's requests finish at its compute end:
    # taking it off their time outside the batcher again was measured on the campaign's 44
    # agreeing runs (validation/reports/triton) and moved the median |error| from 1.1% to
    # 1.8% on p50 and 5.3% to 6.0% on p99, so it stays (unchecked guess: the server's own
    # time after compute end, which perf_analyzer's client parts leave out)
    table = {k: [x + gap for x in v] for k, v in table.items()}
    note = (f"{sum(len(samples[k]) for k in traced)} traced executions (start to end of "
            f"compute) of batch sizes {traced}, at least {MIN_EXECUTIONS} each"
            + (f" ({cold} left out as cold starts: a size's first execution on an instance "
               f"more than {COLD_FACTOR:g} times its median)" if cold else "")
            + (f", sizes {scaled} scaled to the statistics API's mean over the whole run "
               f"(the trace holds its first requests only)" if scaled else "")
            + (f", sizes {borrowed} (executed often, traced rarely) at the statistics "
               f"API's mean with the spread of the nearest traced size" if borrowed else "")
            + f"{filled_note}, each plus the mean pickup gap {gap * 1e3:.3f} ms ("
            + (gap_note or "an instance's next batch waiting, from its freeing to that "
                           "batch's start, traced") + ")")
    jitter = ("the traced executions, drawn independently (their correlation over windows of "
              f"{DRIFT_PERIOD:g} s or more is the drift, where the trace measures it)")
    return ServiceTime.empirical(table), note, jitter


def calibrate(config=None, stats=None, metrics=None, trace=None, perf_analyzer=None, *,
              gpus: int | None = None, prefetch: bool | None = None,
              service: ServiceTime | None = None, gap: float | None = None,
              url: str | None = None, model: str | None = None,
              version: str | int | None = None, metrics_url: str | None = None,
              window: float = 60.0, series=None, poll: float | None = DRIFT_PERIOD) -> Node:
    """The Node a Triton server's reports describe: from their files, or sampled from the
    running server (``url=``).

    Parameters
    ----------
    config : path, text or TritonConfig
        The model's config.pbtxt (:func:`qmodel.triton.read_config`). Not with ``url``.
    stats : (before, after)
        Two ``/v2/models/<m>/stats`` snapshots around the measurement
        (:func:`qmodel.triton.read_stats`): executions and mean times per batch size. Not
        with ``url``.
    metrics : (before, after), optional
        Two metric scrapes (:func:`qmodel.triton.read_metrics`): with summary latencies, the
        jitter of compute_infer where no trace is given; the time outside the batcher where
        neither perf_analyzer nor a trace is.
    trace : path or TritonTrace, optional
        Triton's TIMESTAMPS trace (:func:`qmodel.triton.read_trace`): every execution time by
        batch size becomes the service law (``ServiceTime.empirical``, jitter kept).
    perf_analyzer : path, optional
        perf_analyzer's CSV: its client send, network and client receive means (averaged
        over its rows) are the time outside the batcher.
    gpus : int, optional
        GPUs the server sees (for instance groups that list none).
    prefetch : bool, optional
        Whether to model Triton's prefetching batcher (``Node.prefetch``). None (default):
        wherever Triton prefetches (a delay, and a queue policy with no limit, timeout or
        priorities), the share of late requests that join a batch formed ahead, measured
        from the trace (:func:`qmodel.triton.batcher.prefetch_join`) where it shows enough
        of them, modelled (:data:`MODELLED_PREFETCH`) where no trace is given. True: the
        same, and an error where Triton does not prefetch or the trace shows too few late
        requests; False: batches formed when an instance frees.
    service : ServiceTime, optional
        The shape of S(k) (a kernel profile's law, :meth:`qmodel.profiling.Profile.fit`) for
        the batch sizes the server ran too rarely, scaled to the measured ones. Without it
        those sizes come from a line through the measured means, which needs two sizes or
        more: with one, calibrate raises ValueError rather than invent how S(k) grows.
    gap : float or str, optional
        The pickup gap (an instance held from its freeing to its next batch's start), in
        seconds or with a unit ("0.1ms"), added to every execution; shorter than every
        measured mean execution. None (default): where the rate is known (perf_analyzer's
        throughput, a live window's or a series' requests per second), fitted so that the
        calibrated node's mean sojourn equals the statistics API's mean time in the batcher
        (its queue time, which holds the gap, plus the request-weighted execution), with a
        trace or without (up to half the shortest execution and 0.98 of capacity;
        ``predict`` is called a dozen times, seconds where it simulates); where no rate is
        known, measured from the trace (:func:`qmodel.triton.batcher.pickup_gap`, which
        gives the trace's own for ``gap=``), or without one modelled from the mean batch
        size (:data:`MODELLED_GAP_BASE` + :data:`MODELLED_GAP_PER_REQUEST` x (mean batch -
        1)). 0 leaves it out.
    url : str, optional
        A running server's HTTP endpoint (``"localhost:8000"``): the configuration, the
        statistics and, with ``metrics_url``, the metrics are read from it around ``window``
        seconds of its own traffic (:func:`qmodel.triton.live.sample_server`); nothing is
        sent to the model.
    model : str, optional
        With ``url``: which model (default: the one the server has run inferences on).
    version : str or int, optional
        Which version of the model, where the server (or the snapshots) hold several.
    metrics_url : str, optional
        With ``url``: the metrics endpoint, e.g. ``"localhost:8002/metrics"``.
    window : float
        With ``url``: seconds between the snapshots (default 60).
    series : list of (seconds, snapshot), or path, optional
        The statistics polled every tenth of a second or so during the measurement
        (:func:`qmodel.triton.read_stats_series`; ``qmodel.triton.check.record_run(...,
        poll=0.1)`` writes stats_series.json.gz): where no trace measures the drift
        (:attr:`qmodel.Node.drift`), it is fitted from the windows between polls
        (:func:`qmodel.drift.fit_drift_windows`), and the jitter fitted from the summary
        quantiles, which hold the drift too, keeps only the rest. A trace long enough for
        its own drift (:data:`MIN_DRIFT_WINDOWS` steps of :data:`DRIFT_PERIOD`) is used
        instead, the series then ignored; a shorter one keeps its executions' spread less
        what the series' drift puts in a stretch as long as the trace. ``stats`` may then be
        left out: the series' first and last snapshots are taken.
    poll : float or None
        With ``url``: seconds between statistics polls during the window, the series above
        (default :data:`DRIFT_PERIOD`; None: only the two snapshots, and no drift).

    Returns
    -------
    Node
        With ``calibration`` saying which source gave each quantity.
    """
    if url is not None:
        given = [name for name, value in (("config", config), ("stats", stats),
                                          ("metrics", metrics)) if value is not None]
        if given:
            raise ValueError(f"calibrate(url=...) reads the configuration, statistics and "
                             f"metrics from the server: drop {', '.join(given)}")
        from .live import sample_server

        if series is not None:
            raise ValueError("calibrate(url=...) polls the server's statistics itself "
                             "(poll=); drop series")
        sampled = sample_server(url, model, version=version, metrics_url=metrics_url,
                                window=window, poll=poll)
        config, stats, metrics = sampled.config, sampled.stats, sampled.metrics
        series = sampled.series
    elif model is not None or metrics_url is not None:
        raise ValueError("model= and metrics_url= go with url= (a running server); for files "
                         "give config, stats and metrics")
    elif config is None or (stats is None and series is None):
        raise ValueError("calibrate needs the model's config and the (before, after) "
                         "statistics snapshots (or a series of them), or url= of a running "
                         "server to sample them from")
    polled = None
    sampled_seconds = sampled.window if url is not None else None
    if series is not None:
        polled = read_stats_series(series, model=None, version=version)
        if stats is None:
            stats = (polled.first, polled.last)
    if service is not None and not isinstance(service, ServiceTime):
        raise ValueError(f"calibrate(service=...) takes a ServiceTime (the shape of S(k), e.g. "
                         f"qmodel.profile(...).fit()[0]), got {type(service).__name__}")
    shape = service
    cfg = config if isinstance(config, TritonConfig) else read_config(config, gpus=gpus)
    for value, name in ((stats, "stats"), (metrics, "metrics")):
        if name == "stats" or value is not None:
            if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") \
                    or len(value) != 2:
                raise ValueError(f"calibrate({name}=...) takes the pair (before, after) of "
                                 f"snapshots around the measurement, got {value!r}")
    before, after = stats
    s = read_stats(before, after, model=cfg.name or None, version=version)
    if polled is not None:
        # the series of the model the statistics describe (a series holding several models
        # is read for that one)
        try:
            polled = read_stats_series(series, model=s.model,
                                       version=version or s.version or None)
        except ValueError as err:
            raise ValueError(f"calibrate(series=...) holds no statistics of {s.model!r} (the "
                             f"model the statistics describe) in every snapshot: give the "
                             f"series polled from that model, in the same run ({err})") from None
    m = (read_metrics(*metrics, model=s.model, version=version) if metrics is not None
         else None)
    t = (trace if isinstance(trace, TritonTrace) or trace is None
         else read_trace(trace, model=s.model, version=version))
    rows = read_perf_analyzer(perf_analyzer) if perf_analyzer is not None else None
    queued = [r.queue for r in rows or () if r.queue]
    if queued and s.queue > 0 and not QUEUE_AGREEMENT[0] <= s.queue / np.mean(queued) \
            <= QUEUE_AGREEMENT[1]:
        # one run's statistics and perf_analyzer's server queue agree within 3% (165
        # committed runs; 45% on one overloaded GPU run): these describe two runs
        raise ValueError(f"the statistics' mean queue time ({s.queue * 1e3:.3g} ms) and "
                         f"perf_analyzer's server queue ({np.mean(queued) * 1e3:.3g} ms) "
                         f"differ by more than half: give the statistics snapshots and the "
                         f"perf_analyzer CSV of one run")

    # the instance is held from freeing until it starts its next batch, too
    if gap is not None:
        gap = parse_duration(gap, "calibrate(gap)")
        shortest = min(s.batch_time().values(), default=math.inf)
        if gap >= shortest:
            raise ValueError(f"calibrate(gap={gap:g} s) is longer than the shortest mean "
                             f"execution it joins ({shortest * 1e3:.3g} ms): the pickup gap is "
                             f"a fraction of an execution; give seconds (0.1e-3) or a unit "
                             f"('0.1ms'), or 0 to leave it out")
        gap_origin = ("given", "calibrate(gap=...)")
    elif t is not None:
        gap, gap_origin = pickup_gap(t, cfg.max_queue_delay), ("measured", "the trace")
    else:
        gap = None                     # fitted to the queue below where the rate is known
        gap_origin = ("modelled", f"a line in the statistics API's mean batch size "
                                  f"{s.mean_batch_size:.2f}, fitted to the committed "
                                  f"campaign's traced runs")
    drift, drift_note, drift_origin = None, "none (no trace or statistics series to measure " \
        "it)", ("assumed", "none: no trace or statistics series")
    if t is None and polled is not None:
        drift, drift_note, drift_origin = _series_drift(polled)
    rate, rate_source = _served_rate(s, rows, sampled_seconds, polled)
    fit = gap_origin[0] != "given" and rate is not None and s.queue > 0
    # the gaps the fit tries take the share where it is measurable at that gap: prefetch=True
    # (an error where it is not) holds for the gap fitted, below
    trial = None if prefetch is True else prefetch
    gap_note, gap_fitted = "", False
    if gap is None:
        gap = MODELLED_GAP_BASE + MODELLED_GAP_PER_REQUEST * max(s.mean_batch_size - 1, 0.0)
        if fit:
            gap_origin = (gap_origin[0], f"{gap_origin[1]}, {gap * 1e3:.3f} ms")
            steady, _, _, _ = _summary_service(s, m, cfg, shape, 0.0, "", drift)
            points = dict(steady.points)
            jitter = steady.jitter if steady.jitter in ("deterministic", "exponential") \
                else (steady.jitter, steady.cv)
            summarised = _at_gap(cfg, lambda g: ServiceTime.table(
                {k: v + g for k, v in points.items()}, jitter=jitter), None, trial, drift)
            gap, gap_origin, gap_fitted = _fitted_gap(summarised, s, rate, rate_source, gap,
                                                      gap_origin)
    if t is not None:
        # the steady executions make the service law only: the batcher's measures need
        # the batches' real end times
        drift, steady, drift_note, drift_origin = _drift(t)
        if drift is None and drift_origin[0] == "assumed" and polled is not None:
            # a trace too short for the drift, a series long enough: the traced spread
            # holds the drift's too, and keeps the rest
            short_note = drift_note.removeprefix("none: ")
            drift, drift_note, drift_origin = _series_drift(polled)
            if drift is not None:
                steady = _less_spread(t, drift)
                drift_note += (f" (the trace was too short: {short_note}; its executions' "
                               f"spread keeps what the drift leaves over its span)")
            else:
                drift_note += f"; and the trace was too short: {short_note}"
        if fit:
            # the trace's gap measures the batcher's lag alone; fitted to the queue time it
            # also takes up what the model misses of the mean (instances slowing each other,
            # the batcher's timing): held-out runs within 10% / 15% 14 -> 16 of 17
            # (validation/triton_untraced.py)
            traced = _at_gap(cfg, lambda g: _traced_service(steady, s, cfg, g, shape)[0], t,
                             trial, drift)
            own = gap
            gap, gap_origin, gap_fitted = _fitted_gap(traced, s, rate, rate_source, gap,
                                                      (gap_origin[0], f"{gap_origin[1]}, "
                                                                      f"{gap * 1e3:.3f} ms"))
            if gap_fitted:
                gap_note = (f"fitted to the statistics' queue time; the trace's own "
                            f"{own * 1e3:.3f} ms")
        service, service_note, jitter_note = _traced_service(steady, s, cfg, gap, shape,
                                                             gap_note)
        jitter_origin = ("measured", "the trace")
    else:
        service, service_note, jitter_note, jitter_origin = _summary_service(
            s, m, cfg, shape, gap, f"{gap_origin[0]}: {gap_origin[1]}", drift)
    overhead, overhead_note, overhead_origin = _overhead(rows, t, m)

    node = cfg.node(service)
    chance, batcher_note, prefetch_origin = _prefetch(cfg, node, t, gap, prefetch)
    if chance is None and prefetch_origin[0] == "measured" and gap_fitted:
        # Triton prefetches here, but the trace showed too few late requests to say how
        # much: the fitted gap then also takes up the prefetching's share of the mean
        gap_origin = (gap_origin[0], f"{gap_origin[1]}; no prefetch share measured, so the "
                                     f"gap also stands for the prefetching batcher's effect "
                                     f"on the mean")
    origins = (("execution means", "measured", "the statistics API"),
               ("jitter", *jitter_origin), ("drift", *drift_origin),
               ("pickup gap", *gap_origin),
               ("prefetch", *prefetch_origin), ("overhead", *overhead_origin))
    calibration = Calibration(
        knobs=f"{cfg.source} ({cfg.name or 'unnamed'}): max_batch_size {cfg.max_batch_size}, "
              f"delay {cfg.max_queue_delay * 1e3:g} ms, {cfg.instances} instance(s)",
        service=service_note, jitter=jitter_note, overhead=overhead_note,
        batcher=batcher_note, origins=origins, drift=drift_note)
    return replace(node, overhead=overhead, prefetch=chance, drift=drift,
                   calibration=calibration)


def _drift(t: TritonTrace):
    """(Node.drift or None, the trace with the drift taken out of its executions, the
    sentence, (how, source)): fitted where the trace covers MIN_DRIFT_WINDOWS steps of
    DRIFT_PERIOD, from its executions less cold starts and stalls (longer than COLD_FACTOR
    times their size's median)."""
    span = float(t.starts[-1] - t.starts[0]) if t.starts.size else 0.0
    need = MIN_DRIFT_WINDOWS * DRIFT_PERIOD
    if span < need:
        why = (f"none: the trace covers {span:.2f} s, and drift is measured over {need:g} s "
               f"or more (trace more requests)")
        return None, t, why, ("assumed", why)
    median = {k: float(np.median(t.executions[t.sizes == k])) for k in np.unique(t.sizes)}
    keep = t.executions <= COLD_FACTOR * np.array([median[k] for k in t.sizes])
    try:
        drift, steady = fit_drift(t.starts, t.sizes, t.executions, DRIFT_PERIOD, keep=keep)
    except ValueError as err:
        why = f"none: {err}"
        return None, t, why, ("assumed", why)
    if drift.cv == 0.0:
        why = (f"none: the {span:.1f} s trace's windows of {DRIFT_PERIOD:g} s vary no more "
               f"than their sampling noise")
        return None, t, why, ("measured", "the trace")
    note = (f"{drift.describe()} (correlation time {drift.correlation_time * 1e3:.0f} ms), "
            f"from the trace's {span:.1f} s of executions in windows of {DRIFT_PERIOD:g} s; "
            f"the traced executions are divided by their window's factor before they become "
            f"the service law")
    return drift, replace(t, executions=steady), note, ("measured", "the trace")


def _served_rate(s, rows, seconds, polled) -> tuple:
    """(requests per second over the measurement, where from) or (None, why not):
    perf_analyzer's throughput, else the statistics' requests over a live window or over a
    polled series' span; the snapshots alone do not say how long they lay apart."""
    if rows:
        return float(np.mean([r.throughput for r in rows])), "perf_analyzer's throughput"
    if seconds:
        return s.requests / seconds, "the statistics' requests over the sampled window"
    if polled is not None:
        span = float(polled.seconds[-1] - polled.seconds[0])
        requests = read_stats(polled.first, polled.last).requests
        if span > 0 and requests > 0:
            return requests / span, "the polled statistics' requests over their span"
    return None, "no rate"


# the largest pickup gap the queue fit tries: this fraction of the shortest mean execution,
# and no more than leaves the node below this utilization of its capacity at the rate
QUEUE_GAP_MOST = 0.5
QUEUE_GAP_LOAD = 0.98
# the range of the statistics' mean queue time over perf_analyzer's server queue within
# which the two are taken to describe one run
QUEUE_AGREEMENT = (2 / 3, 1.5)


def _at_gap(cfg: TritonConfig, service_at, t: TritonTrace | None, wanted, drift):
    """node(g): the node calibrate returns with pickup gap g, its service law
    ``service_at(g)``, the prefetch share at that gap (:func:`_prefetch`) and ``drift``,
    without its overhead: what :func:`_queue_gap` fits."""
    def node(g):
        n = cfg.node(service_at(g))
        return replace(n, prefetch=_prefetch(cfg, n, t, g, wanted)[0], drift=drift)
    return node


def _fitted_gap(build, s, rate: float, rate_source: str, gap: float, origin: tuple) -> tuple:
    """(gap, (how, source), fitted): the pickup gap fitted to the statistics' queue time
    (:func:`_queue_gap`), or ``gap`` from ``origin`` where the fit fails, the note saying
    why."""
    fitted, how = _queue_gap(build, s, rate)
    if fitted is None:
        return gap, (origin[0], f"{origin[1]} (a rate was known, {rate:.6g} req/s, but the "
                                f"fit to the queue time failed: {how[:200]})"), False
    return fitted, ("measured", f"fitted so that the model's mean time in the batcher "
                                f"equals the statistics API's (mean queue {s.queue * 1e3:.3f} "
                                f"ms and execution) at {rate:.6g} req/s ({rate_source}){how}; "
                                f"without the fit, {origin[1]}"), True


def _queue_gap(node, s, rate: float) -> tuple:
    """(pickup gap, a clause for the note) such that the calibrated node's mean sojourn
    equals the statistics API's mean time in the batcher: its mean queue time (from a
    request's arrival to its batch's start, so the gap included) plus the request-weighted
    mean execution; (None, why) where the model cannot say (a solver failing). ``node(g)``
    is the node calibrate returns with gap ``g`` joining every execution (prefetch share and
    drift included, without its overhead)."""
    from ..predict import predict
    from ..system import UnstableError
    from ..theory.budget import OverBudget

    times = s.batch_time()
    requests = sum(k * n for k, n in s.executions.items())
    inside = s.queue + sum(k * n * times[k] for k, n in s.executions.items()) / requests

    def excess(g):
        # predict as a user calls it (outside a family's domain it simulates): the gap is
        # fitted to the answer the calibrated node will give
        return float(predict(node(g), rate=rate).mean) - inside

    most = QUEUE_GAP_MOST * float(min(node(0.0).service.measured_means()[1]))
    bound = f"half the shortest execution, {most * 1e3:.3f} ms"
    if rate >= QUEUE_GAP_LOAD * node(most).capacity:
        low, high = 0.0, most
        for _ in range(40):        # the largest gap that keeps the load below the bound
            middle = (low + high) / 2
            low, high = (middle, high) if rate < QUEUE_GAP_LOAD * node(middle).capacity \
                else (low, middle)
        most = low
        bound = (f"the gap that keeps the rate below {QUEUE_GAP_LOAD:g} of capacity, "
                 f"{most * 1e3:.3f} ms")
    try:
        at_zero = excess(0.0)
        if at_zero >= 0:
            return 0.0, (f": the model without a gap already spends as long, "
                         f"{(at_zero + inside) * 1e3:.3f} ms")
        at_most = excess(most)
        if at_most <= 0:
            return most, (f" as near as the gap can bring it (at its bound, {bound}: "
                          f"{(at_most + inside) * 1e3:.3f} ms)")
        return float(optimize.brentq(excess, 0.0, most, xtol=1e-7)), ""
    except (UnstableError, NotImplementedError, ArithmeticError, ValueError,
            OverBudget) as err:
        return None, f"{type(err).__name__}: {err}"


def _less_spread(t: TritonTrace, drift: Drift) -> TritonTrace:
    """The trace with each size's executions drawn in towards their mean in logs, so that
    their log variance loses the part of the drift's σ² a trace of its span holds: σ² less
    the variance of the log factor averaged over the span (:meth:`Drift.window_cv`; none
    left where the spread held less), each size's mean kept: the spread of executions that
    a separate drift multiplies."""
    executions = np.array(t.executions, dtype=float)
    span = float(t.starts.max() - t.starts.min()) if t.starts.size else 0.0
    held = drift.sigma ** 2 - (drift.window_cv(span) ** 2 if span >= drift.period
                               else drift.sigma ** 2)
    for k in np.unique(t.sizes):
        mine = t.sizes == k
        logs = np.log(executions[mine])
        var = float(logs.var())
        shrink = math.sqrt(max(var - held, 0.0) / var) if var > 0 else 0.0
        drawn = np.exp(logs.mean() + shrink * (logs - logs.mean()))
        executions[mine] = drawn * executions[mine].mean() / drawn.mean()
    return replace(t, executions=executions)


def _series_drift(polled):
    """(Node.drift or None, the sentence, (how, source)) from statistics polled during the
    run: :func:`qmodel.drift.fit_drift_windows` over the windows between polls, the drift's
    step their median length (to a tenth of a millisecond: the polls' timer)."""
    period = max(round(polled.period, 4), 1e-4)
    source = (f"the statistics polled every {period * 1e3:.0f} ms "
              f"({polled.counts.shape[0]} windows)")
    try:
        drift = fit_drift_windows(polled.counts, polled.totals, period)
    except ValueError as err:
        why = f"none: {err}"
        return None, why, ("assumed", why)
    if drift.cv == 0.0:
        return (None, f"none: the windows of {source} vary no more than their executions' "
                      f"own spread", ("measured", source))
    note = (f"{drift.describe()} (correlation time {drift.correlation_time * 1e3:.0f} ms), "
            f"from the lag-1 and lag-2 covariances of the mean execution time in the windows "
            f"of {source}")
    if drift.correlation >= MAX_CORRELATION:
        note += (" — at the fit's bound on the correlation: the executions' speed moved over "
                 "the whole series (a trend or a level shift, not a stationary wander), and "
                 "a prediction with this drift overstates the tail (a run that slowed by "
                 "13-17% read +145% on p99); measure again over a steady stretch")
    return drift, note, ("measured", source)


def _prefetch(cfg: TritonConfig, node: Node, t: TritonTrace | None, gap: float,
              wanted: bool | None):
    """(Node.prefetch, the sentence saying where it comes from, (how, source)); ``gap`` is
    the pickup gap (the trace's own or the one fitted to the queue time), by which
    :func:`~qmodel.triton.batcher.prefetch_join` tells the requests that came too late."""
    if wanted is not None and not isinstance(wanted, bool):
        raise ValueError(f"calibrate(prefetch={wanted!r}): give True, False or None (auto)")
    if wanted is False:
        return (None, "batches formed when an instance frees (prefetch=False)",
                ("given", "calibrate(prefetch=False): none"))
    reasons = []
    if cfg.max_queue_delay == 0:
        reasons.append("no delay, so Triton's batcher takes in every arrival until an "
                       "instance picks the batch up")
    elif node.max_batch_size == 1:
        reasons.append("max_batch_size 1: a batch of one is full when it is formed, so "
                       "nothing can join it (Node.prefetches is False there)")
    db = cfg.message.dynamic_batching if cfg.message is not None else None
    if cfg.max_queue_size or (db is not None and (
            db.priority_levels > 1 or db.default_queue_policy.default_timeout_microseconds
            or db.default_queue_policy.allow_timeout_override)):
        reasons.append("the queue policy sets a limit, a timeout or priorities, which turns "
                       "Triton's prefetching off")
    # Triton's rule decides where the config turns prefetching off ("given"); the trace
    # where it shows too few late requests ("measured")
    how = "given" if reasons else "measured"
    if t is None and not reasons:
        return (MODELLED_PREFETCH,
                f"Triton's prefetching batcher: a batch is formed when its delay runs out, "
                f"even while every instance is busy; with no trace to measure it, prefetch "
                f"= {MODELLED_PREFETCH:g}, the median share of late requests that joined "
                f"over the committed campaign's traced runs (0.09-0.66)",
                ("modelled", "the committed campaign's traced runs"))
    if not reasons:
        fraction, joined, late = prefetch_join(t, cfg.max_queue_delay,
                                               max(node.effective_preferred), lag=gap)
        if late < MIN_LATE:
            reasons.append(f"only {late} request(s) queued behind a batch formed ahead "
                           f"(fewer than {MIN_LATE})")
        else:
            return fraction, (f"Triton's prefetching batcher: a batch is formed when its "
                              f"delay runs out, even while every instance is busy; "
                              f"{joined} of the {late} traced requests queued after that "
                              f"and before an instance freed joined it, so prefetch = "
                              f"{fraction:.2f}"), ("measured", "the trace")
    if wanted:
        raise ValueError("calibrate(prefetch=True) cannot measure prefetching: "
                         + "; ".join(reasons))
    why = "; ".join(reasons)
    return None, "batches formed when an instance frees: " + why, (how, why)
