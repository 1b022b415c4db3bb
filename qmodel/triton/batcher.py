"""What a trace says about Triton's batcher beyond the batch execution times.

Two things the statistics API does not show, both measured on the real server here
(docs/triton-server.md, "What the campaign found"):

- **The pickup gap.** Between one batch's COMPUTE_END and the next COMPUTE_START on a
  freed instance, with the next batch already waiting, Triton spends 0.07-0.22 ms (the
  instance thread releasing the batch and taking the next from the rate limiter's queue).
  The instance is held meanwhile, so :func:`qmodel.triton.calibrate` adds the mean gap to
  every execution time.
- **Prefetching.** With a delay and the default queue policy, Triton's batcher forms a batch
  when its delay runs out even while every instance is busy (Triton core's
  ``DynamicBatchScheduler::BatcherThread``, which waits for a payload slot, not for an
  instance). Requests that arrive after the batch is formed and before an instance frees
  join it only when the batcher thread happens to wake in between; :func:`prefetch_join`
  measures how often they do, which is ``Node.prefetch``.

Examples
--------
One instance, delay 2 ms. Batch 0 runs 0-5 ms. Batch 1's oldest request queued at 1 ms, so
the batch is formed at 3 ms while batch 0 runs; it starts at 5.1 ms (a pickup gap of
0.1 ms). Of the requests queued at 3.5 and 4 ms, after the forming and before the instance
freed, the first joined batch 1 and the second waited for batch 2:

>>> import numpy as np
>>> from qmodel.triton.trace import TritonTrace
>>> t = TritonTrace(model="m", starts=np.array([0.0, 5.1e-3, 9.2e-3]),
...                 sizes=np.array([1, 2, 1]), executions=np.array([5e-3, 4e-3, 3e-3]),
...                 waits=np.zeros(4), outside=np.zeros(4),
...                 queued=np.array([-1e-3, 1e-3, 3.5e-3, 4e-3]),
...                 batch=np.array([0, 1, 1, 2]), dropped=0)
>>> round(pickup_gap(t, delay=2e-3) * 1e3, 3)
0.1
>>> prefetch_join(t, delay=2e-3, largest=8, lag=0.0)
(0.5, 1, 2)
"""

from __future__ import annotations

from collections import deque

import numpy as np

from .trace import TritonTrace

__all__ = ["pickup_gap", "prefetch_join", "MIN_LATE"]

# fewer late arrivals than this leave Node.prefetch unmeasured
MIN_LATE = 20
# gaps longer than this are an idle instance, not a pickup
LONGEST_GAP = 2e-3


def _freed(trace: TritonTrace) -> np.ndarray:
    """For each batch, when the instance it ran on freed (-inf for an instance's first
    batch). A trace does not name instances, so they are matched: in order of COMPUTE_START,
    each batch takes the earliest COMPUTE_END at or before its start not yet taken by another
    batch, as a waiting batch goes to the instance that frees first. With one instance that
    is the previous batch's end; with several, the latest end of any instance (the rule
    before) read another instance's freeing just before the start as this one's and made the
    pickup gap short (0.075 ms for a synthetic 0.1 ms over two instances)."""
    order = np.argsort(trace.starts, kind="stable")
    ends = trace.starts + trace.executions
    by_end = np.argsort(ends, kind="stable")
    freed = np.full(trace.starts.size, -np.inf)
    free, j = deque(), 0           # the ends not yet taken, earliest first
    for b in order:
        start = trace.starts[b]
        while j < by_end.size and ends[by_end[j]] <= start:
            if by_end[j] != b:
                free.append(ends[by_end[j]])
            j += 1
        if free:
            freed[b] = free.popleft()
    return freed


def _oldest(trace: TritonTrace) -> np.ndarray:
    oldest = np.full(trace.starts.size, np.inf)
    np.minimum.at(oldest, trace.batch, trace.queued)
    return oldest


def pickup_gap(trace: TritonTrace, delay: float) -> float:
    """Mean time from an instance freeing to its next batch's start, over the batches that
    were ready before it freed (their oldest request's delay ran out earlier); 0 where none
    was.

    Parameters
    ----------
    trace : TritonTrace
    delay : float
        The model's max_queue_delay, seconds.
    """
    freed = _freed(trace)
    gap = trace.starts - freed
    ready = (_oldest(trace) + delay <= freed) & (gap >= 0) & (gap < LONGEST_GAP)
    return float(gap[ready].mean()) if ready.any() else 0.0


def prefetch_join(trace: TritonTrace, delay: float, largest: int,
                  lag: float) -> tuple[float, int, int]:
    """How often a request queued after its batch was formed, while every instance was busy,
    joined that batch: (fraction, joined, late).

    A batch is formed ``lag`` after its oldest request's delay runs out (the batcher thread's
    wake-up); batches of ``largest`` (the largest preferred size) are left out, having no
    room. ``late`` counts the requests queued between the forming and the instance freeing;
    ``joined`` those of them in the batch. The fraction is nan where ``late`` is 0.

    Parameters
    ----------
    trace : TritonTrace
    delay : float
        max_queue_delay, seconds (> 0: without a delay there is no forming ahead).
    largest : int
        The largest preferred batch size (max_batch_size without preferred sizes).
    lag : float
        Seconds from the delay running out to the batch being formed.
    """
    order = np.argsort(trace.queued, kind="stable")
    queued, batch = trace.queued[order], trace.batch[order]
    formed = _oldest(trace) + delay + lag
    freed = _freed(trace)
    joined = late = 0
    for b in np.flatnonzero((formed < freed) & (trace.sizes < largest)):
        lo, hi = np.searchsorted(queued, [formed[b], freed[b]], side="right")
        late += hi - lo
        joined += int(np.count_nonzero(batch[lo:hi] == b))
    return (float(joined / late) if late else float("nan")), int(joined), int(late)
