"""The latency result shared by theory and simulation.

A :class:`Latency` is a sojourn-time distribution (the time from a request's arrival to its
batch's completion) together with the serving metrics that come with it: throughput, utilization,
batch sizes, rejections, and a statement of how it was obtained. Solvers subclass it and implement
what they know in closed form (``_cdf`` at least); the base class supplies the rest, such as
quantiles by numeric inversion, in the style of ``scipy.stats`` distributions.

:class:`SampledLatency` is the empirical distribution of simulated sojourn times; it adds ``ci``,
confidence intervals of quantiles from independent replications. What a result claims about
itself, its :class:`Accuracy`, lives in :mod:`qmodel.accuracy` (re-exported here).
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from typing import Mapping

import numpy as np
from scipy import optimize, stats

from .accuracy import (EXACTNESS, Accuracy, Approximation, ErrorRange,  # noqa: F401
                       MeasuredError, SimulationEstimate, least_exact)
from .checks import real_array, shown

__all__ = ["Latency", "SampledLatency", "HistogramLatency", "LatticeLatency", "ShiftedLatency", "WeightedMixture",
           "with_overhead",
           "Accuracy", "Approximation", "ErrorRange", "MeasuredError", "SimulationEstimate"]


class Latency(ABC):
    """A sojourn-time distribution (seconds) with the serving metrics of the system it describes.

    Subclasses implement ``_cdf``; they may override ``_quantile`` and ``mean`` where they know
    better than numeric inversion and integration.

    Parameters
    ----------
    model : str
        Which model (or the simulator) answered, as a key that does not change with wording:
        ``"mmc"``, ``"mdc"``, ``"md1"``, ``"mg1_transform"``, ``"pollaczek_khinchine_lattice"``,
        ``"lindley_lattice"``, ``"fast_server"``, ``"batch_chain"``, ``"cavity"``,
        ``"balanced_queues"``, ``"least_outstanding_as_round_robin"``, ``"mixture"`` (a
        cluster's nodes), ``"pipeline"``, ``"cramer_lundberg"``, ``"exponential_tail"``,
        ``"kingman"``, ``"allen_cunneen"``, ``"fluid_backlog"``, ``"time_varying"`` or
        ``"simulation"``. Code decides on this (and on :attr:`accuracy`), never on
        ``method``. Every solver of qmodel's sets it; a subclass that does not gets its class
        name in snake case (``MyLatency``: ``"my_latency"``).
    method : str
        Which solver or engine produced it, in words for people, e.g. ``"M/M/c exact"``.
    accuracy : Accuracy
        Exactness and the error statement.
    throughput : float
        Served requests per second.
    utilization : float
        Fraction of instance time spent serving batches, in [0, 1].
    batch_size_distribution : mapping of int to float
        Probability that an executed batch has k requests (per batch, as Triton's
        ``nv_inference_exec_count`` counts them).
    rejection_fraction : float
        Fraction of arriving requests rejected by a full queue (0 with unlimited queues). The
        distribution describes served requests only.

    Attributes
    ----------
    stages : dict of str to Latency, or None
        For an :class:`~qmodel.Ensemble`: each stage's own sojourn (from the moment the
        request is ready at the stage to its completion there), by stage name; else None.
    """

    def __init__(self, *, method: str, accuracy: Accuracy, throughput: float,
                 utilization: float, batch_size_distribution: Mapping[int, float],
                 rejection_fraction: float = 0.0, model: str | None = None):
        if model is None:       # a subclass of the user's own: its class name, as a key
            model = re.sub(r"(?<!^)(?=[A-Z])", "_", type(self).__name__).lower()
        if not (isinstance(model, str) and model.isidentifier()):
            raise ValueError(f"model must be a key such as 'batch_chain', got {model!r}")
        self.model = model
        self.method = method
        self.accuracy = accuracy
        self.throughput = float(throughput)
        self.utilization = float(utilization)
        total = float(sum(batch_size_distribution.values()))
        self.batch_size_distribution = {int(k): float(v) / total
                                         for k, v in sorted(batch_size_distribution.items())
                                         if v > 0}
        self.rejection_fraction = float(rejection_fraction)
        self.stages = None
        for name in ("throughput", "utilization", "rejection_fraction"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"{name} of a {type(self).__name__} is not finite; "
                                 f"the solver {method!r} produced an invalid result")

    # --- what a subclass knows -------------------------------------------------------------
    @abstractmethod
    def _cdf(self, t: np.ndarray) -> np.ndarray:
        """P(sojourn <= t) for an array of t >= 0."""

    def _sf(self, t: np.ndarray) -> np.ndarray:
        """P(sojourn > t) for t >= 0; override to keep relative precision deep in the tail."""
        return 1.0 - self._cdf(t)

    def _quantile(self, p: np.ndarray) -> np.ndarray:
        """Numeric inversion of the cdf: the smallest t with cdf(t) >= p, to 1e-10 relative
        (below the noise of the transform inversions). Levels are taken in increasing order,
        each search starting at the quantile below it."""
        flat = p.ravel()
        out, start = np.empty(flat.size), None
        for i in np.argsort(flat, kind="stable"):
            out[i] = start = self._invert(float(flat[i]), start)
        return out.reshape(p.shape)

    def _invert(self, p: float, start: float | None = None) -> float:
        """The smallest t with cdf(t) >= p, to 1e-10 relative: a bracket [lo, hi] with
        cdf(lo) < p <= cdf(hi), found four-fold from ``start`` (or 1 us), closed by Brent's
        method (Brent 1973) on log sf.

        Brent's method keeps the bracket and bisects where its secant and inverse quadratic
        steps stall, so a jump of the cdf (deterministic service) is closed on like a root:
        the answer is then the jump point. In log sf an exponential tail is a line, so the
        tail levels converge in a few steps: about 12 evaluations per level where bisection
        took 50.
        """
        level = math.log1p(-p)

        seen: dict[float, float] = {}     # Brent's method asks for the bracket's ends again

        def gap(t):                       # >= 0 where cdf(t) >= p
            if t not in seen:
                seen[t] = level - math.log(max(float(self._sf(np.array([t]))[0]), 1e-300))
            return seen[t]

        hi = 1e-6 if start is None or not start > 0 else float(start)
        g_hi = gap(hi)
        while g_hi < 0:                   # grow the bracket up
            hi *= 4.0
            if hi > 1e9:
                raise ArithmeticError(f"cdf of {self.method!r} never reaches {p}")
            g_hi = gap(hi)
        lo = hi / 4.0
        g_lo = gap(lo)
        while g_lo >= 0:                  # or down
            hi, g_hi, lo = lo, g_lo, lo / 4.0
            if lo < 1e-15:
                return hi
            g_lo = gap(lo)
        if g_hi == 0.0:
            return hi
        t = optimize.brentq(gap, lo, hi, xtol=1e-10 * hi, rtol=1e-10, maxiter=200)
        # at a jump of the cdf Brent's method may stop just left of it, where cdf < p: the
        # jump lies within its tolerance to the right (else the bracket's end, where it holds)
        step = 2e-10 * (hi + abs(t))
        for _ in range(8):
            if gap(t) >= 0:
                return t
            t = min(t + step, hi)
        return hi

    @property
    def mean(self) -> float:
        """Mean sojourn time, integrating the survival function."""
        from scipy import integrate

        upper = self.quantile(1 - 1e-12)
        value, _ = integrate.quad(lambda t: float(self.sf(t)), 0.0, upper, limit=400)
        return value

    # --- the public, checked interface -----------------------------------------------------
    def cdf(self, t):
        """P(sojourn <= t); t in seconds, scalar or array."""
        return evaluate(self._cdf, t, below_zero=0.0)

    def sf(self, t):
        """P(sojourn > t) = 1 - cdf(t); t in seconds, scalar or array."""
        return evaluate(self._sf, t, below_zero=1.0)

    def quantile(self, p):
        """The p-quantile of the sojourn time (seconds); p in (0, 1), scalar or array."""
        arr = checked_levels(p)
        # a result's distribution never changes: each level is computed once (predict's
        # self-checks ask for p50-p99.9 before the caller does; some solvers invert a
        # transform for every level)
        known = self.__dict__.setdefault("_known_quantiles", {})
        levels = arr.reshape(-1).tolist()
        missing = [q for q in dict.fromkeys(levels) if q not in known]
        if missing:
            # kept in order with the levels computed before (at a jump of the cdf separate
            # searches may stop 1e-12 apart on either side of it)
            fresh = self._quantile(np.array(missing)).tolist()
            for q, t in sorted(zip(missing, fresh)):
                low = max((v for k, v in known.items() if k < q), default=-math.inf)
                high = min((v for k, v in known.items() if k > q), default=math.inf)
                known[q] = min(max(t, low), high)
        out = np.array([known[q] for q in levels], float).reshape(arr.shape)
        return float(out) if out.ndim == 0 else out

    @property
    def p50(self) -> float:
        return self.quantile(0.50)

    @property
    def p95(self) -> float:
        return self.quantile(0.95)

    @property
    def p99(self) -> float:
        return self.quantile(0.99)

    @property
    def mean_batch_size(self) -> float:
        """Mean executed batch size, per batch (Triton's inference_count / exec_count)."""
        return float(sum(k * v for k, v in self.batch_size_distribution.items()))

    def summary(self) -> dict:
        """The headline numbers as a plain dict (seconds, requests per second)."""
        return {
            "model": self.model,
            "method": self.method,
            "exactness": self.accuracy.exactness,
            "accuracy": self.accuracy.as_dict(),
            "p50": self.p50, "p95": self.p95, "p99": self.p99, "mean": self.mean,
            "throughput": self.throughput, "utilization": self.utilization,
            "mean_batch_size": self.mean_batch_size,
            "rejection_fraction": self.rejection_fraction,
        }

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.method}: p50={self.p50 * 1e3:.3f} ms "
                f"p95={self.p95 * 1e3:.3f} ms p99={self.p99 * 1e3:.3f} ms>")


