"""The look-ahead engine: one batch per lane per step, for nodes that decouple.

Applies when every lane is a single node that sees a stream of arrivals fixed in advance: one
node, or a cluster behind a static router (random, round robin) with unlimited queues. Then the
whole future arrival stream of a lane is known, and each step forms the next batch directly:
the dispatch time and size follow from the earliest free instance and the next B arrivals
(:mod:`qmodel.sim.batching`). A step costs O(log B) gathers per lane however many requests the
batch holds, which is what makes this engine fast.

Triton's prefetching batcher (``Node.prefetch``, lanes with a delay) keeps one more time per
lane, when the batcher may open its next batch: the previous batch's pickup, or its forming
where it was formed full, and no earlier than the pickup of the batch 2c before it (Triton
keeps at most 2c formed batches waiting for c instances). A batch is formed at the batching
rule's time counted from then instead of from a free instance, and starts when an instance
frees; with probability ``prefetch`` it then takes in the requests queued by its start, up to
the largest preferred size. Where it is full at a largest preferred size below B, the batches
formed behind it whose oldest request has waited longer than the delay are merged into it at
its start, while the sum fits in B (Triton's instance queue at dequeue;
docs/triton-semantics.md, "Prefetch").
"""

from __future__ import annotations

import numpy as np

from .batching import batch_size, dispatch_time

__all__ = ["run_lookahead"]

# Steps between checks of "all lanes finished" (a device-to-host sync on CuPy).
CHECK_EVERY = 32


