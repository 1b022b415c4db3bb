"""Bunched instances: several deterministic instances that free together, as one wide instance.

With deterministic service, no max_queue_delay and a queue that refills faster than an
instance serves, the instances of a node do not stay staggered (taken in turn, S(k)/c apart,
the assumption of :mod:`.instances`). An instance that frees while the others are busy takes
the whole queue; the next to free finds only the requests that arrived in between and takes
those, so that its batch, and its service time, hardly differ from the first's when the
service time grows little with the batch. The instances then free within a short time of
each other, cycle after cycle: a request that arrives just after such a burst waits nearly a
whole service time, where the staggered model has it wait S(k)/c. In the simulator the
staggered model is 20-41% low on p99 there (validation/results/ordinary_domain*.json, rows of
the family batch_several_deterministic_no_delay with little growth).

The bunched model takes the c instances as one instance of max_batch_size c B whose batch of
k requests is shared out among the c (the bunch frees together): its service time is
S(ceil(k / c)). That node, of one instance without a delay, is the batch model's exact
embedded chain (:mod:`.chain`); the approximation is the bunch itself.

Which nodes bunch, measured by validation/bunched_draws.py (docs/notes/batch-model.md): per-item
work arriving at most :data:`BUNCH_ITEM_WORK` instances' worth (rate x the steepest step
S(k + 1) - S(k)): more growth lets the instance with the smaller batch free early and take
the next batch alone, which spreads the bunch out; and enough arrivals per instance in a
batch-of-one service time for the queue to refill before an instance frees:
:data:`BUNCH_ARRIVALS` where the per-item work (rate x the mean step) is at least
:data:`FLAT_ITEM_WORK`, :data:`FLAT_ARRIVALS` below it. A flat S(k) bunches only partly with fewer arrivals (between 2
and 4 arrivals per instance the bunched model was a median 17-32% high on p99, the staggered
chain 10-21% low), while a little growth holds the bunch together (there the bunched model a
median 4% off, the staggered chain 21-25% low); at 2 arrivals even that bunch was loose.

A max_queue_delay of at most :data:`TINY_DELAY` S(1) leaves the bunch as it is (the wide
instance carries it); from there to :data:`SPREAD_DELAY` S(1) the instance that takes a short
batch waits out part of the delay and the bunch spreads only partly, so that neither model
holds (validation/results/bunched_delays.txt): such nodes have no model. Past it the staggered chain
answers, as for any delay.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ...latency import Accuracy, Approximation
from ...system import Node, ServiceTime
from ..measured import measured
from .node import DEFAULT_RESOLUTION, UTILIZATION_ROUNDING, BatchNodeLatency, batch_node

__all__ = ["BUNCH_ARRIVALS", "BUNCH_ITEM_WORK", "FLAT_ARRIVALS", "FLAT_ITEM_WORK",
           "MAX_WIDE_BATCH", "TINY_DELAY", "SPREAD_DELAY", "BUNCH_JITTER", "SPREAD_JITTER",
           "ROUTED_ARRIVALS", "ROUTED_ITEM_WORK", "FAMILY", "Bunching",
           "bunching", "may_bunch", "bunches", "too_wide", "stepped", "behind_router", "bunched_node",
           "instance_batches", "bunched_batch_node"]

# the measured family of the bunched model's answers (qmodel/theory/measured_errors.json)
FAMILY = "batch_several_bunched"

# arrival rate x the steepest step of S(k) ("per-item work", in instances), at most; from
# FLAT_ITEM_WORK up it keeps the bunch together down to BUNCH_ARRIVALS arrivals per instance
# in S(1), below it (a flat S(k)) only from FLAT_ARRIVALS (see the module's docstring)
BUNCH_ITEM_WORK = 1.25
FLAT_ITEM_WORK = 0.2
BUNCH_ARRIVALS = 3.0
FLAT_ARRIVALS = 8.0
# c x max_batch_size, at most: the wide instance's chain of 512 takes 0.1-0.3 s, and at 1024
# it took seconds and overflowed near capacity
MAX_WIDE_BATCH = 512
# behind a router (round robin, least outstanding, power of d) a node sees a smoother stream
# than Poisson and bunches past the rule: the routers' models are declined from this many
# arrivals per instance in S(1), up to this per-item work, flat or not (see
# :func:`behind_router`)
ROUTED_ARRIVALS = 1.5
ROUTED_ITEM_WORK = 2.5
# max_queue_delay over S(1): up to TINY_DELAY the instances bunch as without a delay (the
# bunched model carries the delay); above it, up to SPREAD_DELAY, a node inside the rule
# bunches only partly and no model answers (the staggered chain was up to 39% low there, the
# bunched model up to 78% high: validation/results/bunched_delays.txt)
TINY_DELAY = 0.02
SPREAD_DELAY = 0.25
# the service time's jitter cv (lognormal or gamma): up to BUNCH_JITTER the instances bunch
# as deterministic ones (the bunched model carries the jitter), above it up to SPREAD_JITTER
# a node inside the rule bunches only partly and no model answers (the staggered chain up
# to 39% low, the bunched model up to 29% high: validation/results/bunched_jitter.txt)
BUNCH_JITTER = 0.02
SPREAD_JITTER = 0.07
# the jitter laws measured for bunching; measured samples ("empirical") with as little spread
# may bunch too, and the bunched model was not measured on them
_BUNCHING_JITTERS = ("deterministic", "lognormal", "gamma")
_MAY_BUNCH_JITTERS = _BUNCHING_JITTERS + ("empirical",)


class Bunching(NamedTuple):
    """What the rule says of a node at a rate: whether the bunched model answers
    (``bunched``), else why no model does (``unmodelled``; None: the staggered chain)."""

    bunched: bool
    unmodelled: str | None


class _Work(NamedTuple):
    """A node's load in the rule's terms: arrivals per instance in S(1), rate x the
    steepest and the mean step of S(k) (instances), and whether S(k) ever falls."""

    arrivals: float
    steep: float
    mean: float
    falls: bool


# the steps' rounding, not a margin
_SLACK = 1e-9


def bunching(node: Node, rate: float, arrival_scv: float = 1.0) -> Bunching:
    """The rule's verdict on ``node`` at ``rate``, its work computed once (predict's path):
    :func:`bunches`, else why no model answers a node whose instances free together (or
    partly), or ``Bunching(False, None)`` where the staggered chain answers.

    A node that bunches by the rule but has something the bunched model was not measured
    with (a service time resampled from measurements, ``ServiceTime.empirical``, what
    calibration from a trace gives; a preferred size below max_batch_size; a max_queue_size;
    arrivals that are not Poisson, smoother ones judged by the routed thresholds of
    :func:`behind_router`), a delay or a jitter that spreads the bunch only partly, a growth
    in one steep step (:func:`stepped`) or a width past :data:`MAX_WIDE_BATCH`
    (:func:`too_wide`) has no model: the staggered chain was 24-41% low on such nodes."""
    kind, reason = _verdict(node, rate, arrival_scv)
    return Bunching(kind == "bunched", reason)


def _verdict(node: Node, rate: float, arrival_scv: float) -> tuple:
    """(kind, reason): kind "bunched", "too_wide", "stepped", "spread", "unmeasured" or
    None (the staggered chain), and the reason no model answers (None when one does)."""
    spread = _spread(node)
    if spread is None:
        return None, None
    work = _work(node, rate)
    in_rule = _in_rule(work)
    prone = in_rule or _stepped(work)
    if arrival_scv != 1.0:
        # the bunched model is measured under Poisson arrivals only; a smoother stream
        # bunches sooner, as behind a router (measured), a burstier one is judged by the
        # Poisson rule (not measured either way)
        if not (_routed_prone(work) if arrival_scv < 1.0 else prone):
            return None, None
        return "unmeasured", _unmeasured_reason(
            node, f"arrivals that are not Poisson (interarrival scv {arrival_scv:.4g})")
    if not prone:
        return None, None
    B = node.max_batch_size
    if node.service.jitter not in _BUNCHING_JITTERS:
        return "unmeasured", _unmeasured_reason(
            node, f"a service time resampled from measurements (cv {spread.cv:.3g})")
    if any(p < B for p in node.preferred_batch_sizes):
        return "unmeasured", _unmeasured_reason(node, "a preferred batch size below "
                                                      "max_batch_size")
    if node.max_queue_size:
        return "unmeasured", _unmeasured_reason(node, "a max_queue_size")
    if spread.delay > TINY_DELAY or spread.cv > BUNCH_JITTER:
        return "spread", _partly_spread_reason(node, spread)
    if not in_rule:
        return "stepped", _stepped_reason(work)
    if node.instances * B > MAX_WIDE_BATCH:
        return "too_wide", _too_wide_reason(node)
    return "bunched", None


def _unmeasured_reason(node: Node, what: str) -> str:
    return (f"its {node.instances} instances free together, and the bunched model was not "
            f"measured with {what} (the staggered chain was 30-41% low on such nodes): use "
            f"qmodel.simulate")


def bunches(node: Node, rate: float, arrival_scv: float = 1.0) -> bool:
    """Whether the bunched model answers for ``node`` at ``rate``: several deterministic
    instances (or lognormal or gamma jitter of cv at most :data:`BUNCH_JITTER`), a
    max_queue_delay of at most :data:`TINY_DELAY` S(1), no preferred size
    below max_batch_size, an unlimited queue, Poisson arrivals, and the two thresholds of
    the module's docstring.

    Examples
    --------
    >>> import qmodel as qm
    >>> flat = qm.Node(qm.ServiceTime.affine(2e-3, 1e-6), max_batch_size=16, instances=4)
    >>> bunches(flat, rate=0.7 * flat.capacity)        # 11 arrivals per instance in S(1)
    True
    >>> bunches(flat, rate=0.5 * flat.capacity)        # 7.9, and a flat S(k) asks for 8
    False
    >>> steep = qm.Node(qm.ServiceTime.affine(2e-3, 1e-3), max_batch_size=16, instances=4)
    >>> bunches(steep, rate=0.5 * steep.capacity)      # 2 instances' worth of per-item work
    False
    >>> from dataclasses import replace
    >>> bunches(replace(flat, max_queue_delay=20e-6), rate=0.7 * flat.capacity)  # 0.01 S(1)
    True
    """
    return bunching(node, rate, arrival_scv).bunched


def too_wide(node: Node, rate: float, arrival_scv: float = 1.0) -> str | None:
    """Why no model answers a node whose instances bunch but whose c x max_batch_size is
    past :data:`MAX_WIDE_BATCH` (the staggered chain was 26-41% low there), or None.

    Examples
    --------
    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(2e-3, 1e-6), max_batch_size=128, instances=8)
    >>> print(too_wide(node, rate=0.5 * node.capacity))
    its 8 instances free together, and the bunched model is solved up to c x max_batch_size 512 (here 1024); the staggered chain's answer was 26-41% low on such nodes: use qmodel.simulate
    """
    kind, reason = _verdict(node, rate, arrival_scv)
    return reason if kind == "too_wide" else None


def _too_wide_reason(node: Node) -> str:
    return (f"its {node.instances} instances free together, and the bunched model is solved "
            f"up to c x max_batch_size {MAX_WIDE_BATCH} (here "
            f"{node.instances * node.max_batch_size}); the staggered chain's answer was "
            f"26-41% low on such nodes: use qmodel.simulate")


def behind_router(node: Node, rate: float) -> str | None:
    """Why no router model answers for ``node`` at its share ``rate`` behind round robin,
    least outstanding or power of d (each the staggered chain under smoothed arrivals), or
    None: deterministic instances as :func:`bunches` asks, but from
    :data:`ROUTED_ARRIVALS` arrivals per instance in S(1) and up to
    :data:`ROUTED_ITEM_WORK` per-item work (steepest step), flat or not, and any width: a
    routed stream is smoother than Poisson and bunches sooner. The same with a delay up to
    :data:`SPREAD_DELAY` S(1), a jitter up to :data:`SPREAD_JITTER`, preferred sizes or a
    max_queue_size (where the bunch is partial or the bunched model unmeasured, the routers'
    models take the instances in turn all the same). Over the stored
    configurations of such clusters (validation/results/wide_domain.json, the ordinary draws,
    domain_check.json, several_instance_routers.json.gz) the routers' models were a median
    22% off on p99 there (503 of 913 beyond 20%); reviews found flat nodes at 2.4-4
    arrivals behind them 23-35% low, inside their families' domains.

    Examples
    --------
    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(2e-3, 1e-6), max_batch_size=16, instances=4)
    >>> print(behind_router(node, rate=0.7 * node.capacity))
    its 4 instances free together at this node's share of the rate (22,222 req/s), which no router model covers (they take instances in turn and were a median 22% off on p99 on such nodes): use qmodel.simulate, or a random router
    """
    if _spread(node) is None or not _routed_prone(_work(node, rate)):
        return None
    c = node.instances
    # a random router's nodes see Poisson arrivals: the node's own rule
    random = ", or a random router" if _verdict(node, rate, 1.0)[1] is None else ""
    return (f"its {c} instances free together at this node's share of the rate "
            f"({rate:,.0f} req/s), which no router model covers (they take instances in turn "
            f"and were a median 22% off on p99 on such nodes): use qmodel.simulate{random}")


def stepped(node: Node, rate: float, arrival_scv: float = 1.0) -> str | None:
    """Why no model answers a node whose instances would bunch by its mean step but whose
    S(k) grows in one steep step (past :data:`BUNCH_ITEM_WORK`), or None. Such measured
    tables fall between the rule and the staggered chain's measured affine services: a
    review found the staggered chain 24-38% low on 8 of 14 of them, and a table with a large
    jump near max_batch_size 30% low by the bunched model.

    Examples
    --------
    >>> import qmodel as qm
    >>> table = qm.ServiceTime.table({1: 12.8e-3, 31: 12.8e-3, 32: 13.6e-3})
    >>> node = qm.Node(table, max_batch_size=32, instances=4)
    >>> stepped(node, rate=4857.6)[:60]
    'its S(k) grows in one step (rate x the steepest step 3.89 in'
    """
    kind, reason = _verdict(node, rate, arrival_scv)
    return reason if kind == "stepped" else None


def _stepped(work: _Work) -> bool:
    """Inside the rule but for its steepest step."""
    return (not work.falls and work.steep > BUNCH_ITEM_WORK * (1 + _SLACK)
            and work.mean <= BUNCH_ITEM_WORK * (1 + _SLACK) and _enough_arrivals(work))


def _stepped_reason(work: _Work) -> str:
    return (f"its S(k) grows in one step (rate x the steepest step {work.steep:.3g} "
            f"instances, x the mean step {work.mean:.3g}), between the bunched model's rule "
            f"and the affine services the staggered chain was measured on: measure more "
            f"batch sizes, or use qmodel.simulate")


class _Spread(NamedTuple):
    """What spreads a bunch: the delay over S(1) and the jitter's (largest) cv."""

    delay: float
    cv: float