class ShiftedLatency(Latency):
    """``base`` plus a constant ``shift`` seconds: a node's sojourn in the batcher plus the
    time its requests spend outside it (:attr:`qmodel.Node.overhead`).

    Examples
    --------
    >>> import qmodel as qm
    >>> base = qm.predict(qm.Node(qm.ServiceTime.affine(1e-3, jitter="exponential")),
    ...                   rate=500.0)
    >>> r = with_overhead(base, 0.4e-3)
    >>> round((r.p99 - base.p99) * 1e3, 6), round((r.mean - base.mean) * 1e3, 6)
    (0.4, 0.4)
    """

    def __init__(self, base: Latency, shift: float):
        self.base, self.shift = base, float(shift)
        super().__init__(model=base.model,
                         method=f"{base.method} + {self.shift * 1e3:g} ms outside the batcher",
                         accuracy=base.accuracy, throughput=base.throughput,
                         utilization=base.utilization,
                         batch_size_distribution=base.batch_size_distribution,
                         rejection_fraction=base.rejection_fraction)

    def _cdf(self, t):
        return np.asarray(self.base.cdf(t - self.shift), float)

    def _sf(self, t):
        return np.asarray(self.base.sf(t - self.shift), float)

    def _quantile(self, p):
        return np.asarray(self.base.quantile(p), float) + self.shift

    @property
    def mean(self) -> float:
        return self.base.mean + self.shift

    @property
    def parts(self):
        """The base's parts (a mixture's nodes), for checks that pair them with nodes."""
        return getattr(self.base, "parts", [self])


