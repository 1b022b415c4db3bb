"""The description of a serving system: service times, nodes, clusters, arrivals.

Everything here is a frozen dataclass, validated once, in this module, with messages that name the
field and the fix. Theory and simulation both consume these objects and never re-validate them.

Units are seconds and requests per second. Durations also accept strings with a unit ("2ms",
"500us", "1.5 s") so that values copied from a Triton config or a CLI stay readable.
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass, field
from typing import ClassVar, Mapping, Sequence

import numpy as np

from .checks import (LONGEST_PLAUSIBLE_SECONDS, MOST_INSTANCES, MOST_NODES, MOST_QUEUED,
                     MOST_REQUESTS_PER_BATCH, UnstableError, check_below_capacity,
                     parse_duration, positive_duration, positive_int, positive_rate, real_array,
                     shown)
from .jitter import jitter_law, parse_jitter
from .routers import ROUTER_NAMES, router_policy

__all__ = [
    "UnstableError", "ServiceTime", "AffineService", "MeasuredService", "TableService",
    "EmpiricalService", "Node", "Cluster", "Router",
    "Poisson", "Renewal", "Trace", "parse_duration", "check_stable",
]


# --------------------------------------------------------------------------------------------
# service time of a batch
# --------------------------------------------------------------------------------------------
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

    def scv(self, k) -> float:
        """Squared coefficient of variation of S(k): the jitter's cv², the same for every k.

        Examples
        --------
        >>> ServiceTime.affine(1e-3, jitter=("gamma", 0.5)).scv(8)
        0.25
        """
        return float(self.cv) ** 2

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

    @property
    def jitter_law(self):
        return None

    def describe(self) -> str:
        return "empirical " + ", ".join(f"{k}:{len(v)} samples" for k, v in self.samples)


def _checked_size_map(mapping, name, example="seconds, e.g. {1: 3.1e-3, 8: 6.7e-3}"):
    if not isinstance(mapping, Mapping) or not mapping:
        raise ValueError(f"{name} takes a non-empty mapping of batch size to {example}; got "
                         f"{shown(mapping)}")
    items = []
    for k, v in mapping.items():
        size = positive_int(k, f"{name} batch size", maximum=MOST_REQUESTS_PER_BATCH)
        items.append((size, v))
    return sorted(items)


# --------------------------------------------------------------------------------------------
# one node: a model with Triton's dynamic batcher and c instances
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Node:
    """One Triton model deployment: a dynamic batcher in front of ``instances`` model instances.

    Parameters
    ----------
    service : ServiceTime
        Batch execution time S(k).
    max_batch_size : int
        B >= 1. (Triton's 0 means "no batching"; write 1.)
    max_queue_delay : float or str
        D >= 0 seconds that the oldest pending request may wait for a fuller batch.
    preferred_batch_sizes : tuple of int
        Sizes in 1..B that dispatch at once; empty means {B}, as in Triton.
    instances : int
        c >= 1 model instances sharing the node's queue.
    max_queue_size : int
        Pending requests beyond which arrivals are rejected; 0 means unlimited.
    overhead : float or str
        Seconds every request spends outside the batcher (network, serialisation, the
        server's request handling): added to each sojourn by ``predict`` and ``simulate``; it
        holds no instance. :func:`qmodel.triton.calibrate` measures it; default 0.
    calibration : qmodel.triton.Calibration, optional
        Where a calibrated node's numbers come from (set by :func:`qmodel.triton.calibrate`;
        not part of the node's identity).

    Examples
    --------
    >>> n = Node(ServiceTime.affine(2e-3, 5e-4), max_batch_size=8, max_queue_delay="1ms")
    >>> n.max_queue_delay, n.effective_preferred, round(n.capacity)
    (0.001, (8,), 1333)
    """

    service: ServiceTime
    max_batch_size: int = 1
    max_queue_delay: float = 0.0
    preferred_batch_sizes: tuple = ()
    instances: int = 1
    max_queue_size: int = 0
    overhead: float = 0.0
    calibration: object = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if not isinstance(self.service, ServiceTime):
            raise ValueError("Node.service must be a qmodel.ServiceTime, e.g. "
                             "ServiceTime.affine(base=2e-3, per_item=5e-4)")
        if isinstance(self.max_batch_size, numbers.Integral) and self.max_batch_size == 0:
            raise ValueError("Node.max_batch_size=0 is Triton's 'no batching'; qmodel writes that "
                             "as max_batch_size=1 (every batch holds one request)")
        B = positive_int(self.max_batch_size, "Node.max_batch_size",
                         maximum=MOST_REQUESTS_PER_BATCH)
        object.__setattr__(self, "max_batch_size", B)
        object.__setattr__(self, "max_queue_delay",
                           positive_duration(self.max_queue_delay, "Node.max_queue_delay",
                                              allow_zero=True))
        object.__setattr__(self, "instances", positive_int(self.instances, "Node.instances",
                                                           maximum=MOST_INSTANCES))
        object.__setattr__(self, "max_queue_size",
                           positive_int(self.max_queue_size, "Node.max_queue_size", minimum=0,
                                        maximum=MOST_QUEUED))
        object.__setattr__(self, "overhead",
                           positive_duration(self.overhead, "Node.overhead", allow_zero=True))
        prefs = self.preferred_batch_sizes
        if isinstance(prefs, numbers.Integral):
            prefs = (prefs,)
        if isinstance(prefs, (str, bytes, Mapping)):
            raise ValueError("Node.preferred_batch_sizes must be a sequence of whole numbers such "
                             f"as (4, 8), got {shown(prefs)}")
        try:
            prefs = tuple(positive_int(p, "Node.preferred_batch_sizes") for p in prefs)
        except TypeError:
            raise ValueError("Node.preferred_batch_sizes must be a sequence of whole numbers such "
                             f"as (4, 8), got {shown(self.preferred_batch_sizes)}") from None
        if any(p > B for p in prefs):
            raise ValueError(f"Node.preferred_batch_sizes {prefs} must not exceed "
                             f"max_batch_size={B}; drop the larger sizes or raise max_batch_size")
        if len(set(prefs)) != len(prefs):
            raise ValueError(f"Node.preferred_batch_sizes {prefs} repeats a size")
        object.__setattr__(self, "preferred_batch_sizes", tuple(sorted(prefs)))
        if isinstance(self.service, MeasuredService):
            try:
                self.service.mean(np.arange(1, B + 1))  # warns once if B needs extrapolation
            except ValueError as err:
                raise ValueError(f"Node(max_batch_size={B}) needs S(k) for k = 1..{B}, but "
                                 f"{err}") from None

    @property
    def effective_preferred(self) -> tuple:
        """The preferred sizes Triton uses: the configured ones, or (max_batch_size,)."""
        return self.preferred_batch_sizes or (self.max_batch_size,)

    def preferred_table(self, upto: int | None = None) -> np.ndarray:
        """Table t[q] = the largest effective preferred size <= q (0 if none), q = 0..upto.

        ``upto`` defaults to max_batch_size. This is the one encoding of "the largest preferred
        size that fits", used by the simulator's batching rule and by the analytic models.

        Examples
        --------
        >>> Node(ServiceTime.affine(1e-3), max_batch_size=8,
        ...      preferred_batch_sizes=(4, 8)).preferred_table().tolist()
        [0, 0, 0, 0, 4, 4, 4, 4, 8]
        """
        return preferred_table(self.effective_preferred,
                               self.max_batch_size if upto is None else upto)

    @property
    def saturated_batch_size(self) -> int:
        """Batch size dispatched under overload: B with a delay, else the largest preferred size.

        With max_queue_delay > 0 an overloaded queue always holds a request older than the delay,
        so batches of max_batch_size go; with no delay the batcher never waits and dispatches the
        largest preferred size that fits (see docs/triton-semantics.md).
        """
        return self.max_batch_size if self.max_queue_delay > 0 else max(self.effective_preferred)

    @property
    def capacity(self) -> float:
        """Largest sustainable throughput (requests/s): instances * k / E[S(k)], k saturated."""
        k = self.saturated_batch_size
        return self.instances * k / float(self.service.mean(k))

    def describe(self) -> str:
        parts = [f"B={self.max_batch_size}", f"delay={self.max_queue_delay * 1e3:g}ms",
                 f"instances={self.instances}", f"S(k)={self.service.describe()}"]
        if self.preferred_batch_sizes:
            parts.insert(2, f"preferred={list(self.preferred_batch_sizes)}")
        if self.max_queue_size:
            parts.append(f"max_queue_size={self.max_queue_size}")
        if self.overhead:
            parts.append(f"overhead={self.overhead * 1e3:g}ms")
        return "Node(" + ", ".join(parts) + ")"


# --------------------------------------------------------------------------------------------
# routing and clusters
# --------------------------------------------------------------------------------------------
def preferred_table(preferred, upto: int) -> np.ndarray:
    """t[q] = largest size in ``preferred`` that is <= q (0 if none), for q = 0..upto.

    Examples
    --------
    >>> preferred_table([4, 8], 8).tolist()
    [0, 0, 0, 0, 4, 4, 4, 4, 8]
    """
    table = np.zeros(upto + 1, dtype=np.int64)
    for p in sorted(preferred):
        if p <= upto:
            table[p:] = p
    return table


@dataclass(frozen=True)
class Router:
    """How a load balancer in front of the nodes picks one for each request.

    Parameters
    ----------
    policy : {"random", "round_robin", "least_outstanding", "power_of_d"}
        ``random``: independent draws, optionally weighted (canary splits); ``round_robin``:
        nodes in turn; ``least_outstanding``: the node with the fewest queued plus in-service
        requests, ties at random (NGINX least_conn); ``power_of_d``: ``choices`` distinct nodes
        sampled uniformly, the least outstanding of them (Envoy LEAST_REQUEST samples 2).
        What each does lives in its policy object, :data:`qmodel.routers.ROUTERS`.
    weights : tuple of float, optional
        Only with ``random``: relative shares, normalised to sum 1.
    choices : int
        Only with ``power_of_d``: d.
    """

    policy: str
    weights: tuple | None = None
    choices: int = 2

    @property
    def kind(self):
        """The policy object (:class:`qmodel.routers.RouterPolicy`) that carries the behaviour."""
        return router_policy(self.policy)

    @property
    def is_static(self) -> bool:
        """True when the choice ignores node state (the nodes then decouple)."""
        return self.kind.static

    @property
    def name(self) -> str:
        return self.kind.display_name(self)


@dataclass(frozen=True)
class Cluster:
    """Several nodes behind a router.

    Parameters
    ----------
    nodes : Node or sequence of Node
        One node copied ``count`` times, or a list of (possibly different) nodes.
    count : int, optional
        How many copies of a single node; must match the list length if a list is given.
    router : str or Router
        ``"random"``, ``"round_robin"``, ``"least_outstanding"``, ``"power_of_two"`` or
        ``"power_of_d"`` (with ``choices``).
    weights : sequence of float, optional
        With ``router="random"``: each node's share, e.g. ``[9, 1]`` for a 90/10 canary split.
    choices : int, optional
        With ``router="power_of_d"``: how many nodes to sample per request.

    Examples
    --------
    >>> node = Node(ServiceTime.affine(2e-3, 5e-4), max_batch_size=8)
    >>> c = Cluster(node, count=4, router="power_of_two")
    >>> len(c.nodes), c.router.name, round(c.capacity)
    (4, 'power_of_two', 5333)
    """

    nodes: object
    count: int | None = None
    router: object = "random"
    weights: object = None
    choices: int | None = None

    def __post_init__(self):
        nodes = self.nodes
        if isinstance(nodes, Node):
            count = 1 if self.count is None else positive_int(self.count, "Cluster.count",
                                                               maximum=MOST_NODES)
            nodes = (nodes,) * count
            size = "node" if self.count is None else f"node, count={count}"
        else:
            if isinstance(nodes, (str, bytes)):
                raise ValueError(f"Cluster.nodes must be a Node or a list of Nodes, got "
                                 f"{shown(nodes)}")
            try:
                nodes = tuple(nodes)
            except TypeError:
                raise ValueError(f"Cluster.nodes must be a Node or a list of Nodes, got "
                                 f"{shown(nodes)}") from None
            if not nodes:
                raise ValueError("Cluster.nodes is empty; a cluster needs at least one Node")
            if not all(isinstance(n, Node) for n in nodes):
                raise ValueError("every entry of Cluster.nodes must be a qmodel.Node, got "
                                 f"{shown(next(n for n in nodes if not isinstance(n, Node)))}")
            if len(nodes) > MOST_NODES:
                raise ValueError(f"Cluster.nodes lists {len(nodes):,} nodes, more than "
                                 f"{MOST_NODES:,}, beyond anything qmodel is built to model")
            if self.count is not None and self.count != len(nodes):
                raise ValueError(f"Cluster.count={shown(self.count)} disagrees with the "
                                 f"{len(nodes)} nodes listed; drop count when you list the nodes")
            size = f"[{len(nodes)} node{'s' if len(nodes) > 1 else ''}]"
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "count", len(nodes))
        object.__setattr__(self, "router", self._make_router(len(nodes), size))
        object.__setattr__(self, "weights", self.router.weights)
        object.__setattr__(self, "choices", self.router.choices
                           if self.router.kind.samples_nodes else None)

    def _make_router(self, n: int, size: str) -> Router:
        r = self.router
        if isinstance(r, Router):
            name, weights, choices, explicit = r.policy, r.weights, r.choices, True
            if self.weights is not None or self.choices is not None:
                raise ValueError("give weights/choices either in the Router or in the Cluster, "
                                 "not both")
        elif isinstance(r, str):
            name, weights, choices, explicit = r, self.weights, self.choices, False
        else:
            raise ValueError(f"Cluster.router must be a string or a Router, got {shown(r)}")
        if not isinstance(name, str) or name not in ROUTER_NAMES:
            raise ValueError(f"Cluster.router {shown(name)} is unknown; use one of "
                             f"{', '.join(repr(x) for x in ROUTER_NAMES)}")
        policy = router_policy(name)
        weights, choices = policy.checked_parameters(weights, choices, n, explicit,
                                                     written=name, size=size)
        return Router(policy=policy.name, weights=weights, choices=choices)

    @property
    def shares(self) -> np.ndarray | None:
        """Each node's long-run share of requests for static routers; None for dynamic ones."""
        return self.router.kind.shares(self.router, len(self.nodes))

    @property
    def capacity(self) -> float:
        """Largest total rate (requests/s) the cluster sustains under its router.

        Static routers: the first node to saturate limits, min_i capacity_i / share_i. Dynamic
        routers send work where it fits: the sum of node capacities (necessary, and sufficient for
        least_outstanding; power_of_d over very unequal nodes can saturate earlier).
        """
        caps = np.array([n.capacity for n in self.nodes])
        shares = self.shares
        if shares is None:
            return float(caps.sum())
        used = shares > 0
        return float(np.min(caps[used] / shares[used]))

    def __repr__(self) -> str:
        return self.describe()

    def describe(self) -> str:
        kinds = {n for n in self.nodes}
        body = (f"{len(self.nodes)} x {self.nodes[0].describe()}" if len(kinds) == 1
                else f"{len(self.nodes)} nodes ({len(kinds)} kinds)")
        return f"Cluster({body}, router={self.router.name})"


# --------------------------------------------------------------------------------------------
# arrivals
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Poisson:
    """Poisson arrivals at ``rate`` requests per second."""

    rate: float

    def __post_init__(self):
        object.__setattr__(self, "rate", positive_rate(self.rate))

    scv = 1.0


@dataclass(frozen=True)
class Renewal:
    """Renewal arrivals: i.i.d. gamma interarrival times with mean 1/rate and squared
    coefficient of variation ``scv`` (1 is Poisson, 0 is deterministic, > 1 is bursty)."""

    rate: float
    scv: float = 1.0

    def __post_init__(self):
        object.__setattr__(self, "rate", positive_rate(self.rate))
        scv = self.scv
        if isinstance(scv, (bool, np.bool_)) or not isinstance(scv, numbers.Real) \
                or not math.isfinite(scv):
            raise ValueError(f"Renewal.scv must be a finite number >= 0, got {shown(scv)}")
        if scv < 0:
            raise ValueError(f"Renewal.scv={scv} must be >= 0 (0 deterministic, 1 Poisson)")
        if scv > 100:
            raise ValueError(f"Renewal.scv={scv} > 100 is outside what the gamma family models "
                             "well; use a Trace of the measured arrivals")
        object.__setattr__(self, "scv", float(scv) + 0.0)    # -0.0 becomes 0.0


@dataclass(frozen=True, eq=False)
class Trace:
    """A recorded sequence of arrival times (seconds, non-decreasing), replayed as is.

    Replications cut the trace into consecutive segments, so confidence intervals assume that
    segments far apart are nearly independent.
    """

    times: np.ndarray = field(repr=False)

    def __post_init__(self):
        t = np.array(real_array(self.times, "Trace.times",
                                "a sequence of arrival times in seconds"), dtype=float).ravel()
        if t.size < 2:
            raise ValueError("Trace.times needs at least 2 arrival times")
        if not np.all(np.isfinite(t)):
            raise ValueError(f"Trace.times contains NaN or infinite values, the first at index "
                             f"{int(np.argmax(~np.isfinite(t)))}; give arrival times in seconds")
        if np.any(np.diff(t) < 0):
            raise ValueError("Trace.times must be sorted in non-decreasing order")
        if t[-1] == t[0]:
            raise ValueError("Trace.times spans zero time; arrivals need distinct times")
        t.flags.writeable = False
        object.__setattr__(self, "times", t)

    @property
    def rate(self) -> float:
        return (self.times.size - 1) / float(self.times[-1] - self.times[0])

    @property
    def scv(self) -> float:
        gaps = np.diff(self.times)
        return float(gaps.var() / gaps.mean() ** 2)


def arrivals_from(rate=None, arrivals=None):
    """The arrival process from ``rate=`` (Poisson) or ``arrivals=`` (exactly one of them)."""
    if (rate is None) == (arrivals is None):
        raise ValueError("give exactly one of rate= (Poisson, requests per second) or "
                         "arrivals= (qmodel.Poisson, Renewal or Trace)")
    if arrivals is None:
        return Poisson(rate)
    if not isinstance(arrivals, (Poisson, Renewal, Trace)):
        raise ValueError("arrivals must be qmodel.Poisson, qmodel.Renewal or qmodel.Trace, "
                         f"got {type(arrivals).__name__}")
    return arrivals


def as_cluster(system) -> Cluster:
    """A Node is a one-node cluster; anything else must already be a Cluster."""
    if isinstance(system, Node):
        return Cluster(system)
    if isinstance(system, Cluster):
        return system
    if type(system).__name__ == "Ensemble":    # qmodel.ensemble imports this module
        raise NotImplementedError("a qmodel.Ensemble is described (stages, edges, capacity) "
                                  "but not simulated or predicted yet; model its stages as "
                                  "Nodes meanwhile")
    raise ValueError(f"system must be a qmodel.Node or qmodel.Cluster, got "
                     f"{type(system).__name__}")


def check_stable(system, rate: float) -> None:
    """Raise UnstableError if ``rate`` reaches the capacity of ``system``.

    Nodes with a finite ``max_queue_size`` shed load instead of growing, so they never make a
    system unstable.
    """
    if type(system).__name__ == "Ensemble":
        system.check_stable(rate)
        return
    cluster = as_cluster(system)
    rate = positive_rate(rate)
    if all(n.max_queue_size > 0 for n in cluster.nodes):
        return
    cap = cluster.capacity
    if rate >= cap:
        node = cluster.nodes[0]
        hint = ("add nodes or instances, raise max_batch_size"
                + (" or set max_queue_delay > 0 (with no delay, batches stop at the largest "
                   "preferred size)" if node.max_queue_delay == 0 and node.preferred_batch_sizes
                   else "")
                + ", or set max_queue_size to reject the excess")
        check_below_capacity(rate, cap, cluster.describe() if len(cluster.nodes) > 1
                             else node.describe(), hint)