def _spread(node: Node) -> _Spread | None:
    """The node's :class:`_Spread` where its instances may free together (several
    instances, deterministic or with a lognormal, gamma or measured jitter of cv at most
    :data:`SPREAD_JITTER`, a delay of at most :data:`SPREAD_DELAY` S(1); fully up to
    :data:`TINY_DELAY` S(1) and :data:`BUNCH_JITTER`), else None."""
    service = node.service
    if (node.instances == 1 or node.max_batch_size == 1
            or service.jitter not in _MAY_BUNCH_JITTERS):
        return None
    spread = _Spread(node.max_queue_delay / float(service.mean(1)),
                     service.largest_cv(node.max_batch_size))
    return None if spread.delay > SPREAD_DELAY or spread.cv > SPREAD_JITTER else spread


def may_bunch(node: Node) -> bool:
    """Whether the rule reads ``node`` at all: several instances, deterministic or with a
    lognormal, gamma or measured jitter of cv at most :data:`SPREAD_JITTER`, a delay of at
    most :data:`SPREAD_DELAY` S(1) (at some rate its instances may free together).

    Examples
    --------
    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(2e-3, 1e-6), max_batch_size=16, instances=4)
    >>> may_bunch(node), may_bunch(qm.Node(node.service, max_batch_size=16))
    (True, False)
    """
    return _spread(node) is not None


