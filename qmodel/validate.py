"""Validation campaigns: the models against the simulator, over many configurations, in parallel.

A campaign is a list of configurations (a node, optionally a cluster, and a load). For each one
:func:`measure_config` predicts (:func:`qmodel.predict`) and simulates (:func:`qmodel.simulate`)
p50/p95/p99, records the simulator's 99% confidence intervals, the relative errors, the error of
the textbook baseline (:mod:`qmodel.theory.baselines`) and the time each took; :func:`judge` then
gives a verdict against stated tolerances (:class:`Tolerance`). Systems that ``predict`` does not
model are simulated and reported as "not modelled", not as failures.

:func:`run_campaign` runs the work over local processes (``concurrent.futures``) or any
:class:`concurrent.futures.Executor` (Dask: ``dask.distributed.Client().get_executor()``),
caches each result as JSON under the output folder (keyed by a hash of the configuration and
the simulation settings, so an interrupted campaign resumes), and shows a progress bar.
:mod:`qmodel.report` turns the results into a Markdown report with figures; ``qmodel validate``
does both.

The configurations (``--configs FILE``, or the built-in grids of :func:`plan`) are read
by :mod:`qmodel.configs`.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import __version__
from .configs import Config, grid_config, load_configs, node_of, parse_config, system_of
from .system import Cluster, Node

__all__ = ["Config", "Tolerance", "parse_config", "load_configs", "grid_config", "plan",
           "measure_config", "judge", "run_tasks", "run_campaign", "Campaign",
           "add_arguments", "run"]

QUANTILES = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
# Probability levels whose simulated quantiles set the times at which both distributions are
# stored (for the CDF figures): the body evenly, the tail geometrically down to 1 - 5e-4.
CURVE_LEVELS = tuple(np.round(np.concatenate([np.linspace(0.02, 0.9, 23),
                                              1 - np.geomspace(0.08, 5e-4, 14)]), 6).tolist())
# Bump when a cached result's fields change, so old caches are recomputed, not misread.
CACHE_SCHEMA = 2
DEFAULT_REQUESTS = {"quick": 400_000, "full": 2_000_000, "configs": 1_000_000}


# ------------------------------------------------------------------------------------------
# measuring one configuration (runs in a worker: plain data in, plain data out)
# ------------------------------------------------------------------------------------------
def _tags(spec: dict) -> dict:
    """What the report groups and plots by, for any configuration."""
    system = system_of(spec)
    node = system if isinstance(system, Node) else system.nodes[0]
    rate = (spec["rate"] if spec.get("rate") is not None
            else spec["load"] * system.capacity)
    name, cv = spec["service"]["jitter"]
    s1 = float(node.service.mean(1))
    return {"system": system.describe(), "B": node.max_batch_size,
            "delay": node.max_queue_delay, "D_over_S1": round(node.max_queue_delay / s1, 3),
            "instances": node.instances, "preferred": list(node.preferred_batch_sizes),
            "jitter": name if cv is None else f"{name} {cv:g}",
            "nodes": len(system.nodes) if isinstance(system, Cluster) else 1,
            "router": system.router.name if isinstance(system, Cluster) else None,
            "rate": rate, "load": rate / system.capacity, "capacity": system.capacity}


def _lattice_step(result) -> float:
    """The lattice step h of a numerical result (the largest over a mixture's parts), else 0."""
    steps = [getattr(result, "h", 0.0) or 0.0]
    steps += [getattr(p, "h", 0.0) or 0.0 for p in getattr(result, "parts", ())]
    return float(max(steps))


def _baseline(node: Node, rate: float):
    """Quantile function of the textbook back-of-envelope for a node, or None.

    Full batches of b requests (b = the batch size the node's capacity assumes) are the
    customers of a GI/G/c queue (batch interarrival scv 1/b) with Kingman's (c = 1) or
    Allen-Cunneen's mean wait and an exponential tail, plus the mean time a request waits
    for its batch to fill, (b - 1) / (2 rate), capped at the delay (0 without one).
    """
    from .theory.baselines import baseline_latency

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
           "method": pred.method if pred is not None else None,
           "accuracy": pred.accuracy.statement if pred is not None else None,
           "lattice_step": _lattice_step(pred) if pred is not None else 0.0,
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
    from .predict import predict

    t0 = time.perf_counter()
    try:
        pred = predict(system, rate=rate, fallback="raise")
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
    from .sim import simulate

    system, row = system_of(spec), _tags(spec)
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
        base = _baseline(system, rate) if isinstance(system, Node) else None
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
    from .compare import compare_routers
    from .sim import simulate

    node, cl = node_of(spec), spec["cluster"]
    row = _tags(spec)
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
    from .predict import predict

    system = system_of(spec)
    t0 = time.perf_counter()
    points = []
    for load in loads:
        r = predict(system, rate=load * system.capacity, fallback="raise")
        points.append({"load": load, "throughput": r.throughput, "p99": r.p99})
    return {**_tags({**spec, "load": loads[0], "rate": None}), "points": points,
            "seconds": time.perf_counter() - t0}


def _run_task(kind: str, params: dict, requests: int, seed: int) -> dict:
    """Worker entry point (module level, so that process pools and Dask can pickle it)."""
    if kind in ("config", "router"):
        fn = measure_config if kind == "config" else measure_router
        return fn(params, requests, seed)
    if kind == "curve":
        return measure_curve(params["spec"], params["loads"])
    if kind == "lab":
        from .lab import lab_point
        return lab_point(params["B"], requests=requests, seed=seed)
    raise ValueError(f"unknown task kind {kind!r}")


# ------------------------------------------------------------------------------------------
# verdicts
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Tolerance:
    """When a prediction passes, quantile by quantile (p95 and p99 by default).

    - ``exact`` and ``numerical`` results must lie inside the simulator's 99% confidence
      interval widened by the result's lattice step h (0 for closed forms);
    - ``approximation`` results must lie within ``approx`` (relative) of the simulated
      quantile, plus the interval's half-width and h.

    Every band also gets ``slack`` (relative) for the simulator's float32 samples, so that an
    atom of the distribution (a quantile where every section agrees and the interval has zero
    width) is not failed by rounding. p50 is reported, not judged by default: the tool's claims
    are about the tail.
    """

    approx: float = 0.08
    slack: float = 1e-6
    judged: tuple = ("p95", "p99")

    def describe(self) -> str:
        return (f"exact/numerical: inside the simulator's 99% CI widened by the "
                f"lattice step h; approximation: within {self.approx:.0%} of the simulated "
                f"value plus the CI half-width and h; judged on {', '.join(self.judged)}")


def judge(row: dict, tolerance: Tolerance = Tolerance()) -> dict:
    """Add ``verdict`` ("pass", "fail", "not modelled" or "error") and ``checks`` to a row.

    Examples
    --------
    >>> row = {"modelled": True, "family": "exact", "lattice_step": 0.0,
    ...        "predicted": {"p95": 1.0, "p99": 2.0},
    ...        "simulated": {"p95": 1.01, "p99": 2.2, "ci99": {"p95": [0.98, 1.04],
    ...                                                      "p99": [2.1, 2.3]}}}
    >>> judge(row)["verdict"], row["checks"]["p99"]["ok"]
    ('fail', False)
    """
    if row.get("error_message"):
        row["verdict"], row["checks"] = "error", {}
        return row
    if not row["modelled"]:
        row["verdict"], row["checks"] = "not modelled", {}
        return row
    h = row.get("lattice_step") or 0.0
    checks = {}
    for name in tolerance.judged:
        q, s = row["predicted"][name], row["simulated"][name]
        lo, hi = row["simulated"]["ci99"][name]
        pad = h + tolerance.slack * s
        if row["family"] in ("exact", "numerical"):
            band = (lo - pad, hi + pad)
        else:
            width = tolerance.approx * s + (hi - lo) / 2 + pad
            band = (s - width, s + width)
        checks[name] = {"ok": bool(band[0] <= q <= band[1]), "band": list(band)}
    row["checks"] = checks
    row["verdict"] = "pass" if all(c["ok"] for c in checks.values()) else "fail"
    return row


# ------------------------------------------------------------------------------------------
# running many, with a cache
# ------------------------------------------------------------------------------------------
def _key(kind: str, params: dict, requests: int, seed: int) -> str:
    blob = json.dumps({"kind": kind, "params": params, "requests": requests, "seed": seed,
                       "schema": CACHE_SCHEMA, "qmodel": __version__}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def _cost(kind: str, params: dict) -> float:
    """A rough cost, to start the slowest tasks first (the pool then ends evenly)."""
    if kind == "lab":
        return 50.0 + params["B"]
    spec = params.get("spec", params)
    c = spec.get("instances", 1)
    return (1 + spec.get("max_batch_size", 1) * c * c / 8) * (20 if kind == "curve" else 1) \
        + (10 if spec.get("cluster") else 0)


def run_tasks(tasks, *, requests: int, seed: int, cache_dir=None, executor=None,
              workers: int | None = None, progress: bool = True, fresh: bool = False,
              desc: str = "validate") -> tuple[list, dict]:
    """Run ``(kind, params)`` tasks, each at most once per cache; results in task order.

    Parameters
    ----------
    tasks : sequence of (str, dict)
        Kinds "config", "router", "curve" and "lab" (see :func:`_run_task`).
    requests, seed : int
        Simulation settings (part of every cache key).
    cache_dir : path, optional
        One JSON file per finished task; present files are loaded instead of recomputed.
    executor : concurrent.futures.Executor, optional
        Runs the tasks (e.g. Dask's ``client.get_executor()``); not shut down here.
    workers : int, optional
        Without an executor: local processes (default: all cores); 1 runs in this process.
    progress : bool
        tqdm progress bar on stderr.
    fresh : bool
        Ignore (and overwrite) cached results.

    Returns
    -------
    (results, stats)
        ``stats``: {"computed", "cached", "errors"} counts.
    """
    keys = [_key(kind, params, requests, seed) for kind, params in tasks]
    results: list = [None] * len(tasks)
    cache = Path(cache_dir) if cache_dir is not None else None
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
    todo = []
    for i, ((kind, _), key) in enumerate(zip(tasks, keys)):
        path = cache / f"{kind}-{key}.json" if cache is not None else None
        if path is not None and path.exists() and not fresh:
            try:
                results[i] = json.loads(path.read_text())
                continue
            except (OSError, ValueError):
                pass                   # a file cut short by an interruption: recompute it
        todo.append(i)
    todo.sort(key=lambda i: -_cost(*tasks[i]))
    stats = {"computed": 0, "cached": len(tasks) - len(todo), "errors": 0}

    def done(i, value, err=None):
        if err is not None:
            # keep the campaign going; the report lists it, and no cache file means a rerun
            # tries again
            value = {"error_message": f"{type(err).__name__}: {err}", "modelled": False}
            stats["errors"] += 1
        else:
            stats["computed"] += 1
            if cache is not None:
                path = cache / f"{tasks[i][0]}-{keys[i]}.json"
                tmp = path.with_suffix(".tmp")
                tmp.write_text(json.dumps(value))
                os.replace(tmp, path)  # atomic: an interruption never leaves half a file
        results[i] = value
        bar.update(1)

    from tqdm import tqdm

    bar = tqdm(total=len(tasks), initial=len(tasks) - len(todo), desc=desc,
               disable=not progress, unit="task", file=sys.stderr)
    try:
        if executor is None and (workers == 1 or len(todo) <= 1):
            for i in todo:
                try:
                    value = _run_task(tasks[i][0], tasks[i][1], requests, seed)
                except Exception as err:  # noqa: BLE001 - recorded in the report
                    done(i, None, err)
                else:
                    done(i, value)
        elif todo:
            own = executor is None
            pool = executor or cf.ProcessPoolExecutor(max_workers=workers or os.cpu_count())
            try:
                futures = {pool.submit(_run_task, tasks[i][0], tasks[i][1], requests, seed): i
                           for i in todo}
                for fut in cf.as_completed(futures):
                    err = fut.exception()
                    done(futures[fut], None if err else fut.result(), err)
            finally:
                if own:
                    pool.shutdown(wait=True, cancel_futures=True)
    finally:
        bar.close()
    return results, stats


# ------------------------------------------------------------------------------------------
# campaigns
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Plan:
    """What a campaign runs: configurations plus the report's extra sections."""

    level: str
    configs: list
    router_loads: tuple = ()
    router_nodes: int = 8
    curve_loads: tuple = ()
    curve_slices: tuple = ()          # (jitter, B, d, c) theory lines for throughput vs p99
    lab_sizes: tuple = ()


# The router comparison's node: B = 8, no delay (the dynamic-router model covers that node),
# lognormal cv 0.3 jitter; 8 nodes.
ROUTER_NODE = ("lognormal", 8, 0.0, 1)
ROUTERS = ("random", "round_robin", "power_of_two", "least_outstanding")


def plan(level: str = "quick") -> Plan:
    """The built-in campaigns.

    ``quick`` (a few minutes on 2 cores): B in {1, 4, 8, 32}, D in {0, 2} x S(1), c in {1, 2},
    load in {0.3, 0.5, 0.7, 0.9}, deterministic and lognormal (cv 0.3) service; routers at
    loads 0.5, 0.7, 0.9; the lab. ``full`` (the issue-3 grid): D in {0, 0.5, 2} x S(1),
    c in {1, 2, 4}, loads 0.1 to 0.95, routers at five loads, the lab.
    B = 1 takes D = 0 only: with one request per batch the delay never binds.

    Examples
    --------
    >>> len(plan("quick").configs), len(plan("full").configs)
    (112, 420)
    """
    if level == "quick":
        ds, cs, loads = (0.0, 2.0), (1, 2), (0.3, 0.5, 0.7, 0.9)
        router_loads = (0.5, 0.7, 0.9)
    elif level == "full":
        ds, cs, loads = (0.0, 0.5, 2.0), (1, 2, 4), (0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95)
        router_loads = (0.3, 0.5, 0.7, 0.8, 0.9)
    else:
        raise ValueError(f"level={level!r}: use 'quick' or 'full'")
    configs = []
    for jitter in ("deterministic", "lognormal"):
        for B in (1, 4, 8, 32):
            for d in ((0.0,) if B == 1 else ds):
                for c in cs:
                    for load in loads:
                        configs.append(grid_config(jitter, B, d, c, load))
    slices = tuple((j, B, d, 1) for j in ("deterministic", "lognormal") for d in ds
                   for B in (1, 4, 8, 32) if not (B == 1 and d > 0))
    return Plan(level, configs, router_loads=router_loads,
                curve_loads=tuple(np.round(np.linspace(0.05, 0.95, 19), 3).tolist()) + (0.97,),
                curve_slices=slices, lab_sizes=(1, 2, 4, 8, 16, 32, 64))


@dataclass
class Campaign:
    """Results of a campaign, ready for :func:`qmodel.report.write_report`."""

    level: str
    settings: dict
    rows: list
    routers: list = field(default_factory=list)
    curves: list = field(default_factory=list)
    lab: list = field(default_factory=list)
    stats: dict = field(default_factory=dict)
    wall_seconds: float = 0.0


def run_campaign(configs, out=None, *, requests: int = DEFAULT_REQUESTS["quick"],
                 seed: int = 11, executor=None, workers: int | None = None,
                 tolerance: Tolerance = Tolerance(), progress: bool = True,
                 fresh: bool = False, extras: Plan | None = None, level: str = "configs"
                 ) -> Campaign:
    """Predict and simulate every configuration (in parallel, cached) and judge the results.

    Parameters
    ----------
    configs : sequence of Config or dict
        Dicts go through :func:`parse_config`.
    out : path, optional
        Output folder; results are cached under ``out/cache`` (none without ``out``).
    requests, seed : int
        Simulated requests per configuration, and the seed.
    executor : concurrent.futures.Executor, optional
        Any executor, e.g. ``dask.distributed.Client().get_executor()``; default local
        processes (``workers``, default all cores; ``workers=1`` runs in this process).
    tolerance : Tolerance
    progress : bool
    fresh : bool
        Recompute everything, ignoring the cache.
    extras : Plan, optional
        Also run its router comparison, theory curves and lab (the built-in campaigns).

    Returns
    -------
    Campaign

    Examples
    --------
    >>> c = run_campaign([{"service": {"base": "2ms"}, "max_batch_size": 4, "load": 0.5}],
    ...                  requests=20_000, workers=1, progress=False)
    >>> c.rows[0]["family"], c.rows[0]["verdict"] in ("pass", "fail")
    ('numerical', True)
    """
    t0 = time.perf_counter()
    configs = [c if isinstance(c, Config) else parse_config(c, f"config {i}")
               for i, c in enumerate(configs, 1)]
    tasks = [("config", c.spec) for c in configs]
    n_rows = len(tasks)
    router_specs, curve_specs = [], []
    if extras is not None:
        jit, B, d, c = ROUTER_NODE
        for load in extras.router_loads:
            for router in ROUTERS:
                spec = grid_config(jit, B, d, c, load, nodes=extras.router_nodes,
                                   router=router).spec
                router_specs.append(spec)
                tasks.append(("router", spec))
        for jit, B, d, c in extras.curve_slices:
            spec = grid_config(jit, B, d, c, 0.5).spec
            curve_specs.append(spec)
            tasks.append(("curve", {"spec": spec, "loads": list(extras.curve_loads)}))
        tasks += [("lab", {"B": B}) for B in extras.lab_sizes]
    cache = Path(out) / "cache" if out is not None else None
    results, stats = run_tasks(tasks, requests=requests, seed=seed, cache_dir=cache,
                               executor=executor, workers=workers, progress=progress,
                               fresh=fresh)
    rows = []
    for config, row in zip(configs, results[:n_rows]):
        if row.get("error_message"):
            row = {**_tags(config.spec), **row}
        row = {**row, "name": config.name, "config": config.spec}
        rows.append(judge(row, tolerance))
    rest = results[n_rows:]
    routers = [judge({**(_tags(s) if r.get("error_message") else {}), **r, "name": f"{s['cluster']['router']} load={s['load']:.2f}",
                      "config": s}, tolerance)
               for s, r in zip(router_specs, rest[:len(router_specs)])]
    rest = rest[len(router_specs):]
    curves = [r for r in rest[:len(curve_specs)] if not r.get("error_message")]
    lab = [r for r in rest[len(curve_specs):] if not r.get("error_message")]
    # the work behind the results, wherever and whenever it was done (cached results keep it)
    stats["task_seconds"] = float(
        sum(r.get("predict_seconds", 0) + r.get("simulate_seconds", 0)
            + r.get("baseline_seconds", 0) for r in rows + routers)
        + sum(r.get("seconds", 0) for r in curves + lab))
    settings = {"requests": requests, "seed": seed, "tolerance": tolerance.describe(),
                "executor": type(executor).__name__ if executor is not None
                else ("this process" if workers == 1 else
                      f"{workers or os.cpu_count()} local processes"),
                "qmodel": __version__}
    return Campaign(level, settings, rows, routers, curves, lab, stats,
                    time.perf_counter() - t0)


# ------------------------------------------------------------------------------------------
# command line
# ------------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``validate`` options to a parser (used by ``qmodel validate``)."""
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--quick", action="store_true",
                       help="the quick grid, routers and lab (default; minutes on 2 cores)")
    which.add_argument("--full", action="store_true",
                       help="the whole issue-3 grid, routers and lab (tens of minutes on 2 "
                            "cores)")
    which.add_argument("--configs", default=None, metavar="FILE",
                       help="your own configurations, TOML ([[config]] tables) or JSON")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="output folder (default validation/reports/quick, .../full, or "
                             ".../<FILE stem>); results are cached in DIR/cache")
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help="local processes (default: all cores; 1 runs in this process)")
    parser.add_argument("--requests", type=float, default=None, metavar="N",
                        help="simulated requests per configuration (default 4e5 quick, 2e6 "
                             "full, 1e6 configs)")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--tolerance", type=float, default=Tolerance.approx, metavar="REL",
                        help="relative tolerance of approximations on p95/p99 (default 0.08)")
    parser.add_argument("--fresh", action="store_true", help="ignore cached results")
    parser.add_argument("--strict", action="store_true",
                        help="exit with status 1 if any modelled configuration fails")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                        help="progress bar on stderr (default on)")
    return parser


