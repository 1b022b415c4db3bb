"""One replica of a cluster, request by request: the compiled engine's rule, written once.

A replica is simulated sequentially, event by event, as one thread of work: the next arrival
or the earliest due batch of any node, whichever comes first (an arrival first on a tie, so
that a batch due at an arrival's time takes it, as the look-ahead engine counts arrivals
<= the dispatch time). Every rule is Triton's (docs/triton-semantics.md) and is the one the
reference engines apply:

- a node's next batch is due at the batching rule's time given the requests queued so far
  (:func:`qmodel.sim.batching.dispatch_time`, :func:`~qmodel.sim.batching.batch_size`):
  recomputed when a request joins, exact because the rule never looks ahead;
- the batch goes to the node's earliest free instance; its service time is S(k) drawn from
  the node's jitter law (or its measured samples); its requests leave at its end plus the
  node's overhead;
- the router sees every node's outstanding requests (queued plus in service) at the arrival;
- a request finding max_queue_size requests queued is rejected;
- a prefetching node (``Node.prefetch``, docs/triton-semantics.md "Prefetch") forms its batch
  at the rule's time counted from when its batcher may open one (the previous batch's
  pickup, or its forming where it was formed full, and no earlier than the pickup of the
  batch 2c before it) instead of from a free instance, from the requests queued by then; the
  batch starts when an instance frees and, with probability ``prefetch``, takes in the
  requests queued by then, up to the largest preferred size, and where it is full the
  batches formed behind it that waited past the delay merge into it while they fit in B.
  This is the look-ahead engine's rule, and here it runs behind every router.

The functions are plain Python over scalars and arrays, in the subset Numba compiles both for
the CPU (``numba.njit``) and for the GPU (``numba.cuda.jit(device=True)``): :func:`build`
compiles them for one target, with the target's way of adding to a shared counter. The random
generator is xoroshiro128+ (Blackman & Vigna, "Scrambled linear pseudorandom number
generators", 2018) on each replica's own state, so a replica draws the same numbers on every
target. Latencies are counted into log-spaced histogram bins (:mod:`qmodel.sim.histogram`).

The driver (:mod:`qmodel.sim.compiled`) packs a description into the arrays below; the codes
are the contract between them.
"""

from __future__ import annotations

import math
import types

import numpy as np

__all__ = ["build", "RULE", "LAW", "ARRIVAL", "ROUTER", "NODE_INT", "NODE_FLOAT", "OPENED",
           "STAT", "SCRATCH_OVERFLOW"]

# Jitter laws of S(k) (qmodel.jitter), and measured samples.
LAW = {"deterministic": 0, "exponential": 1, "gamma": 2, "lognormal": 3, "empirical": 4}
# Interarrival laws; a trace replays given times.
ARRIVAL = {"poisson": 0, "deterministic": 1, "gamma": 2, "trace": 3}
# Routers (qmodel.routers); "one" is a single node.
ROUTER = {"one": 0, "random": 1, "round_robin": 2, "least_outstanding": 3, "power_of_d": 4}
# Columns of the per-node integer and float parameter tables.
NODE_INT = {"batch": 0, "pmin": 1, "instances": 2, "max_queue": 3, "law": 4}
# "prefetch": the probability that a batch formed ahead takes in later requests, -1 where the
# node forms its batches when an instance frees
# "drift_sigma", "drift_period", "drift_rho": Node.drift's log-factor deviation (0: none), step
# and step-to-step correlation
NODE_FLOAT = {"delay": 0, "overhead": 1, "law_param": 2, "prefetch": 3, "drift_sigma": 4,
              "drift_period": 5, "drift_rho": 6}
# Per-node state: a prefetching node's batcher (when it may open its next batch, when the
# batch it holds was formed, how many batches it has formed that instances picked up, and
# from column "ring" on, 2 x instances of them, the pickup times of its last 2c batches:
# Triton keeps at most 2c formed batches waiting for c instances) and a drifting node's
# speed (its log factor, and when its step ends). The drivers allocate
# len(OPENED) - 1 + 2 x the most instances columns.
OPENED = {"open": 0, "formed": 1, "drift_log": 2, "drift_next": 3, "picked": 4, "ring": 5}
# Columns of the per-replica results.
STAT = {"busy": 0, "sojourn_sum": 1, "served": 2, "rejected": 3, "t_warm": 4, "t_end": 5,
        "overflow": 6, "batches": 7}
