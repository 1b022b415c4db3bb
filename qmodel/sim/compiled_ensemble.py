"""The compiled engine for Ensembles: every stage of every pod inside one replica.

:func:`qmodel.simulate` of an :class:`~qmodel.Ensemble` (or a cluster of Ensemble pods behind
a static router) with ``engine="compiled"`` or a "cpu" / "gpu" backend lands here. The rule of
one replica is :mod:`qmodel.sim.ensemble_rule`; this module packs the description into its
arrays, plans the replicas as the reference does (:mod:`qmodel.sim.ensemble`: as long as the
stage that needs the longest, its arrivals' burstiness counted), runs them on the CPU's cores
or one GPU thread each, and returns the end-to-end :class:`~qmodel.latency.HistogramLatency`
with each stage's own in ``.stages``.
"""

from __future__ import annotations

import math
import types
import warnings

import numpy as np

from ..system import Trace
from . import compiled, ensemble_rule
from .compiled import (CACHE_LINE, FIRST_QUEUE_ROOM, HIST_COPIES, HIST_HI, HIST_LO,
                       LARGEST_QUEUE_ROOM, RESOLUTION, histogram_result)
from .ensemble import _longest_need, _pods_of
from .ensemble_rule import ESTAT, RELEASE_OVERFLOW, STAGE_STAT
from .replica_rule import OPENED
from .window import batch_places, cool_down_arrivals

__all__ = ["simulate_compiled_ensemble"]

# Unreleased batches held per instance, grown four-fold (and the run repeated) when a stage's
# overhead outlasts more of its batches, up to the largest.
FIRST_RELEASE_DEPTH = 4
LARGEST_RELEASE_DEPTH = 1 << 12

_runners: dict = {}


def _cpu_runner():
    if "cpu" not in _runners:
        import numba

        jit = lambda f: numba.njit(f, cache=True)    # noqa: E731
        driver = ensemble_rule.cpu_driver(jit, jit(compiled.replica_rule.add), numba.prange)
        _runners["cpu"] = numba.njit(driver, parallel=True, cache=True)
    return _runners["cpu"]


def _gpu_runner():
    if "gpu" not in _runners:
        cuda = compiled._cuda()
        add = cuda.jit(device=True)(types.FunctionType(compiled._atomic_add.__code__,
                                                        {"cuda": cuda}, "atomic_add"))
        run_replica = ensemble_rule.build(cuda.jit(device=True), add)
        _runners["gpu"] = cuda.jit(cache=True)(types.FunctionType(
            _one_thread_per_replica.__code__,
            {"cuda": cuda, "run_replica": run_replica, "HIST_COPIES": HIST_COPIES},
            "one_thread_per_ensemble_replica"))
    return _runners["gpu"]


def _one_thread_per_replica(replicas, sections, pods, stages, node_i, node_f, pref, mean,
                            emp_off, emp_cnt, emp_scale, pool, slow, graph, arr_code, arr_f, trace,
                            trace_off, router_i, cum, totals, first, last, seeds, hist,
                            hist_lo, hist_step, bhist, stats, qbuf, qid, qhead, qlen, free, nt,
                            nk, opened, pending, pend_t, pend_k, pend_ids, req_t, req_wait,
                            req_left, req_end, req_i, rs):
    # cuda and run_replica are bound by _gpu_runner
    r = cuda.grid(1)  # noqa: F821
    if r < replicas:
        section = r * sections // replicas
        row = section * HIST_COPIES + cuda.blockIdx.x % HIST_COPIES  # noqa: F821
        run_replica(r, r, row, pods, stages, node_i, node_f, pref, mean, emp_off,  # noqa: F821
                    emp_cnt, emp_scale, pool, slow, graph, arr_code, arr_f, trace, trace_off,
                    router_i, cum, totals, first, last, seeds, hist, hist_lo, hist_step, bhist,
                    stats, qbuf, qid, qhead, qlen, free, nt, nk, opened, pending, pend_t,
                    pend_k, pend_ids, req_t, req_wait, req_left, req_end, req_i, rs)