class WeightedMixture(Latency):
    """A mixture of latency laws: with probability ``weights[i]`` (normalised) a request's
    sojourn follows ``parts[i]``. The latency of a cluster (a part per node) and of a window
    of traffic (a part per moment) are such mixtures.

    Parts given more than once (the same object) are evaluated once.

    Examples
    --------
    >>> import qmodel as qm
    >>> a = qm.predict(qm.Node(qm.ServiceTime.affine(1e-3, jitter="exponential")), rate=500.0)
    >>> m = WeightedMixture([a, a], [1, 3], model="mixture", method="demo", accuracy=a.accuracy,
    ...                     throughput=500, utilization=0.5, batch_size_distribution={1: 1})
    >>> round(m.quantile(0.99) / a.quantile(0.99), 9)
    1.0
    """

    def __init__(self, parts, weights, **metrics):
        super().__init__(**metrics)
        self._set_parts(parts, weights)

    def _set_parts(self, parts, weights) -> None:
        w = np.asarray(weights, dtype=float)
        if len(parts) != w.size or w.size == 0 or np.any(w < 0) or not w.sum() > 0:
            raise ValueError("a mixture needs one non-negative weight per part, not all zero")
        self.parts, self.weights = list(parts), w / w.sum()
        distinct: dict[int, list] = {}
        for part, weight in zip(self.parts, self.weights):
            if weight > 0:
                distinct.setdefault(id(part), [part, 0.0])[1] += weight
        self._distinct = [(part, float(weight)) for part, weight in distinct.values()]

    def _cdf(self, t):
        # the weights sum to 1 up to rounding: keep the sum a probability
        return np.clip(sum(w * p.cdf(t) for p, w in self._distinct), 0.0, 1.0)

    def _quantile(self, p):
        if len(self._distinct) == 1:       # identical parts (a cluster of copies): the part's
            return np.asarray(self._distinct[0][0].quantile(p), float)
        return super()._quantile(p)

    def _sf(self, t):
        return np.clip(sum(w * p.sf(t) for p, w in self._distinct), 0.0, 1.0)

    @property
    def mean(self) -> float:
        return float(sum(w * p.mean for p, w in self._distinct))


