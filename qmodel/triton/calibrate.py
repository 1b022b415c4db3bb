"""A Node calibrated from what a Triton server reported.

:func:`calibrate` reads the knobs from the model's config.pbtxt, the batch execution time of
each batch size from the statistics API (input + infer + output, the time an instance is
held) or, with a trace, every traced execution (its spread kept, its mean the statistics'),
plus the pickup gap and Triton's prefetching (:mod:`qmodel.triton.batcher`), and the time a
request spends outside the batcher (:attr:`qmodel.Node.overhead`) from perf_analyzer's
per-component means, the trace, or the metrics. perf_analyzer's latency percentiles are never
used: they are what the calibrated node is compared with. The node's :class:`Calibration`
says which source gave each quantity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy import optimize, stats as sps

from ..profiling import fit_line
from ..system import Node, ServiceTime
from .config import TritonConfig, read_config
from .metrics import read_metrics
from .perf_analyzer import read_perf_analyzer
from .batcher import MIN_LATE, pickup_gap, prefetch_join
from .stats import read_stats
from .trace import TritonTrace, read_trace

__all__ = ["Calibration", "calibrate", "MIN_EXECUTIONS"]

# batch sizes executed fewer times than this are left to the service law's extrapolation
MIN_EXECUTIONS = 5


@dataclass(frozen=True)
class Calibration:
    """Where a calibrated node's numbers come from: one sentence per quantity."""

    knobs: str
    service: str
    jitter: str
    overhead: str
    batcher: str = "batches formed when an instance frees (no trace to say otherwise)"

    def lines(self) -> list[str]:
        return [f"{name}: {getattr(self, name)}" for name in ("knobs", "service", "jitter",
                                                              "overhead", "batcher")]


def _fill(measured: dict, counts: dict, B: int, samples: bool) -> tuple[dict, list]:
    """``measured`` (means, or samples, by batch size) completed up to B: each missing size
    gets the weighted line's mean (samples: the nearest measured size's, scaled to it);
    returns (the table, the sizes filled)."""
    means = {k: float(np.mean(v)) if samples else v for k, v in measured.items()}
    sizes = sorted(means)
    a, b = fit_line(sizes, [means[k] for k in sizes], [counts[k] for k in sizes])
    filled, out = [], dict(measured)
    for k in range(1, B + 1):
        if k in out:
            continue
        near = min(measured, key=lambda m: (abs(m - k), -m))
        target = a + b * k
        out[k] = ([x * target / means[near] for x in measured[near]] if samples else target)
        filled.append(k)
    return dict(sorted(out.items())), filled


def _filled_note(filled: list) -> str:
    if not filled:
        return ""
    return (f"; sizes {filled[0]}-{filled[-1] if len(filled) > 1 else ''}".rstrip("-")
            + " (too rarely executed) from a line fitted to the measured means, weighted by "
              "their executions")


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

    grid = np.arange(0.0, 1.501, 0.01)
    errors = [float(np.sum((mixture_quantiles(c) - target) ** 2)) for c in grid]
    return float(grid[int(np.argmin(errors))])