def run_lookahead(bk, types, times, counts, lane_type, progress=None):
    """Simulate every lane to the end of its arrivals.

    Parameters
    ----------
    bk : Backend
    types : NodeTypes
    times : array (lanes, width)
        Arrival times per lane, increasing, +inf padded with at least 2 * bmax spare columns.
    counts : int array (lanes,)
        Real arrivals per lane.
    lane_type : int array (lanes,)
        Node type of each lane.
    progress : callable, optional
        Called with the fraction of requests dispatched so far.

    Returns
    -------
    dict of numpy arrays, each (steps, lanes): ``start`` (dispatch time), ``service``, ``size``.
    Lane l's batches, in step order, cover its requests in arrival order; size 0 marks a
    finished lane.
    """
    xp = bk.xp
    lanes, width = times.shape
    flat = times.ravel()
    row = xp.arange(lanes, dtype=np.int64) * width
    limit, delay, pmin, pref_base, instances, _ = types.lane_params(xp, lane_type)
    if len(types.kinds) == 1:      # one node kind: scalars spare an array op per use
        delay, pmin = float(types.delay[0]), int(types.pmin[0])
    scalar_pmin = isinstance(pmin, int)
    preferred = types.preferred
    sampler = types.sampler
    free = types.initial_free(xp, instances)
    single = types.cmax == 1
    lane_ids = xp.arange(lanes)
    # Binary-search steps for counting arrivals <= T among the next B: powers of two, largest
    # first, covering every count up to bmax. With one B for all lanes the probe sizes can be
    # chosen to never pass B (halving the remaining range), which saves the per-lane bound check.
    uniform_limit = len(types.kinds) == 1
    if uniform_limit:
        probes, left = [], int(types.bmax)
        while left > 0:
            half = (left + 1) // 2
            probes.append(half)
            left -= half
    else:
        probes = [1 << j for j in reversed(range(int(types.bmax).bit_length()))]
    head = xp.zeros(lanes, dtype=np.int64)
    total = float(counts.sum())
    starts, services, sizes = [], [], []

    pref_le = None if types.preferred_is_max else (lambda q: preferred[pref_base + q])
    kind = 0 if len(types.kinds) == 1 else lane_type
    prefetch = types.prefetch[lane_type] if types.any_prefetch else None
    largest = types.largest_preferred[lane_type]
    t_open = xp.zeros(lanes)
    # Triton keeps at most 2c formed batches waiting for c instances: each lane's batch
    # number j forms no earlier than the pickup of its batch j - 2c (the last 2c pickups, a
    # ring indexed by the batch's number mod 2c)
    slots = 2 * instances
    ring = xp.zeros((lanes, 2 * types.cmax))
    picked = xp.zeros(lanes, dtype=np.int64)

    def slot_free(index):
        """When each lane's batch number ``index`` may form (the batch 2c before it already
        picked up): that batch's pickup, 0 for the first 2c."""
        back = index - slots
        return xp.where(back < 0, 0.0, ring[lane_ids, xp.maximum(back, 0) % slots])
    # merging at dequeue needs a largest preferred size below B on a prefetching lane
    merging = prefetch is not None and bool(
        ((types.prefetch >= 0) & (types.largest_preferred < types.batch)).any())

    def pending(seen, base, a0, when):
        """q = #{j < B : arrival[head + j] <= when}: arrivals are sorted, so a binary search
        for the flat index of the last one, starting just before the head."""
        before = base - 1
        last = before
        for i, step in enumerate(probes):
            cand = last + step
            value = _at(seen, flat, base, step - 1) if i == 0 else flat[cand]
            ok = value <= when
            if not uniform_limit:
                ok &= cand - before <= limit
            last = xp.where(ok, cand, last)
        # A finished lane sees only +inf padding, which "arrives" at when = +inf: count none.
        return xp.where(a0 < xp.inf, last - before, 0)

    def merge(base, formed_k, k, formed, when, t_open):
        """(k, t_open, batches taken) with the batches formed behind a full one merged in at
        ``when``: each is formed by the rule from the forming of the one before (the batcher
        opened it at once; at ``when`` where the batch filled only as it started) once a
        slot is free, and joins where its oldest request has waited longer than the delay by
        ``when``, it was formed by then and the sum fits in B."""
        start = xp.where(formed_k >= largest, formed, when)
        taken = xp.ones(lanes, dtype=np.int64)
        chained = (k >= largest) & (largest < limit) & (prefetch >= 0)
        merged = xp.zeros(lanes, dtype=bool)
        full = chained
        for _ in range(int(types.bmax)):
            if not bool(chained.any()):
                break
            nxt = base + k
            seen = {0: flat[nxt]}
            a0 = seen[0]
            a_pmin = _at(seen, flat, nxt, pmin - 1) if scalar_pmin else flat[nxt + pmin - 1]
            behind = dispatch_time(xp, xp.maximum(start, slot_free(picked + taken)), a0,
                                   a_pmin, delay)
            # formed as the rule forms any batch (up to B), then merged if it fits
            k2 = batch_size(xp, behind, pending(seen, nxt, a0, behind), a0, delay, pmin,
                            pref_le)
            # a batch whose slot frees only with this pickup is formed after it: not merged
            ok = chained & (a0 + delay < when) & (behind <= when) & (k2 > 0) \
                & (k + k2 <= limit) & (taken < slots)
            k = xp.where(ok, k + k2, k)
            taken += ok
            start = xp.where(ok, behind, start)
            merged |= ok
            full = xp.where(ok, k2 >= largest, full)
            chained = ok & full
        # the batcher opens its next batch at the last merged one's forming where it left
        # full, else once this one is picked up
        return k, xp.where(merged, xp.where(full, start, when), t_open), taken

    while True:
        for _ in range(CHECK_EVERY):
            if single:
                t_free = free[:, 0]
            else:
                inst = xp.argmin(free, axis=1)
                t_free = free[lane_ids, inst]
            base = row + head
            # Arrivals at fixed offsets from the head; an offset wanted twice (pmin - 1 and the
            # first probe often coincide) is gathered once.
            seen = {0: flat[base]}
            a0 = seen[0]
            a_pmin = _at(seen, flat, base, pmin - 1) if scalar_pmin else flat[base + pmin - 1]
            if prefetch is None:
                when = dispatch_time(xp, t_free, a0, a_pmin, delay)
                q = pending(seen, base, a0, when)
                k = batch_size(xp, when, q, a0, delay, pmin, pref_le)
            else:
                formed = dispatch_time(xp, xp.where(prefetch < 0, t_free,
                                                    xp.maximum(t_open, slot_free(picked))),
                                       a0, a_pmin, delay)
                k = batch_size(xp, formed, pending(seen, base, a0, formed), a0, delay, pmin,
                               pref_le)
                formed_k = k
                when = xp.maximum(formed, t_free)
                late = (when > formed) & (k < largest) & (bk.rng.random(lanes) < prefetch)
                grown = xp.minimum(pending(seen, base, a0, when), largest)
                if pref_le is not None:     # a preferred size grows only to a larger one
                    grown = xp.where(pref_le(k) == k, pref_le(grown), grown)
                k = xp.where(late, xp.maximum(k, grown), k)
                # the batcher opens its next batch once this one is picked up, or at once
                # where this one was formed full
                t_open = xp.where(formed_k >= largest, formed, when)
                taken = 1
                if merging:
                    k, t_open, taken = merge(base, formed_k, k, formed, when, t_open)
                    for i in range(int(taken.max())):
                        mine = (taken > i) & (prefetch >= 0)
                        at = (picked + i) % slots
                        ring[lane_ids, at] = xp.where(mine, when, ring[lane_ids, at])
                else:
                    ring[lane_ids, picked % slots] = when
                picked += taken
            s = types.slowed(xp, sampler.sample(kind, k), kind, free, when)
            if single:
                free[:, 0] = when + s
            else:
                free[lane_ids, inst] = when + s
            head += k
            starts.append(when)
            services.append(s)
            sizes.append(k)
        done = float(xp.minimum(head, counts).sum())
        if progress is not None:
            progress(done / total)
        if done >= total:
            break
    return {
        "start": bk.asnumpy(xp.stack(starts)),
        "service": bk.asnumpy(xp.stack(services)),
        # Batch sizes fit 32 bits; half the bytes to move in the caller's transpose.
        "size": bk.asnumpy(xp.stack(sizes).astype(np.int32)),
    }


def _at(seen, flat, base, offset):
    """flat[base + offset] for a scalar offset, gathered once per step."""
    if offset not in seen:
        seen[offset] = flat[base + offset]
    return seen[offset]