# stats[r, STAT["overflow"]] when a queue outgrew its buffer: the driver reruns with more room.
SCRATCH_OVERFLOW = 1.0

# the columns above as module constants, which Numba compiles in (a dict it cannot read)
_B_I, _PMIN_I, _C_I, _MAXQ_I, _LAW_I = (NODE_INT[k] for k in
                                        ("batch", "pmin", "instances", "max_queue", "law"))
_D_F, _OVER_F, _PAR_F, _PREFETCH_F = (NODE_FLOAT[k] for k in
                                      ("delay", "overhead", "law_param", "prefetch"))
_DSIG_F, _DPER_F, _DRHO_F = (NODE_FLOAT[k] for k in ("drift_sigma", "drift_period",
                                                      "drift_rho"))
_OPEN, _FORMED, _DLOG, _DNEXT, _PICKED, _RING = (OPENED[k] for k in (
    "open", "formed", "drift_log", "drift_next", "picked", "ring"))
_BUSY, _SUM, _SERVED, _REJ, _TWARM, _TEND, _OVERFLOW, _BATCHES = (STAT[k] for k in (
    "busy", "sojourn_sum", "served", "rejected", "t_warm", "t_end", "overflow", "batches"))

# xoroshiro128+ constants as unsigned 64-bit numbers (Numba types a plain int as signed, and
# signed with unsigned arithmetic gives floats).
_U11 = np.uint64(11)
_U16 = np.uint64(16)
_U24 = np.uint64(24)
_U40 = np.uint64(40)
_U37 = np.uint64(37)
_U27 = np.uint64(27)
_U0 = np.uint64(0)
# counts above it tie (a queue holds up to 2^22 requests, the batches in service up to
# instances x max_batch_size more: far below)
_COUNT_MAX = (1 << 32) - 1
_U32 = np.uint64(32)
_TWO_M53 = 1.0 / 9007199254740992.0      # 2**-53
prange = range                           # numba.prange in the CPU driver


RULE = ("next_bits", "uniform", "exponential", "normal", "standard_gamma", "service", "gap",
        "arrival", "running_after", "first_due", "node_start", "drift_factor", "batch_service",
        "decide", "form", "settle", "route", "earliest_free", "busy_at", "slot_free", "prefetch_grow",
        "prefetch_merge", "bin_of",
        "run_replica")


def add(array, index, value):
    """Add to a counter; the CPU's version (each section's counters belong to one thread)."""
    array[index] += value


def build(jit, add):
    """The rule compiled for one target.

    Each function of :data:`RULE` is rebound to a namespace of its own, where the names it
    calls are that target's compiled functions: one source, no closures (which Numba would
    not cache).

    Parameters
    ----------
    jit : callable
        Compiles a function: ``numba.njit`` (CPU) or ``numba.cuda.jit(device=True)`` (GPU,
        or the CUDA simulator).
    add : callable
        ``add(array, (i, j), 1)``: adds to a counter that other threads may share
        (``numba.cuda.atomic.add`` on the GPU; :func:`add` compiled on the CPU).

    Returns
    -------
    callable
        ``run_replica(r, slot, section, ...)`` compiled with ``jit``: simulates replica ``r``
        in scratch row ``slot``, counting into histogram row ``section`` (the arguments:
        :mod:`qmodel.sim.compiled`).
    """
    return _compiled_rule(jit, add)["run_replica"]


def _compiled_rule(jit, add) -> dict:
    """A namespace where each function of :data:`RULE` is compiled with ``jit`` and calls
    the others so compiled."""
    namespace = dict(globals())
    namespace["add"] = add
    for name in RULE:
        namespace[name] = jit(types.FunctionType(globals()[name].__code__, namespace, name))
    return namespace


def cpu_driver(jit, add, prange):
    """:func:`run_sections` compiled with ``jit`` over the rule compiled with it, its loop
    over sections spread by ``prange`` (``numba.prange``)."""
    namespace = _compiled_rule(jit, add)
    namespace["prange"] = prange
    return types.FunctionType(run_sections.__code__, namespace, "run_sections")