def _routed_prone(work: _Work) -> bool:
    """The routed thresholds: at least :data:`ROUTED_ARRIVALS` arrivals per instance in
    S(1), per-item work (steepest step) at most :data:`ROUTED_ITEM_WORK`."""
    return (work.steep <= ROUTED_ITEM_WORK * (1 + _SLACK)
            and work.arrivals >= ROUTED_ARRIVALS * (1 - _SLACK))


def _partly_spread_reason(node: Node, spread: _Spread) -> str:
    what, measured = [], []
    if spread.delay > TINY_DELAY:
        what.append(f"a delay of {spread.delay:.3g} x S(1) (between {TINY_DELAY} and "
                    f"{SPREAD_DELAY})")
        measured.append("with such delays the staggered chain was up to 39% low, the bunched "
                        "model up to 78% high")
    if spread.cv > BUNCH_JITTER:
        what.append(f"a jitter cv of {spread.cv:.3g} (between {BUNCH_JITTER} and "
                    f"{SPREAD_JITTER})")
        measured.append("with such jitter the staggered chain was up to 39% low, the bunched "
                        "model up to 29% high")
    return (f"its {node.instances} instances would free together without "
            f"{'them' if len(what) > 1 else 'it'}, and {' and '.join(what)} "
            f"{'spread' if len(what) > 1 else 'spreads'} them "
            f"only partly: no model holds there ({'; '.join(measured)}): use "
            f"qmodel.simulate")


