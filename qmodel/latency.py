"""The latency result shared by theory and simulation.

A :class:`Latency` is a sojourn-time distribution (the time from a request's arrival to its
batch's completion) together with the serving metrics that come with it: throughput, utilization,
batch sizes, rejections, and a statement of how it was obtained. Solvers subclass it and implement
what they know in closed form (``_cdf`` at least); the base class supplies the rest, such as
quantiles by numeric inversion, in the style of ``scipy.stats`` distributions.

:class:`SampledLatency` is the empirical distribution of simulated sojourn times; it adds ``ci``,
confidence intervals of quantiles from independent replications.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, replace
from typing import Mapping

import numpy as np
from scipy import optimize, stats

from .checks import real_array, shown

__all__ = ["Latency", "SampledLatency", "LatticeLatency", "ShiftedLatency", "with_overhead",
           "Accuracy", "Approximation", "ErrorRange", "MeasuredError", "SimulationEstimate"]

# What a result claims about itself; every result carries exactly one of these, from the most
# to the least trustworthy.
EXACTNESS = ("exact", "numerical", "approximation", "simulation")


@dataclass(frozen=True)
class Approximation:
    """One simplification a model makes: a short key (for code), a sentence (for people) and,
    where the approximation has one, the value of its parameter (e.g. a calibrated scv).

    Examples
    --------
    >>> Approximation("staggered_instances", "instances taken in turn").key
    'staggered_instances'
    """

    key: str
    text: str
    value: float | None = None


@dataclass(frozen=True)
class ErrorRange:
    """Relative errors of one quantile (predicted / simulated - 1) over a family of
    configurations: the lowest and highest (signed) and the median of their magnitudes."""

    low: float
    high: float
    median: float

    @property
    def worst(self) -> float:
        """The largest magnitude, max(|low|, |high|)."""
        return max(abs(self.low), abs(self.high))


@dataclass(frozen=True)
class MeasuredError:
    """How far a family of approximate models has been measured to be from the simulator.

    Parameters
    ----------
    family : str
        The family's key in :func:`qmodel.theory.measured.measured_table`.
    description : str
        Which configurations belong to it, in a few words.
    configurations : int
        How many configurations were measured.
    p95, p99 : ErrorRange
        Relative errors of the predicted p95 and p99 against the simulated ones.
    sources : tuple of str
        The scripts that measured them (their stored results are in validation/results/).
    p50 : ErrorRange, optional
        The median's errors, where the campaign recorded them.
    mean_batch_size, utilization : (float, float), optional
        Signed ranges of those errors, on ``batch_configurations`` of the configurations.
    domain : tuple of (str, float, float)
        The measured domain: for each feature of a configuration
        (:func:`qmodel.theory.measured.configuration_features`), the lowest and highest value
        among the measured configurations. The errors above hold there; :meth:`outside` says
        whether a configuration lies beyond it.
    """

    family: str
    description: str
    configurations: int
    p95: ErrorRange
    p99: ErrorRange
    sources: tuple
    p50: ErrorRange | None = None
    batch_configurations: int = 0
    mean_batch_size: tuple | None = None
    utilization: tuple | None = None
    domain: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "sources", tuple(self.sources))
        object.__setattr__(self, "domain", tuple((str(f), float(lo), float(hi))
                                                 for f, lo, hi in self.domain))

    def outside(self, features: Mapping[str, float]) -> str | None:
        """Which feature of a configuration lies outside the measured domain (the first
        found, in words), or None when every feature the domain bounds lies inside it.

        Examples
        --------
        >>> m = MeasuredError("demo", "demo nodes", 10, ErrorRange(-0.01, 0.02, 0.005),
        ...                   ErrorRange(-0.03, 0.04, 0.01), ("validation/demo.py",),
        ...                   domain=(("load", 0.1, 0.95),))
        >>> m.outside({"load": 0.5}) is None
        True
        >>> m.outside({"load": 0.99})
        "load 0.99 is outside 0.1-0.95, where family 'demo' was measured"
        """
        for feature, low, high in self.domain:
            value = features.get(feature)
            if value is None:
                continue
            slack = 1e-9 * max(abs(low), abs(high), 1.0)
            if not low - slack <= value <= high + slack:
                return (f"{feature} {value:.4g} is outside {low:.4g}-{high:.4g}, where family "
                        f"'{self.family}' was measured")
        return None

    @property
    def statement(self) -> str:
        """One sentence with the figures.

        Examples
        --------
        >>> m = MeasuredError("demo", "demo nodes", 10, ErrorRange(-0.01, 0.02, 0.005),
        ...                   ErrorRange(-0.03, 0.04, 0.01), ("validation/demo.py",))
        >>> print(m.statement)
        measured on 10 demo nodes against the simulator: p95 -1.0% to +2.0% (median |error| 0.5%), p99 -3.0% to +4.0% (median |error| 1.0%) (family 'demo', validation/demo.py)
        """
        parts = [f"{q} {r.low:+.1%} to {r.high:+.1%} (median |error| {r.median:.1%})"
                 for q, r in (("p50", self.p50), ("p95", self.p95), ("p99", self.p99))
                 if r is not None]
        text = (f"measured on {self.configurations} {self.description} against the simulator: "
                + ", ".join(parts))
        if self.mean_batch_size is not None:
            text += (f"; on {self.batch_configurations} of them mean batch size "
                     f"{self.mean_batch_size[0]:+.1%} to {self.mean_batch_size[1]:+.1%}, "
                     f"utilization {self.utilization[0]:+.1%} to {self.utilization[1]:+.1%}")
        return f"{text} (family '{self.family}', {', '.join(self.sources)})"


@dataclass(frozen=True)
class SimulationEstimate:
    """What a Monte Carlo result rests on: the requests measured after warm-up, the
    independent replicas, the relative half-width of the p99's 95% confidence interval (None
    with fewer than 2 replicas), the engine and the array library that ran it."""

    requests: int
    replicas: int
    p99_half_width: float | None
    engine: str = ""
    backend: str = ""


@dataclass(frozen=True)
class Accuracy:
    """How a latency result was obtained and how far it can be trusted, as fields.

    Parameters
    ----------
    exactness : {"exact", "numerical", "approximation", "simulation"}
        ``exact``: a closed form, correct to floating point. ``numerical``: exact up to a stated
        truncation or discretisation error. ``approximation``: a model with a measured error.
        ``simulation``: a Monte Carlo estimate with confidence intervals.
    basis : str
        How the result was computed and what bounds its numerical error, in one sentence,
        e.g. ``"closed form (Erlang C); float64 rounding only"``.
    lattice_step : float, optional
        The time lattice's step h (seconds) of a lattice solver.
    quantile_error : float, optional
        How far (seconds) a quantile can be off because of the lattice.
    truncated_mass : float, optional
        Probability mass the solver left out or discretised.
    approximations : tuple of Approximation
        The simplifications made (empty for exact and numerical results).
    measured : tuple of MeasuredError
        The measured errors of the approximations' families.
    simulation : SimulationEstimate, optional
        For Monte Carlo results.
    fallback_reason : str, optional
        Why no model answered, where ``predict`` fell back to the simulator.

    Examples
    --------
    >>> a = Accuracy("numerical", "demo solver", lattice_step=1e-5, quantile_error=1e-5,
    ...              truncated_mass=2e-8)
    >>> a.statement
    'demo solver; lattice step h = 0.01 ms (quantiles within about 0.01 ms); truncated or discretised mass 2.0e-08'
    """

    exactness: str
    basis: str = ""
    lattice_step: float | None = None
    quantile_error: float | None = None
    truncated_mass: float | None = None
    approximations: tuple = ()
    measured: tuple = ()
    simulation: SimulationEstimate | None = None
    fallback_reason: str | None = None

    def __post_init__(self):
        if self.exactness not in EXACTNESS:
            raise ValueError(f"exactness must be one of {EXACTNESS}, got {self.exactness!r}")
        object.__setattr__(self, "approximations", tuple(self.approximations))
        object.__setattr__(self, "measured", tuple(self.measured))

    @property
    def approximation_keys(self) -> tuple:
        """The keys of :attr:`approximations`, in order."""
        return tuple(a.key for a in self.approximations)

    def approximation(self, key: str) -> Approximation | None:
        """The approximation with this key, or None."""
        return next((a for a in self.approximations if a.key == key), None)

    @property
    def is_fallback(self) -> bool:
        """True where predict answered with the simulator because no model covers the system."""
        return self.fallback_reason is not None

    def p99_bounds(self, p99: float) -> tuple[float, float]:
        """The interval (seconds) in which this record says the true p99 lies, for the
        ``p99`` the result reports: the rule by which a prediction is judged (and a sizing
        margin taken).

        - A lattice: ``quantile_error`` (or, without it, ``lattice_step``) either side.
        - A simulation: its p99's 95% CI, ``simulation.p99_half_width`` relative.
        - Measured families: each family's p99 errors e = predicted / simulated - 1 lie in
          [low, high], so the true p99 lies in [p99 / (1 + high), p99 / (1 + low)]; with
          several families the widest range (the lowest low and the highest high).
        - Nothing stated ("exact", or an approximation without a measured family): the point.

        Truncated or discretised mass is not counted here: the self-checks
        (:mod:`qmodel.selfcheck`) refuse an answer whose mass is off.

        Examples
        --------
        >>> m = MeasuredError("demo", "demo nodes", 10, ErrorRange(-0.1, 0.1, 0.0),
        ...                   ErrorRange(-0.2, 0.25, 0.0), ("demo",))
        >>> Accuracy("approximation", measured=[m]).p99_bounds(1.0)
        (0.8, 1.25)
        >>> Accuracy("numerical", quantile_error=0.01).p99_bounds(1.0)
        (0.99, 1.01)
        """
        err = self.quantile_error if self.quantile_error is not None \
            else (self.lattice_step or 0.0)
        low, high = p99 - err, p99 + err
        if self.simulation is not None and self.simulation.p99_half_width is not None:
            half = self.simulation.p99_half_width
            low, high = low - half * p99, high + half * p99
        ranges = [m.p99 for m in self.measured if m.p99 is not None]
        if ranges:
            lowest = min(r.low for r in ranges)
            highest = max(r.high for r in ranges)
            low = low / (1.0 + highest)
            high = high / (1.0 + lowest) if lowest > -1.0 else math.inf
        return max(low, 0.0), high

    def clauses(self) -> list:
        """The statement's clauses, each derived from one field."""
        out = [self.basis] if self.basis else []
        if self.simulation is not None:
            sim = self.simulation
            clause = (f"Monte Carlo: {sim.requests} requests after warm-up in {sim.replicas} "
                      f"replicas")
            if sim.p99_half_width is not None:
                clause += f"; p99 95% CI +/-{sim.p99_half_width:.2%}"
            out.append(clause)
        if self.lattice_step is not None:
            clause = f"lattice step h = {self.lattice_step * 1e3:.4g} ms"
            if self.quantile_error is not None:
                clause += f" (quantiles within about {self.quantile_error * 1e3:.4g} ms)"
            out.append(clause)
        if self.truncated_mass is not None:
            out.append(f"truncated or discretised mass {self.truncated_mass:.1e}")
        out += [f"approximation: {a.text}" for a in self.approximations]
        out += [m.statement for m in self.measured]
        if self.fallback_reason is not None:
            out.append(f"no analytic model: {self.fallback_reason}")
        return out

    @property
    def statement(self) -> str:
        """The whole record in words (derived from the fields; never parse it)."""
        return "; ".join(self.clauses())

    def as_dict(self) -> dict:
        """The fields as plain data (for JSON), with the clauses and the statement."""
        return asdict(self) | {"clauses": self.clauses(), "statement": self.statement}

    def extended(self, *, exactness: str | None = None, basis: str | None = None,
                 approximations=(), measured=(), fallback_reason: str | None = None
                 ) -> "Accuracy":
        """This record with more approximations and measured errors in front of its own (for a
        model built on another model's result), optionally a new exactness and basis.

        Examples
        --------
        >>> a = Accuracy("numerical", "lattice solver")
        >>> b = a.extended(exactness="approximation",
        ...                approximations=[Approximation("renewal", "renewal counts")])
        >>> b.exactness, b.approximation_keys, b.basis
        ('approximation', ('renewal',), 'lattice solver')
        """
        return replace(
            self, exactness=exactness or self.exactness,
            basis=self.basis if basis is None else basis,
            approximations=_unique(tuple(approximations) + self.approximations),
            measured=_unique(tuple(measured) + self.measured),
            fallback_reason=self.fallback_reason if fallback_reason is None
            else fallback_reason)


    @classmethod
    def combine(cls, outer: "Accuracy", parts) -> "Accuracy":
        """The accuracy of a result assembled from ``parts`` (e.g. a cluster's nodes) by a step
        described by ``outer``: the weakest exactness, the largest lattice step and truncated
        mass, every approximation and measured error once.

        Examples
        --------
        >>> a = Accuracy("numerical", "node solver", lattice_step=1e-5, truncated_mass=1e-9)
        >>> c = Accuracy.combine(Accuracy("exact", "random split"), [a, a])
        >>> c.exactness, c.basis, c.lattice_step
        ('numerical', 'random split; nodes: node solver', 1e-05)
        """
        records = [outer, *parts]

        def largest(name):
            values = [getattr(r, name) for r in records if getattr(r, name) is not None]
            return max(values) if values else None

        bases = list(dict.fromkeys(p.basis for p in parts if p.basis))
        basis = outer.basis + ("; nodes: " + " | ".join(bases) if bases else "")
        return cls(least_exact(records), basis, lattice_step=largest("lattice_step"),
                   quantile_error=largest("quantile_error"),
                   truncated_mass=largest("truncated_mass"),
                   approximations=_unique(sum((r.approximations for r in records), ())),
                   measured=_unique(sum((r.measured for r in records), ())))


