"""One replica of Ensemble pods, request by request: the compiled engine's pipeline rule.

A replica holds every stage of every pod as a node (node ``pod * stages + stage``) and runs
them as :mod:`qmodel.sim.replica_rule` runs a cluster, one event at a time, with one more kind
of event: a batch of a stage with downstream stages *releases* its requests when it finishes
(its end plus the stage's overhead), and each request then joins every downstream stage whose
upstream stages have all released it (a fan-in waits for the last). The events in time order;
on a tie a release first, then an arrival, then a due batch, so that a batch due at an
instant takes the requests that became ready at it, as the reference counts ready times <=
the dispatch time. A request is done when the last stage without downstream finishes it.

Each node's batching (the rule's time, its size, the earliest free instance, prefetch, S(k)
and its jitter) is :mod:`qmodel.sim.replica_rule`'s own functions. The reference is
:mod:`qmodel.sim.ensemble`, which runs the stages one after another over whole lanes (exact,
since a stage's batches depend only on when its requests become ready): the two agree in
distribution, and to rounding on deterministic service.

What is counted, as the reference does: the requests that arrived at the ensemble inside the
measured window, end to end (histogram row 0) and at each stage (row 1 + stage: the stage's
own sojourn, its finish minus when the request became ready there); each stage's batches and
busy time in the window.

The functions are in the subset Numba compiles for the CPU and the GPU; :func:`build`
compiles them for one target.
"""

from __future__ import annotations

import math
import types

from . import replica_rule
# The node rule's functions, by name: compiled, each is rebound to that target's version.
from .replica_rule import (NODE_FLOAT, NODE_INT, add, arrival, batch_service, bin_of, decide,
                           earliest_free, first_due, node_start, prange, prefetch_grow,
                           prefetch_merge, route, running_after, uniform)

__all__ = ["build", "cpu_driver", "ENSEMBLE_RULE", "ESTAT", "STAGE_STAT", "SCRATCH_OVERFLOW",
           "RELEASE_OVERFLOW"]

# Columns of the per-replica results; then, per stage s, STAGE_STAT columns from
# len(ESTAT) + s * len(STAGE_STAT).
ESTAT = {"sojourn_sum": 0, "served": 1, "t_warm": 2, "t_end": 3, "overflow": 4}
STAGE_STAT = {"busy": 0, "sojourn_sum": 1, "served": 2}
# stats[r, ESTAT["overflow"]]: a queue outgrew its room, or an instance's unreleased batches
# outgrew theirs; the driver reruns with more of it.
SCRATCH_OVERFLOW = 1.0
RELEASE_OVERFLOW = 2.0

ENSEMBLE_RULE = ("join", "next_release", "run_ensemble_replica")

_C_I = NODE_INT["instances"]
_OVER_F = NODE_FLOAT["overhead"]
_PREFETCH_F = NODE_FLOAT["prefetch"]
_E_SUM, _E_SERVED, _E_TWARM, _E_TEND, _E_OVERFLOW = (ESTAT[k] for k in (
    "sojourn_sum", "served", "t_warm", "t_end", "overflow"))
_S_BUSY, _S_SUM, _S_SERVED = (STAGE_STAT[k] for k in ("busy", "sojourn_sum", "served"))
_NE = len(ESTAT)
_NS = len(STAGE_STAT)


def build(jit, add):
    """:func:`run_ensemble_replica` compiled with ``jit``, calling the node rule's functions
    compiled with it (``add`` as in :func:`qmodel.sim.replica_rule.build`)."""
    return _compiled(jit, add)["run_ensemble_replica"]


def _compiled(jit, add) -> dict:
    namespace = replica_rule._compiled_rule(jit, add)
    # this module's constants (numbers), beside the node rule's
    namespace.update({k: v for k, v in globals().items()
                      if isinstance(v, (int, float)) and not isinstance(v, bool)})
    for name in ENSEMBLE_RULE:
        namespace[name] = jit(types.FunctionType(globals()[name].__code__, namespace, name))
    return namespace


def cpu_driver(jit, add, prange):
    """:func:`run_ensemble_sections` compiled with ``jit`` over the rule compiled with it,
    its loop over sections spread by ``prange``."""
    namespace = _compiled(jit, add)
    namespace["prange"] = prange
    return types.FunctionType(run_ensemble_sections.__code__, namespace,
                              "run_ensemble_sections")


