"""The description of a serving system: service times, nodes, clusters, arrivals.

Everything here is a frozen dataclass, validated once, in this module, with messages that name the
field and the fix. Theory and simulation both consume these objects and never re-validate them.

Units are seconds and requests per second. Durations also accept strings with a unit ("2ms",
"500us", "1.5 s") so that values copied from a Triton config or a CLI stay readable.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from .checks import (MOST_INSTANCES, MOST_NODES, MOST_QUEUED, MOST_RENEWAL_SCV,
                     MOST_REQUESTS_PER_BATCH, UnstableError, check_below_capacity,
                     parse_duration, positive_duration, positive_int, positive_rate, real_array,
                     shown)
from .drift import Drift
from .routers import ROUTER_NAMES, router_policy
from .service_time import (AffineService, EmpiricalService, MeasuredService,  # noqa: F401
                           ServiceTime, TableService)

__all__ = [
    "UnstableError", "ServiceTime", "AffineService", "MeasuredService", "TableService",
    "EmpiricalService", "Node", "Cluster", "Router",
    "Poisson", "Renewal", "Trace", "parse_duration", "check_stable",
]


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
    prefetch : float, optional
        Triton's prefetching batcher, its default where the queue policy sets no
        ``max_queue_size`` and no timeouts. None (default): a batch is formed when an instance
        frees, by the decision in docs/triton-semantics.md. A probability p in [0, 1]: with a
        delay, a batch is formed as soon as its delay runs out or it reaches the largest
        preferred size, even while every instance is busy, and then waits for an instance;
        with probability p it takes in the requests that queued meanwhile (a race between
        Triton's batcher and instance threads), otherwise it leaves as formed.
        :func:`qmodel.triton.calibrate` measures p from a trace. No model covers it:
        ``predict`` simulates, on the look-ahead engine (one node, static routers) or the
        compiled engine (behind every router); the event engine does not run it.
    slowdown : tuple of float, optional
        Instances that slow each other (sharing a GPU, or a CPU's cores): ``slowdown[m - 1]``
        multiplies S(k) for a batch that starts while m instances, itself included, are
        busy; ``slowdown[0]`` is 1 (``service`` is an instance running alone) and the last
        factor holds for more instances. None (default): instances run independently.
        :meth:`Profile.slowdown <qmodel.profiling.Profile.slowdown>` measures it from
        copies profiled at several concurrencies (``calibrate`` fits none from a trace:
        validation/triton_contention.py found none in the committed runs).
        No model covers it: ``predict`` simulates. The factor is drawn at the batch's start
        (an approximation of instances that share a device for part of a batch).
    drift : Drift, optional
        Executions whose speed wanders over time (:class:`qmodel.Drift`): every S(k) times a
        stationary factor of mean 1 that holds over steps of ``drift.period`` and is
        correlated from step to step. None (default), or a cv of 0: no drift.
        :func:`qmodel.triton.calibrate` measures it from a trace that covers enough periods.
        No model covers it: ``predict`` simulates, on the compiled engine.
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
    prefetch: float | None = None
    slowdown: tuple | None = None
    drift: Drift | None = None
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
        if self.prefetch is not None:
            p = self.prefetch
            if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0 <= p <= 1:
                raise ValueError(f"Node.prefetch={shown(p)}: give the probability in [0, 1] "
                                 f"that a batch formed ahead takes in later requests, or None "
                                 f"for a batch formed when an instance frees")
            if self.max_queue_size:
                raise ValueError("Node.prefetch needs max_queue_size=0: Triton turns "
                                 "prefetching off when the queue policy limits the queue")
            object.__setattr__(self, "prefetch", float(p))
        if self.slowdown is not None:
            object.__setattr__(self, "slowdown", _checked_slowdown(self.slowdown,
                                                                   self.instances))
        if self.drift is not None:
            if not isinstance(self.drift, Drift):
                raise ValueError(f"Node.drift={shown(self.drift)}: give a qmodel.Drift, e.g. "
                                 f"Drift(cv=0.03, period=0.1, correlation=0.6), or None")
            if self.drift.cv == 0.0:
                object.__setattr__(self, "drift", None)
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
        largest preferred size that fits (see docs/triton-semantics.md). A prefetching node
        (``prefetch``) too: once 2c formed batches wait for its c instances the batcher forms
        no more until one is picked up, and then forms it from requests past their delay, up
        to B. Replays at twice the capacity drained at this rate within 1% for B 8-16, one or
        several preferred sizes, prefetch 0 to 1 and 1, 2 or 4 instances
        (tests/test_sim_prefetch.py).
        """
        if self.max_queue_delay > 0:
            return self.max_batch_size
        return max(self.effective_preferred)

    @property
    def capacity(self) -> float:
        """Largest sustainable throughput (requests/s): instances * k / E[S(k)], k saturated
        (with ``slowdown``, S(k) of every instance busy)."""
        k = self.saturated_batch_size
        return self.instances * k / (float(self.service.mean(k))
                                     * self.slowdown_at(self.instances))

    def slowdown_at(self, busy: int) -> float:
        """The factor on S(k) of a batch that starts while ``busy`` instances (itself
        included) are busy: 1 without ``slowdown``.

        Examples
        --------
        >>> n = Node(ServiceTime.affine(1e-3), instances=3, slowdown=(1.0, 1.2))
        >>> n.slowdown_at(1), n.slowdown_at(2), n.slowdown_at(3)
        (1.0, 1.2, 1.2)
        """
        if self.slowdown is None:
            return 1.0
        return self.slowdown[min(busy, len(self.slowdown)) - 1]

    @property
    def prefetches(self) -> bool:
        """Whether Triton's prefetching batcher changes this node: ``prefetch`` is set and
        there is a delay (without one the batch grows with every arrival until an instance
        takes it, which is the rule at the instance's freeing) that acts, at a
        max_batch_size above 1 (a batch of one is full when formed: nothing can join it, and
        the batches leave in their requests' order either way)."""
        return (self.prefetch is not None and self.max_queue_delay > 0
                and self.max_batch_size > 1)

    def describe(self, service: bool = True) -> str:
        """One line naming the node's knobs; ``service=False`` leaves S(k) out."""
        parts = [f"B={self.max_batch_size}", f"delay={self.max_queue_delay * 1e3:g}ms",
                 f"instances={self.instances}"]
        if service:
            parts.append(f"S(k)={self.service.describe()}")
        if self.preferred_batch_sizes:
            parts.insert(2, f"preferred={list(self.preferred_batch_sizes)}")
        if self.max_queue_size:
            parts.append(f"max_queue_size={self.max_queue_size}")
        if self.overhead:
            parts.append(f"overhead={self.overhead * 1e3:g}ms")
        if self.prefetch is not None:
            parts.append(f"prefetch={self.prefetch:.2f}")
        if self.slowdown is not None:
            parts.append("slowdown=(" + ", ".join(f"{f:.3g}" for f in self.slowdown) + ")")
        if self.drift is not None:
            parts.append(self.drift.describe())
        return "Node(" + ", ".join(parts) + ")"