def _unique(items: tuple) -> tuple:
    """Items in order, each once."""
    return tuple(dict.fromkeys(items))


def least_exact(records) -> str:
    """The weakest exactness among Accuracy records (simulation weakest)."""
    return max((r.exactness for r in records), key=EXACTNESS.index)


class Latency(ABC):
    """A sojourn-time distribution (seconds) with the serving metrics of the system it describes.

    Subclasses implement ``_cdf``; they may override ``_quantile`` and ``mean`` where they know
    better than numeric inversion and integration.

    Parameters
    ----------
    method : str
        Which solver or engine produced it, e.g. ``"simulation/lookahead"`` or ``"M/M/c exact"``.
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
    """

    def __init__(self, *, method: str, accuracy: Accuracy, throughput: float,
                 utilization: float, batch_size_distribution: Mapping[int, float],
                 rejection_fraction: float = 0.0):
        self.method = method
        self.accuracy = accuracy
        self.throughput = float(throughput)
        self.utilization = float(utilization)
        total = float(sum(batch_size_distribution.values()))
        self.batch_size_distribution = {int(k): float(v) / total
                                         for k, v in sorted(batch_size_distribution.items())
                                         if v > 0}
        self.rejection_fraction = float(rejection_fraction)
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
        return optimize.brentq(gap, lo, hi, xtol=1e-10 * hi, rtol=1e-10, maxiter=200)

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
            known.update(zip(missing, self._quantile(np.array(missing)).tolist()))
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
        super().__init__(method=f"{base.method} + {self.shift * 1e3:g} ms outside the batcher",
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
    >>> r = SampledLatency(x, [5_000] * 20, method="demo",
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
        p = _one_level(p, "p")
        level = _one_level(level, "level", what="", example=(0.95, "a 95% interval"))
        if self.sections < 2:
            raise ValueError("a confidence interval needs at least 2 independent sections; "
                             "simulate with replicas >= 2")
        sec = self.section_quantiles(float(p))
        half = float(stats.t.ppf(0.5 + level / 2, self.sections - 1) * sec.std(ddof=1)
                     / math.sqrt(self.sections))
        centre = self.quantile(p)
        return centre - half, centre + half


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
