"""How far the search trusts a prediction, and the range rule: an SLO over a range of rates.

- :func:`model_answer` is the answer a candidate is ranked by: the model's, never a
  simulation, also outside its family's measured domain (marked).
- :func:`trusted_quantile` raises a quantile by the error its result states.
- :class:`Rates` is what a plan must hold at: one rate, or every rate in [low, peak].
  :func:`worst_over_rates` evaluates a system over it: the model at both ends and on a
  geometric grid between them (:data:`GRID_POINTS` points), then, for each SLO key, a
  golden-section search around each local maximum of the grid (an end included, towards its
  neighbour), so that a maximum of the tail between grid points is found
  (the tail against the rate is U-shaped with a delay: high at low rates, where the delay is
  waited out, and near capacity). validation/range_grid.py measures how close this comes to
  the maximum over a dense grid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..checks import UnstableError
from ..latency import Approximation
from ..slo import LEVELS

__all__ = ["model_answer", "trusted_quantile", "is_extrapolated", "Rates", "RangeAnswer",
           "worst_over_rates", "GRID_POINTS"]

# interior points of the geometric grid between the ends of a range, and golden-section
# steps around the worst of them
GRID_POINTS = 6
REFINE_STEPS = 8


def model_answer(system, rate: float, budget=None, scv: float = 1.0):
    """The answer a candidate is ranked by: the model's, never a simulation, and outside its
    family's measured domain the model's own (``extrapolate=True``, marked in its accuracy).

    Within the domain a model is trusted to its measured error (:func:`trusted_quantile`).
    Outside it, nothing measured says how far off it is; the search still ranks by it, because
    refusing would leave whole spaces unsized, and the plan's simulation is what vouches for
    the chosen one. A node with Triton's prefetching batcher (``Node.prefetch``) has no model:
    it is ranked by the model of the same node forming batches when an instance frees
    (marked ``prefetch_ranked_without``), and the plan's simulation keeps the prefetch. One
    such node states the error of that answer measured against the prefetching node (the
    families ``prefetch_one_instance`` and ``prefetch_several_instances``, which replace the
    at-free node's own, and their domain); behind a router no family measured it.
    ``scv`` other than 1 takes renewal arrivals of that squared coefficient of variation (a
    Traffic's shape). Raises UnstableError, or NotImplementedError where no model covers the
    system at all.
    """
    from ..predict import predict
    from ..system import Node, Renewal

    def answer(s):
        if scv == 1.0:
            return predict(s, rate=rate, fallback="raise", extrapolate=True, budget=budget)
        return predict(s, arrivals=Renewal(rate, scv), fallback="raise", extrapolate=True,
                       budget=budget)

    try:
        return answer(system)
    except NotImplementedError:
        plain = without_prefetch(system)
        if plain is system:
            raise
    result = answer(plain)
    accuracy = result.accuracy.extended(approximations=[Approximation(
        "prefetch_ranked_without",
        "ranked by the model of the same nodes without Triton's prefetching batcher "
        "(no model covers it); the plan's simulation keeps it")])
    if isinstance(system, Node):
        accuracy = _prefetch_measured(accuracy, system, rate, scv)
    result.accuracy = accuracy
    return result


def _prefetch_measured(accuracy, node, rate: float, scv: float):
    """``accuracy`` of the at-free answer for a prefetching ``node``, restated with the
    error measured against the prefetching node (validation/prefetch_accuracy.py): its
    family in place of the at-free node's own, and outside that family's domain (which
    bounds the prefetch share) marked as extrapolated."""
    from ..stationary import extrapolated
    from ..theory.measured import configuration_features, measured, prefetch_family

    family = measured(prefetch_family(node.instances))
    kept = tuple(a for a in accuracy.approximations if a.key != "outside_measured_domain")
    accuracy = replace(accuracy, exactness="approximation", approximations=kept,
                       measured=(family,))
    outside = family.outside(configuration_features(node, rate / node.capacity, scv))
    if outside is None:
        return accuracy
    return extrapolated(accuracy, f"{outside} (its measured error {family.p99.low:+.1%} to "
                                  f"{family.p99.high:+.1%} on p99 is not known to hold here)")


def without_prefetch(system):
    """``system`` with every node forming batches when an instance frees (itself where none
    prefetches)."""
    from ..ensemble import Ensemble
    from ..system import Cluster, Node

    def plain(node):
        if isinstance(node, Ensemble):
            stages = {name: plain(n) for name, n in node.stages.items()}
            if all(stages[n] is node.stages[n] for n in stages):
                return node
            return Ensemble(stages, list(node.edges))
        return replace(node, prefetch=None) if node.prefetch is not None else node

    if isinstance(system, (Node, Ensemble)):
        return plain(system)
    nodes = [plain(n) for n in system.nodes]
    if all(a is b for a, b in zip(nodes, system.nodes)):
        return system
    if system.pods:
        return Cluster(nodes[0], count=len(nodes), router=system.router)
    return Cluster(nodes, router=system.router)


def is_extrapolated(result) -> bool:
    """Whether ``result`` is a model's answer outside its family's measured domain."""
    return any(a.key == "outside_measured_domain" for a in result.accuracy.approximations)


def trusted_quantile(result, level: float) -> float:
    """The quantile at ``level`` raised by what ``result`` says about its own error.

    - a simulation: the upper end of its 95% confidence interval;
    - a model with a measured family: the quantile divided by (1 + the family's lowest error
      at that level), where that error is negative (the model has read low by that much); the
      p50 uses the family's p50 errors where measured, else its p95 errors; p99.9 the p99's;
    - a lattice: plus its step (``accuracy.quantile_error``).

    An answer outside its family's measured domain also carries the error measured on such
    answers (family ``extrapolated``, -41% to +100% on p99); a search does not rank by that
    range, which would price every extrapolated candidate at twice its answer, but by its
    family's, and the plan's simulation vouches for the candidate chosen
    (:func:`model_answer`). ``accuracy.p99_bounds`` states the wide range. An extrapolated
    answer with no family of its own takes that range; with no error measured at all (a
    trace of correlated gaps), infinity.

    Examples
    --------
    >>> import qmodel as qm
    >>> r = qm.predict(qm.Node(qm.ServiceTime.affine(1e-3, jitter="exponential")), rate=500.0)
    >>> round(trusted_quantile(r, 0.99) / r.quantile(0.99), 6)    # M/M/1: exact
    1.0
    """
    q = float(result.quantile(level))
    acc = result.accuracy
    if acc.exactness == "simulation" and getattr(result, "sections", 0) >= 2:
        return float(result.ci(level)[1])
    own = [f for f in acc.measured if f.family != "extrapolated"]
    if is_extrapolated(result) and not own:
        # no family of its own: the error measured on extrapolations, where there is one
        own = list(acc.measured)
        if not own:
            return math.inf
    low = 0.0
    for family in own:
        if level <= 0.5 and family.p50 is not None:
            rng = family.p50
        elif level <= 0.95:
            rng = family.p95
        else:
            rng = family.p99
        low = min(low, rng.low)
    if low < 0:
        q /= 1.0 + low
    return q + (acc.quantile_error or 0.0)


@dataclass(frozen=True)
class Rates:
    """The rates an SLO must hold at: ``low`` to ``peak`` (requests per second), one rate
    where they are equal.

    Examples
    --------
    >>> [round(r) for r in Rates(1000.0, 10000.0).grid()]
    [10000, 1000, 1389, 1931, 2683, 3728, 5179, 7197]
    >>> Rates(500.0, 500.0).grid()
    [500.0]
    """

    low: float
    peak: float

    @property
    def single(self) -> bool:
        return self.low == self.peak

    def grid(self) -> list:
        """The peak first (most configurations fail there), then the low end, then the
        geometric grid between them."""
        if self.single:
            return [self.peak]
        ratio = self.peak / self.low
        inner = [self.low * ratio ** (i / (GRID_POINTS + 1)) for i in range(1, GRID_POINTS + 1)]
        return [self.peak, self.low, *inner]

    def scaled(self, factor: float) -> "Rates":
        """The rates seen with ``factor`` of the nodes (a node's share)."""
        return Rates(self.low * factor, self.peak * factor)

    def describe(self) -> str:
        return (f"{self.peak:,.6g} req/s" if self.single
                else f"every rate in [{self.low:,.6g}, {self.peak:,.6g}] req/s")


@dataclass(frozen=True)
class RangeAnswer:
    """A system over a range of rates: the worst trusted quantile over its target, where.

    Attributes
    ----------
    worst_ratio : float
        The largest trusted quantile (plus the network budget) over its target, over every
        rate evaluated and every SLO key; inf where unstable or no model answers.
    binding : float
        The rate where it is largest.
    result : Latency or None
        The model's answer there.
    quantiles, trusted : dict
        SLO key -> predicted and trusted (+ network) quantile at the binding rate.
    evaluated : int
        Predictions made.
    complete : bool
        False where the evaluation stopped at the first rate that missed (then worst_ratio
        is a lower bound).
    method : str
        The model that answered at the binding rate, or why none did.
    extrapolated : bool
        Whether any answer lay outside its family's measured domain.
    """

    worst_ratio: float
    binding: float
    result: object
    quantiles: dict
    trusted: dict
    evaluated: int
    complete: bool
    method: str
    extrapolated: bool


def worst_over_rates(answer, rates: Rates, slo: dict, network: float = 0.0,
                     stop_at_miss: bool = True) -> RangeAnswer:
    """Evaluate ``answer(rate)`` (a Latency, or UnstableError / NotImplementedError) over
    ``rates`` (see the module docstring): the worst ratio of trusted quantile plus
    ``network`` to target, and where it is. With ``stop_at_miss`` the evaluation stops at
    the first rate that misses the SLO (the candidate is infeasible whatever the rest).

    Examples
    --------
    A 10 ms delay: at 100 req/s a request waits it out alone; from about 500 req/s a batch
    often fills first; in between, the longest tail (a delay waited out, then a batch of
    several), which the grid brackets and the search finds (a grid of 80 rates: 536 req/s,
    11.761 ms).

    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(1e-3, 0.1e-3), max_batch_size=8,
    ...                max_queue_delay=10e-3)
    >>> answer = lambda x: qm.predict(node, rate=x, extrapolate=True)
    >>> r = worst_over_rates(answer, Rates(100.0, 3000.0), {"p99": 12e-3}, stop_at_miss=False)
    >>> round(r.binding), round(r.quantiles["p99"] * 1e3, 3), r.evaluated
    (540, 11.761, 18)
    """
    seen: dict = {}
    state = {"evaluated": 0, "extrapolated": False}

    def ratio(rate):
        if rate not in seen:
            state["evaluated"] += 1
            try:
                result = answer(rate)
            except UnstableError:
                seen[rate] = (math.inf, None, {}, {k: math.inf for k in slo}, "over capacity")
                return seen[rate][0]
            except NotImplementedError as err:
                seen[rate] = (math.inf, None, {}, {k: math.inf for k in slo}, f"no model: {err}")
                return seen[rate][0]
            state["extrapolated"] |= is_extrapolated(result)
            quantiles = {k: float(result.quantile(LEVELS[k])) for k in slo}
            trusted = {k: trusted_quantile(result, LEVELS[k]) + network for k in slo}
            worst = max(trusted[k] / slo[k] for k in slo)
            seen[rate] = (worst, result, quantiles, trusted, result.method)
        return seen[rate][0]

    def key_ratio(key):
        def of(rate):
            ratio(rate)
            trusted = seen[rate][3]
            return trusted[key] / slo[key]
        return of

    complete = True
    for rate in rates.grid():
        if ratio(rate) > 1.0 and stop_at_miss:
            complete = False
            break
    if complete and not rates.single and max(seen[r][0] for r in seen) < math.inf:
        grid = sorted(seen)
        for key in slo:
            if not _refine(key_ratio(key), grid, stop_at_miss):
                break
        complete = not (stop_at_miss and max(seen[r][0] for r in seen) > 1.0)
    binding = max(seen, key=lambda r: (seen[r][0], r))
    worst, result, quantiles, trusted, method = seen[binding]
    return RangeAnswer(worst, binding, result, quantiles, trusted, state["evaluated"],
                       complete, method, state["extrapolated"])


def _refine(ratio, points, stop_at_miss) -> bool:
    """Golden-section searches (in log rate) for a maximum around every local maximum of
    ``ratio`` on the grid ``points``: between its two neighbours, or for an end, between it
    and its neighbour (a hump may rise just inside the range). False where a search found a
    miss and ``stop_at_miss`` stops it."""
    values = [ratio(p) for p in points]
    last = len(points) - 1
    peaks = [i for i in range(len(points))
             if (i == 0 or values[i] >= values[i - 1]) and (i == last or values[i] >= values[i + 1])]
    g = (math.sqrt(5) - 1) / 2
    for i in peaks:
        a, b = math.log(points[max(i - 1, 0)]), math.log(points[min(i + 1, last)])
        c, d = b - g * (b - a), a + g * (b - a)
        fc, fd = ratio(math.exp(c)), ratio(math.exp(d))
        for _ in range(REFINE_STEPS):
            if stop_at_miss and max(fc, fd) > 1.0:
                return False
            if fc >= fd:
                b, d, fd = d, c, fc
                c = b - g * (b - a)
                fc = ratio(math.exp(c))
            else:
                a, c, fc = c, d, fd
                d = a + g * (b - a)
                fd = ratio(math.exp(d))
        if stop_at_miss and max(fc, fd) > 1.0:
            return False
    return True