def _graph(ensemble) -> np.ndarray:
    """The stage graph as :func:`qmodel.sim.ensemble_rule.run_ensemble_replica` reads it."""
    order = list(ensemble.order)
    stages = len(order)
    g = ensemble.graph
    graph = np.zeros((stages, stages + 2), dtype=np.int64)
    for s, name in enumerate(order):
        for down in g.successors(name):
            graph[s, order.index(down)] = 1
        graph[s, stages] = g.in_degree(name)
        graph[s, stages + 1] = int(g.out_degree(name) == 0)
    return graph


def simulate_compiled_ensemble(cluster, source, requests, seed, replicas, warmup,
                               backend="auto"):
    """Run the compiled engine over Ensemble pods (``cluster.pods``); the arguments are
    :func:`qmodel.sim.compiled.simulate_compiled`'s."""
    target = compiled.compiled_target(cluster, source, requests, backend)
    ensemble, pods = cluster.nodes[0], len(cluster.nodes)
    stage_nodes = [ensemble.stages[name] for name in ensemble.order]
    stages = len(stage_nodes)
    worst, plan_source = _longest_need(cluster, source, warmup)
    rate = source.rate
    cool = sum(cool_down_arrivals(_pods_of(node, cluster), rate) for node in stage_nodes)
    phase = max(batch_places(_pods_of(node, cluster)) for node in stage_nodes)
    rng = np.random.default_rng(seed)
    replicas, totals, first, last, offsets, ask = compiled._replica_plan(
        _pods_of(worst, cluster), source, requests, replicas, warmup, target, rng, cool=cool,
        phase=phase, plan_source=plan_source)
    seeds = rng.integers(1, np.iinfo(np.uint64).max, (replicas, 2), dtype=np.uint64,
                         endpoint=True)
    # node pod * stages + s is stage s of that pod
    tables, bmax, cmax = compiled._tables(types.SimpleNamespace(nodes=stage_nodes * pods))
    router_i, cum = compiled._router(cluster)
    arr_code, arr_f = compiled._arrivals(source)
    trace = np.array(source.times, dtype=float) if isinstance(source, Trace) else np.zeros(1)
    sections = min(replicas, compiled.MAX_SECTIONS)
    bins = int(math.ceil(math.log(HIST_HI / HIST_LO) / math.log1p(RESOLUTION))) + 2
    room = FIRST_QUEUE_ROOM
    while room < 4 * bmax:
        room *= 2
    depth = FIRST_RELEASE_DEPTH
    graph = _graph(ensemble)
    while True:
        out = _run(target, replicas, sections, pods, stages, tables, graph, arr_code, arr_f,
                   trace, offsets, router_i, cum, totals, first, last, seeds, bins, bmax, cmax,
                   room, depth)
        flags = out["stats"][:, ESTAT["overflow"]]
        if not flags.any():
            break
        if (flags == RELEASE_OVERFLOW).any():
            if depth >= LARGEST_RELEASE_DEPTH:
                raise ValueError(f"a stage's overhead outlasted {depth:,} of its batches on "
                                 "one instance: lower the overhead or the rate")
            depth *= 4
        else:
            if room >= LARGEST_QUEUE_ROOM:
                raise ValueError(f"a queue grew past {room:,} requests in one replica: the "
                                 "load is too close to capacity to simulate; lower the rate")
            room *= 4
    return _results(cluster, stage_nodes, out, replicas, target, requests, ask, bmax)


