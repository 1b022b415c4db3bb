"""The event engine: one arrival per replica per step, for nodes that interact.

Needed when the routing of a request depends on node state (least outstanding, power of d) or
when a finite ``max_queue_size`` rejects requests, so the future of a node's queue is not known in
advance. Each replica is a whole cluster: R replicas x N nodes = R*N queues, advanced together.

Per arrival at time t, in every replica:

1. every node whose next batch is due before t dispatches it (repeated until none is due);
2. the router picks a node from the outstanding counts at t (queued + in service);
3. the request joins that node's queue, or is rejected if the queue is full;
4. that node's next dispatch is recomputed.

A node's next dispatch is cached and is valid until its queue or instances change: with no new
arrival to the node, the batching rule (:mod:`qmodel.sim.batching`) says exactly when the next
batch goes. Queues are ring buffers of arrival times that grow when they fill.
"""

from __future__ import annotations

import numpy as np

from .batching import batch_size, dispatch_time
from .routing import choose_node, tie_bits

__all__ = ["run_events"]

PROGRESS_EVERY = 512
# Routing decisions whose random tie-breakers are drawn in one call.
TIE_BLOCK = 64


class _Queues:
    """R*N FIFO queues of arrival times with the batching state of each node."""

    def __init__(self, bk, types, pair_type, capacity):
        xp = bk.xp
        self.bk, self.xp, self.types = bk, xp, types
        pairs = pair_type.size
        self.pair_type = pair_type
        (self.limit, self.delay, self.pmin, self.pref_base, instances,
         self.max_queue) = types.lane_params(xp, pair_type)
        # One node kind: parameters are scalars, which spares a gather per parameter per step.
        self.uniform = len(types.kinds) == 1
        if self.uniform:
            self.limit, self.pmin, self.pref_base = (int(types.batch[0]), int(types.pmin[0]), 0)
            self.delay = float(types.delay[0])
        self.single = types.cmax == 1
        self.cap = capacity
        self.buf = xp.full((pairs, capacity), xp.inf)
        self.head = xp.zeros(pairs, dtype=np.int64)
        self.length = xp.zeros(pairs, dtype=np.int64)
        self.free = types.initial_free(xp, instances)
        self.in_service = xp.zeros((pairs, types.cmax), dtype=np.int64)
        self.next_time = xp.full(pairs, xp.inf)
        self.next_size = xp.zeros(pairs, dtype=np.int64)
        self.records = []

    def _param(self, values, ps):
        return values if self.uniform else values[ps]

    def decide(self, ps):
        """Recompute the cached next dispatch of the nodes ``ps`` (flat pair indices)."""
        xp = self.xp
        mask = self.cap - 1
        length, head = self.length[ps], self.head[ps]
        pmin, delay = self._param(self.pmin, ps), self._param(self.delay, ps)
        a0 = xp.where(length > 0, self.buf[ps, head], xp.inf)
        a_pmin = xp.where(length >= pmin, self.buf[ps, (head + pmin - 1) & mask], xp.inf)
        free = self.free[ps, 0] if self.single else self.free[ps].min(axis=1)
        when = dispatch_time(xp, free, a0, a_pmin, delay)
        # Everything queued arrived before `when` (the engine never looks into the future),
        # so the pending count at `when` is the queue length, capped at B.
        q = xp.minimum(length, self._param(self.limit, ps))
        base = self._param(self.pref_base, ps)
        pref_le = None if self.types.preferred_is_max else (
            lambda q: self.types.preferred[base + q])
        self.next_time[ps] = when
        self.next_size[ps] = batch_size(xp, when, q, a0, delay, pmin, pref_le)

    def dispatch(self, ps):
        """Send the cached next batch of nodes ``ps`` to their earliest free instance."""
        xp = self.xp
        when, k = self.next_time[ps], self.next_size[ps]
        kind = 0 if self.uniform else self.pair_type[ps]
        s = self.types.slowed(xp, self.types.sampler.sample(kind, k), kind, self.free[ps],
                              when)
        inst = 0 if self.single else xp.argmin(self.free[ps], axis=1)
        self.free[ps, inst] = when + s
        self.in_service[ps, inst] = k
        self.head[ps] = (self.head[ps] + k) & (self.cap - 1)
        self.length[ps] -= k
        self.records.append((ps, when, s, k))
        self.decide(ps)

    def advance(self, t, nodes):
        """Dispatch every batch due strictly before each replica's time ``t``, in rounds."""
        xp = self.xp
        due = xp.flatnonzero(self.next_time.reshape(-1, nodes) < t[:, None])
        while due.size:
            self.dispatch(due)
            # Only the nodes that just dispatched have a new next batch; another may be due.
            due = due[self.next_time[due] < t[due // nodes]]

    def outstanding(self, t, replicas, nodes):
        """Queued + in-service requests of every node at time t (per replica), (R, N)."""
        xp = self.xp
        if self.single:
            busy = self.free[:, 0].reshape(replicas, nodes) > t[:, None]
            return self.length.reshape(replicas, nodes) + xp.where(
                busy, self.in_service[:, 0].reshape(replicas, nodes), 0)
        busy = self.free.reshape(replicas, nodes, -1) > t[:, None, None]
        serving = (self.in_service.reshape(replicas, nodes, -1) * busy).sum(axis=2)
        return self.length.reshape(replicas, nodes) + serving

    def push(self, ps, t):
        """Append arrivals at times ``t`` to queues ``ps`` (distinct pairs)."""
        if ps.size and int(self.length[ps].max()) >= self.cap:
            self._grow()
        self.buf[ps, (self.head[ps] + self.length[ps]) & (self.cap - 1)] = t
        self.length[ps] += 1
        self.decide(ps)

    def _grow(self):
        xp = self.xp
        old, cap = self.buf, self.cap
        idx = (self.head[:, None] + xp.arange(cap)[None, :]) & (cap - 1)
        self.buf = xp.full((old.shape[0], 2 * cap), xp.inf)
        self.buf[:, :cap] = xp.take_along_axis(old, idx, axis=1)
        self.head[:] = 0
        self.cap = 2 * cap


def run_events(bk, types, router, times, assign=None, progress=None):
    """Simulate R replicas of an N-node cluster, arrival by arrival.

    Parameters
    ----------
    bk : Backend
    types : NodeTypes
    router : Router
    times : array (R, n)
        Arrival times per replica, increasing, +inf padded.
    assign : int array (R, n), optional
        Pre-drawn node of every request, for static routers; None for dynamic ones.
    progress : callable, optional
        Called with the fraction of arrival steps done.

    Returns
    -------
    dict of numpy arrays: ``route`` (R, n), the node of each request or -1 if rejected (padding
    is -1 too); ``pair``, ``start``, ``service``, ``size``, one entry per executed batch, in the
    order they were dispatched (chronological within each node); ``nodes``.
    """
    if types.any_prefetch:
        raise ValueError("the event engine does not run Node.prefetch: the compiled engine "
                         "runs it behind every router (engine='auto' or 'compiled', "
                         "backend='auto' or 'cpu'), the look-ahead engine for one node or a "
                         "static router")
    xp = bk.xp
    replicas, n = times.shape
    # Each step reads one arrival per replica: keep arrivals, routes and pre-drawn assignments
    # time-major so that the step touches contiguous memory.
    times = xp.ascontiguousarray(times.T)
    if assign is not None:
        assign = xp.ascontiguousarray(assign.T)
    nodes = types.type_of_node.size
    pair_type = xp.asarray(np.tile(types.type_of_node, replicas))
    queues = _Queues(bk, types, pair_type, capacity=_pow2(max(64, 4 * types.bmax)))
    route = xp.full((n, replicas), -1, dtype=np.int64)
    replica_base = xp.arange(replicas, dtype=np.int64) * nodes
    finite_queues = bool((types.max_queue > 0).any())
    for i in range(n):
        t = times[i]
        queues.advance(t, nodes)
        if assign is not None:
            node = assign[i]
        else:
            if i % TIE_BLOCK == 0:
                ties = tie_bits(bk, router, TIE_BLOCK, replicas, nodes)
            node = choose_node(bk, router, queues.outstanding(t, replicas, nodes),
                               ties[i % TIE_BLOCK])
        ps = replica_base + node
        accept = xp.isfinite(t)
        if finite_queues:
            room = queues.max_queue[ps]
            accept &= (room == 0) | (queues.length[ps] < room)
        route[i] = xp.where(accept, node, -1)
        queues.push(ps[accept], t[accept])
        if progress is not None and i % PROGRESS_EVERY == 0:
            progress(i / n)
    queues.advance(xp.full(replicas, xp.inf), nodes)
    if progress is not None:
        progress(1.0)
    cat = lambda j: bk.asnumpy(xp.concatenate([r[j] for r in queues.records])) \
        if queues.records else np.zeros(0)
    return {"route": bk.asnumpy(route.T), "pair": cat(0).astype(np.int64), "start": cat(1),
            "service": cat(2), "size": cat(3).astype(np.int64), "nodes": nodes}


def _pow2(n: int) -> int:
    return 1 << (int(n) - 1).bit_length()