def run_sections(replicas, sections, nodes, node_i, node_f, pref, mean, emp_off, emp_cnt,
                 emp_scale, pool, slow, arr_code, arr_f, trace, trace_off, router_i, cum, totals,
                 first_measured, last_measured, seeds, hist, hist_lo, hist_step, bhist, stats,
                 qbuf, qhead, qlen, free, busy_k, nt, nk, opened, perm, held, rs, record, qidx,
                 rec_sojourn, rec_node, rec_batch, rec_batch_i):
    """Every replica, section by section: section ``sec`` runs its replicas in turn in scratch
    row ``sec`` and counts into histogram row ``sec``, so sections share nothing."""
    for sec in prange(sections):
        begin = (sec * replicas + sections - 1) // sections
        end = ((sec + 1) * replicas + sections - 1) // sections
        for r in range(begin, end):
            run_replica(r, sec, sec, nodes, node_i, node_f, pref, mean, emp_off, emp_cnt,
                        emp_scale, pool, slow, arr_code, arr_f, trace, trace_off, router_i, cum,
                        totals, first_measured, last_measured, seeds, hist, hist_lo,
                        hist_step, bhist, stats, qbuf, qhead, qlen, free, busy_k, nt, nk,
                        opened, perm, held, rs, record, qidx, rec_sojourn, rec_node, rec_batch,
                        rec_batch_i)


def next_bits(rs, slot):
    """The next 64 random bits of the slot's xoroshiro128+ state."""
    s0 = rs[slot, 0]
    s1 = rs[slot, 1]
    result = s0 + s1
    s1 ^= s0
    rs[slot, 0] = ((s0 << _U24) | (s0 >> _U40)) ^ s1 ^ (s1 << _U16)
    rs[slot, 1] = (s1 << _U37) | (s1 >> _U27)
    return result


def uniform(rs, slot):
    """A uniform draw in [0, 1) (the top 53 of 64 random bits)."""
    # through int64: 53 bits fit, and a signed conversion is one instruction where an
    # unsigned one is a branch
    return float(np.int64(next_bits(rs, slot) >> _U11)) * _TWO_M53


def exponential(rs, slot):
    return -math.log(1.0 - uniform(rs, slot))


def normal(rs, slot):
    # Box-Muller; 1 - u lies in (0, 1], so the logarithm is finite
    u = 1.0 - uniform(rs, slot)
    v = uniform(rs, slot)
    return math.sqrt(-2.0 * math.log(u)) * math.cos(2.0 * math.pi * v)


def standard_gamma(rs, slot, shape):
    """Gamma(shape, 1) by Marsaglia & Tsang ("A simple method for generating gamma
    variables", 2000); below shape 1 through Gamma(shape + 1) x U^(1/shape)."""
    boost = 1.0
    a = shape
    if a < 1.0:
        boost = math.pow(1.0 - uniform(rs, slot), 1.0 / a)
        a = a + 1.0
    d = a - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    while True:
        x = normal(rs, slot)
        v = 1.0 + c * x
        if v <= 0.0:
            continue
        v = v * v * v
        u = 1.0 - uniform(rs, slot)
        if math.log(u) < 0.5 * x * x + d - d * v + d * math.log(v):
            return d * v * boost


def service(rs, slot, n, k, node_i, node_f, mean, emp_off, emp_cnt, emp_scale, pool):
    """S(k) at node n: its mean times a jitter draw, or a measured sample, scaled."""
    law = node_i[n, _LAW_I]
    m = mean[n, k]
    if law == 0:
        return m
    if law == 1:
        return m * exponential(rs, slot)
    if law == 2:
        shape = node_f[n, _PAR_F]
        return m * standard_gamma(rs, slot, shape) / shape
    if law == 3:
        sigma = node_f[n, _PAR_F]
        return m * math.exp(sigma * normal(rs, slot) - 0.5 * sigma * sigma)
    pick = emp_off[n, k] + int(uniform(rs, slot) * emp_cnt[n, k])
    return pool[pick] * emp_scale[n, k]


def gap(rs, slot, arr_code, arr_f, first):
    """The next interarrival time; a deterministic stream starts at a random phase."""
    mean_gap = arr_f[0]
    if arr_code == 0:
        return mean_gap * exponential(rs, slot)
    if arr_code == 1:
        if first:
            return mean_gap * uniform(rs, slot)
        return mean_gap
    shape = arr_f[1]
    return mean_gap * standard_gamma(rs, slot, shape) / shape