def _work(node: Node, rate: float) -> _Work:
    means = np.asarray(node.service.mean(np.arange(1, node.max_batch_size + 1)), dtype=float)
    steps = np.diff(means)
    return _Work(rate * float(means[0]) / node.instances, rate * float(steps.max()),
                 rate * float(steps.mean()), bool(steps.min() < 0))


def _enough_arrivals(work: _Work) -> bool:
    # the mean step says whether S(k) is flat (a table flat but for one step bunched only
    # partly with few arrivals: a review found it up to 51% high)
    least = BUNCH_ARRIVALS if work.mean >= FLAT_ITEM_WORK else FLAT_ARRIVALS
    return work.arrivals >= least * (1 - _SLACK)


def _in_rule(work: _Work) -> bool:
    """:func:`bunches` but for the width: S(k) never falls (a batch that takes less time than
    a smaller one), the steepest step bounds the growth (a measured table may grow little
    on average, a lot at once), and enough arrivals."""
    return (not work.falls and work.steep <= BUNCH_ITEM_WORK * (1 + _SLACK)
            and _enough_arrivals(work))


def bunched_node(node: Node) -> Node:
    """The one wide instance of the bunched model: max_batch_size c B, S'(k) = S(ceil(k / c)),
    the node's jitter and max_queue_delay (at most :data:`BUNCH_JITTER` and
    :data:`TINY_DELAY` S(1) where the model answers).

    Examples
    --------
    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(1.0, 0.5), max_batch_size=2, instances=2)
    >>> wide = bunched_node(node)
    >>> wide.max_batch_size, wide.instances, [float(wide.service.mean(k)) for k in (1, 2, 3, 4)]
    (4, 1, [1.5, 1.5, 2.0, 2.0])
    """
    B, c = node.max_batch_size, node.instances
    means = {k: float(node.service.mean(math.ceil(k / c))) for k in range(1, c * B + 1)}
    jitter = node.service.jitter
    if jitter != "deterministic":
        jitter = (jitter, node.service.cv)
    return Node(ServiceTime.table(means, jitter=jitter), max_batch_size=c * B, instances=1,
                max_queue_delay=node.max_queue_delay)