def with_overhead(result: Latency, overhead: float) -> Latency:
    """``result`` with ``overhead`` seconds added to every sojourn (unchanged where 0)."""
    return ShiftedLatency(result, overhead) if overhead else result


class SampledLatency(Latency):
    """The empirical sojourn-time distribution of a simulation, with confidence intervals.

    Confidence intervals use sectioning (Asmussen & Glynn, "Stochastic Simulation", 2007,
    III.5): independent replications are pooled into sections, the quantile is estimated in
    each, and Student's t over the sections gives the interval around the pooled estimate.

    Samples are kept as float32 (relative resolution 6e-8, far below any confidence interval):
    it halves memory and makes sorting several times faster.

    Parameters
    ----------
    samples : ndarray
        Sojourn times of served requests (seconds), grouped by section: the first
        ``section_sizes[0]`` belong to section 0, and so on.
    section_sizes : sequence of int
        Number of samples in each independent section.
    **metrics
        Passed to :class:`Latency`.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = rng.exponential(1.0, 100_000)
    >>> r = SampledLatency(x, [5_000] * 20, model="simulation", method="demo",
    ...                    accuracy=Accuracy("simulation", "demo"), throughput=1.0,
    ...                    utilization=0.5, batch_size_distribution={1: 1.0})
    >>> round(r.p50, 2), round(r.cdf(1.0), 2)
    (0.69, 0.63)
    >>> lo, hi = r.ci(0.99)
    >>> bool(lo < np.log(100) < hi)
    True
    """

    def __init__(self, samples, section_sizes, **metrics):
        samples = np.asarray(samples, dtype=np.float32).ravel()
        sizes = np.asarray(section_sizes, dtype=np.int64)
        if samples.size == 0:
            raise ValueError("the simulation produced no served requests after warm-up; "
                             "raise requests= or lower warmup=")
        if sizes.sum() != samples.size or np.any(sizes < 0):
            raise ValueError("section_sizes must be non-negative and add up to the sample count")
        if not np.isfinite(samples).all():
            raise ValueError("simulated sojourn times are not all finite (a bug in the engine)")
        super().__init__(**metrics)
        self._sections = np.split(samples, np.cumsum(sizes)[:-1])
        self._sections = [x for x in self._sections if x.size]
        # sections: the independent groups of replicas whose quantiles give the CIs
        self._sorted = np.sort(samples)
        self.sections = len(self._sections)
        self.requests = samples.size
        self._section_cache: dict = {}

    def _cdf(self, t):
        # Compare at the samples' own (float32) precision, so that cdf(quantile(p)) >= p holds
        # for the rounded quantiles reported above.
        return np.searchsorted(self._sorted, t.astype(np.float32), side="right") / self._sorted.size

    def _quantile(self, p):
        # A float32 sample stands for the shortest decimal that rounds to it (2.5e-3, not
        # 0.0024999999441206455): report that, so printed latencies carry no false digits.
        picked = self._sorted[_rank(p, self._sorted.size)]
        return np.array([float(str(v)) for v in picked])

    @property
    def mean(self) -> float:
        return float(self._sorted.mean(dtype=np.float64))

    @property
    def samples(self) -> np.ndarray:
        """The sorted sojourn times (read-only view, float32 seconds)."""
        view = self._sorted.view()
        view.flags.writeable = False
        return view

    def section_quantiles(self, p: float) -> np.ndarray:
        """The p-quantile within each independent section (seconds)."""
        p = _one_level(p, "p")
        if p not in self._section_cache:
            out = []
            for x in self._sections:
                k = int(_rank(np.array([p]), x.size)[0])
                out.append(float(np.partition(x, k)[k]))
            self._section_cache[p] = np.array(out)
        return self._section_cache[p]

    def ci(self, p: float, level: float = 0.95) -> tuple[float, float]:
        """Confidence interval (seconds) for the p-quantile of the sojourn time.

        Parameters
        ----------
        p : float
            Quantile level, e.g. 0.99 for p99.
        level : float
            Confidence level of the interval, 0.95 by default.
        """
        return _sectioned_ci(self, p, level)


