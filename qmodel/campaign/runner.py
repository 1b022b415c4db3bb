"""Running a campaign: tasks over local processes or any executor, each cached as JSON.

:func:`run_tasks` runs ``(kind, params)`` tasks (one configuration, one router, one theory
curve, one point of the lab) over local processes (``concurrent.futures``) or any
:class:`concurrent.futures.Executor` (Dask: ``dask.distributed.Client().get_executor()``),
caches each result as JSON (keyed by a hash of the task and the simulation settings, so an
interrupted campaign resumes) and shows a progress bar. :func:`run_campaign` builds the tasks
of a list of configurations (and of a built-in :class:`~qmodel.campaign.grids.Plan`'s extra
sections), runs them and judges every row (:mod:`qmodel.campaign.verdicts`) into a
:class:`Campaign`, which :mod:`qmodel.campaign.report` writes out.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..version import __version__
from .configs import Config, parse_config
from .grids import ROUTER_NODE, ROUTERS, Plan, grid_config
from .measure import measure_config, measure_curve, measure_router, tags
from .verdicts import Tolerance, judge

__all__ = ["CACHE_SCHEMA", "DEFAULT_REQUESTS", "run_task", "run_tasks", "Campaign",
           "run_campaign"]

# Bump when a cached result's fields change, so old caches are recomputed, not misread.
CACHE_SCHEMA = 3
DEFAULT_REQUESTS = {"quick": 400_000, "full": 2_000_000, "configs": 1_000_000}


def run_task(kind: str, params: dict, requests: int, seed: int) -> dict:
    """Run one task (module level, so that process pools and Dask can pickle it).

    Kinds: "config" (:func:`~qmodel.campaign.measure.measure_config` of a spec), "router"
    (:func:`~qmodel.campaign.measure.measure_router`), "curve"
    (:func:`~qmodel.campaign.measure.measure_curve` of ``{"spec", "loads"}``) and "lab"
    (:func:`~qmodel.campaign.lab.lab_point` of ``{"B"}``).
    """
    if kind in ("config", "router"):
        fn = measure_config if kind == "config" else measure_router
        return fn(params, requests, seed)
    if kind == "curve":
        return measure_curve(params["spec"], params["loads"])
    if kind == "lab":
        from .lab import lab_point
        return lab_point(params["B"], requests=requests, seed=seed)
    raise ValueError(f"unknown task kind {kind!r}")


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
        Kinds "config", "router", "curve" and "lab" (see :func:`run_task`).
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
                    value = run_task(tasks[i][0], tasks[i][1], requests, seed)
                except Exception as err:  # noqa: BLE001 - recorded in the report
                    done(i, None, err)
                else:
                    done(i, value)
        elif todo:
            own = executor is None
            pool = executor or cf.ProcessPoolExecutor(max_workers=workers or os.cpu_count())
            try:
                futures = {pool.submit(run_task, tasks[i][0], tasks[i][1], requests, seed): i
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


@dataclass
class Campaign:
    """Results of a campaign, ready for :func:`qmodel.campaign.report.write_report`."""

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
            row = {**tags(config.spec), **row}
        row = {**row, "name": config.name, "config": config.spec}
        rows.append(judge(row, tolerance))
    rest = results[n_rows:]
    routers = [judge({**(tags(s) if r.get("error_message") else {}), **r,
                      "name": f"{s['cluster']['router']} load={s['load']:.2f}", "config": s},
                     tolerance)
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