def _checked_slowdown(slowdown, instances: int) -> tuple:
    """``Node.slowdown`` as a tuple of floats, or ValueError naming the fix."""
    example = "e.g. slowdown=(1.0, 1.2) for two instances that each run 20% slower together"
    if isinstance(slowdown, (str, bytes, Mapping)) or not hasattr(slowdown, "__len__"):
        raise ValueError(f"Node.slowdown={shown(slowdown)}: give the factors on S(k) by the "
                         f"number of busy instances, {example}")
    if instances < 2:
        raise ValueError("Node.slowdown needs instances >= 2: one instance has no other to "
                         "share its device with")
    factors = []
    for f in slowdown:
        if isinstance(f, bool) or not isinstance(f, numbers.Real) or not math.isfinite(f) \
                or f <= 0:
            raise ValueError(f"Node.slowdown={shown(slowdown)}: every factor must be a "
                             f"positive number, {example}")
        factors.append(float(f))
    if not 2 <= len(factors) <= instances:
        raise ValueError(f"Node.slowdown={shown(slowdown)}: give 2 to instances={instances} "
                         f"factors (one instance alone, two busy, ...; the last holds for "
                         f"more), {example}")
    if abs(factors[0] - 1.0) > 1e-9:
        raise ValueError(f"Node.slowdown={shown(slowdown)}: the first factor (an instance "
                         f"running alone) must be 1; scale the ServiceTime instead")
    return tuple(factors)


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
        if _is_ensemble(nodes):
            count = 1 if self.count is None else positive_int(self.count, "Cluster.count",
                                                               maximum=MOST_NODES)
            object.__setattr__(self, "nodes", (nodes,) * count)
            object.__setattr__(self, "count", count)
            object.__setattr__(self, "router", self._make_router(count, f"pod, count={count}"))
            object.__setattr__(self, "weights", self.router.weights)
            object.__setattr__(self, "choices", None)
            if not self.router.is_static:
                raise ValueError(f"Cluster of Ensemble pods: router={self.router.name!r} is "
                                 "not modelled for pipelines (a pod's outstanding count spans "
                                 "its stages); use 'random' (with weights) or 'round_robin'")
            return
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
    def pods(self) -> bool:
        """True when every node is the same :class:`~qmodel.Ensemble` (a pod serving the whole
        pipeline)."""
        return _is_ensemble(self.nodes[0])

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
        if scv > MOST_RENEWAL_SCV:
            raise ValueError(f"Renewal.scv={scv} > {MOST_RENEWAL_SCV:g} is outside what the "
                             "gamma family models "
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

    def gap_autocorrelation(self, lags: int = 10) -> np.ndarray:
        """The sample autocorrelation of the successive gaps' ranks at lags 1 to ``lags``
        (Spearman's; zeros where the gaps do not vary). Ranks of independent gaps are
        independent whatever the gaps' law, so their values lie within a few times
        1 / sqrt(gaps) of 0 even for long-tailed gaps, where the gaps' own autocorrelation
        strays far wider; bursts give positive values.

        Examples
        --------
        >>> rng = np.random.default_rng(1)
        >>> t = Trace(np.cumsum(rng.exponential(1e-3, 100_000)))
        >>> bool(np.all(np.abs(t.gap_autocorrelation()) < 4 / np.sqrt(100_000)))
        True
        >>> bursts = np.cumsum(np.repeat(rng.exponential(1e-3, 10_000), 10))
        >>> round(float(Trace(bursts).gap_autocorrelation(1)[0]), 1)
        0.9
        """
        gaps = np.diff(self.times)
        order = np.argsort(gaps, kind="stable")
        ranks = np.empty(gaps.size)
        ranks[order] = np.arange(gaps.size)
        # ties (equal gaps) share their mean rank
        _, inverse, counts = np.unique(gaps, return_inverse=True, return_counts=True)
        sums = np.bincount(inverse, weights=ranks)
        x = sums[inverse] / counts[inverse]
        x = x - x.mean()
        var = float(x @ x)
        lags = min(int(lags), x.size - 1)
        if var <= 0.0 or lags < 1:
            return np.zeros(max(lags, 0))
        return np.array([float(x[:-k] @ x[k:]) / var for k in range(1, lags + 1)])


def arrivals_from(rate=None, arrivals=None):
    """The arrival process from ``rate=`` (Poisson) or ``arrivals=`` (exactly one of them)."""
    if (rate is None) == (arrivals is None):
        raise ValueError("give exactly one of rate= (Poisson, requests per second) or "
                         "arrivals= (qmodel.Poisson, Renewal or Trace)")
    if arrivals is None:
        return Poisson(rate)
    if not isinstance(arrivals, (Poisson, Renewal, Trace)):
        raise ValueError("arrivals must be qmodel.Poisson, qmodel.Renewal or qmodel.Trace "
                         "(qmodel.Traffic, a rate that changes with time, in qmodel.simulate "
                         f"and qmodel.predict), got {type(arrivals).__name__}")
    return arrivals


def _is_ensemble(system) -> bool:
    return type(system).__name__ == "Ensemble"    # qmodel.ensemble imports this module


def as_cluster(system) -> Cluster:
    """A Node is a one-node cluster; anything else must already be a Cluster."""
    if isinstance(system, Node):
        return Cluster(system)
    if isinstance(system, Cluster):
        return system
    if _is_ensemble(system):
        return Cluster(system)
    raise ValueError(f"system must be a qmodel.Node, Ensemble or Cluster, got "
                     f"{type(system).__name__}")


def check_stable(system, rate: float) -> None:
    """Raise UnstableError if ``rate`` reaches the capacity of ``system``.

    Nodes with a finite ``max_queue_size`` shed load instead of growing, so they never make a
    system unstable.
    """
    cluster = as_cluster(system)
    if cluster.pods:
        share = 1.0 if cluster.shares is None else float(np.max(cluster.shares))
        cluster.nodes[0].check_stable(positive_rate(rate) * share)
        return
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