def arrival(rs, slot, r, i, t_before, arr_code, arr_f, trace, trace_off):
    """Replica r's arrival i: from its trace, or ``t_before`` (arrival i - 1's time) plus
    a gap drawn from the renewal law (the first gap at a random phase)."""
    if arr_code == 3:
        return trace[trace_off[r] + i]
    if i == 0:
        return gap(rs, slot, arr_code, arr_f, True)
    return t_before + gap(rs, slot, arr_code, arr_f, False)


def running_after(slot, n, t, node_i, free):
    """Seconds of node n's batches still running after time t, over its instances."""
    rest = 0.0
    for j in range(node_i[n, _C_I]):
        if free[slot, n, j] > t:
            rest += free[slot, n, j] - t
    return rest


def first_due(slot, nodes, nt):
    """The node whose next batch is due first (-1 where none is)."""
    due = -1
    t_due = math.inf
    for m in range(nodes):
        if nt[slot, m] < t_due:
            t_due = nt[slot, m]
            due = m
    return due


def node_start(rs, slot, n, node_f, opened):
    """Node n's state at a replica's start: its batcher with no batch formed or picked up,
    and its speed (``Node.drift``) with its log factor drawn from its stationary law, its
    first step ending at a random phase (no draw without drift)."""
    opened[slot, n, _OPEN] = 0.0
    opened[slot, n, _FORMED] = 0.0
    opened[slot, n, _PICKED] = 0.0
    sigma = node_f[n, _DSIG_F]
    if sigma > 0.0:
        opened[slot, n, _DLOG] = sigma * normal(rs, slot)
        opened[slot, n, _DNEXT] = node_f[n, _DPER_F] * uniform(rs, slot)


def drift_factor(rs, slot, n, when, node_f, opened):
    """Node n's speed factor at ``when`` (no earlier than any time asked before): the AR(1)
    log factor stepped over the periods that ended since, m at once (X' = ρ^m X +
    sqrt(1 - ρ^2m) σ ε: the m-step law exactly)."""
    sigma = node_f[n, _DSIG_F]
    nxt = opened[slot, n, _DNEXT]
    if when >= nxt:
        period = node_f[n, _DPER_F]
        m = math.floor((when - nxt) / period) + 1.0
        rho_m = math.pow(node_f[n, _DRHO_F], m)
        opened[slot, n, _DLOG] = (rho_m * opened[slot, n, _DLOG]
                                  + math.sqrt(1.0 - rho_m * rho_m) * sigma * normal(rs, slot))
        opened[slot, n, _DNEXT] = nxt + m * period
    return math.exp(opened[slot, n, _DLOG] - 0.5 * sigma * sigma)


def batch_service(rs, slot, n, k, when, node_i, node_f, mean, emp_off, emp_cnt, emp_scale,
                  pool, slow, free, opened):
    """S(k) of node n's batch starting at ``when`` (:func:`service`), times the node's
    slowdown at the instances then busy (``Node.slowdown``) and its speed factor then
    (``Node.drift``); before the batch's instance is marked busy."""
    s = service(rs, slot, n, k, node_i, node_f, mean, emp_off, emp_cnt, emp_scale, pool)
    if slow[n, 0] > 0.0:
        s *= slow[n, busy_at(slot, n, when, node_i, free)]
    if node_f[n, _DSIG_F] > 0.0:
        s *= drift_factor(rs, slot, n, when, node_f, opened)
    return s


def decide(slot, n, node_i, node_f, pref, qbuf, qhead, qlen, free, nt, nk, opened, mask):
    """Cache node n's next batch: when it is due and its size, from its queue alone (for a
    prefetching node, the size it was formed with: it may grow at its dispatch)."""
    length = qlen[slot, n]
    if length == 0:
        nt[slot, n] = math.inf
        nk[slot, n] = 0
        return
    t_free = math.inf
    for j in range(node_i[n, _C_I]):
        if free[slot, n, j] < t_free:
            t_free = free[slot, n, j]
    # One rule for both batchers: the batch is formed at the rule's time counted from a free
    # instance or, for a prefetching node, from when its batcher may open a batch, out of
    # the requests queued by then; it starts when an instance frees (at once, without
    # prefetch, where formed is never before t_free)
    prefetching = node_f[n, _PREFETCH_F] >= 0.0
    start = t_free
    if prefetching:
        start = max(opened[slot, n, _OPEN],
                    slot_free(slot, n, int(opened[slot, n, _PICKED]), node_i, opened))
    formed, k = form(slot, n, 0, start, prefetching, node_i, node_f, pref, qbuf, qhead, qlen,
                     mask)
    if prefetching:
        opened[slot, n, _FORMED] = formed
    nt[slot, n] = max(formed, t_free)
    nk[slot, n] = k