class HistogramLatency(Latency):
    """The distribution of simulated sojourn times counted into log-spaced bins.

    What the compiled engine (:mod:`qmodel.sim.compiled`) returns: every measured request is
    counted into a bin of its section, so a run of 10^10 requests costs the memory of its
    histogram, not of its samples. Bin b >= 1 holds ``[lo x r^(b-1), lo x r^b)`` with
    ``r = 1 + resolution``; bin 0 holds everything below ``lo`` and the last bin everything
    from its lower edge up. A quantile is its bin's geometric centre, within
    ``resolution / 2`` relative of the sample quantile (the rank rule of
    :class:`SampledLatency`); confidence intervals come from the sections as there
    (sectioning, Asmussen & Glynn 2007, III.5).

    Parameters
    ----------
    counts : ndarray (sections, bins) of int
        Requests per bin, one row per independent section.
    lo : float
        Lower edge of bin 1 (seconds).
    resolution : float
        Relative width of a bin, e.g. 0.0005.
    mean : float
        Mean sojourn (seconds), summed over the requests themselves.
    **metrics
        Passed to :class:`Latency`.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).exponential(1.0, 100_000)
    >>> lo, res = 1e-6, 5e-4
    >>> b = 1 + np.floor(np.log(x / lo) / np.log1p(res)).astype(int)
    >>> counts = np.stack([np.bincount(b[i::10], minlength=40_000) for i in range(10)])
    >>> r = HistogramLatency(counts, lo, res, float(x.mean()), model="simulation",
    ...                      method="demo", accuracy=Accuracy("simulation", "demo"),
    ...                      throughput=1.0, utilization=0.5, batch_size_distribution={1: 1})
    >>> bool(abs(r.p50 / np.quantile(x, 0.5) - 1) < 5e-4)
    True
    >>> lo99, hi99 = r.ci(0.99)
    >>> bool(lo99 < np.log(100) < hi99)
    True
    """

    def __init__(self, counts, lo: float, resolution: float, mean: float, **metrics):
        counts = np.asarray(counts, dtype=np.int64)
        if counts.ndim != 2 or counts.shape[1] < 3:
            raise ValueError("counts must be (sections, bins) with at least 3 bins")
        if counts.sum() == 0:
            raise ValueError("the simulation produced no served requests after warm-up; "
                             "raise requests= or lower warmup=")
        if not math.isfinite(mean):
            raise ValueError("the mean sojourn time is not finite (a bug in the engine)")
        super().__init__(**metrics)
        self._counts = counts[counts.sum(axis=1) > 0]
        self._total = self._counts.sum(axis=0)
        self._cum = np.cumsum(self._total)
        self.lo = float(lo)
        self.resolution = float(resolution)
        self._log_step = math.log1p(self.resolution)
        self.sections = self._counts.shape[0]
        self.requests = int(self._cum[-1])
        self._mean = float(mean)
        self._section_cache: dict = {}

    @property
    def below_range(self) -> int:
        """Requests faster than the lowest bin edge (their bin is ``(0, lo)``)."""
        return int(self._total[0])

    @property
    def above_range(self) -> int:
        """Requests in the last, open bin."""
        return int(self._total[-1])

    def _centre(self, b: np.ndarray) -> np.ndarray:
        """Geometric centre of bins b >= 1 (bin 0: half its upper edge)."""
        b = np.asarray(b, dtype=float)
        return np.where(b >= 1, self.lo * np.exp((b - 0.5) * self._log_step), self.lo / 2)

    def _bin_quantile(self, cum: np.ndarray, p: np.ndarray) -> np.ndarray:
        n = int(cum[-1])
        rank = _rank(p, n) + 1                # the rank-th smallest request
        b = np.searchsorted(cum, rank, side="left")
        if np.any(b >= cum.size - 1) or np.any(b == 0):
            raise ValueError(f"a quantile lies outside the histogram's bins "
                             f"({self.lo:.3g} s to {self._edge(cum.size - 1):.3g} s): the "
                             "latencies are outside the range the compiled engine counts; "
                             "simulate with engine='lookahead' or 'events'")
        return self._centre(b)

    def _edge(self, b):
        """Lower edge of bin b >= 1."""
        return self.lo * np.exp((np.asarray(b, dtype=float) - 1) * self._log_step)

    def _cdf(self, t):
        # Each bin's requests count at its centre: the cdf steps there, so that it and the
        # quantiles invert each other as an empirical distribution's do.
        t = np.asarray(t, dtype=float)
        with np.errstate(divide="ignore"):
            # + 1e-9 of a bin: a bin's own centre, given back, rounds into that bin
            z = np.floor(np.log(np.maximum(t, 1e-300) / self.lo) / self._log_step + 0.5 + 1e-9)
        b = np.where(t >= self.lo / 2, np.clip(z, 0, self._total.size - 1), -1).astype(np.int64)
        return np.where(b >= 0, self._cum[np.maximum(b, 0)], 0) / self.requests

    def _quantile(self, p):
        return self._bin_quantile(self._cum, p)

    @property
    def mean(self) -> float:
        return self._mean

    def section_quantiles(self, p: float) -> np.ndarray:
        """The p-quantile within each independent section (seconds)."""
        p = _one_level(p, "p")
        if p not in self._section_cache:
            self._section_cache[p] = np.array(
                [float(self._bin_quantile(np.cumsum(c), np.array([p]))[0])
                 for c in self._counts])
        return self._section_cache[p]

    def ci(self, p: float, level: float = 0.95) -> tuple[float, float]:
        """Confidence interval (seconds) for the p-quantile, as :meth:`SampledLatency.ci`."""
        return _sectioned_ci(self, p, level)