def run(args) -> int:
    """``qmodel validate``: run the campaign, write the report, print the summary."""
    from .report import summary_text, write_report

    try:
        if args.configs:
            level, configs, extras = "configs", load_configs(args.configs), None
            out = args.out or f"validation/reports/{Path(args.configs).stem}"
        else:
            level = "full" if args.full else "quick"
            extras = plan(level)
            configs, out = extras.configs, args.out or f"validation/reports/{level}"
        requests = DEFAULT_REQUESTS[level] if args.requests is None else args.requests
        if not float(requests).is_integer() or requests < 1000:
            raise ValueError(f"--requests={requests:g} must be a whole number >= 1000")
        if args.workers is not None and args.workers < 1:
            raise ValueError(f"--workers={args.workers} must be at least 1")
        if not 0 <= args.tolerance < 1:
            raise ValueError(f"--tolerance={args.tolerance} must be a fraction in [0, 1), "
                             "e.g. 0.08")
        campaign = run_campaign(configs, out, requests=int(requests), seed=args.seed,
                                workers=args.workers, tolerance=Tolerance(approx=args.tolerance),
                                progress=args.progress, fresh=args.fresh, extras=extras,
                                level=level)
        if args.configs:
            campaign.settings["source"] = str(args.configs)
        report = write_report(campaign, out)
    except (OSError, ValueError) as err:
        print(f"qmodel: error: {err}", file=sys.stderr)
        return 2
    print(summary_text(campaign.rows))
    verdicts = [r["verdict"] for r in campaign.rows + campaign.routers]
    print(f"\n{verdicts.count('pass')} passed, {verdicts.count('fail')} failed, "
          f"{verdicts.count('not modelled')} not modelled, {verdicts.count('error')} errors; "
          f"{campaign.stats.get('cached', 0)} results from the cache; "
          f"{campaign.wall_seconds:.1f} s")
    print(f"report: {report}")
    return 1 if args.strict and "fail" in verdicts else 0
