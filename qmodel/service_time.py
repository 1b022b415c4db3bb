"""The service time of a batch, S(k): an affine law, a table of measured means, or samples.

Part of the description of a serving system (:mod:`qmodel.system` re-exports every name here):
frozen dataclasses, validated once, with messages that name the field and the fix. Units are
seconds.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import ClassVar, Mapping, Sequence

import numpy as np

from .checks import (LONGEST_PLAUSIBLE_SECONDS, MOST_REQUESTS_PER_BATCH, positive_duration,
                     positive_int, real_array, shown)
from .jitter import jitter_law, parse_jitter

__all__ = ["ServiceTime", "AffineService", "MeasuredService", "TableService",
           "EmpiricalService"]


@dataclass(frozen=True)
class ServiceTime:
    """The time one model instance takes to execute a batch of k requests, S(k).

    Build it with :meth:`affine`, :meth:`table` or :meth:`empirical`. For the first two,
    S(k) = mean(k) * J with J a unit-mean jitter drawn independently per batch:
    deterministic (J = 1), exponential, lognormal or gamma with coefficient of variation ``cv``.

    Each constructor returns an instance of a small subclass (:class:`AffineService`,
    :class:`TableService`, :class:`EmpiricalService`) that carries what its kind does: its
    mean, its spread and its description. All of them have every field below (the unused ones
    keep their defaults), so code may read ``base``, ``points``, ``samples``, ``jitter`` and
    ``cv`` of any service time; ``kind`` names the subclass ("affine", "table", "empirical").

    Examples
    --------
    >>> s = ServiceTime.affine(base=2.4e-3, per_item=0.54e-3)
    >>> round(float(s.mean(8)) * 1e3, 2)
    6.72
    >>> ServiceTime.affine(base=3e-3, per_item=2.5e-4, jitter=("lognormal", 0.3)).cv
    0.3
    >>> t = ServiceTime.table({1: 3.1e-3, 2: 3.6e-3, 4: 4.4e-3, 8: 6.7e-3})
    >>> round(float(t.mean(3)) * 1e3, 2)
    4.0
    >>> isinstance(t, ServiceTime), t.kind
    (True, 'table')
    """

    kind: ClassVar[str] = ""
    base: float = 0.0
    per_item: float = 0.0
    points: tuple = ()               # ((k, mean_seconds), ...) for kind "table"
    samples: tuple = ()              # ((k, (s1, s2, ...)), ...) for kind "empirical"
    jitter: str = "deterministic"
    cv: float = 0.0

    def __post_init__(self):
        if not self.kind:
            raise TypeError("build a ServiceTime with ServiceTime.affine, ServiceTime.table or "
                            "ServiceTime.empirical")

    # ---- constructors ---------------------------------------------------------------------
    @classmethod
    def affine(cls, base, per_item=0.0, jitter="deterministic") -> "ServiceTime":
        """S(k) = (base + per_item * k) * J.

        Parameters
        ----------
        base, per_item : float or str
            Seconds (or "2.4ms"). ``base`` > 0, ``per_item`` >= 0.
        jitter : str or (str, float)
            ``"deterministic"``, ``"exponential"``, ``("lognormal", cv)`` or ``("gamma", cv)``.
        """
        base = positive_duration(base, "ServiceTime.base")
        per_item = positive_duration(per_item, "ServiceTime.per_item", allow_zero=True)
        name, cv = parse_jitter(jitter)
        return AffineService(base=base, per_item=per_item, jitter=name, cv=cv)

    @classmethod
    def table(cls, means: Mapping[int, float], jitter="deterministic") -> "ServiceTime":
        """Measured mean batch times per batch size, linearly interpolated in between.

        Sizes beyond the measured range are extrapolated linearly from the two nearest
        measured points, with a warning: measure the sizes you deploy. Where that line reaches
        zero, or size 1 alone was measured and a larger size is asked for, a ValueError names
        the sizes to add (see :class:`MeasuredService`).
        """
        points = _checked_size_map(means, "ServiceTime.table")
        if len(points) < 2 and points[0][0] != 1:
            raise ValueError("ServiceTime.table needs at least two batch sizes, or size 1 alone "
                             f"(for max_batch_size 1); got sizes {[k for k, _ in points]}")
        pts = tuple((k, positive_duration(v, f"ServiceTime.table[{k}]")) for k, v in points)
        name, cv = parse_jitter(jitter)
        return TableService(points=pts, jitter=name, cv=cv)

    @classmethod
    def empirical(cls, samples: Mapping[int, Sequence[float]]) -> "ServiceTime":
        """Measured batch times per batch size, resampled as they are.

        A batch of a measured size k draws one of that size's samples uniformly. An unmeasured
        size draws from the nearest measured size, scaled by the ratio of the interpolated
        means, so its spread keeps the measured relative shape.
        """
        items = _checked_size_map(samples, "ServiceTime.empirical",
                                  "measured seconds, e.g. {1: [3.1e-3, 3.4e-3], 8: [6.7e-3]}")
        out = []
        for k, values in items:
            arr = real_array(values, f"ServiceTime.empirical[{k}]",
                             "a sequence of measured times in seconds").ravel()
            if arr.size == 0:
                raise ValueError(f"ServiceTime.empirical[{k}] has no samples; give at least one")
            bad = ~(np.isfinite(arr) & (arr > 0))
            if bad.any():
                raise ValueError(f"ServiceTime.empirical[{k}] must hold positive finite seconds; "
                                 f"{bad.sum()} of its {arr.size} samples are not, e.g. "
                                 f"{float(arr[bad][0])!r}")
            if arr.max() > LONGEST_PLAUSIBLE_SECONDS:
                raise ValueError(f"ServiceTime.empirical[{k}] has samples above "
                                 f"{LONGEST_PLAUSIBLE_SECONDS:g} s; convert to seconds")
            out.append((k, tuple(arr.tolist())))
        return EmpiricalService(samples=tuple(out), jitter="empirical", cv=float("nan"))

    # ---- what the engines and solvers ask -------------------------------------------------
    def mean(self, k):
        """Mean service time (seconds) of a batch of k requests; k scalar or array, k >= 1."""
        raise NotImplementedError

    def utilization(self, throughput: float, batch_sizes, servers: int) -> float:
        """The busy fraction of ``servers`` instances that serve ``throughput`` requests per
        second in batches of the law ``batch_sizes`` (k -> probability per batch, a mapping
        or an array indexed by k): throughput x E[S(K)] / (servers x E[K]), by conservation.

        Examples
        --------
        >>> ServiceTime.affine(2e-3, 1e-3).utilization(200.0, {2: 1.0}, 1)   # 100 x 4 ms
        0.4
        """
        if isinstance(batch_sizes, dict):
            k = np.array(list(batch_sizes), float)
            p = np.array(list(batch_sizes.values()), float)
        else:
            p = np.asarray(batch_sizes, float)
            k = np.arange(p.size, dtype=float)
            k, p = k[p > 0], p[p > 0]
        means = np.array([float(self.mean(int(j))) for j in k])
        return float(throughput * (p @ means) / (servers * (p @ k)))

    def scv(self, k) -> float:
        """Squared coefficient of variation of S(k): the jitter's cv², the same for every k.

        Examples
        --------
        >>> ServiceTime.affine(1e-3, jitter=("gamma", 0.5)).scv(8)
        0.25
        """
        return float(self.cv) ** 2

    def largest_cv(self, max_batch_size: int) -> float:
        """The largest coefficient of variation of S(k) over k = 1..max_batch_size: the
        jitter's cv, the same for every k.

        Examples
        --------
        >>> ServiceTime.affine(1e-3, jitter=("gamma", 0.5)).largest_cv(8)
        0.5
        """
        positive_int(max_batch_size, "max_batch_size")
        return float(self.cv)

    def scaled(self, factor: float) -> "ServiceTime":
        """Every batch ``factor`` times slower, the spread's shape kept (e.g. i instances
        time-slicing one GPU).

        Examples
        --------
        >>> ServiceTime.affine(2e-3, 1e-4, jitter=("gamma", 0.5)).scaled(2).describe()
        '4 ms + 0.2 ms x k, gamma jitter cv 0.5'
        """
        factor = float(factor)
        if not factor > 0:
            raise ValueError(f"ServiceTime.scaled: factor={factor!r} must be > 0")
        jitter = self.jitter if self.jitter in ("deterministic", "exponential") \
            else (self.jitter, self.cv)
        if self.kind == "affine":
            return ServiceTime.affine(self.base * factor, self.per_item * factor, jitter=jitter)
        if self.kind == "table":
            return ServiceTime.table({k: v * factor for k, v in self.points}, jitter=jitter)
        return ServiceTime.empirical({k: [v * factor for v in vs] for k, vs in self.samples})

    def nearest_measured(self, k: int) -> int:
        """The measured batch size whose samples a batch of k draws (empirical service)."""
        raise ValueError(f"nearest_measured is for empirical service times; this one is "
                         f"{self.kind!r}")

    @property
    def jitter_law(self):
        """The unit-mean jitter law J (:mod:`qmodel.jitter`); None for empirical samples, which
        carry their own spread."""
        return jitter_law(self.jitter, self.cv)

    def describe(self) -> str:
        law = self.jitter_law
        if not law.random:
            return self._describe_mean()
        return f"{self._describe_mean()}, {self.jitter} jitter cv {self.cv:g}"

    def _describe_mean(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class AffineService(ServiceTime):
    """S(k) = (base + per_item k) J: built by :meth:`ServiceTime.affine`."""

    kind: ClassVar[str] = "affine"

    def mean(self, k):
        k = np.asarray(k, dtype=float)
        return self.base + self.per_item * k

    def _describe_mean(self) -> str:
        return f"{self.base * 1e3:g} ms + {self.per_item * 1e3:g} ms x k"


@dataclass(frozen=True)
class MeasuredService(ServiceTime):
    """A service time whose means are measured at some batch sizes and interpolated linearly
    in between. Beyond the measured sizes the line through the two nearest is extended, with a
    warning that names the missing sizes; where that line reaches zero, or a single measured
    size leaves no line to extend, a ValueError says which sizes to measure."""

    # what a user adds to measure batch size k, e.g. "the mean time of batch size 8"
    measurement: ClassVar[str] = ""

    def measured_means(self) -> tuple[np.ndarray, np.ndarray]:
        """(sizes, mean seconds) at the measured sizes, sizes increasing."""
        raise NotImplementedError

    def mean(self, k):
        k = np.asarray(k, dtype=float)
        sizes, means = self.measured_means()
        below, above = k < sizes[0], k > sizes[-1]
        if sizes.size == 1:
            if below.any() or above.any():
                raise ValueError(self._one_size_message(k[below | above], sizes[0]))
            return np.full_like(k, means[0])
        lo = np.interp(k, sizes, means)
        left = means[0] + (k - sizes[0]) * (means[1] - means[0]) / (sizes[1] - sizes[0])
        right = means[-1] + (k - sizes[-1]) * (means[-1] - means[-2]) / (sizes[-1] - sizes[-2])
        out = np.where(below, left, np.where(above, right, lo))
        if np.any(out <= 0):
            raise ValueError(self._nonpositive_message(k, out, sizes, means))
        if below.any() or above.any():
            warnings.warn(self._extrapolated_message(k[below], k[above], sizes), stacklevel=2)
        return out

    # ---- the messages: which sizes were measured, which are missing, what to add -------------
    @property
    def field_name(self) -> str:
        """How messages name this service time: "ServiceTime.table" or "ServiceTime.empirical"."""
        return f"ServiceTime.{self.kind}"

    def _measured(self, sizes) -> str:
        listed = ", ".join(f"{s:g}" for s in sizes)
        return f"{self.field_name} measures batch size{'s' if sizes.size > 1 else ''} {listed}"

    def _one_size_message(self, missing, size) -> str:
        smaller, larger = missing[missing < size], missing[missing > size]
        sides = [(side, k) for side, k in (("smaller", smaller), ("larger", larger)) if k.size]
        unknown = " and ".join(f"{side} k = {_sizes(k)}" for side, k in sides)
        adds = " and ".join(f"{self.measurement} {k.min() if side == 'smaller' else k.max():g}"
                            for side, k in sides)
        return (f"{self._measured(np.array([size]))} only, so S(k) for the {unknown} is unknown "
                f"(one size gives no line to extend); measure the "
                f"{' and '.join(side for side, _ in sides)} sizes: add {adds}"
                + (f", or use max_batch_size={size:g}" if not smaller.size else ""))

    def _nonpositive_message(self, k, out, sizes, means) -> str:
        parts = []
        for side, where, pair in (("smaller", k < sizes[0], slice(0, 2)),
                                  ("larger", k > sizes[-1], slice(-2, None))):
            bad = where & (out <= 0)
            if not bad.any():
                continue
            (s0, s1), (m0, m1) = sizes[pair], means[pair]
            if side == "smaller":
                worst, edge = k[bad].min(), sizes[0]
                between = f" (and any sizes between it and {edge:g})" if worst < edge - 1 else ""
                fix = f"add {self.measurement} {worst:g}{between}"
            else:
                worst, edge = k[bad].max(), sizes[-1]
                fix = (f"add {self.measurement} {worst:g} (the largest asked for), or keep "
                       f"max_batch_size <= {edge:g}")
            at_worst = float(out[bad & (k == worst)][0])
            parts.append(
                f"the line through sizes {s0:g} and {s1:g} ({m0 * 1e3:.4g} ms, {m1 * 1e3:.4g} "
                f"ms) reaches S(k) <= 0 at the {side} k = {_sizes(k[bad])} "
                f"(S({worst:g}) = {at_worst * 1e3:.4g} ms); measure the {side} sizes: {fix}")
        return f"{self._measured(sizes)}: " + "; and ".join(parts)

    def _extrapolated_message(self, smaller, larger, sizes) -> str:
        parts = []
        if smaller.size:
            parts.append(f"S(k) for the smaller k = {_sizes(smaller)} is extrapolated from sizes "
                         f"{sizes[0]:g} and {sizes[1]:g}; add {self.measurement} "
                         f"{smaller.min():g}")
        if larger.size:
            parts.append(f"S(k) for the larger k = {_sizes(larger)} is extrapolated from sizes "
                         f"{sizes[-2]:g} and {sizes[-1]:g}; add {self.measurement} "
                         f"{larger.max():g} or keep max_batch_size <= {sizes[-1]:g}")
        return (f"service time extrapolated outside the measured batch sizes: "
                f"{self._measured(sizes)}; " + "; ".join(parts))


def _sizes(k) -> str:
    """Batch sizes for a message: "5..8" for a run of whole numbers, else a short list.

    Examples
    --------
    >>> _sizes(np.array([5.0, 6.0, 7.0, 8.0])), _sizes(np.array([1.0])), _sizes([1, 3])
    ('5..8', '1', '1, 3')
    """
    k = np.unique(np.asarray(k, dtype=float))
    if k.size > 2 and np.all(k == np.round(k)) and np.all(np.diff(k) == 1):
        return f"{k[0]:g}..{k[-1]:g}"
    listed = ", ".join(f"{x:g}" for x in k[:6])
    return listed + (", ..." if k.size > 6 else "")


@dataclass(frozen=True)
class TableService(MeasuredService):
    """Measured means times a jitter J: built by :meth:`ServiceTime.table`."""

    kind: ClassVar[str] = "table"
    measurement: ClassVar[str] = "the mean time of batch size"

    def measured_means(self):
        sizes, means = map(np.array, zip(*self.points))
        return sizes, means

    def _describe_mean(self) -> str:
        return "table " + ", ".join(f"{k}:{v * 1e3:g}ms" for k, v in self.points)


@dataclass(frozen=True)
class EmpiricalService(MeasuredService):
    """Measured samples, resampled: built by :meth:`ServiceTime.empirical`. Its ``jitter`` is
    "empirical" and its ``cv`` NaN: the samples carry their own spread."""

    kind: ClassVar[str] = "empirical"
    measurement: ClassVar[str] = "samples of batch size"

    def measured_means(self):
        sizes = np.array([s for s, _ in self.samples], dtype=float)
        means = np.array([np.mean(v) for _, v in self.samples])
        return sizes, means

    def nearest_measured(self, k: int) -> int:
        """The measured batch size whose samples a batch of k draws: the nearest one, the
        smaller on a tie.

        Examples
        --------
        >>> s = ServiceTime.empirical({1: [1e-3, 2e-3], 8: [5e-3]})
        >>> s.nearest_measured(3), s.nearest_measured(6)
        (1, 8)
        """
        k = positive_int(k, "batch size k")
        sizes = np.array([size for size, _ in self.samples])
        return int(sizes[np.argmin(np.abs(sizes - k))])

    def scaled_samples(self, k: int) -> np.ndarray:
        """The values a batch of k draws from, as the simulator draws them: the samples of the
        nearest measured size, scaled by the ratio of the interpolated means.

        Examples
        --------
        >>> s = ServiceTime.empirical({1: [1e-3, 3e-3], 4: [4e-3, 6e-3]})
        >>> (s.scaled_samples(2) * 1e3).round(4).tolist()          # mean(2) = 3 ms
        [1.5, 4.5]
        """
        values = np.asarray(dict(self.samples)[self.nearest_measured(k)], float)
        return values * (float(self.mean(k)) / float(values.mean()))

    def scv(self, k) -> float:
        """Squared coefficient of variation of S(k): that of the samples it draws from.

        Examples
        --------
        >>> ServiceTime.empirical({1: [1e-3, 3e-3]}).scv(1)
        0.25
        """
        values = np.asarray(dict(self.samples)[self.nearest_measured(k)], float)
        return float(values.var() / values.mean() ** 2)

    def largest_cv(self, max_batch_size: int) -> float:
        """The largest coefficient of variation of S(k) over k = 1..max_batch_size: that of
        the samples the widest-spread size among them draws from.

        Examples
        --------
        >>> s = ServiceTime.empirical({1: [1e-3, 3e-3], 8: [4e-3, 4e-3]})
        >>> s.largest_cv(2), s.largest_cv(8)
        (0.5, 0.5)
        >>> ServiceTime.empirical({1: [2e-3, 2e-3], 8: [4e-3, 6e-3]}).largest_cv(4)
        0.0
        """
        B = positive_int(max_batch_size, "max_batch_size")
        sizes = {self.nearest_measured(k) for k in range(1, B + 1)}
        return max(float(np.sqrt(max(self.scv(size), 0.0))) for size in sizes)

    @property
    def jitter_law(self):
        return None

    def describe(self) -> str:
        """The measured sizes, how many samples each, and the range of their means: short
        enough for a plan's one-line summary however many sizes were measured."""
        sizes = [k for k, _ in self.samples]
        counts = {len(v) for _, v in self.samples}
        if sizes == list(range(sizes[0], sizes[-1] + 1)) and len(sizes) > 2:
            shown_sizes = f"k {sizes[0]}-{sizes[-1]}"
        else:
            shown_sizes = "k " + ",".join(map(str, sizes))
        each = (f"{counts.pop()} samples each" if len(counts) == 1 else
                f"{min(counts)}-{max(counts)} samples")
        means = [float(np.mean(v)) * 1e3 for _, v in self.samples]
        return (f"empirical, {shown_sizes} ({each}), mean {min(means):.3g}-{max(means):.3g} "
                "ms")


def _checked_size_map(mapping, name, example="seconds, e.g. {1: 3.1e-3, 8: 6.7e-3}"):
    if not isinstance(mapping, Mapping) or not mapping:
        raise ValueError(f"{name} takes a non-empty mapping of batch size to {example}; got "
                         f"{shown(mapping)}")
    items = []
    for k, v in mapping.items():
        size = positive_int(k, f"{name} batch size", maximum=MOST_REQUESTS_PER_BATCH)
        items.append((size, v))
    return sorted(items)
