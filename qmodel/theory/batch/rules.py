"""Triton's dispatch rule for one node, as the numbers the batch model works with.

See docs/triton-semantics.md for the rule itself: a queue of n >= pmin requests dispatches the
largest preferred size that fits (max_batch_size B once the oldest request's max_queue_delay D
has run out); fewer than pmin wait until pmin are there or the oldest reaches D.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ...system import Node, ServiceTime

__all__ = ["Rules"]


@dataclass(frozen=True, eq=False)
class Rules:
    """One node's batching rule and service law.

    Attributes
    ----------
    service : ServiceTime
    B, Q : int
        max_batch_size and max_queue_size (0: unlimited).
    D : float
        max_queue_delay, seconds.
    table : ndarray
        table[n]: the largest preferred size <= n (0 if none), n = 0..B.
    pmin : int
        The smallest preferred size: fewer waiting form a batch rather than go at once.
    K : int
        What a long queue dispatches: B once the oldest request's delay has run out (with a
        delay, a long queue always holds such a request), else the largest preferred size.
    leaving : tuple of int
        The batch sizes that can leave requests behind: a queue of n >= pmin dispatches
        table[min(n, B)], and B once the delay ran out.
    c : int
        Instances.
    own_means : ndarray
        E[S(k)], k = 1..B.
    """

    service: ServiceTime
    B: int
    Q: int
    D: float
    table: np.ndarray
    pmin: int
    K: int
    leaving: tuple
    c: int
    own_means: np.ndarray

    @classmethod
    def of(cls, node: Node) -> "Rules":
        B, D = node.max_batch_size, float(node.max_queue_delay)
        table = node.preferred_table()
        pmin = min(node.effective_preferred)
        leaving = sorted({int(table[n]) for n in range(pmin, B + 1)} | ({B} if D > 0 else set()))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")          # building the Node warned already
            own = np.asarray(node.service.mean(np.arange(1, B + 1)), float)
        return cls(service=node.service, B=B, Q=node.max_queue_size, D=D, table=table,
                   pmin=pmin, K=node.saturated_batch_size, leaving=tuple(leaving),
                   c=node.instances, own_means=own)