class LatticeLatency(Latency):
    """Sojourn-time distribution held as probabilities on a time lattice.

    ``pmf[i]`` is the probability of the cell ``((i - 1/2) h, (i + 1/2) h]``; the cdf
    interpolates linearly between cell edges.
    """

    def __init__(self, pmf: np.ndarray, h: float, **metrics):
        super().__init__(**metrics)
        pmf = np.clip(np.asarray(pmf, float), 0.0, None)
        self.h = float(h)
        self.pmf = pmf / pmf.sum()
        # cdf at the upper cell edges (i + 1/2) h
        self._edges = (np.arange(pmf.size) + 0.5) * h
        self._cum = np.minimum(np.cumsum(self.pmf), 1.0)

    def _cdf(self, t):
        return np.interp(t, np.concatenate([[0.0], self._edges]),
                         np.concatenate([[0.0], self._cum]), right=1.0)

    def _sf(self, t):
        tail = np.concatenate([[1.0], np.clip(1.0 - self._cum, 0.0, 1.0)])
        return np.interp(t, np.concatenate([[0.0], self._edges]), tail, right=0.0)

    def _quantile(self, p):
        xs = np.concatenate([[0.0], self._edges])
        ys = np.concatenate([[0.0], self._cum])
        # first cell whose upper cdf reaches p, then linear inside it
        i = np.searchsorted(ys, p, side="left").clip(1, ys.size - 1)
        y0, y1 = ys[i - 1], ys[i]
        frac = np.where(y1 > y0, (p - y0) / np.where(y1 > y0, y1 - y0, 1.0), 1.0)
        return xs[i - 1] + frac * (xs[i] - xs[i - 1])

    @property
    def mean(self) -> float:
        return float(np.dot(self.pmf, np.arange(self.pmf.size) * self.h))