def form(slot, n, offset, start, search, node_i, node_f, pref, qbuf, qhead, qlen, mask):
    """(when, size) of the batch node n's rule forms from its queue ``offset`` places behind
    the head, counted from ``start``: at the pmin-th request or the oldest one's delay,
    whichever is first (never before ``start``), of the largest preferred size that fits, or
    of all that wait once the delay has run out (up to B). With ``search``, of the requests
    queued by then (a binary search: the queue is in arrival order); else of all queued (the
    event loop queues no arrival past the batch's time)."""
    head = qhead[slot, n] + offset
    q = min(qlen[slot, n] - offset, node_i[n, _B_I])
    pmin = node_i[n, _PMIN_I]
    delay = node_f[n, _D_F]
    a0 = qbuf[slot, n, head & mask]
    a_pmin = math.inf
    if q >= pmin:
        a_pmin = qbuf[slot, n, (head + pmin - 1) & mask]
    t0 = max(start, a0)
    formed = min(max(t0, a_pmin), max(t0, a0 + delay))
    if search:
        lo = 1
        hi = q
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if qbuf[slot, n, (head + mid - 1) & mask] <= formed:
                lo = mid
            else:
                hi = mid - 1
        q = lo
    k = pref[n, q]
    if q < pmin or (delay > 0.0 and formed >= a0 + delay):
        k = q
    return formed, k


def settle(slot, nodes, t, node_i, free, busy_k, held):
    """Take the batches finished by time t out of their nodes' outstanding counts (``held``:
    queued plus in service, the count a dynamic router compares); returns when the next
    batch still counted finishes."""
    t_next = math.inf
    for n in range(nodes):
        for j in range(node_i[n, _C_I]):
            k = busy_k[slot, n, j]
            if k > 0:
                done = free[slot, n, j]
                if done <= t:
                    held[slot, n] -= k
                    busy_k[slot, n, j] = 0
                elif done < t_next:
                    t_next = done
    return t_next


def route(rs, slot, i, nodes, router_i, cum, rr_start, perm, held):
    """The node the router picks for arrival i (``held``: the nodes' outstanding requests at
    its time, :func:`settle`)."""
    code = router_i[0]
    if code == 0:
        return 0
    if code == 1:
        u = uniform(rs, slot)
        for n in range(nodes - 1):
            if u < cum[n]:
                return n
        return nodes - 1
    if code == 2:
        return (rr_start + i) % nodes
    # least outstanding over all nodes (code 3) or over d sampled ones (code 4), ties
    # broken uniformly at random
    looked = nodes
    if code == 4:
        looked = router_i[1]
        for j in range(looked):          # a uniform d-subset: partial Fisher-Yates
            other = j + int(uniform(rs, slot) * (nodes - j))
            keep = perm[slot, j]
            perm[slot, j] = perm[slot, other]
            perm[slot, other] = keep
    # The smallest count wins, ties broken uniformly at random: one pass finds the smallest
    # count and how many nodes hold it, and only where several do a second pass takes the
    # j-th of them, j uniform from one random word (Lemire's multiply-shift, "Fast random
    # integer generation in an interval", 2019; bias below 2^-32). A hashed key per node, as
    # before, cost a third of a request's time over 16 nodes.
    if code == 3:
        # every node: the smallest count, how many hold it, the j-th of them (three short
        # passes over one row; keeping a tally of counts instead measured no faster)
        best_count = held[slot, 0]
        for n in range(1, nodes):
            best_count = min(best_count, held[slot, n])
        ties = 0
        for n in range(nodes):
            ties += held[slot, n] == best_count
        pick = 0
        if ties > 1:
            pick = int(((next_bits(rs, slot) >> _U32) * np.uint64(ties)) >> _U32)
        for n in range(nodes):
            if held[slot, n] == best_count:
                if pick == 0:
                    return n
                pick -= 1
    best = 0
    best_count = _COUNT_MAX
    ties = 0
    for j in range(looked):
        n = perm[slot, j]
        c = held[slot, n]
        if c < best_count:
            best = n
            best_count = c
            ties = 1
        elif c == best_count:
            ties += 1
    if ties > 1:
        pick = int(((next_bits(rs, slot) >> _U32) * np.uint64(ties)) >> _U32)
        for j in range(looked):
            n = perm[slot, j]
            if held[slot, n] == best_count:
                if pick == 0:
                    return n
                pick -= 1
    return best


