"""How accurate are the cluster models? Every router against the simulator (the issue-4 grid).

Grid: N in {2, 4, 8, 32, 128} nodes; routers random, round_robin, power_of_two,
least_outstanding; max_batch_size B in {1, 8, 32}; max_queue_delay D in {0, 1} x S(1) (B = 1
takes D = 0 only); load 0.3 to 0.95 of the cluster's capacity. One instance per node, S(k) =
1.8874 ms + 0.1438 ms x k (Inoue 2021, V100), deterministic. ``--quick``: N in {2, 8, 32, 128},
load in {0.3, 0.7, 0.9}.

Static routers go through ``qmodel.predict``. The dynamic routers' cavity model
(:func:`qmodel.theory.routing.dynamic_router`; least outstanding with D = 0 only) is run
directly on every configuration where ``predict`` declines it, so that the table shows where
the mean field holds and where it does not; the column ``in predict`` says which rows
``predict`` answers. Each configuration simulates 1 million requests or 20,000 per node,
or more where 8 replicas long enough for the start-up transient need more (the simulator's
rule, qmodel.sim.run.arrivals_per_replica_node; up to 64 million). Rows are appended to the
JSON file as they finish, and a rerun skips the configurations already there (an interrupted
campaign resumes).

Run: ``.venv/bin/python validation/router_accuracy.py [--quick] [--json FILE] [--summary FILE]``
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import qmodel as qm
from qmodel.predict import DYNAMIC_RESOLUTION
from qmodel.routers import ROUTERS
from qmodel.sim import run as sim_run
from qmodel.theory.routing import dynamic_router

BASE, PER_ITEM = 1.8874e-3, 0.1438e-3
S1 = BASE + PER_ITEM
ROUTERS = ("random", "round_robin", "power_of_two", "least_outstanding")
MAX_REQUESTS = 64_000_000


def grid(quick: bool):
    nodes = (2, 8, 32, 128) if quick else (2, 4, 8, 32, 128)
    loads = (0.3, 0.7, 0.9) if quick else (0.3, 0.5, 0.7, 0.8, 0.9, 0.95)
    for router in ("power_of_two", "least_outstanding", "round_robin", "random"):
        for N in nodes:
            for B in (1, 8, 32):
                for d in ((0.0,) if B == 1 else (0.0, 1.0)):
                    for load in loads:
                        yield router, N, B, d, load


def model(router, N, B, d, load):
    """(prediction, seconds, whether predict answered) for one configuration."""
    node = qm.Node(qm.ServiceTime.affine(BASE, PER_ITEM), max_batch_size=B,
                   max_queue_delay=d * S1)
    cluster = qm.Cluster(node, count=N, router=router)
    rate = load * cluster.capacity
    start = time.perf_counter()
    try:
        pred, in_predict = qm.predict(cluster, rate=rate, fallback="raise"), True
    except NotImplementedError:
        choices = N if router == "least_outstanding" else 2
        pred, in_predict = dynamic_router(node, rate, N, choices,
                                          resolution=DYNAMIC_RESOLUTION), False
    return pred, time.perf_counter() - start, in_predict


def refresh_models(rows) -> list:
    """Recompute the model columns of stored rows (the simulations stay as they are)."""
    out = []
    for r in rows:
        if "declined" in r:
            out.append(r)
            continue
        try:
            pred, seconds, in_predict = model(r["router"], r["N"], r["B"], r["D"], r["load"])
        except ValueError as err:
            out.append({k: r[k] for k in ("router", "N", "B", "D", "load")}
                       | {"declined": str(err)})
            continue
        r = dict(r, method=pred.method, model_s=seconds, in_predict=in_predict)
        for name, p in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
            r[name] = dict(r[name], model=float(pred.quantile(p)))
        out.append(r)
        print(summarise([r]).splitlines()[1], flush=True)
    return out


def run_case(router, N, B, d, load, seed=7) -> dict:
    node = qm.Node(qm.ServiceTime.affine(BASE, PER_ITEM), max_batch_size=B,
                   max_queue_delay=d * S1)
    cluster = qm.Cluster(node, count=N, router=router)
    rate = load * cluster.capacity
    start = time.perf_counter()
    in_predict = True
    try:
        pred = qm.predict(cluster, rate=rate, fallback="raise")
    except NotImplementedError:
        in_predict = False
        choices = N if router == "least_outstanding" else 2
        if router == "least_outstanding" and d > 0:
            return {"router": router, "N": N, "B": B, "D": d, "load": load,
                    "declined": "no model of least outstanding with a delay below B = 8"}
        try:
            pred = dynamic_router(node, rate, N, choices, resolution=DYNAMIC_RESOLUTION)
        except ValueError as err:              # the count outgrew the model's truncation
            return {"router": router, "N": N, "B": B, "D": d, "load": load,
                    "declined": str(err)}
    model_s = time.perf_counter() - start
    # at least 8 replicas long enough for the start-up transient (the simulator's own rule)
    requests = int(min(MAX_REQUESTS, max(1_000_000, 20_000 * N, sim_run.MIN_REPLICAS * N
                                         * sim_run.arrivals_per_replica_node(cluster, rate))))
    start = time.perf_counter()
    sim = qm.simulate(cluster, rate=rate, requests=requests, seed=seed)
    sim_s = time.perf_counter() - start
    row = {"router": router, "N": N, "B": B, "D": d, "load": load, "in_predict": in_predict,
           "method": pred.method, "model_s": model_s, "sim_s": sim_s, "requests": requests}
    for name, p in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
        lo, hi = sim.ci(p, level=0.99)
        row[name] = {"model": float(pred.quantile(p)), "sim": float(sim.quantile(p)),
                     "lo": float(lo), "hi": float(hi)}
    return row


def _in_predict(r) -> bool:
    """Whether qmodel.predict answers this row (its current domain, not the one at run time)."""
    if r["router"] in ("random", "round_robin"):
        return True
    if r["router"] == "least_outstanding":
        return r["B"] >= ROUTERS["least_outstanding"].AS_ROUND_ROBIN_MIN_BATCH or r["B"] == 1
    # power of two over two nodes samples both: least outstanding
    return r["N"] == 2 or ROUTERS["power_of_d"].in_mean_field_domain(r["N"], r["load"], r["B"])


def summarise(rows) -> str:
    rows = [dict(r, in_predict=_in_predict(r)) for r in rows]
    lines = [f"{'router':<18}{'N':>4}{'B':>4}{'D':>4}{'load':>6}  {'p99 model':>9}{'sim':>9}"
             f"{'err':>8}  {'p95 err':>8}  in predict  model s"]
    for r in rows:
        if "declined" in r:
            lines.append(f"{r['router']:<18}{r['N']:>4}{r['B']:>4}{r['D']:>4g}{r['load']:>6}  "
                         f"model declined: {r['declined'][:60]}")
            continue
        e99 = r["p99"]["model"] / r["p99"]["sim"] - 1
        e95 = r["p95"]["model"] / r["p95"]["sim"] - 1
        lines.append(f"{r['router']:<18}{r['N']:>4}{r['B']:>4}{r['D']:>4g}{r['load']:>6}  "
                     f"{r['p99']['model'] * 1e3:>9.3f}{r['p99']['sim'] * 1e3:>9.3f}{e99:>+8.1%}  "
                     f"{e95:>+8.1%}  {'yes' if r['in_predict'] else 'no':>10}  "
                     f"{r['model_s']:>7.2f}")
    lines.append("")
    lines.append(f"{'family':<54}{'configs':>8}{'p99 median':>12}{'p99 worst':>11}"
                 f"{'p95 median':>12}{'p95 worst':>11}{'p50 median':>12}{'p50 worst':>11}")
    families = {}
    for r in rows:
        if "declined" in r:
            continue
        dyn = r["router"] in ("power_of_two", "least_outstanding")
        key = f"{r['router']}" + ("" if not dyn else (" (in predict)" if r["in_predict"]
                                                       else " (outside predict)"))
        if dyn and r["in_predict"] and (r["router"] == "least_outstanding" or r["N"] == 2):
            key += ", B = 1 balanced" if r["B"] == 1 else ", B >= 8 as round robin"
            if r["router"] == "power_of_two":
                key += " (N = 2: least outstanding)"
        families.setdefault(key, []).append(r)
    for key, sel in families.items():
        e99 = np.array([abs(r["p99"]["model"] / r["p99"]["sim"] - 1) for r in sel])
        e95 = np.array([abs(r["p95"]["model"] / r["p95"]["sim"] - 1) for r in sel])
        e50 = np.array([abs(r["p50"]["model"] / r["p50"]["sim"] - 1) for r in sel])
        lines.append(f"{key:<54}{len(sel):>8}{np.median(e99):>12.1%}{e99.max():>11.1%}"
                     f"{np.median(e95):>12.1%}{e95.max():>11.1%}"
                     f"{np.median(e50):>12.1%}{e50.max():>11.1%}")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", type=Path, default=Path("validation/results/router_accuracy.json"))
    ap.add_argument("--summary", type=Path, default=None)
    ap.add_argument("--refresh-models", action="store_true",
                    help="recompute the model columns of the stored rows, keep the simulations")
    ap.add_argument("--router", choices=ROUTERS, default=None,
                    help="with --refresh-models: only this router's rows")
    ap.add_argument("--nodes", type=int, default=None,
                    help="with --refresh-models: only the rows with this many nodes")
    args = ap.parse_args(argv)
    rows = json.loads(args.json.read_text()) if args.json.exists() else []
    if args.refresh_models:
        def chosen(r):
            return args.router in (None, r["router"]) and args.nodes in (None, r["N"])
        rows = [r for r in rows if not chosen(r)] + refresh_models([r for r in rows
                                                                    if chosen(r)])
        args.json.write_text(json.dumps(rows, indent=1))
    done = {(r["router"], r["N"], r["B"], r["D"], r["load"]) for r in rows}
    for case in grid(args.quick):
        if case in done:
            continue
        row = run_case(*case)
        rows.append(row)
        args.json.write_text(json.dumps(rows, indent=1))
        print(summarise([row]).splitlines()[1], flush=True)
    text = summarise(rows)
    print(text)
    if args.summary:
        args.summary.write_text(text + "\n")


if __name__ == "__main__":
    main()
