"""The measured window of a replica: how long it must be, and what is counted inside it.

Each replica starts empty. Its measured window is ``per_replica`` consecutive arrivals less
the first ``warmup`` fraction of them: it runs from the first kept arrival, ``t_warm``, to
the last one, ``t_end``. Two things keep its edges from biasing what it measures:

- the cool-down (:func:`cool_down_arrivals`): more arrivals after ``t_end``, served but never
  measured. They give the last measured requests the successors they have in steady state,
  so that their batches fill (or wait) as they would in an endless stream;
- a random phase (:func:`batch_places`): the window starts after a uniformly random number
  of arrivals, 0 to the cluster's batch places less one. Where every batch fills, batches
  keep the boundaries the empty start gave them (every B-th arrival of a node), and a window
  at fixed arrival numbers would start and end at the same place within a batch in every
  replica, measuring too many (or too few) of the requests that wait longest for their
  batch to fill.

Every figure of a simulation comes from the window, by rules written once here and used by
both engines and both backends:

- latency: the requests that arrive inside the window (``assemble.assemble`` cuts them);
- utilization: the busy time that lies inside the window (:func:`busy_time`), each batch's
  ``[start, start + service)`` clipped to ``[t_warm, t_end]``, over instances x window length.
  An instance serves one batch at a time, so this is at most 1;
- batch statistics: the batches dispatched inside the window (:func:`measured_batches`).
  A batch dispatched by ``t_end`` holds no cool-down request, which arrive after it.

A window must hold many batch cycles (:func:`batch_cycle`: the wait for a batch to fill or
its delay to run out, then the slowest batch's service): a window shorter than one cycle can
see requests arrive and no batch leave, and the first cycle of a fresh replica is a transient.
``simulate`` makes replicas long enough for :data:`WINDOW_CYCLES` cycles where the requests
allow (fewer, longer replicas) and warns with :class:`ShortRunWarning` where they do not.

A replayed trace has no successors beyond its end: its last replica has no cool-down, and its
last requests are measured as the trace has them (with a delay, the last batch waits it out).
Its other replicas cool down on the arrivals that follow them in the trace. Its windows are
its segments as cut, with no random phase.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

__all__ = ["ShortRunWarning", "WINDOW_CYCLES", "COOL_DOWN_CYCLES", "COOL_DOWN_BATCHES",
           "batch_cycle", "longest_cycle", "window_arrivals", "batch_places", "cool_down_arrivals",
           "busy_time", "measured_batches"]

# Batch cycles each replica's measured window holds. With the default 10% warm-up the warm-up
# then spans 2.2 cycles, past the first batch of a fresh replica, and the window's edges (a
# batch cut by t_warm or t_end) weigh about 1/20 of a cycle's batches each.
WINDOW_CYCLES = 20
# The cool-down: each replica simulates, after its window, enough arrivals for each node to
# see COOL_DOWN_BATCHES x max_batch_size or COOL_DOWN_CYCLES batch cycles of its own, whichever
# is fewer. A measured request's batch is formed from the requests that follow the oldest one
# in it: at most B - 1 after t_end at its node, and only those that arrive before its delay
# (at most one cycle's wait) runs out, so either one suffices. Measured on eleven systems
# (paired runs, docs/notes/simulation-window.md): with one cycle every measured sojourn
# equals that with a cool-down of twenty, and so with B - 1 arrivals per node where each
# node's share is fixed (a random router's uneven split left up to 0.015% differing); with
# half a cycle up to 0.06% differ and p99 reads up to 0.3% high. Two of each leave a factor
# of two.
COOL_DOWN_CYCLES = 2
COOL_DOWN_BATCHES = 2


class ShortRunWarning(UserWarning):
    """``qmodel.simulate`` was given too few requests for its figures to be trusted: replicas
    too short for the start-up transient at this load, or measured windows too short for the
    node's delay and batch service times. The message names the number of requests to ask
    for."""


def batch_cycle(node, rate: float) -> float:
    """Longest time one batch of ``node`` takes from its first request to its end (seconds).

    The batch waits until B requests have arrived at ``rate`` (requests/s at this node) or
    its max_queue_delay runs out, whichever is first (it never waits with no delay; a
    max_queue_size below B, which never holds B, waits out the delay or for a preferred size
    the queue can hold), then
    runs for the mean service time of the slowest batch size up to B (a measured table need
    not grow with the size).

    Examples
    --------
    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(1e-3, 1e-4), max_batch_size=8,
    ...                max_queue_delay=0.05)
    >>> round(batch_cycle(node, 20.0), 6)       # waits out 50 ms, then S(8) = 1.8 ms
    0.0518
    >>> round(batch_cycle(node, 800.0), 6)      # 8 arrive in 10 ms
    0.0118
    >>> from dataclasses import replace
    >>> round(batch_cycle(replace(node, max_queue_size=4), 800.0), 6)   # never 8 waiting
    0.0518
    """
    fill = node.max_batch_size
    queue = node.max_queue_size
    if queue and queue < fill:
        # a queue shorter than B never fills a batch: it leaves at a preferred size the queue
        # can hold, or when its delay runs out
        reachable = [p for p in node.preferred_batch_sizes if p <= queue]
        fill = max(reachable) if reachable else math.inf
    wait = min(node.max_queue_delay, fill / rate) if rate > 0 else 0.0
    with warnings.catch_warnings():
        # a table extrapolated past its sizes warned when the Node was built
        warnings.simplefilter("ignore")
        slowest = float(np.max(node.service.mean(np.arange(1, node.max_batch_size + 1))))
    return wait + slowest


def longest_cycle(cluster, rate: float) -> float:
    """The longest :func:`batch_cycle` over the nodes of ``cluster`` at a total ``rate``.

    Each node sees its share of ``rate`` (static routers) or an equal share (dynamic
    routers, which balance the load); nodes that receive nothing are left out.

    Examples
    --------
    >>> import qmodel as qm
    >>> fast = qm.Node(qm.ServiceTime.affine(1e-3), max_batch_size=4, max_queue_delay=0.01)
    >>> slow = qm.Node(qm.ServiceTime.affine(5e-3), max_batch_size=4, max_queue_delay=0.01)
    >>> round(longest_cycle(qm.Cluster([fast, slow]), 100.0), 6)   # slow: 10 ms + 5 ms
    0.015
    """
    shares = cluster.shares
    nodes = len(cluster.nodes)
    if shares is None:
        shares = np.full(nodes, 1.0 / nodes)
    return max(batch_cycle(node, rate * share)
               for node, share in zip(cluster.nodes, shares) if share > 0)


def window_arrivals(cluster, rate: float, warmup: float) -> float:
    """Arrivals per replica (over all nodes) whose measured window, after the ``warmup``
    fraction, holds :data:`WINDOW_CYCLES` of the cluster's :func:`longest_cycle`.

    Examples
    --------
    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(1e-3), max_batch_size=128, max_queue_delay=0.5)
    >>> round(window_arrivals(qm.Cluster(node), 100.0, 0.1))  # 20 x 0.501 s x 100/s / 0.9
    1113
    """
    return WINDOW_CYCLES * longest_cycle(cluster, rate) * rate / (1.0 - warmup)


def batch_places(cluster) -> int:
    """The max_batch_size summed over the nodes of ``cluster`` that receive arrivals.

    Where every batch fills, a node's batches start at every B-th of its arrivals, so the
    cluster's arrivals repeat their place within the batches every this many (round robin;
    random routing mixes them sooner). The window's random phase is drawn over them.

    Examples
    --------
    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(1e-3), max_batch_size=8)
    >>> batch_places(qm.Cluster(node, count=4))
    32
    """
    shares = cluster.shares
    if shares is None:
        return sum(node.max_batch_size for node in cluster.nodes)
    return sum(node.max_batch_size for node, share in zip(cluster.nodes, shares) if share > 0)


def cool_down_arrivals(cluster, rate: float) -> int:
    """Arrivals each replica simulates after its measured window (over all nodes).

    Enough for every node that receives arrivals to see, on average, :data:`COOL_DOWN_BATCHES`
    of its max_batch_size or :data:`COOL_DOWN_CYCLES` of its :func:`batch_cycle`, whichever
    is fewer arrivals. They are served but never measured.

    Examples
    --------
    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(2e-3, 1e-4), max_batch_size=32,
    ...                max_queue_delay=0.02)
    >>> cool_down_arrivals(qm.Cluster(node), 3000.0)   # 2 x 32 before 2 cycles (95.2)
    64
    >>> cool_down_arrivals(qm.Cluster(node), 300.0)    # 2 x (20 ms + 5.2 ms) x 300/s
    16
    >>> cool_down_arrivals(qm.Cluster(node, count=4), 12000.0)   # 64 for each of 4 nodes
    256
    """
    shares = cluster.shares
    if shares is None:
        shares = np.full(len(cluster.nodes), 1.0 / len(cluster.nodes))
    # a node's own rate is rate x share; so many arrivals in all give it its part
    need = max(min(COOL_DOWN_BATCHES * node.max_batch_size / share,
                   COOL_DOWN_CYCLES * batch_cycle(node, rate * share) * rate)
               for node, share in zip(cluster.nodes, shares) if share > 0)
    return math.ceil(need)


def busy_time(xp, start, service, t_warm, t_end):
    """Part of each batch's run ``[start, start + service)`` inside ``[t_warm, t_end]``.

    Elementwise over arrays of the array module ``xp`` (numpy or cupy); ``t_warm`` and
    ``t_end`` broadcast against ``start``. A batch that starts at +inf (a finished lane of the
    look-ahead engine) is busy for 0.

    Examples
    --------
    >>> import numpy as np
    >>> busy_time(np, np.array([0.0, 1.0, 4.0, 9.0]), np.array([1.0, 3.0, 3.0, 3.0]),
    ...           2.0, 10.0).tolist()
    [0.0, 2.0, 3.0, 1.0]
    """
    return xp.maximum(xp.minimum(start + service, t_end) - xp.maximum(start, t_warm), 0.0)


def measured_batches(xp, start, size, t_warm, t_end, first_arrival=None):
    """Which batches the batch statistics count, and whether the window had none of its own.

    The batches dispatched inside ``[t_warm, t_end]``; where no batch (of size > 0) was
    dispatched inside any replica's window, the batches dispatched at or after ``t_warm``
    that carried the requests that arrived in the window: those whose first request arrived
    by ``t_end``, not the cool-down's. ``first_arrival`` is a callable that returns the
    arrival time of each batch's first request (called only then); None when the replicas
    have no cool-down. Returns ``(mask, fallback)``.

    Examples
    --------
    >>> import numpy as np
    >>> mask, fallback = measured_batches(np, np.array([1.0, 3.0, 12.0]), np.array([2, 4, 1]),
    ...                                   2.0, 10.0)
    >>> mask.tolist(), fallback
    ([False, True, False], False)
    >>> mask, fallback = measured_batches(np, np.array([1.0, 12.0]), np.array([2, 1]), 2.0, 10.0)
    >>> mask.tolist(), fallback
    ([False, True], True)
    >>> # a cool-down batch (first request at 11.0) after the one that carried the window's
    >>> mask, fallback = measured_batches(np, np.array([1.0, 12.0, 13.0]), np.array([2, 3, 1]),
    ...                                   2.0, 10.0, lambda: np.array([0.5, 9.0, 11.0]))
    >>> mask.tolist(), fallback
    ([False, True, False], True)
    """
    after_warm = (start >= t_warm) & (size > 0)
    mask = after_warm & (start <= t_end)
    if bool(mask.any()) or not bool(after_warm.any()):
        return mask, False
    if first_arrival is not None:
        after_warm &= first_arrival() <= t_end
    return after_warm, True