def earliest_free(slot, n, node_i, free):
    """The instance of node n that frees first (the lowest-numbered on a tie)."""
    inst = 0
    for j in range(1, node_i[n, _C_I]):
        if free[slot, n, j] < free[slot, n, inst]:
            inst = j
    return inst


def busy_at(slot, n, t, node_i, free):
    """How many instances of node n are busy at time t, counting one more: the instance
    that starts a batch then (it is free by t, so not counted among the busy)."""
    busy = 1
    for j in range(node_i[n, _C_I]):
        if free[slot, n, j] > t:
            busy += 1
    return busy


def slot_free(slot, n, index, node_i, opened):
    """The earliest time node n's prefetching batcher may form its batch number ``index``
    (counted from the replica's start; the batch 2c before it already picked up): when that
    batch was picked up, as Triton keeps at most 2c formed batches waiting for c instances;
    0 for the first 2c."""
    ring = 2 * node_i[n, _C_I]
    back = index - ring
    if back < 0:
        return 0.0
    return opened[slot, n, _RING + back % ring]


def prefetch_grow(rs, slot, n, k, when, node_i, node_f, pref, qlen, opened):
    """The size of node n's batch of size k as it starts at ``when``: a prefetching node's
    batch formed ahead takes in the requests queued by its start with probability p, up to
    the largest preferred size (a preferred size grows only to a larger preferred size); and
    the node's batcher opens its next batch once this one is picked up, or at once where this
    one was formed full. Other nodes' batches keep their size."""
    p = node_f[n, _PREFETCH_F]
    if p < 0.0:
        return k
    formed = opened[slot, n, _FORMED]
    largest = pref[n, node_i[n, _B_I]]      # the largest preferred size
    if k >= largest:
        opened[slot, n, _OPEN] = formed
    else:
        opened[slot, n, _OPEN] = when
    # (no draw where p is 0 or 1: with p = 1, one instance and preferred size B alone a
    # replica is then the rule at the instance's freeing, draw for draw)
    if (when > formed and k < largest and p > 0.0
            and (p >= 1.0 or uniform(rs, slot) < p)):
        grown = min(qlen[slot, n], largest)
        if pref[n, k] == k:
            grown = pref[n, grown]
        if grown > k:
            k = grown
    return k


def prefetch_merge(slot, n, formed_k, k, when, node_i, node_f, pref, qbuf, qhead, qlen, opened,
                   mask):
    """The size of node n's batch (formed with ``formed_k`` requests, ``k`` as it starts at
    ``when``) with the batches formed behind it merged in (Triton's instance queue, at
    dequeue): each whose oldest request has waited longer than the delay, while the sum fits
    in B; and the pickup of every batch taken, for the 2c formed batches Triton keeps
    (:func:`slot_free`). A batch stands behind this one only where this one is full (at the
    largest preferred size), the batcher then opening the next at once: at this one's
    forming, or at ``when`` where it filled only as it started. Each is formed by the rule
    from then, once a slot is free."""
    B = node_i[n, _B_I]
    largest = pref[n, B]
    ring = 2 * node_i[n, _C_I]
    taken = 1
    picked = int(opened[slot, n, _PICKED])
    if largest < B:
        delay = node_f[n, _D_F]
        start = opened[slot, n, _FORMED] if formed_k >= largest else when
        last_full = k >= largest
        # a batch whose slot frees only with this pickup (2c after one taken now) is formed
        # after it: not merged
        while last_full and k < qlen[slot, n] and taken < ring:
            if qbuf[slot, n, (qhead[slot, n] + k) & mask] + delay >= when:
                break
            # the batch behind, formed as the rule forms any (up to B), merged if it fits
            formed, k2 = form(slot, n, k,
                              max(start, slot_free(slot, n, picked + taken, node_i, opened)),
                              True, node_i, node_f, pref, qbuf, qhead, qlen, mask)
            if formed > when or k + k2 > B:
                break
            k += k2
            taken += 1
            start = formed
            last_full = k2 >= largest
        if taken > 1:
            if last_full:
                opened[slot, n, _OPEN] = start
            else:
                opened[slot, n, _OPEN] = when
    for i in range(taken):
        opened[slot, n, _RING + (picked + i) % ring] = when
    opened[slot, n, _PICKED] = picked + taken
    return k


