"""How accurate are the cluster models? Every router against the simulator (the issue-4 grid).

Grid: :func:`qmodel.campaign.grids.router_grid`: N in {2, 4, 8, 32, 128} nodes; routers
random, round_robin, power_of_two, least_outstanding; max_batch_size B in {1, 8, 32};
max_queue_delay D in {0, 1} x S(1) (B = 1 takes D = 0 only); load 0.3 to 0.95 of the cluster's
capacity. One instance per node, the issue-3 grid's deterministic service time S(k) = 1.8874 ms
+ 0.1438 ms x k. ``--quick``: N in {2, 8, 32, 128}, load in {0.3, 0.7, 0.9}.

Static routers go through ``qmodel.predict``. The dynamic routers' cavity model
(:func:`qmodel.theory.routing.dynamic_router`; least outstanding with D = 0 only) is run
directly on every configuration where ``predict`` declines it, so that the table shows where
the mean field holds and where it does not; the column ``in predict`` says which rows
``predict`` answers. Each configuration simulates 1 million requests or 20,000 per node, or
more where the simulator's minimum of replicas, each long enough for the start-up transient,
needs more (:func:`qmodel.campaign.budget.cluster_requests`; up to 64 million). Rows are
appended to the JSON file as they finish, and a rerun skips the configurations already there
(an interrupted campaign resumes).

Run from the repository root: ``python validation/router_accuracy.py [--quick] [--json FILE]
[--summary FILE] [--refresh-models [--router R] [--nodes N]]`` (hours; results in
validation/results/router_accuracy{,_full}.{json,txt}).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import qmodel as qm
from qmodel.campaign.budget import cluster_requests
from qmodel.campaign.grids import GRID_SERVICE, ROUTERS, router_grid
from qmodel.campaign.measure import QUANTILES
from qmodel.campaign.results import write_rows
from qmodel.campaign.summaries import router_class, router_error, router_groups
from qmodel.stationary import DYNAMIC_RESOLUTION
from qmodel.theory.routing import dynamic_router


def cluster_of(router, N, B, d) -> qm.Cluster:
    """N one-instance deterministic grid nodes behind ``router``."""
    return qm.Cluster(GRID_SERVICE.node(B, d), count=N, router=router)


def model(router, N, B, d, load):
    """(prediction, seconds, whether predict answered) for one configuration.

    Raises
    ------
    ValueError
        Where no model answers: least outstanding with a delay outside predict's domain, or a
        count that outgrew the cavity model's truncation.
    """
    cluster = cluster_of(router, N, B, d)
    rate = load * cluster.capacity
    start = time.perf_counter()
    try:
        pred, in_predict = qm.predict(cluster, rate=rate, fallback="raise"), True
    except NotImplementedError:
        if router == "least_outstanding" and d > 0:
            raise ValueError("no model of least outstanding with a delay below B = 8") from None
        choices = N if router == "least_outstanding" else 2
        pred, in_predict = dynamic_router(cluster.nodes[0], rate, N, choices,
                                          resolution=DYNAMIC_RESOLUTION), False
    return pred, time.perf_counter() - start, in_predict


def _declined(r, err) -> dict:
    return {k: r[k] for k in ("router", "N", "B", "D", "load")} | {"declined": str(err)}


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
            out.append(_declined(r, err))
            continue
        r = dict(r, method=pred.method, model_s=seconds, in_predict=in_predict)
        for name, p in QUANTILES:
            r[name] = dict(r[name], model=float(pred.quantile(p)))
        out.append(r)
        print(summarise([r]).splitlines()[1], flush=True)
    return out


def run_case(router, N, B, d, load, seed=7) -> dict:
    """Model and simulate one (router, N, B, D/S(1), load) of the grid."""
    case = {"router": router, "N": N, "B": B, "D": d, "load": load}
    try:
        pred, model_s, in_predict = model(router, N, B, d, load)
    except ValueError as err:
        return _declined(case, err)
    cluster = cluster_of(router, N, B, d)
    rate = load * cluster.capacity
    requests = cluster_requests(cluster, rate)
    start = time.perf_counter()
    sim = qm.simulate(cluster, rate=rate, requests=requests, seed=seed)
    sim_s = time.perf_counter() - start
    row = {**case, "in_predict": in_predict, "method": pred.method, "model_s": model_s,
           "sim_s": sim_s, "requests": requests}
    for name, p in QUANTILES:
        lo, hi = sim.ci(p, level=0.99)
        row[name] = {"model": float(pred.quantile(p)), "sim": float(sim.quantile(p)),
                     "lo": float(lo), "hi": float(hi)}
    return row


def summarise(rows) -> str:
    lines = [f"{'router':<18}{'N':>4}{'B':>4}{'D':>4}{'load':>6}  {'p99 model':>9}{'sim':>9}"
             f"{'err':>8}  {'p95 err':>8}  in predict  model s"]
    for r in rows:
        if "declined" in r:
            lines.append(f"{r['router']:<18}{r['N']:>4}{r['B']:>4}{r['D']:>4g}{r['load']:>6}  "
                         f"model declined: {r['declined'][:60]}")
            continue
        in_predict = router_class(r).in_predict
        lines.append(f"{r['router']:<18}{r['N']:>4}{r['B']:>4}{r['D']:>4g}{r['load']:>6}  "
                     f"{r['p99']['model'] * 1e3:>9.3f}{r['p99']['sim'] * 1e3:>9.3f}"
                     f"{router_error(r, 'p99'):>+8.1%}  {router_error(r, 'p95'):>+8.1%}  "
                     f"{'yes' if in_predict else 'no':>10}  {r['model_s']:>7.2f}")
    lines.append("")
    lines.append(f"{'family':<54}{'configs':>8}{'p99 median':>12}{'p99 worst':>11}"
                 f"{'p95 median':>12}{'p95 worst':>11}{'p50 median':>12}{'p50 worst':>11}")
    for g in router_groups(rows):
        cells = "".join(f"{g.figures[q].median:>12.1%}{g.figures[q].worst:>11.1%}"
                        for q in ("p99", "p95", "p50"))
        lines.append(f"{g.name:<54}{len(g.rows):>8}{cells}")
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
        write_rows(args.json, rows)
    done = {(r["router"], r["N"], r["B"], r["D"], r["load"]) for r in rows}
    for case in router_grid(args.quick):
        if case in done:
            continue
        row = run_case(*case)
        rows.append(row)
        write_rows(args.json, rows)
        print(summarise([row]).splitlines()[1], flush=True)
    text = summarise(rows)
    print(text)
    if args.summary:
        args.summary.write_text(text + "\n")


if __name__ == "__main__":
    main()