def calibrate(config, stats, metrics=None, trace=None, perf_analyzer=None, *,
              gpus: int | None = None, prefetch: bool | None = None) -> Node:
    """The Node a Triton server's reports describe.

    Parameters
    ----------
    config : path, text or TritonConfig
        The model's config.pbtxt (:func:`qmodel.triton.read_config`).
    stats : (before, after)
        Two ``/v2/models/<m>/stats`` snapshots around the measurement
        (:func:`qmodel.triton.read_stats`): executions and mean times per batch size.
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
        Whether to model Triton's prefetching batcher (``Node.prefetch``, measured from the
        trace by :func:`qmodel.triton.batcher.prefetch_join`). None (default): wherever
        Triton prefetches (a delay, and a queue policy with no limit, timeout or priorities)
        and the trace shows enough requests queued behind batches formed ahead. True: the
        same, and an error where it cannot be measured; False: batches formed when an
        instance frees.

    Returns
    -------
    Node
        With ``calibration`` saying which source gave each quantity.
    """
    cfg = config if isinstance(config, TritonConfig) else read_config(config, gpus=gpus)
    for value, name in ((stats, "stats"), (metrics, "metrics")):
        if name == "stats" or value is not None:
            if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") \
                    or len(value) != 2:
                raise ValueError(f"calibrate({name}=...) takes the pair (before, after) of "
                                 f"snapshots around the measurement, got {value!r}")
    before, after = stats
    s = read_stats(before, after, model=cfg.name or None)
    m = read_metrics(*metrics, model=s.model) if metrics is not None else None
    t = (trace if isinstance(trace, TritonTrace) or trace is None
         else read_trace(trace, model=s.model))
    rows = read_perf_analyzer(perf_analyzer) if perf_analyzer is not None else None

    # the instance is held from freeing until it starts its next batch, too
    gap = pickup_gap(t, cfg.max_queue_delay) if t is not None else 0.0
    if t is not None:
        # each instance's first execution on a fresh server is a cold start (10-19 times the
        # median here); the trace's first batch is dropped already, the others' are here
        cold = cfg.instances - 1
        samples = {k: v for k, v in t.samples(skip=cold).items() if len(v) >= MIN_EXECUTIONS}
        if not samples:
            raise ValueError(f"the trace has fewer than {MIN_EXECUTIONS} executions of every "
                             f"batch size: trace more requests")
        # the trace holds the run's first requests only; the statistics cover all of it, so
        # each size's traced executions keep their spread but take the statistics' mean
        whole = s.batch_time()
        scaled = sorted(k for k in samples if s.executions.get(k, 0) >= MIN_EXECUTIONS)
        for k in scaled:
            factor = whole[k] / float(np.mean(samples[k]))
            samples[k] = [x * factor for x in samples[k]]
        table, filled = _fill(samples, {k: len(v) for k, v in samples.items()},
                              cfg.max_batch_size, samples=True)
        table = {k: [x + gap for x in v] for k, v in table.items()}
        service = ServiceTime.empirical(table)
        service_note = (f"{sum(len(v) for v in samples.values())} traced executions (start "
                        f"to end of compute) of batch sizes {sorted(samples)}, at least "
                        f"{MIN_EXECUTIONS} each"
                        + (f" (the first {cold} left out: each instance's first execution is "
                           f"a cold start)" if cold else "")
                        + (f", sizes {scaled} scaled to the statistics API's mean over the "
                           f"whole run (the trace holds its first requests only)"
                           if scaled else "")
                        + f"{_filled_note(filled)}, each plus the mean "
                        f"pickup gap {gap * 1e3:.3f} ms (an instance's next batch waiting, "
                        f"from its freeing to that batch's start)")
        jitter_note = ("the traced executions, drawn independently (their correlation in "
                       "time is not modelled)")
    else:
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
            jitter = ("lognormal", cv) if cv > 0 else "deterministic"
            jitter_note = (f"lognormal cv {cv:.2f}, fitted to the server's compute_infer "
                           f"summary quantiles {sorted(infer_q)} as a mixture over the "
                           f"executed batch sizes" if cv > 0 else
                           "none: the compute_infer summary quantiles are explained by the "
                           "batch sizes alone")
        else:
            jitter = "deterministic"
            jitter_note = "unknown (no trace, no summary quantiles): taken as none"
        table, filled = _fill(means, s.executions, cfg.max_batch_size, samples=False)
        service_note += _filled_note(filled)
        service = ServiceTime.table(table, jitter=jitter)

    if rows:
        parts = [(r.client_send or 0) + (r.network or 0) + (r.client_recv or 0) for r in rows]
        overhead = float(np.mean(parts))
        overhead_note = (f"perf_analyzer's client send + network + client receive means, "
                         f"{overhead * 1e3:.3f} ms (over {len(rows)} row(s))")
    elif t is not None:
        overhead = max(float(np.mean(t.outside)), 0.0)
        overhead_note = (f"the trace's mean time in the server outside queue and execution, "
                         f"{overhead * 1e3:.3f} ms (network and client not included)")
    elif m is not None and m.request is not None and m.queue is not None:
        inside = m.queue + (m.compute_input or 0) + (m.compute_infer or 0) + \
            (m.compute_output or 0)
        overhead = max(m.request - inside, 0.0)
        overhead_note = (f"the metrics' mean request duration less queue and compute, "
                         f"{overhead * 1e3:.3f} ms (network and client not included)")
    else:
        overhead = 0.0
        overhead_note = "unknown (no perf_analyzer file, trace or metrics): taken as 0"

    node = cfg.node(service)
    chance, batcher_note = _prefetch(cfg, node, t, gap, prefetch)
    calibration = Calibration(
        knobs=f"{cfg.source} ({cfg.name or 'unnamed'}): max_batch_size {cfg.max_batch_size}, "
              f"delay {cfg.max_queue_delay * 1e3:g} ms, {cfg.instances} instance(s)",
        service=service_note, jitter=jitter_note, overhead=overhead_note,
        batcher=batcher_note)
    return replace(node, overhead=overhead, prefetch=chance, calibration=calibration)


def _prefetch(cfg: TritonConfig, node: Node, t: TritonTrace | None, gap: float,
              wanted: bool | None):
    """(Node.prefetch, the sentence saying where it comes from); ``gap`` is the trace's
    pickup gap, the batcher's lag in forming a batch."""
    if wanted is not None and not isinstance(wanted, bool):
        raise ValueError(f"calibrate(prefetch={wanted!r}): give True, False or None (auto)")
    if wanted is False:
        return None, "batches formed when an instance frees (prefetch=False)"
    reasons = []
    if cfg.max_queue_delay == 0:
        reasons.append("no delay, so Triton's batcher takes in every arrival until an "
                       "instance picks the batch up")
    db = cfg.message.dynamic_batching if cfg.message is not None else None
    if cfg.max_queue_size or (db is not None and (
            db.priority_levels > 1 or db.default_queue_policy.default_timeout_microseconds
            or db.default_queue_policy.allow_timeout_override)):
        reasons.append("the queue policy sets a limit, a timeout or priorities, which turns "
                       "Triton's prefetching off")
    if t is None:
        reasons.append("no trace to measure prefetching from")
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
                              f"{fraction:.2f}")
    if wanted:
        raise ValueError("calibrate(prefetch=True) cannot measure prefetching: "
                         + "; ".join(reasons))
    return None, "batches formed when an instance frees: " + "; ".join(reasons)
