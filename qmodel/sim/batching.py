"""Triton's dynamic-batching decision, written once and used by every engine.

The rule (docs/triton-semantics.md; Triton core ``DynamicBatchScheduler::GetDynamicBatch``):
when an instance is free at ``free`` and the oldest pending request arrived at ``a0``,

- the delay is exceeded at ``a0 + D`` (only when D > 0): then min(q, B) requests go at once and
  preferred sizes are ignored;
- before that, as soon as the queue holds the smallest preferred size ``pmin`` (at the arrival
  time ``a_pmin`` of the pmin-th pending request) the largest preferred size <= q goes;
- with D == 0 the batcher never waits: the largest preferred size <= q goes, or all q if q is
  below every preferred size.

Both functions are elementwise over arrays (one entry per lane or per node of a lane) and work
with NumPy and CuPy alike. Missing requests are represented by +inf arrival times, which makes
the dispatch time +inf: the engines use that for empty queues and finished lanes.

Triton's prefetching batcher (``Node.prefetch``) forms a batch with the same decision, counted
from when the batcher may open a batch instead of from a free instance; the look-ahead engine
does that (docs/triton-semantics.md, "Prefetch").
"""

from __future__ import annotations

__all__ = ["dispatch_time", "batch_size", "preferred_lookup"]

import numpy as np

from ..system import preferred_table


def dispatch_time(xp, free, a0, a_pmin, delay):
    """When the next batch leaves, given no arrivals other than those already known.

    Parameters
    ----------
    xp : module
        numpy or cupy.
    free : array
        Time the earliest instance is (or was) free.
    a0 : array
        Arrival time of the oldest pending request (+inf if none).
    a_pmin : array
        Arrival time of the pmin-th pending request (+inf if not known to arrive).
    delay : float or array
        max_queue_delay D (0 for greedy batching).

    Returns
    -------
    array
        ``min(max(T0, a_pmin), max(T0, a0 + D))`` with ``T0 = max(free, a0)``. With D == 0 this
        is T0: the batcher dispatches as soon as an instance and a request are both there.

    Examples
    --------
    >>> import numpy as np
    >>> # a lone request at t=1 with D=2 and a free instance waits for its delay: leaves at 3
    >>> float(dispatch_time(np, np.array(0.), np.array(1.), np.array(np.inf), 2.0))
    3.0
    >>> # the pmin-th request arrives at 1.5, before the delay runs out: the batch leaves then
    >>> float(dispatch_time(np, np.array(0.), np.array(1.), np.array(1.5), 2.0))
    1.5
    """
    t0 = xp.maximum(free, a0)
    return xp.minimum(xp.maximum(t0, a_pmin), xp.maximum(t0, a0 + delay))


def batch_size(xp, when, q, a0, delay, pmin, pref_le):
    """How many requests leave at ``when``, with ``q`` = min(pending at ``when``, B).

    Parameters
    ----------
    when : array
        Dispatch time from :func:`dispatch_time`.
    q : integer array
        Pending requests at ``when``, already capped at max_batch_size.
    a0, delay : array or float
        As in :func:`dispatch_time`.
    pmin : int or integer array
        Smallest effective preferred batch size.
    pref_le : callable or None
        ``pref_le(q)``: the largest preferred size <= q (a table lookup, see
        :func:`preferred_lookup`). None when the preferred sizes are just {B}: then the size is
        always q (below B, q < pmin = B; at B, the largest preferred size <= B is B).

    Examples
    --------
    >>> import numpy as np
    >>> table = preferred_lookup([4], 8)          # B = 8, preferred {4}
    >>> look = lambda q: table[q]
    >>> # 6 queued, delay not exceeded: a batch of 4 goes
    >>> int(batch_size(np, np.array(5.), np.array(6), np.array(4.), 2.0, 4, look))
    4
    >>> # 6 queued, delay exceeded (5 >= 2.5 + 2): all 6 go, preferred sizes ignored
    >>> int(batch_size(np, np.array(5.), np.array(6), np.array(2.5), 2.0, 4, look))
    6
    """
    if pref_le is None:
        return q
    if isinstance(delay, float) and delay == 0:
        return xp.where(q < pmin, q, pref_le(q))
    exceeded = (delay > 0) & (when >= a0 + delay)
    return xp.where(exceeded | (q < pmin), q, pref_le(q))


def preferred_lookup(preferred, max_batch_size: int) -> np.ndarray:
    """Table t[q] = largest preferred size <= q (0 if none), for q = 0..max_batch_size.

    The table itself is :func:`qmodel.system.preferred_table`, shared with the analytic models.

    Examples
    --------
    >>> preferred_lookup([4, 8], 8).tolist()
    [0, 0, 0, 0, 4, 4, 4, 4, 8]
    """
    return preferred_table(preferred, max_batch_size)