def instance_batches(wide_batches: dict, c: int) -> dict:
    """The batch sizes the instances run, from the wide instance's: a bunch of k requests
    shared out as the model's service time S(ceil(k / c)) assumes, k = q c + r as r batches
    of q + 1 and c - r of q (none of 0); per dispatch, summing to 1. (In the simulator a flat
    node of four instances at half its capacity ran a mean batch of 8.0 and kept its
    instances 99.7% busy; this split gives 8.0 and 1.0, Triton's order of B to the first 13.0
    and 0.61.)

    Examples
    --------
    >>> instance_batches({3: 0.5, 8: 0.5}, c=4)      # 3 -> three of 1; 8 -> four of 2
    {1: 0.42857142857142855, 2: 0.5714285714285714}
    """
    top = max(int(k) for k in wide_batches) // c + 1
    counts = np.zeros(top + 1)
    for k, p in wide_batches.items():
        q, r = divmod(int(k), c)
        counts[q + 1] += p * r
        if q:
            counts[q] += p * (c - r)
    counts /= counts.sum()
    return {int(k): float(v) for k, v in enumerate(counts) if v > 0}


def bunched_batch_node(node: Node, rate: float,
                       resolution: int = DEFAULT_RESOLUTION) -> BatchNodeLatency:
    """The sojourn-time distribution of a node that :func:`bunches`, by the bunched model.

    Parameters
    ----------
    node : Node
        A node for which :func:`bunches` holds (not checked again here).
    rate : float
        Poisson arrival rate, requests per second, below the node's capacity.
    resolution : int
        Lattice steps per batch-of-one service time, as :func:`~.node.batch_node`'s.

    Returns
    -------
    BatchNodeLatency
        The wide instance's sojourn law; the batch sizes are the instances'
        (:func:`instance_batches`: their mean is close to the simulator's, their spread
        narrower, as the split is even) and the utilization theirs by conservation.

    Examples
    --------
    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(2e-3, 1e-6), max_batch_size=16, instances=4)
    >>> r = bunched_batch_node(node, rate=0.7 * node.capacity)
    >>> r.accuracy.approximation_keys
    ('bunched_instances',)
    >>> round(r.mean_batch_size, 2), round(r.utilization, 3)   # simulated: 11.18 and 0.998
    (11.18, 1.0)
    """
    B, c = node.max_batch_size, node.instances
    wide = batch_node(bunched_node(node), rate, resolution=resolution)
    batches = instance_batches(wide.batch_size_distribution, c)
    utilization = node.service.utilization(wide.throughput, batches, c)
    notes = [Approximation(
        "bunched_instances", f"{c} instances that free together (a queue that "
        f"refills faster than they serve, service time growing little with the batch): one "
        f"instance of max_batch_size {c * B} whose batch of k takes S(ceil(k / {c})), shared "
        f"out evenly (the batch sizes' mean holds, their spread is narrower)")]
    if utilization > 1.0 + UTILIZATION_ROUNDING:
        notes.append(Approximation(
            "utilization_capped", f"the bunch's batch sizes imply a utilization of "
            f"{utilization:.3f}, capped at 1"))
    accuracy = Accuracy(
        "approximation", "embedded chain of dispatch records on a time lattice, of the "
        "bunched instances as one", lattice_step=wide.h, quantile_error=wide.h,
        truncated_mass=wide.accuracy.truncated_mass, mass_defect=wide.accuracy.mass_defect,
        approximations=notes, measured=(measured(FAMILY),))
    return BatchNodeLatency(
        wide.pmf, wide.h, model="batch_chain",
        method=f"batch node, {c} bunched instances as one of max_batch_size {c * B}",
        accuracy=accuracy, throughput=wide.throughput, utilization=min(utilization, 1.0),
        rejection_fraction=wide.rejection_fraction, batch_size_distribution=batches)
