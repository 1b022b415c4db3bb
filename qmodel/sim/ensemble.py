"""Simulating an Ensemble: every stage by Triton's batching rule, coupled by completion times.

Each replica (a "lane") draws its arrivals once. The stages then run in topological order, each
over all lanes at once on the look-ahead engine (:func:`qmodel.sim.lookahead.run_lookahead`,
the same batching rule as a lone node): a stage's requests become ready when the request
arrives (a stage without upstream), when its upstream stage completes the batch that carried
it, or at a fan-in when the last of its upstreams does. A batch's requests are therefore
released downstream together, at one instant, which is the clumping later stages see. The
ready times of a downstream stage are not in arrival order (several instances, or jittery
service, finish batches out of order), so each stage serves its requests sorted by ready time
and the completions are put back in request order. A request is done when the last of the
stages without downstream completes it.

This decoupling is exact: a stage's batches depend only on when its requests become ready,
never on what happens downstream, because every stage has an unlimited queue (Triton passes
tensors between steps without back-pressure; :class:`qmodel.Ensemble` refuses a stage with a
finite ``max_queue_size``, which would drop requests midway).

Each replica's measured window, warm-up, random phase and confidence intervals are those of a
node's simulation (:mod:`qmodel.sim.window`, :mod:`qmodel.sim.run`); the window is cut by the
requests' arrival at the ensemble, for the end-to-end latency and for every stage alike. The
replicas are as long as the stage that needs the longest one (its load, batch size and jitter,
and its arrivals' burstiness: downstream of a stage of max_batch_size B, arrivals come in
clumps of up to B, counted as an arrival scv raised by B - 1), and each runs on after its
window by the cool-down of every stage in turn.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..checks import MOST_RENEWAL_SCV
from ..system import Cluster, Renewal, Trace, as_cluster
from .arrivals import replica_arrivals
from .assemble import assemble
from .backend import get_backend
from .lookahead import run_lookahead
from .nodetypes import NodeTypes
from .replicas import arrivals_per_replica_node, plan_replicas
from .routing import split_by_node, static_assignment
from .window import batch_places, cool_down_arrivals

__all__ = ["simulate_ensemble", "run_stages", "stage_arrival_scv", "arrivals_per_replica"]



def stage_arrival_scv(ensemble, scv: float) -> dict:
    """A bound on the squared coefficient of variation of each stage's arrivals, for sizing
    the replicas: ``scv`` at a stage without upstream, and downstream of stage u the largest
    of its upstreams' plus B_u - 1 (u releases clumps of up to B_u requests at once), at most
    100.

    Examples
    --------
    >>> import qmodel as qm
    >>> s = qm.ServiceTime.affine(1e-3)
    >>> ens = qm.Ensemble({"a": qm.Node(s, max_batch_size=8), "b": qm.Node(s)}, [("a", "b")])
    >>> stage_arrival_scv(ens, 1.0)
    {'a': 1.0, 'b': 8.0}
    """
    graph = ensemble.graph
    out: dict = {}
    for name in ensemble.order:
        ups = list(graph.predecessors(name))
        out[name] = (float(scv) if not ups else
                     min(MOST_RENEWAL_SCV, max(out[u] + ensemble.stages[u].max_batch_size - 1
                                       for u in ups)))
    return out


def run_stages(bk, ensemble, arrival: np.ndarray, totals: np.ndarray, progress=None) -> dict:
    """Run every stage of ``ensemble`` over the lanes' arrivals.

    Parameters
    ----------
    bk : Backend
    ensemble : Ensemble
    arrival : ndarray (lanes, width)
        Arrival times at the ensemble per lane, increasing, +inf past ``totals[lane]``.
    totals : int ndarray (lanes,)
        Real arrivals per lane.
    progress : callable, optional
        Called with the fraction of the work done.

    Returns
    -------
    dict of stage name -> dict with ``ready`` and ``finish`` (lanes, width): when each
    request becomes ready at the stage and when the stage completes it, in arrival order
    (+inf past the real ones); ``order`` (lanes, width): the requests' indices in the order
    the stage serves them (by ready time); ``record``: the look-ahead engine's batches
    (``start``, ``service``, ``size``, each (steps, lanes)), which take the requests in that
    order; ``types``.

    Examples
    --------
    Two deterministic stages in a row, one request at a time: each request takes 1 + 2 ms.

    >>> import numpy as np, qmodel as qm
    >>> from qmodel.sim.backend import get_backend
    >>> ens = qm.Ensemble({"a": qm.Node(qm.ServiceTime.affine(1e-3)),
    ...                    "b": qm.Node(qm.ServiceTime.affine(2e-3))}, [("a", "b")])
    >>> out = run_stages(get_backend("numpy"), ens, np.array([[0.0, 0.01]]), np.array([2]))
    >>> out["b"]["finish"].round(6).tolist()
    [[0.003, 0.013]]
    """
    graph = ensemble.graph
    lanes, width = arrival.shape
    real = np.arange(width)[None, :] < np.asarray(totals)[:, None]
    xp = bk.xp
    order = ensemble.order
    out: dict = {}
    for i, name in enumerate(order):
        node = ensemble.stages[name]
        ups = list(graph.predecessors(name))
        if not ups:
            ready = arrival
        else:
            ready = out[ups[0]]["finish"]
            for u in ups[1:]:
                ready = np.maximum(ready, out[u]["finish"])      # a fan-in waits for the last
        perm = np.argsort(ready, axis=1, kind="stable")
        ready_sorted = np.take_along_axis(ready, perm, axis=1)
        types = NodeTypes(bk, [node])
        lane_times = np.full((lanes, width + 2 * types.bmax + 2), np.inf)
        lane_times[:, :width] = ready_sorted
        report = None
        if progress is not None:
            report = (lambda f, i=i: progress((i + f) / len(order)))
        record = run_lookahead(bk, types, xp.asarray(lane_times), xp.asarray(totals),
                               xp.zeros(lanes, dtype=np.int64), report)
        # Lane l's batches in step order cover its ready requests in order (run_static does
        # the same for a node): repeat each batch's completion by its size, lane by lane.
        completion = np.repeat((record["start"] + record["service"]).T.ravel(),
                               record["size"].T.ravel())
        done = np.full((lanes, width), np.inf)
        done[real] = completion + node.overhead
        finish = np.empty_like(done)
        np.put_along_axis(finish, perm, done, axis=1)
        out[name] = {"ready": ready, "finish": finish, "order": perm, "record": record,
                     "types": types}
    return out


def _pods_of(node, cluster):
    """``node`` in place of each pod of ``cluster`` (same count and router)."""
    return Cluster(node, count=len(cluster.nodes), router=cluster.router)


def simulate_ensemble(cluster, source, requests: int, seed, replicas, warmup: float,
                      backend: str, progress=None):
    """The end-to-end sojourn times of a cluster of Ensemble pods behind a static router
    (one pod: the Ensemble alone), with ``.stages``; called by :func:`qmodel.simulate`,
    which has checked the arguments (see its documentation). Each replica's arrivals are
    split among its pods by the router, one lane per (replica, pod)."""

    ensemble, pods = cluster.nodes[0], len(cluster.nodes)
    rate = source.rate
    worst, plan_source = _longest_need(cluster, source, warmup)
    replicas, per_replica, ask = plan_replicas(_pods_of(worst, cluster), plan_source,
                                                requests, replicas, warmup)
    nodes = ensemble.stages.values()
    cool = sum(cool_down_arrivals(_pods_of(node, cluster), rate) for node in nodes)
    phase = max(batch_places(_pods_of(node, cluster)) for node in nodes)
    bk = get_backend(backend, seed)
    times, start, counts, totals = replica_arrivals(bk, source, replicas, per_replica,
                                                    cool=cool, phase=phase, requests=requests)
    if pods > 1:
        width = int(bk.asnumpy(totals).max())
        assign = static_assignment(bk, cluster.router, pods, (replicas, width))
        arrival, totals = split_by_node(bk, times[:, :width], assign, pods, pad=0)
    else:
        arrival = times
    times, start, counts = bk.asnumpy(times), bk.asnumpy(start), bk.asnumpy(counts)
    totals = bk.asnumpy(totals)
    width = int(totals.max())
    arrival = bk.asnumpy(arrival)[:, :width]
    stages = run_stages(bk, ensemble, arrival, totals, progress)
    lanes = replicas * pods
    lane_replica = np.arange(lanes) // pods         # lane = replica * pods + pod
    per_stage = {}
    with np.errstate(invalid="ignore"):        # inf - inf past each lane's real requests
        outcomes = {name: _requests_record(arrival, stages[name]["finish"] - stages[name]["ready"],
                                           totals, lane_replica, replicas,
                                           stages[name]["record"], stages[name]["order"])
                    for name in ensemble.order}
    with warnings.catch_warnings():
        # the end-to-end result below warns once for the whole run
        warnings.simplefilter("ignore")
        for name in ensemble.order:
            # the stage's instance count, in every pod
            types = NodeTypes(bk, [ensemble.stages[name]] * pods)
            result = assemble(outcomes[name], times, start, counts, types, warmup,
                              "lookahead", bk.name, requests, ask)
            result.method = f"simulation of ensemble stage {name!r} ({result.method})"
            per_stage[name] = result

    end = stages[ensemble.exits[0]]["finish"]
    for name in ensemble.exits[1:]:
        end = np.maximum(end, stages[name]["finish"])    # done when the last exit is
    # Every stage's batches together: the end-to-end utilization is the busy fraction of all
    # the pipeline's instances, its batch sizes those of all its batches.
    pooled = _pool_records(list(outcomes.values()))
    with np.errstate(invalid="ignore"):
        e2e = _requests_record(arrival, end - arrival, totals, lane_replica, replicas)
    e2e.update(pooled)
    result = assemble(e2e, times, start, counts,
                       NodeTypes(bk, [ensemble.stages[n] for n in ensemble.order] * pods),
                       warmup, "lookahead", bk.name, requests, ask)
    where = f" x {pods} pods, {cluster.router.name}" if pods > 1 else ""
    result.method = (f"simulation of a {len(ensemble.stages)}-stage ensemble{where} (lookahead "
                     f"engine per stage, {bk.name}, {replicas} replicas)")
    result.stages = per_stage
    return result


def _requests_record(arrival, sojourn, totals, lane_replica, replicas, record=None, order=None):
    """The engine-adapter record :func:`qmodel.sim.assemble.assemble` takes, lane by lane:
    the requests by their arrival at the ensemble (``arrival``, sorted in each lane, which
    cuts every stage's window as the end-to-end one) with their ``sojourn`` (at one stage, or
    end to end), and where a stage's ``record`` is given its batches, which take the lane's
    requests in ``order``: each batch's first request is the one at the batch's first place
    in that order, in the batch's own lane."""
    lanes = arrival.shape[0]
    rows = [arrival[r, :totals[r]] for r in range(lanes)]
    out = {"arrival": rows, "segment_replica": lane_replica,
           "sojourn": np.concatenate([sojourn[r, :totals[r]] for r in range(lanes)]),
           "rejected_arrival": np.zeros(0), "rejected": np.zeros(replicas, dtype=np.int64)}
    if record is None:
        return out
    sizes = record["size"]
    width = arrival.shape[1]

    def first_arrival():
        place = np.minimum(np.cumsum(sizes, axis=0) - sizes, width - 1)     # (steps, lanes)
        lane = np.broadcast_to(np.arange(lanes)[None, :], place.shape)
        got = arrival[lane, order[lane, place]]
        return np.where(sizes > 0, got, np.inf)

    out.update({"batch_start": record["start"], "batch_service": record["service"],
                "batch_size": sizes, "batch_replica": lane_replica[None, :],
                "batch_first_arrival": first_arrival})
    return out


