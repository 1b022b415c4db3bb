"""Measuring one configuration: predicted, simulated and the textbook baseline, as plain data.

For one configuration :func:`measure_config` predicts (:func:`qmodel.predict`) and simulates
(:func:`qmodel.simulate`) p50/p95/p99, records the simulator's 99% confidence intervals, the
relative errors, the error of the textbook baseline (:func:`baseline`) and the time each took;
:func:`measure_router` does the same for one router of :func:`qmodel.compare_routers`, and
:func:`measure_curve` predicts one node's throughput and p99 over a list of loads. Each takes
and returns plain data (a normalised spec, JSON-ready dicts), so that it runs in any worker
process and its result can be cached. Systems that ``predict`` does not model are simulated
and reported as "not modelled".
"""

from __future__ import annotations

import time

import numpy as np

from ..system import Cluster, Node
from .configs import node_of, system_of

__all__ = ["QUANTILES", "CURVE_LEVELS", "tags", "lattice_step", "baseline",
           "measure_config", "measure_router", "measure_curve"]

QUANTILES = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
# Probability levels whose simulated quantiles set the times at which both distributions are
# stored (for the CDF figures): the body evenly, the tail geometrically down to 1 - 5e-4.
CURVE_LEVELS = tuple(np.round(np.concatenate([np.linspace(0.02, 0.9, 23),
                                              1 - np.geomspace(0.08, 5e-4, 14)]), 6).tolist())


def tags(spec: dict) -> dict:
    """What the report groups and plots by, for any configuration."""
    system = system_of(spec)
    node = system if isinstance(system, Node) else system.nodes[0]
    rate = (spec["rate"] if spec.get("rate") is not None
            else spec["load"] * system.capacity)
    name, cv = spec["service"]["jitter"]
    s1 = float(node.service.mean(1))
    return {"system": system.describe(), "node": node.describe(), "B": node.max_batch_size,
            "delay": node.max_queue_delay, "D_over_S1": round(node.max_queue_delay / s1, 3),
            "instances": node.instances, "preferred": list(node.preferred_batch_sizes),
            "jitter": name if cv is None else f"{name} {cv:g}",
            "nodes": len(system.nodes) if isinstance(system, Cluster) else 1,
            "router": system.router.name if isinstance(system, Cluster) else None,
            "rate": rate, "load": rate / system.capacity, "capacity": system.capacity}


def lattice_step(result) -> float:
    """The lattice step h a result states (the largest over a mixture's parts), else 0."""
    return float(result.accuracy.lattice_step or 0.0)


def baseline(node: Node, rate: float):
    """Quantile function of the textbook back-of-envelope for a node, or None.

    The estimate a capacity planner would write (:mod:`qmodel.theory.baselines`): full
    batches of b requests (b = the batch size the node's capacity assumes) are the customers
    of a GI/G/c queue (batch interarrival scv 1/b) with Kingman's (c = 1) or Allen-Cunneen's
    mean wait and an exponential tail, plus the mean time a request waits for its batch to
    fill, (b - 1) / (2 rate), capped at the delay (0 without one). None for finite queues and
    empirical service times, which it does not describe.

    Raises
    ------
    ValueError
        From the queue's own stability check (a GI/G/c queue of full batches can be unstable
        where the batching node is not).

    Examples
    --------
    >>> from qmodel import Node, ServiceTime
    >>> q = baseline(Node(ServiceTime.affine(2e-3, 0.5e-3), max_batch_size=4), rate=800.0)
    >>> round(q(0.99) * 1e3, 3)
    14.955
    """
    from ..theory.baselines import baseline_latency

    if node.service.jitter == "empirical" or node.max_queue_size:
        return None
    b = float(node.saturated_batch_size)
    scv = 0.0 if node.service.jitter == "deterministic" else float(node.service.cv) ** 2
    lat = baseline_latency(rate / b, float(node.service.mean(b)), scv, servers=node.instances,
                           arrival_scv=1.0 / b,
                           method="kingman" if node.instances == 1 else "allen_cunneen")
    fill = min((b - 1) / (2 * rate), node.max_queue_delay) if node.max_queue_delay > 0 else 0.0
    return lambda p: float(lat.quantile(p)) + fill