def bin_of(x, hist_lo, per_step, bins):
    """The histogram bin of latency x: bin 0 holds x <= 0 and what lies below the first
    edge, the last bin what lies past the last."""
    if x <= 0.0:
        return 0
    z = (math.log(x) - hist_lo) * per_step + 1.0
    if z < 1.0:
        return 0
    if z >= bins - 1:
        return bins - 1
    return int(z)


def run_replica(r, slot, section, nodes, node_i, node_f, pref, mean, emp_off, emp_cnt,
                emp_scale, pool, slow, arr_code, arr_f, trace, trace_off, router_i, cum, totals,
                first_measured, last_measured, seeds, hist, hist_lo, hist_step, bhist,
                stats, qbuf, qhead, qlen, free, busy_k, nt, nk, opened, perm, held, rs, record,
                qidx, rec_sojourn, rec_node, rec_batch, rec_batch_i):
    """Simulate replica r from empty to its last arrival and its last batch.

    With ``record`` set (a replay: one replica), every request's sojourn and node
    (``rec_sojourn``, ``rec_node``, by arrival index) and every batch's start and service
    (``rec_batch``) and size and node (``rec_batch_i``), in dispatch order, are written out.
    """
    cap = qbuf.shape[2]
    mask = cap - 1
    bins = hist.shape[1]
    per_step = 1.0 / hist_step
    rs[slot, 0] = seeds[r, 0]
    rs[slot, 1] = seeds[r, 1]
    for n in range(nodes):
        qhead[slot, n] = 0
        qlen[slot, n] = 0
        nt[slot, n] = math.inf
        nk[slot, n] = 0
        perm[slot, n] = n
        held[slot, n] = 0
        node_start(rs, slot, n, node_f, opened)
        for j in range(free.shape[2]):
            free[slot, n, j] = 0.0
            busy_k[slot, n, j] = 0
    for s in range(stats.shape[1]):
        stats[r, s] = 0.0
    total = totals[r]
    i_warm = first_measured[r]
    i_end = last_measured[r]
    t_warm = math.inf           # the window opens when arrival i_warm is processed
    t_end = math.inf            # and closes when arrival i_end is
    busy = 0.0
    soj_sum = 0.0
    served = 0.0
    rejected = 0.0
    batches = 0.0
    dispatched = 0
    rr_start = int(uniform(rs, slot) * nodes)
    i = 0
    t_arr = arrival(rs, slot, r, 0, 0.0, arr_code, arr_f, trace, trace_off)
    # The node whose batch is due first: a request joining a node can only bring its batch
    # forward, so only a dispatch (which moves that node's next batch later) needs a scan.
    due = -1
    t_due = math.inf
    # Outstanding counts are kept only for a dynamic router; the batches they still count
    # are taken out when the first of them has finished by an arrival's time.
    dynamic = router_i[0] >= 3
    t_settle = math.inf
    while True:
        if i < total and t_arr <= t_due:
            if i == i_warm:
                t_warm = t_arr
                stats[r, _TWARM] = t_arr
                for n in range(nodes):     # batches already running count from here
                    busy += running_after(slot, n, t_warm, node_i, free)
            if i == i_end:
                t_end = t_arr
                stats[r, _TEND] = t_arr
            if dynamic and t_settle <= t_arr:
                t_settle = settle(slot, nodes, t_arr, node_i, free, busy_k, held)
            n = route(rs, slot, i, nodes, router_i, cum, rr_start, perm, held)
            room = node_i[n, _MAXQ_I]
            if room > 0 and qlen[slot, n] >= room:
                if i >= i_warm and i <= i_end:
                    rejected += 1.0
            else:
                if qlen[slot, n] >= cap:
                    stats[r, _OVERFLOW] = SCRATCH_OVERFLOW
                    return
                qbuf[slot, n, (qhead[slot, n] + qlen[slot, n]) & mask] = t_arr
                if record:
                    qidx[slot, n, (qhead[slot, n] + qlen[slot, n]) & mask] = i
                    rec_node[i] = n
                qlen[slot, n] += 1
                held[slot, n] += 1
                decide(slot, n, node_i, node_f, pref, qbuf, qhead, qlen, free, nt, nk, opened,
                       mask)
                if nt[slot, n] < t_due:
                    t_due = nt[slot, n]
                    due = n
            if i == i_end:          # batches still running past t_end: their tail is out
                for m in range(nodes):
                    busy -= running_after(slot, m, t_end, node_i, free)
            i += 1
            if i < total:
                # arrival() inlined: the call cost single nodes 8% (same process, A/B)
                if arr_code == 3:
                    t_arr = trace[trace_off[r] + i]
                else:
                    t_arr += gap(rs, slot, arr_code, arr_f, False)
            continue
        if due < 0:
            break
        # dispatch node `due`'s batch to its earliest free instance
        n = due
        when = nt[slot, n]
        k = nk[slot, n]
        inst = earliest_free(slot, n, node_i, free)
        if node_f[n, _PREFETCH_F] >= 0.0:      # (a call not taken: 15% faster nodes)
            formed_k = k
            k = prefetch_grow(rs, slot, n, k, when, node_i, node_f, pref, qlen, opened)
            k = prefetch_merge(slot, n, formed_k, k, when, node_i, node_f, pref, qbuf, qhead,
                               qlen, opened, mask)
        # batch_service() inlined: the call cost single nodes 5% (same process, A/B)
        s = service(rs, slot, n, k, node_i, node_f, mean, emp_off, emp_cnt, emp_scale,
                    pool)
        if slow[n, 0] > 0.0:
            s *= slow[n, busy_at(slot, n, when, node_i, free)]
        if node_f[n, _DSIG_F] > 0.0:
            s *= drift_factor(rs, slot, n, when, node_f, opened)
        done = when + s
        free[slot, n, inst] = done
        if dynamic:
            # the instance's last batch finished by now (it is the earliest free): out of
            # the count, if no arrival took it out yet; this batch's requests stay counted
            held[slot, n] -= busy_k[slot, n, inst]
            busy_k[slot, n, inst] = k
            if done < t_settle:
                t_settle = done
        if when >= t_warm and when <= t_end:
            add(bhist, (section, k), 1)
            batches += 1.0
        # Where no window holds a batch of its own, the batch statistics count the batches
        # from t_warm on that carried the window's requests (qmodel.sim.window's rule): kept
        # apart, from column B + 1 on.
        if when >= t_warm and qbuf[slot, n, qhead[slot, n]] <= t_end:
            add(bhist, (section, pref.shape[1] + k), 1)
        if t_warm < math.inf and t_end == math.inf:
            busy += done - when
        over = node_f[n, _OVER_F]     # added after the difference, as the reference engines do
        head = qhead[slot, n]
        if record:
            rec_batch[dispatched, 0] = when
            rec_batch[dispatched, 1] = s
            rec_batch_i[dispatched, 0] = k
            rec_batch_i[dispatched, 1] = n
        dispatched += 1
        for _ in range(k):
            a = qbuf[slot, n, head]
            if record:
                rec_sojourn[qidx[slot, n, head]] = done - a + over
            head = (head + 1) & mask
            if a >= t_warm and a <= t_end:
                x = done - a + over
                soj_sum += x
                served += 1.0
                add(hist, (section, bin_of(x, hist_lo, per_step, bins)), 1)
        qhead[slot, n] = head
        qlen[slot, n] -= k
        decide(slot, n, node_i, node_f, pref, qbuf, qhead, qlen, free, nt, nk, opened, mask)
        due = first_due(slot, nodes, nt)
        t_due = nt[slot, due] if due >= 0 else math.inf
    stats[r, _BUSY] = busy
    stats[r, _SUM] = soj_sum
    stats[r, _SERVED] = served
    stats[r, _REJ] = rejected
    stats[r, _BATCHES] = batches