def _pool_records(parts) -> dict:
    """All stages' batch records (their engine-adapter records) as flat arrays, for the
    end-to-end batch statistics."""
    flat = {key: np.concatenate([np.broadcast_to(p[key], p["batch_start"].shape).ravel()
                                 for p in parts])
            for key in ("batch_start", "batch_service", "batch_size", "batch_replica")}
    flat["batch_first_arrival"] = lambda: np.concatenate(
        [p["batch_first_arrival"]().ravel() for p in parts])
    return flat


def arrivals_per_replica(system, source, warmup: float = 0.1) -> float:
    """Arrivals each replica of a simulation of an Ensemble (or a cluster of Ensemble pods)
    needs: those of the stage that needs the most
    (:func:`qmodel.sim.replicas.arrivals_per_replica_node`, for that stage in every pod, with the
    stage's arrival scv from :func:`stage_arrival_scv`)."""
    cluster = as_cluster(system)
    return len(cluster.nodes) * max(_needs(cluster, source, warmup)[0].values())


def _needs(cluster, source, warmup: float):

    ensemble = cluster.nodes[0]
    scv = stage_arrival_scv(ensemble, source.scv)
    return {name: arrivals_per_replica_node(_pods_of(ensemble.stages[name], cluster),
                                            source.rate, scv[name], warmup)
            for name in ensemble.order}, scv


def _longest_need(system, source, warmup: float):
    """The stage whose replicas must be longest, and the arrivals to plan them with (its
    arrival scv from :func:`stage_arrival_scv`)."""
    cluster = as_cluster(system)
    ensemble = cluster.nodes[0]
    need, scv = _needs(cluster, source, warmup)
    worst = max(ensemble.order, key=lambda n: need[n])
    if isinstance(source, Trace) or scv[worst] == source.scv:
        return ensemble.stages[worst], source
    return ensemble.stages[worst], Renewal(source.rate, scv[worst])