def _compare(pred, reason, sim, timings) -> dict:
    """The numbers of one prediction against one simulation, as plain data."""
    # One grid of times for both distributions: the simulated quantiles (dense where the
    # requests are) plus an even spread up to the farther of the two 99.95th percentiles, so
    # a theory with a heavier tail is drawn to its end.
    sim_q = np.array([float(v) for v in sim.quantile(np.array(CURVE_LEVELS))])
    top = float(sim.quantile(0.9995))
    if pred is not None:
        try:
            top = max(top, float(pred.quantile(0.9995)))
        except ArithmeticError:
            pass
    t = np.unique(np.concatenate([sim_q, np.linspace(sim_q[0], top, 24)]))
    out = {"modelled": pred is not None, "not_modelled_reason": reason,
           "family": pred.accuracy.exactness if pred is not None else "not modelled",
           # a campaign measures the model also beyond its families' measured domains
           "outside_domain": pred is not None and pred.accuracy.approximation(
               "outside_measured_domain") is not None,
           "method": pred.method if pred is not None else None,
           "accuracy": pred.accuracy.as_dict() if pred is not None else None,
           "lattice_step": lattice_step(pred) if pred is not None else 0.0,
           "simulated": {"method": sim.method, "requests": int(sim.requests),
                         "throughput": sim.throughput, "utilization": sim.utilization,
                         "mean_batch_size": sim.mean_batch_size, "mean": sim.mean,
                         "ci99": {}},
           "predicted": None, "error": None,
           "curve": {"t": t.tolist(), "simulated_cdf": np.asarray(sim.cdf(t), float).tolist(),
                     "predicted_cdf": None},
           **timings}
    for name, p in QUANTILES:
        out["simulated"][name] = float(sim.quantile(p))
        out["simulated"]["ci99"][name] = [float(x) for x in sim.ci(p, level=0.99)]
    if pred is not None:
        out["predicted"] = {name: float(pred.quantile(p)) for name, p in QUANTILES}
        out["predicted"].update(throughput=pred.throughput, utilization=pred.utilization,
                                mean_batch_size=pred.mean_batch_size)
        out["error"] = {name: out["predicted"][name] / out["simulated"][name] - 1
                        for name, _ in QUANTILES}
        out["curve"]["predicted_cdf"] = np.asarray(pred.cdf(t), float).tolist()
    return out


def _predicted(system, rate):
    """(result with p50/p95/p99 evaluated, reason it is not modelled, seconds taken)."""
    from ..predict import predict

    t0 = time.perf_counter()
    try:
        pred = predict(system, rate=rate, fallback="raise", extrapolate=True)
        for _, p in QUANTILES:         # some results are lazy: time the numbers, not a promise
            pred.quantile(p)
        reason = None
    except NotImplementedError as err:
        pred, reason = None, str(err)
    return pred, reason, time.perf_counter() - t0


def measure_config(spec: dict, requests: int, seed: int) -> dict:
    """Predict, simulate and baseline one configuration; plain numbers (seconds, req/s).

    Parameters
    ----------
    spec : dict
        ``Config.spec``.
    requests, seed : int
        Of the simulation.

    Returns
    -------
    dict
        The configuration's tags (B, delay, load, ...), ``predicted``/``simulated`` p50/p95/p99
        (with the simulator's 99% CIs), relative ``error``, ``baseline`` quantiles and errors,
        ``family`` ("exact", "numerical", "approximation" or "not modelled") and the seconds
        each step took. No verdict: :func:`judge` adds it, so a changed tolerance needs no rerun.
    """
    from ..sim import simulate

    system, row = system_of(spec), tags(spec)
    rate = row["rate"]
    pred, reason, t_pred = _predicted(system, rate)
    t0 = time.perf_counter()
    sim = simulate(system, rate=rate, requests=requests, seed=seed)
    t_sim = time.perf_counter() - t0
    row.update(_compare(pred, reason, sim, {"predict_seconds": t_pred,
                                            "simulate_seconds": t_sim}))
    t0 = time.perf_counter()
    base = None
    try:
        base = baseline(system, rate) if isinstance(system, Node) else None
        if base is not None:
            q = {name: base(p) for name, p in QUANTILES}
            row["baseline"] = {"quantiles": q, "error": {
                name: q[name] / row["simulated"][name] - 1 for name in q}}
    except ValueError as err:          # e.g. the baseline's own stability check
        row["baseline"] = {"unavailable": str(err)}
    if base is None and "baseline" not in row:
        row["baseline"] = {"unavailable": "no textbook baseline for clusters, finite queues or "
                                          "empirical service times"}
    row["baseline_seconds"] = time.perf_counter() - t0
    return row


def measure_router(spec: dict, requests: int, seed: int) -> dict:
    """One router at one load via :func:`qmodel.compare_routers`, then simulated; plain data."""
    from ..compare import compare_routers
    from ..sim import simulate

    node, cl = node_of(spec), spec["cluster"]
    row = tags(spec)
    t0 = time.perf_counter()
    (res,) = compare_routers(node, cl["nodes"], row["rate"], routers=(cl["router"],))
    pred = res.predicted
    if pred is not None:
        for _, p in QUANTILES:
            pred.quantile(p)
    t_pred = time.perf_counter() - t0
    t0 = time.perf_counter()
    sim = simulate(system_of(spec), rate=row["rate"], requests=requests, seed=seed)
    row.update(_compare(pred, None if pred is not None else res.note, sim,
                        {"predict_seconds": t_pred,
                         "simulate_seconds": time.perf_counter() - t0}))
    row["note"] = res.note
    row["baseline"] = {"unavailable": "no textbook baseline for clusters"}
    return row


def measure_curve(spec: dict, loads) -> dict:
    """Predicted throughput and p99 of one node over a list of loads (a theory line)."""
    from ..predict import predict

    system = system_of(spec)
    t0 = time.perf_counter()
    points = []
    for load in loads:
        r = predict(system, rate=load * system.capacity, fallback="raise", extrapolate=True)
        points.append({"load": load, "throughput": r.throughput, "p99": r.p99})
    return {**tags({**spec, "load": loads[0], "rate": None}), "points": points,
            "seconds": time.perf_counter() - t0}
