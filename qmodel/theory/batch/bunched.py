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

Which nodes bunch (both thresholds chosen on two stored campaigns, wide_domain.json and
ordinary_domain.json, and checked on a third, ordinary_domain_2.json; docs/notes/
batch-model.md): at least :data:`BUNCH_ARRIVALS` arrivals per instance in a batch-of-one
service time (the queue refills before an instance frees), and per-item work arriving at most
:data:`BUNCH_ITEM_WORK` instances' worth (rate x (S(B) - S(1)) / (B - 1)): more growth lets the
instance with the smaller batch free early and take the next batch alone, which spreads the
bunch out.
"""

from __future__ import annotations

import math

import numpy as np

from ...latency import Accuracy, Approximation
from ...system import Node, ServiceTime
from ..measured import measured
from .node import DEFAULT_RESOLUTION, UTILIZATION_ROUNDING, BatchNodeLatency, batch_node

__all__ = ["BUNCH_ARRIVALS", "BUNCH_ITEM_WORK", "FAMILY", "bunches", "bunched_node",
           "instance_batches", "bunched_batch_node"]

# the measured family of the bunched model's answers (qmodel/theory/measured_errors.json)
FAMILY = "batch_several_bunched"

# arrivals per instance in a batch-of-one service time, at least (see the module's docstring)
BUNCH_ARRIVALS = 3.0
# arrival rate x the per-item service time, at most (see the module's docstring)
BUNCH_ITEM_WORK = 1.25


def bunches(node: Node, rate: float, arrival_scv: float = 1.0) -> bool:
    """Whether the bunched model answers for ``node`` at ``rate``: several deterministic
    instances, no max_queue_delay, no preferred size below max_batch_size, an unlimited
    queue, Poisson arrivals, and the two thresholds of the module's docstring.

    Examples
    --------
    >>> import qmodel as qm
    >>> flat = qm.Node(qm.ServiceTime.affine(2e-3, 1e-6), max_batch_size=16, instances=4)
    >>> bunches(flat, rate=0.5 * flat.capacity)        # 8 arrivals per instance and S(1)
    True
    >>> steep = qm.Node(qm.ServiceTime.affine(2e-3, 1e-3), max_batch_size=16, instances=4)
    >>> bunches(steep, rate=0.5 * steep.capacity)      # 2 instances' worth of per-item work
    False
    """
    B, c, service = node.max_batch_size, node.instances, node.service
    if (c == 1 or B == 1 or node.max_queue_delay > 0 or node.max_queue_size
            or any(p < B for p in node.preferred_batch_sizes) or arrival_scv != 1.0
            or service.jitter != "deterministic"):
        return False
    s1 = float(service.mean(1))
    per_item = (float(service.mean(B)) - s1) / (B - 1)
    return rate * s1 / c >= BUNCH_ARRIVALS and rate * per_item <= BUNCH_ITEM_WORK


def bunched_node(node: Node) -> Node:
    """The one wide instance of the bunched model: max_batch_size c B, S'(k) = S(ceil(k / c)),
    deterministic, no delay.

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
    return Node(ServiceTime.table(means), max_batch_size=c * B, instances=1)


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


def bunched_batch_node(node: Node, rate: float, resolution: int = DEFAULT_RESOLUTION, *,
                       measured_error: bool = True) -> BatchNodeLatency:
    """The sojourn-time distribution of a node that :func:`bunches`, by the bunched model.

    Parameters
    ----------
    node : Node
        A node for which :func:`bunches` holds (not checked again here).
    rate : float
        Poisson arrival rate, requests per second, below the node's capacity.
    resolution : int
        Lattice steps per batch-of-one service time, as :func:`~.node.batch_node`'s.
    measured_error : bool
        Whether the accuracy quotes the family's measured error (False: for the campaign
        that measures it, validation/bunched_repredict.py).

    Returns
    -------
    BatchNodeLatency
        The wide instance's sojourn law; the batch sizes are the instances'
        (:func:`instance_batches`) and the utilization theirs by conservation.

    Examples
    --------
    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(2e-3, 1e-6), max_batch_size=16, instances=4)
    >>> r = bunched_batch_node(node, rate=0.5 * node.capacity)
    >>> r.accuracy.approximation_keys
    ('bunched_instances',)
    >>> round(r.mean_batch_size, 2), round(r.utilization, 3)   # simulated: 7.99 and 0.997
    (7.97, 1.0)
    """
    B, c = node.max_batch_size, node.instances
    wide = batch_node(bunched_node(node), rate, resolution=resolution)
    batches = instance_batches(wide.batch_size_distribution, c)
    utilization = node.service.utilization(wide.throughput, batches, c)
    notes = [Approximation(
        "bunched_instances", f"{c} deterministic instances that free together (a queue that "
        f"refills faster than they serve, service time growing little with the batch): one "
        f"instance of max_batch_size {c * B} whose batch of k takes S(ceil(k / {c}))")]
    if utilization > 1.0 + UTILIZATION_ROUNDING:
        notes.append(Approximation(
            "utilization_capped", f"the bunch's batch sizes imply a utilization of "
            f"{utilization:.3f}, capped at 1"))
    accuracy = Accuracy(
        "approximation", "embedded chain of dispatch records on a time lattice, of the "
        "bunched instances as one", lattice_step=wide.h, quantile_error=wide.h,
        truncated_mass=wide.accuracy.truncated_mass, mass_defect=wide.accuracy.mass_defect,
        approximations=notes, measured=(measured(FAMILY),) if measured_error else ())
    return BatchNodeLatency(
        wide.pmf, wide.h, model="batch_chain",
        method=f"batch node, {c} bunched instances as one of max_batch_size {c * B}",
        accuracy=accuracy, throughput=wide.throughput, utilization=min(utilization, 1.0),
        rejection_fraction=wide.rejection_fraction, batch_size_distribution=batches)