def checked_levels(p, name: str = "p", what: str = "quantile level ",
                   example: tuple = (0.99, "the 99th percentile")) -> np.ndarray:
    """Probabilities as an array, each strictly between 0 and 1, or a ValueError naming
    ``what`` + ``name`` and, by ``example`` (a level and what it stands for), the fix.

    The one check of every level a result is asked for (quantiles, confidence levels): numbers
    or arrays of numbers, not strings or booleans; not NaN, 0, 1 or outside (0, 1).

    Examples
    --------
    >>> checked_levels([0.5, 0.99]).tolist()
    [0.5, 0.99]
    >>> checked_levels(99)
    Traceback (most recent call last):
    ...
    ValueError: quantile level p must lie strictly between 0 and 1, got 99 (for the 99th percentile pass 0.99, not 99)
    """
    level, meaning = example
    arr = real_array(p, f"{what}{name}", f"a probability strictly between 0 and 1 (a number or "
                     f"an array of numbers), e.g. {level:g} for {meaning}")
    bad = ~((arr > 0) & (arr < 1))
    if bad.any():
        values = arr[bad]
        got = shown(p) if arr.ndim == 0 else f"{shown(values.tolist(), 40)} in {name}={shown(p)}"
        hints = []
        if np.any(np.isnan(values)):
            hints.append("NaN is no probability")
        if np.any((values == 0) | (values == 1)):
            hints.append("0 and 1 themselves are excluded")
        percent = np.any((values > 1) & (values <= 100))
        hints.append(f"for {meaning} pass {level:g}" + (f", not {level * 100:g}" if percent
                                                          else ""))
        raise ValueError(f"{what}{name} must lie strictly between 0 and 1, got {got} "
                         f"({'; '.join(hints)})")
    return arr


def checked_times(t, name: str = "t") -> np.ndarray:
    """Times in seconds as an array (any real number, infinities included, not NaN), or a
    ValueError naming ``name``: the one check of every argument a result evaluates at a time.

    Examples
    --------
    >>> checked_times([0.001, -1.0]).tolist()
    [0.001, -1.0]
    >>> checked_times("5ms")
    Traceback (most recent call last):
    ...
    ValueError: t must be a time in seconds (a number or an array of numbers), e.g. 0.005 for 5 ms; got '5ms'
    """
    arr = real_array(t, name, "a time in seconds (a number or an array of numbers), e.g. 0.005 "
                     "for 5 ms")
    if np.isnan(arr).any():
        raise ValueError(f"{name} must be a time in seconds, got {shown(t)}: NaN is no time "
                         f"(is it the result of a failed computation?)")
    return arr


def evaluate(fn, t, below_zero: float):
    """Apply a distribution function defined for t >= 0 to any real t (scalar or array).

    Checks ``t`` (:func:`checked_times`), returns ``below_zero`` for t < 0, its complement for
    t = +inf (where a closed form may give inf * 0) and a float for a scalar argument. Shared by
    every cdf/sf-like method, so they behave alike.
    """
    arr = checked_times(t)
    inside = np.where(np.isinf(arr), 0.0, np.maximum(arr, 0.0))
    out = fn(inside.ravel()).reshape(arr.shape)
    out = np.where(arr < 0, below_zero, np.where(arr == np.inf, 1.0 - below_zero, out))
    return float(out) if out.ndim == 0 else out


def _sectioned_ci(result, p, level) -> tuple[float, float]:
    """Student's t interval over the section quantiles around the pooled quantile."""
    p = _one_level(p, "p")
    level = _one_level(level, "level", what="", example=(0.95, "a 95% interval"))
    if result.sections < 2:
        raise ValueError("a confidence interval needs at least 2 independent sections; "
                         "simulate with replicas >= 2 (with a Traffic: independent "
                         "realisations of it)")
    sec = result.section_quantiles(float(p))
    half = float(stats.t.ppf(0.5 + level / 2, result.sections - 1) * sec.std(ddof=1)
                 / math.sqrt(result.sections))
    centre = result.quantile(p)
    return centre - half, centre + half


def _one_level(p, name: str, what: str = "quantile level ", **how) -> float:
    """One probability in (0, 1) as a float (:func:`checked_levels`), not an array."""
    arr = checked_levels(p, name, what, **how)
    if arr.ndim:
        raise ValueError(f"{what}{name} must be one number here, got {shown(p)}; ask for one "
                         f"level at a time")
    return float(arr)


def _rank(p: np.ndarray, n: int) -> np.ndarray:
    """Index of the p-quantile in a sorted sample of size n: the smallest x with F_n(x) >= p."""
    # The factor absorbs rounding in p * n (0.99 * 100 must give rank 99, not 100).
    return np.clip(np.ceil(p * n * (1 - 1e-12)).astype(np.int64) - 1, 0, n - 1)