def run_ensemble_sections(replicas, sections, pods, stages, node_i, node_f, pref, mean,
                          emp_off, emp_cnt, emp_scale, pool, slow, graph, arr_code, arr_f, trace,
                          trace_off, router_i, cum, totals, first_measured, last_measured,
                          seeds, hist, hist_lo, hist_step, bhist, stats, qbuf, qid, qhead,
                          qlen, free, nt, nk, opened, pending, pend_t, pend_k, pend_ids, req_t,
                          req_wait, req_left, req_end, req_i, rs):
    """Every replica, section by section (as :func:`qmodel.sim.replica_rule.run_sections`)."""
    for sec in prange(sections):
        begin = (sec * replicas + sections - 1) // sections
        end = ((sec + 1) * replicas + sections - 1) // sections
        for r in range(begin, end):
            run_ensemble_replica(
                r, sec, sec, pods, stages, node_i, node_f, pref, mean, emp_off, emp_cnt,
                emp_scale, pool, slow, graph, arr_code, arr_f, trace, trace_off, router_i, cum,
                totals, first_measured, last_measured, seeds, hist, hist_lo, hist_step, bhist,
                stats, qbuf, qid, qhead, qlen, free, nt, nk, opened, pending, pend_t, pend_k,
                pend_ids, req_t, req_wait, req_left, req_end, req_i, rs)


def join(slot, n, t, request, node_i, node_f, pref, qbuf, qid, qhead, qlen, free, nt, nk,
         opened, req_i):
    """Queue ``request`` at node n, ready at time t, and recompute the node's next batch;
    False where the queue's room is full. Requests ready at one instant queue in the order
    they arrived at the ensemble (``req_i``), as the reference sorts equal ready times: the
    batches released at an instant (by instances, by stages of a fan-in) are released one
    after another, in an order of no meaning."""
    cap = qbuf.shape[2]
    mask = cap - 1
    if qlen[slot, n] >= cap:
        return False
    head = qhead[slot, n]
    j = qlen[slot, n]
    while j > 0:
        before = (head + j - 1) & mask
        if qbuf[slot, n, before] != t or req_i[slot, qid[slot, n, before]] < req_i[slot,
                                                                                  request]:
            break
        qbuf[slot, n, (head + j) & mask] = qbuf[slot, n, before]
        qid[slot, n, (head + j) & mask] = qid[slot, n, before]
        j -= 1
    qbuf[slot, n, (head + j) & mask] = t
    qid[slot, n, (head + j) & mask] = request
    qlen[slot, n] += 1
    decide(slot, n, node_i, node_f, pref, qbuf, qhead, qlen, free, nt, nk, opened, mask)
    return True


def next_release(slot, nodes, node_i, pending, pend_t):
    """The node and instance whose oldest unreleased batch is released first (-1: none), and
    its time. An instance's batches are released in the order it ran them."""
    best = -1
    best_j = 0
    t_best = math.inf
    depth = pend_t.shape[3]
    for n in range(nodes):
        for j in range(node_i[n, _C_I]):
            if pending[slot, n, j, 1] > 0:
                t = pend_t[slot, n, j, pending[slot, n, j, 0] & (depth - 1)]
                if t < t_best:
                    t_best = t
                    best = n
                    best_j = j
    return best, best_j, t_best