def _run(target, replicas, sections, pods, stages, tables, graph, arr_code, arr_f, trace,
         offsets, router_i, cum, totals, first, last, seeds, bins, bmax, cmax, room, depth):
    """One launch; returns the histograms (sections, 1 + stages, bins), batch counts
    (sections, stages, columns) and per-replica results."""
    nodes = pods * stages
    slots = sections if target == "cpu" else replicas
    columns = 2 * (bmax + 1) + CACHE_LINE
    out = {"hist": np.zeros((sections, 1 + stages, bins), dtype=np.int64),
           "bhist": np.zeros((sections, stages, columns), dtype=np.int64),
           "stats": np.zeros((replicas, len(ESTAT) + stages * len(STAGE_STAT)))}
    # in flight at once: at most what the queues and the unreleased batches hold
    ring = 1 << int(nodes * (room + cmax * (depth + 1) * bmax)).bit_length()
    pad = CACHE_LINE if target == "cpu" else 0
    scratch = [np.zeros((slots, nodes, room)), np.zeros((slots, nodes, room), dtype=np.int64),
               np.zeros((slots, nodes + pad), dtype=np.int64),
               np.zeros((slots, nodes + pad), dtype=np.int64),
               np.zeros((slots, nodes, cmax + pad)),
               np.zeros((slots, nodes + pad)), np.zeros((slots, nodes + pad), dtype=np.int64),
               np.zeros((slots, nodes + pad, len(OPENED) - 1 + 2 * cmax)),
               np.zeros((slots, nodes, cmax, 2), dtype=np.int64),
               np.zeros((slots, nodes, cmax, depth)),
               np.zeros((slots, nodes, cmax, depth), dtype=np.int64),
               np.zeros((slots, nodes, cmax, depth, bmax), dtype=np.int64),
               np.zeros((slots, ring + pad)), np.zeros((slots, ring, stages), dtype=np.int64),
               np.zeros((slots, ring + pad), dtype=np.int64), np.zeros((slots, ring + pad)),
               np.zeros((slots, ring + pad), dtype=np.int64),
               np.zeros((slots, 2 + pad), dtype=np.uint64)]
    args = [pods, stages, *tables, graph, arr_code, arr_f, trace, offsets, router_i, cum,
            totals, first, last, seeds, out["hist"], math.log(HIST_LO), math.log1p(RESOLUTION),
            out["bhist"], out["stats"], *scratch]
    if target == "cpu":
        _cpu_runner()(replicas, sections, *args)
        return out
    return compiled.launch_on_gpu(_gpu_runner(), replicas, sections, args, scratch, out)


def _results(cluster, stage_nodes, out, replicas, target, requests, ask, bmax):
    """The end-to-end result, with each stage's in ``.stages``."""
    ensemble, pods = cluster.nodes[0], len(cluster.nodes)
    stats, hist, bhist = out["stats"], out["hist"], out["bhist"]
    span = float(np.sum(stats[:, ESTAT["t_end"]] - stats[:, ESTAT["t_warm"]]))
    backend = "gpu" if target == "gpu" else "cpu"
    base, width = len(ESTAT), len(STAGE_STAT)

    def column(s, name):
        return float(stats[:, base + s * width + STAGE_STAT[name]].sum())

    where = f" x {pods} pods, {cluster.router.name}" if pods > 1 else ""
    run = f"compiled engine, {backend}, {replicas} replicas"
    per_stage = {}
    with warnings.catch_warnings():
        # the end-to-end result below warns once for the whole run, as the reference does
        warnings.simplefilter("ignore")
        for s, name in enumerate(ensemble.order):
            node = stage_nodes[s]
            per_stage[name] = histogram_result(
                hist[:, 1 + s, :], bhist[:, s, :].sum(axis=0), bmax, column(s, "busy"), span,
                node.instances * pods, column(s, "served"), column(s, "sojourn_sum"), 0.0,
                replicas, backend, f"simulation of ensemble stage {name!r} ({run})",
                requests, ask)
    busy = sum(column(s, "busy") for s in range(len(stage_nodes)))
    instances = pods * sum(node.instances for node in stage_nodes)
    result = histogram_result(
        hist[:, 0, :], bhist.sum(axis=(0, 1)), bmax, busy, span, instances,
        float(stats[:, ESTAT["served"]].sum()), float(stats[:, ESTAT["sojourn_sum"]].sum()),
        0.0, replicas, backend,
        f"simulation of a {len(stage_nodes)}-stage ensemble{where} ({run})", requests, ask)
    result.stages = per_stage
    return result
