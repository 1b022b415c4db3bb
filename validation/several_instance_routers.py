"""Routers over batching nodes of several instances (issue 35).

Round robin gives each node every N-th arrival (Erlang-N gaps for Poisson input), solved by
the batch model of several instances under those renewal arrivals. Least outstanding and
power of two (:func:`qmodel.stationary.as_round_robin_over`) send each request to the
emptiest node they look at, so the node is solved as round robin over the nodes looked at
would feed it (scv 1/N for least outstanding, 1/2 for power of two). This grid measures the
three against the compiled simulator:

- least outstanding and round robin over N = 2 and 8 nodes, power of two over N = 4 and 16;
- 2, 4 and 8 instances; max_batch_size 2, 4, 16 and 64; max_queue_delay 0, 0.25, 1, 3 and
  7 S(1); loads 0.15, 0.3, 0.6, 0.85 and 0.95; deterministic and lognormal (cv 0.3) service;
  S(k) = a + b k with S(1) = 2 ms and b / S(1) = 0.005, 0.02, 0.1, 0.2 and 0.4 (the
  features' spacing matches qmodel.accuracy.NEIGHBOURHOOD's radii, so the grid's points cover
  the ranges between them).

Each configuration is simulated once (400,000 requests, seed 35, p99 CI about +-1-2%) and
its p50 / p95 / p99 errors stored; validation/measured_errors.py marks the families'
domains (``{router}_several_delay`` and ``{router}_several_no_delay``) from them.

Run: ``python validation/several_instance_routers.py --workers 2 [--write]`` (18,000
configurations, about 20 minutes on 2 cores; with ``--write`` the rows already stored are
kept, the same configuration, seed, requests and S(1) giving the same row, and only the
others run: after a change to the model, ``--fresh`` runs them all); ``--write`` stores
validation/results/several_instance_routers.json.gz.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import multiprocessing as mp
import os
import time
import warnings
from pathlib import Path

import numpy as np

OUT = Path(__file__).parent / "results" / "several_instance_routers.json.gz"
S1 = 2e-3
REQUESTS, SEED = 400_000, 35
ROUTERS = {"least_outstanding": (2, 8), "power_of_two": (4, 16), "round_robin": (2, 8)}


def grid():
    """The configurations as plain data."""
    for router, counts in ROUTERS.items():
        for N, c, B, d, load, cv, growth in itertools.product(
                counts, (2, 4, 8), (2, 4, 16, 64), (0.0, 0.25, 1.0, 3.0, 7.0),
                (0.15, 0.3, 0.6, 0.85, 0.95), (0.0, 0.3), (0.005, 0.02, 0.1, 0.2, 0.4)):
            yield dict(router=router, N=N, c=c, B=B, d=d, load=load, cv=cv, growth=growth)


def _key(spec) -> tuple:
    """A configuration's identity: its grid coordinates and how it was simulated (a row
    stored with other requests, seed or S(1) is run again)."""
    return (*(spec[k] for k in ("router", "N", "c", "B", "d", "load", "cv", "growth")),
            spec.get("requests", REQUESTS), spec.get("seed", SEED), spec.get("s1", S1))


def system_of(spec):
    from qmodel.campaign.summaries import several_instance_cluster
    cluster = several_instance_cluster({"s1": S1, **spec})
    return cluster, cluster.nodes[0]


def run_one(spec) -> dict:
    import qmodel as qm
    from qmodel.stationary import as_round_robin_over
    from qmodel.theory.measured import configuration_features, router_choices
    warnings.simplefilter("ignore")
    cluster, node = system_of(spec)
    rate = spec["load"] * cluster.capacity
    over = 2 if spec["router"] == "power_of_two" else spec["N"]
    row = dict(spec, requests=REQUESTS, seed=SEED, s1=S1)
    row["features"] = configuration_features(
        node, spec["load"], 1.0, nodes=spec["N"], choices=router_choices(cluster))
    started = time.perf_counter()
    try:
        with np.errstate(all="ignore"):
            model = as_round_robin_over(cluster, rate, 100, 1.0, over)
    except (NotImplementedError, ArithmeticError, ValueError) as err:
        row["declined"] = str(err)[:200]
        model = None
    row["model_seconds"] = time.perf_counter() - started
    sim = qm.simulate(cluster, rate=rate, requests=REQUESTS, seed=SEED, backend="cpu")
    row["simulated_mean_batch"] = sim.mean_batch_size
    for q in (0.5, 0.95, 0.99):
        key = f"p{round(q * 100)}"
        lo, hi = sim.ci(q)
        entry = {"simulated": sim.quantile(q), "ci95": [lo, hi]}
        if model is not None:
            entry["predicted"] = model.quantile(q)
            entry["error"] = entry["predicted"] / entry["simulated"] - 1
        row[key] = entry
    if model is not None:
        row["predicted_mean_batch"] = model.mean_batch_size
    return row


def _init():
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    warnings.simplefilter("ignore")


def summary(rows) -> str:
    lines = []
    for router in ROUTERS:
        got = [r for r in rows if r["router"] == router and "error" in r["p99"]]
        if not got:
            continue
        e = np.array([r["p99"]["error"] for r in got])
        lines.append(f"{router}: {len(got)} answered; p99 error median |e| "
                     f"{np.median(np.abs(e)):.1%}, {e.min():+.1%} .. {e.max():+.1%}; within "
                     f"10% {np.mean(np.abs(e) <= 0.1):.0%}, within 20% "
                     f"{np.mean(np.abs(e) <= 0.2):.0%}")
        for d in (0.0, 0.25, 1.0, 3.0, 7.0):
            sub = np.array([r["p99"]["error"] for r in got if r["d"] == d])
            if not sub.size:
                continue
            lines.append(f"  delay {d:g} S(1): {sub.size} rows, {sub.min():+.1%} .. "
                         f"{sub.max():+.1%}, median |e| {np.median(np.abs(sub)):.1%}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--limit", type=int, default=None, help="only the first LIMIT rows "
                    "(with --write, the other stored rows are kept)")
    ap.add_argument("--fresh", action="store_true",
                    help="run every configuration again (after the model changed)")
    args = ap.parse_args(argv)
    specs = list(grid())[:args.limit]
    started = time.perf_counter()
    stored = {}
    if args.write and OUT.exists() and not args.fresh:
        stored = {_key(r): r for r in json.loads(gzip.decompress(OUT.read_bytes()))}
    rows = [stored[_key(s)] for s in specs if _key(s) in stored]
    todo = [s for s in specs if _key(s) not in stored]
    print(f"{len(rows)} configurations stored, {len(todo)} to run", flush=True)
    with mp.get_context("spawn").Pool(args.workers, initializer=_init) as pool:
        for row in pool.imap(run_one, todo, chunksize=4):
            rows.append(row)
            if "error" in row["p99"]:
                print(f"{row['router'][:5]} N {row['N']:2} c {row['c']} B {row['B']:2} "
                      f"D {row['d']:g} load {row['load']:.2f} cv {row['cv']:g} growth "
                      f"{row['growth']:g}: p99 {row['p99']['simulated'] * 1e3:7.2f} ms, model "
                      f"{row['p99']['error']:+.1%}", flush=True)
            else:
                print(f"declined: {row['declined']}", flush=True)
    print(f"{len(rows)} configurations in {time.perf_counter() - started:.0f} s")
    print(summary(rows))
    if args.write:
        # the whole grid's stored rows, the new ones in their place: --limit runs a part,
        # it does not drop the rest
        every = list(grid())
        order = {_key(s): i for i, s in enumerate(every)}
        done = {_key(r): r for r in rows}
        rows = sorted({**{k: r for k, r in stored.items() if k in order}, **done}.values(),
                      key=lambda r: order[_key(r)])
        # one row a line, gzipped (18,000 rows: 16 MB of JSON, 3.4 MB stored)
        text = "[\n" + ",\n".join(json.dumps(r, separators=(",", ":")) for r in rows) + "\n]\n"
        OUT.write_bytes(gzip.compress(text.encode(), compresslevel=9, mtime=0))
        print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