def run_ensemble_replica(r, slot, section, pods, stages, node_i, node_f, pref, mean, emp_off,
                         emp_cnt, emp_scale, pool, slow, graph, arr_code, arr_f, trace, trace_off,
                         router_i, cum, totals, first_measured, last_measured, seeds, hist,
                         hist_lo, hist_step, bhist, stats, qbuf, qid, qhead, qlen, free, nt,
                         nk, opened, pending, pend_t, pend_k, pend_ids, req_t, req_wait,
                         req_left, req_end, req_i, rs):
    """Simulate replica r of ``pods`` pods of a ``stages``-stage ensemble from empty to its
    last arrival and its last batch.

    ``graph`` (stages, stages + 2): column d < stages is 1 where stage d is downstream of the
    row's stage; column ``stages`` its upstream count, ``stages + 1`` 1 where it has no
    downstream. Requests in flight live in a ring (``req_*``, indexed by arrival mod its
    size): when the request arrived, how many upstream releases each stage still waits for,
    how many exit stages have yet to finish it, the latest exit finish so far, and its
    arrival index (``req_i``, which orders the requests ready at one instant).
    Unreleased batches wait in a ring per instance (``pending``: head and count;
    ``pend_t``, ``pend_k``, ``pend_ids``: release time, size, request slots).
    """
    nodes = pods * stages
    cap = qbuf.shape[2]
    mask = cap - 1
    ring = req_wait.shape[1]        # (req_t and req_left are padded on the CPU)
    rmask = ring - 1
    depth = pend_t.shape[3]
    bins = hist.shape[2]
    per_step = 1.0 / hist_step
    rs[slot, 0] = seeds[r, 0]
    rs[slot, 1] = seeds[r, 1]
    for n in range(nodes):
        qhead[slot, n] = 0
        qlen[slot, n] = 0
        nt[slot, n] = math.inf
        nk[slot, n] = 0
        node_start(rs, slot, n, node_f, opened)
        for j in range(pending.shape[2]):
            free[slot, n, j] = 0.0
            pending[slot, n, j, 0] = 0
            pending[slot, n, j, 1] = 0
    for x in range(ring):
        req_left[slot, x] = 0
    for x in range(stats.shape[1]):
        stats[r, x] = 0.0
    exits = 0
    for s in range(stages):
        exits += graph[s, stages + 1]
    total = totals[r]
    i_warm = first_measured[r]
    i_end = last_measured[r]
    t_warm = math.inf
    t_end = math.inf
    rr_start = int(uniform(rs, slot) * pods)
    i = 0
    t_arr = arrival(rs, slot, r, 0, 0.0, arr_code, arr_f, trace, trace_off)
    due = -1
    t_due = math.inf
    rel_n, rel_j, t_rel = -1, 0, math.inf
    while True:
        if i >= total:
            t_next_arr = math.inf
        else:
            t_next_arr = t_arr
        if rel_n >= 0 and t_rel <= t_next_arr and t_rel <= t_due:
            # release the oldest unreleased batch of instance rel_j of node rel_n
            n = rel_n
            s = n % stages
            base = n - s
            head = pending[slot, n, rel_j, 0]
            at = head & (depth - 1)
            for b in range(pend_k[slot, n, rel_j, at]):
                x = pend_ids[slot, n, rel_j, at, b]
                for d in range(stages):
                    if graph[s, d] > 0:
                        req_wait[slot, x, d] -= 1
                        if req_wait[slot, x, d] == 0:
                            m = base + d
                            if not join(slot, m, t_rel, x, node_i, node_f, pref, qbuf, qid,
                                        qhead, qlen, free, nt, nk, opened, req_i):
                                stats[r, _E_OVERFLOW] = SCRATCH_OVERFLOW
                                return
                            if nt[slot, m] < t_due:
                                t_due = nt[slot, m]
                                due = m
            pending[slot, n, rel_j, 0] = head + 1
            pending[slot, n, rel_j, 1] -= 1
            rel_n, rel_j, t_rel = next_release(slot, nodes, node_i, pending, pend_t)
            continue
        if i < total and t_arr <= t_due:
            if i == i_warm:
                t_warm = t_arr
                stats[r, _E_TWARM] = t_arr
                for n in range(nodes):      # batches already running count from here
                    stats[r, _NE + (n % stages) * _NS + _S_BUSY] += running_after(
                        slot, n, t_warm, node_i, free)
            if i == i_end:
                t_end = t_arr
                stats[r, _E_TEND] = t_arr
            # pods sit behind a static router, which reads no counts (qhead and qlen stand
            # in for the dynamic routers' arrays)
            pod = route(rs, slot, i, pods, router_i, cum, rr_start, qhead, qlen)
            x = i & rmask
            if req_left[slot, x] > 0:       # the ring wrapped onto a request in flight
                stats[r, _E_OVERFLOW] = SCRATCH_OVERFLOW
                return
            req_t[slot, x] = t_arr
            req_i[slot, x] = i
            req_left[slot, x] = exits
            req_end[slot, x] = t_arr
            for s in range(stages):
                req_wait[slot, x, s] = graph[s, stages]
            for s in range(stages):
                if graph[s, stages] == 0:
                    m = pod * stages + s
                    if not join(slot, m, t_arr, x, node_i, node_f, pref, qbuf, qid, qhead,
                                qlen, free, nt, nk, opened, req_i):
                        stats[r, _E_OVERFLOW] = SCRATCH_OVERFLOW
                        return
                    if nt[slot, m] < t_due:
                        t_due = nt[slot, m]
                        due = m
            if i == i_end:          # batches still running past t_end: their tail is out
                for n in range(nodes):
                    stats[r, _NE + (n % stages) * _NS + _S_BUSY] -= running_after(
                        slot, n, t_end, node_i, free)
            i += 1
            if i < total:
                t_arr = arrival(rs, slot, r, i, t_arr, arr_code, arr_f, trace, trace_off)
            continue
        if due < 0:
            break
        # dispatch node `due`'s batch to its earliest free instance
        n = due
        s = n % stages
        when = nt[slot, n]
        k = nk[slot, n]
        inst = earliest_free(slot, n, node_i, free)
        if node_f[n, _PREFETCH_F] >= 0.0:      # (a call not taken: 15% faster nodes)
            formed_k = k
            k = prefetch_grow(rs, slot, n, k, when, node_i, node_f, pref,
                              qlen, opened)
            k = prefetch_merge(slot, n, formed_k, k, when, node_i, node_f, pref, qbuf, qhead,
                               qlen, opened, mask)
        took = batch_service(rs, slot, n, k, when, node_i, node_f, mean, emp_off, emp_cnt,
                             emp_scale, pool, slow, free, opened)
        done = when + took
        free[slot, n, inst] = done
        over = node_f[n, _OVER_F]
        finish = done + over
        head = qhead[slot, n]
        if when >= t_warm and when <= t_end:
            add(bhist, (section, s, k), 1)
        if when >= t_warm and req_t[slot, qid[slot, n, head]] <= t_end:
            add(bhist, (section, s, pref.shape[1] + k), 1)
        if t_warm < math.inf and t_end == math.inf:
            stats[r, _NE + s * _NS + _S_BUSY] += took
        exit_stage = graph[s, stages + 1] > 0
        at = 0
        if not exit_stage:
            # the batch's requests are released downstream at its finish
            if pending[slot, n, inst, 1] >= depth:
                stats[r, _E_OVERFLOW] = RELEASE_OVERFLOW
                return
            at = (pending[slot, n, inst, 0] + pending[slot, n, inst, 1]) & (depth - 1)
            pend_t[slot, n, inst, at] = finish
            pend_k[slot, n, inst, at] = k
            pending[slot, n, inst, 1] += 1
            if pending[slot, n, inst, 1] == 1 and finish < t_rel:
                rel_n, rel_j, t_rel = n, inst, finish
        for b in range(k):
            a = qbuf[slot, n, head]
            x = qid[slot, n, head]
            head = (head + 1) & mask
            arrived = req_t[slot, x]
            measured = arrived >= t_warm and arrived <= t_end
            if measured:
                y = finish - a
                stats[r, _NE + s * _NS + _S_SUM] += y
                stats[r, _NE + s * _NS + _S_SERVED] += 1.0
                add(hist, (section, 1 + s, bin_of(y, hist_lo, per_step, bins)),
                    1)
            if not exit_stage:
                pend_ids[slot, n, inst, at, b] = x
                continue
            if finish > req_end[slot, x]:
                req_end[slot, x] = finish
            req_left[slot, x] -= 1
            if req_left[slot, x] == 0 and measured:
                y = req_end[slot, x] - arrived
                stats[r, _E_SUM] += y
                stats[r, _E_SERVED] += 1.0
                add(hist, (section, 0, bin_of(y, hist_lo, per_step, bins)), 1)
        qhead[slot, n] = head
        qlen[slot, n] -= k
        decide(slot, n, node_i, node_f, pref, qbuf, qhead, qlen, free, nt, nk,
               opened, mask)
        due = first_due(slot, nodes, nt)
        t_due = nt[slot, due] if due >= 0 else math.inf
