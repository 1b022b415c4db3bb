"""Per-node-type parameter arrays, gathered once per lane so the engines' loops do no lookups.

A cluster may mix node kinds (different batching knobs, speeds or instance counts); each distinct
Node is a "type", and every lane (or every node of a lane) carries its type's parameters.
"""

from __future__ import annotations

import numpy as np

from .batching import preferred_lookup
from .service import ServiceSampler

__all__ = ["NodeTypes"]


class NodeTypes:
    """The distinct nodes of a cluster as arrays indexed by type.

    Attributes
    ----------
    type_of_node : ndarray (N,)
        Type index of each cluster node.
    bmax, cmax : int
        Largest max_batch_size and instance count over the types.
    sampler : ServiceSampler
    """

    def __init__(self, bk, nodes):
        xp = bk.xp
        kinds: list = []
        type_of = []
        for n in nodes:
            if n not in kinds:
                kinds.append(n)
            type_of.append(kinds.index(n))
        self.kinds = kinds
        self.type_of_node = np.array(type_of, dtype=np.int64)
        self.bmax = max(n.max_batch_size for n in kinds)
        self.cmax = max(n.instances for n in kinds)
        self.width = self.bmax + 1
        self.batch = xp.asarray([n.max_batch_size for n in kinds], dtype=np.int64)
        self.delay = xp.asarray([n.max_queue_delay for n in kinds], dtype=float)
        self.pmin = xp.asarray([min(n.effective_preferred) for n in kinds], dtype=np.int64)
        self.instances = xp.asarray([n.instances for n in kinds], dtype=np.int64)
        self.max_queue = xp.asarray([n.max_queue_size for n in kinds], dtype=np.int64)
        self.preferred = xp.asarray(np.concatenate(
            [preferred_lookup(n.effective_preferred, self.bmax) for n in kinds]))
        # With preferred sizes {B} (Triton's default) the batch size is always q: see
        # batching.batch_size, which then skips the table lookup.
        self.preferred_is_max = all(n.effective_preferred == (n.max_batch_size,) for n in kinds)
        # Triton's prefetching batcher (Node.prefetches): the probability that a batch formed
        # ahead takes in later requests, -1 where batches form when an instance frees
        self.prefetch = xp.asarray([n.prefetch if n.prefetches else -1.0 for n in kinds])
        self.any_prefetch = any(n.prefetches for n in kinds)
        self.largest_preferred = xp.asarray([max(n.effective_preferred) for n in kinds],
                                            dtype=np.int64)
        self.sampler = ServiceSampler(bk, [n.service for n in kinds],
                                      [n.max_batch_size for n in kinds])
        # Node.slowdown: the factor on S(k) by type and busy instances (itself included)
        self.any_slowdown = any(n.slowdown is not None for n in kinds)
        self.slowdown = xp.asarray([[n.slowdown_at(max(m, 1)) for m in range(self.cmax + 1)]
                                    for n in kinds])

    def slowed(self, xp, s, kind, free, when):
        """Service times ``s`` of batches starting at ``when`` on nodes of type ``kind``
        whose instances are free at ``free`` (rows; +inf pads a smaller node's row), times
        the node's slowdown at the instances then busy (the starting one among them: it is
        free by ``when``)."""
        if not self.any_slowdown:
            return s
        busy = 1 + ((free > when[:, None]) & xp.isfinite(free)).sum(axis=1)
        return s * self.slowdown[kind, busy]

    def lane_params(self, xp, lane_type):
        """Per-lane (B, D, pmin, preferred-table offset, instances, max_queue)."""
        return (self.batch[lane_type], self.delay[lane_type], self.pmin[lane_type],
                lane_type * self.width, self.instances[lane_type], self.max_queue[lane_type])

    def initial_free(self, xp, instances):
        """Instance free times: 0 for real instances, +inf for the padding of smaller nodes."""
        cols = xp.arange(self.cmax)[None, :]
        return xp.where(cols < instances[:, None], 0.0, xp.inf)
