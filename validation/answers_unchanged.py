"""Do qmodel's answers stay the same across a refactor? Record them, then compare.

``--record FILE`` stores, for the systems below, predict's p50/p95/p99 (and mean, mean batch
size, utilization, exactness) and a fingerprint of seeded simulations (SHA-256 of the sorted
float32 sojourn times, plus the metrics). ``--check FILE`` recomputes them and compares:
predictions within ``--rtol`` (1e-9) relative, simulations bit-identical.

Systems:

- the 420-configuration accuracy grid (validation/predict_accuracy.py): S(k) = 1.8874 ms +
  0.1438 ms x k, B in {1, 4, 8, 32}, D in {0, 0.5, 2} x S(1), c in {1, 2, 4}, seven loads,
  deterministic and lognormal cv 0.3;
- the two 108-node holdouts (validation/multi_instance_holdout.py and
  single_instance_holdout.py): S(k) = 4 ms + 0.4 ms x k;
- the router grid's quick half (validation/router_accuracy.py), predict with fallback="raise"
  (a declined configuration records its exception type);
- a few other shapes (finite queue, renewal arrivals, gamma, exponential, table, empirical);
- seeded simulations of 16 systems covering both engines and every router, on NumPy, and on
  CuPy where ``--backend cupy`` asks for it (its own section of the file).

The node definitions are written out here on purpose: this script must not move when the code
it checks does.

Run: ``.venv/bin/python validation/answers_unchanged.py --check
validation/results/answers_baseline.json`` (about 2 minutes). After a change that moves some
answers on purpose, ``--update`` that file replaces those answers only (each printed).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

import qmodel as qm

LEVELS = (0.5, 0.95, 0.99)


def grid_systems():
    base, per_item = 1.8874e-3, 0.1438e-3
    s1 = base + per_item
    for jitter in ("deterministic", "lognormal"):
        j = "deterministic" if jitter == "deterministic" else ("lognormal", 0.3)
        for B in (1, 4, 8, 32):
            for d in ((0.0,) if B == 1 else (0.0, 0.5, 2.0)):
                for c in (1, 2, 4):
                    node = qm.Node(qm.ServiceTime.affine(base, per_item, jitter=j),
                                   max_batch_size=B, max_queue_delay=d * s1, instances=c)
                    for load in (0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95):
                        yield f"grid {jitter} B={B} D={d} c={c} load={load}", node, load


def holdout_systems():
    base, per_item = 4e-3, 0.4e-3
    for jit in ("deterministic", "lognormal"):
        service = qm.ServiceTime.affine(base, per_item, jitter=(
            "deterministic" if jit == "deterministic" else ("lognormal", 0.2)))
        s1 = float(service.mean(1))
        for B, c, d, load in itertools.product((2, 16, 64), (2, 3, 8), (0.0, 1.0),
                                               (0.5, 0.8, 0.95)):
            node = qm.Node(service, max_batch_size=B, max_queue_delay=d * s1, instances=c)
            yield f"multi {jit} B={B} c={c} D={d} load={load}", node, load
        for B, d, pref, load in itertools.product((2, 16, 64), (0.0, 0.5, 2.0),
                                                  ("B", "B/2,B"), (0.5, 0.8, 0.95)):
            sizes = (B,) if pref == "B" else (B // 2, B)
            node = qm.Node(service, max_batch_size=B, max_queue_delay=d * s1,
                           preferred_batch_sizes=sizes)
            yield f"single {jit} B={B} D={d} pref={pref} load={load}", node, load


def router_systems():
    base, per_item = 1.8874e-3, 0.1438e-3
    s1 = base + per_item
    for router in ("power_of_two", "least_outstanding", "round_robin", "random"):
        for N in (2, 8, 32, 128):
            for B in (1, 8, 32):
                for d in ((0.0,) if B == 1 else (0.0, 1.0)):
                    node = qm.Node(qm.ServiceTime.affine(base, per_item), max_batch_size=B,
                                   max_queue_delay=d * s1)
                    for load in (0.3, 0.7, 0.9):
                        yield (f"router {router} N={N} B={B} D={d} load={load}",
                               qm.Cluster(node, count=N, router=router), load)


def other_systems():
    aff = qm.ServiceTime.affine
    yield "finite queue", qm.Node(aff(2e-3, 0.3e-3), max_batch_size=8, max_queue_delay=1e-3,
                                  max_queue_size=12), 0.8
    yield "gamma", qm.Node(aff(2e-3, 0.3e-3, jitter=("gamma", 0.5)), max_batch_size=8), 0.7
    yield "exponential B=1 c=3", qm.Node(aff(1e-3, jitter="exponential"), instances=3), 0.8
    yield "deterministic B=1 c=3", qm.Node(aff(1e-3), instances=3), 0.8
    yield "lognormal B=1", qm.Node(aff(1e-3, jitter=("lognormal", 0.8))), 0.8
    yield "gamma B=1 c=2", qm.Node(aff(1e-3, jitter=("gamma", 1.5)), instances=2), 0.7
    yield "table", qm.Node(qm.ServiceTime.table({1: 3.1e-3, 2: 3.6e-3, 4: 4.4e-3, 8: 6.7e-3}),
                           max_batch_size=8, max_queue_delay=2e-3, preferred_batch_sizes=(4, 8),
                           instances=2), 0.6
    rng = np.random.default_rng(3)
    emp = qm.ServiceTime.empirical({k: 1e-3 * (1 + 0.2 * k) * rng.gamma(20, 1 / 20, 200)
                                    for k in (1, 2, 4, 8)})
    yield "empirical", qm.Node(emp, max_batch_size=8, max_queue_delay=0.5e-3), 0.7
    yield "weighted", qm.Cluster([qm.Node(aff(2e-3, 0.2e-3), max_batch_size=4)] * 2,
                                 router=qm.Router("random", weights=[3, 1])), 0.5


def renewal_systems():
    aff = qm.ServiceTime.affine
    for scv in (0.5, 2.0):
        yield (f"renewal scv={scv} B=8", qm.Node(aff(2e-3, 0.3e-3), max_batch_size=8,
                                                 max_queue_delay=1e-3), 0.7, scv)
        yield (f"renewal scv={scv} B=1", qm.Node(aff(2e-3, jitter=("gamma", 0.5))), 0.7, scv)
        yield (f"renewal scv={scv} B=1 c=2",
               qm.Node(aff(2e-3, jitter=("lognormal", 0.5)), instances=2), 0.7, scv)


def predicted(system, load, scv=None) -> dict:
    cap = system.capacity
    kwargs = ({"rate": load * cap} if scv is None
              else {"arrivals": qm.Renewal(load * cap, scv)})
    try:
        r = qm.predict(system, fallback="raise", **kwargs)
    except NotImplementedError:
        return {"declined": "NotImplementedError"}
    return {"quantiles": [float(r.quantile(p)) for p in LEVELS], "mean": float(r.mean),
            "mean_batch_size": r.mean_batch_size, "utilization": r.utilization,
            "exactness": r.accuracy.exactness}


def sim_systems():
    aff = qm.ServiceTime.affine
    node = qm.Node(aff(2e-3, 0.3e-3, jitter=("lognormal", 0.3)), max_batch_size=8,
                   max_queue_delay=1e-3, preferred_batch_sizes=(4, 8), instances=2)
    plain = qm.Node(aff(1e-3, 0.2e-3), max_batch_size=4)
    rng = np.random.default_rng(11)
    trace = np.cumsum(rng.exponential(1 / 500.0, 300_000))
    yield "node", node, {"rate": 0.7 * node.capacity}
    yield "node events", node, {"rate": 0.7 * node.capacity, "engine": "events"}
    yield "mm1", qm.Node(aff(1e-3, jitter="exponential")), {"rate": 800.0}
    yield "finite", qm.Node(aff(2e-3, 0.3e-3), max_batch_size=8, max_queue_delay=1e-3,
                            max_queue_size=12), {"rate": 0.9 * 8 / 4.4e-3}
    yield "renewal", plain, {"arrivals": qm.Renewal(0.6 * plain.capacity, 0.5)}
    yield "trace", plain, {"arrivals": qm.Trace(trace)}
    yield "gamma", qm.Node(aff(2e-3, 0.3e-3, jitter=("gamma", 0.5)), max_batch_size=8,
                           instances=3), {"rate": 0.8 * 3 * 8 / 4.4e-3}
    yield "table", qm.Node(qm.ServiceTime.table({1: 3.1e-3, 2: 3.6e-3, 4: 4.4e-3, 8: 6.7e-3}),
                           max_batch_size=8), {"rate": 900.0}
    emp = qm.ServiceTime.empirical({k: 1e-3 * (1 + 0.2 * k) * rng.gamma(20, 1 / 20, 200)
                                    for k in (1, 2, 4, 8)})
    yield "empirical", qm.Node(emp, max_batch_size=8), {"rate": 2000.0}
    for router in ("random", "round_robin", "least_outstanding", "power_of_two"):
        cluster = qm.Cluster(plain, count=4, router=router)
        yield f"cluster {router}", cluster, {"rate": 0.8 * cluster.capacity}
    pod = qm.Cluster(plain, count=6, router=qm.Router("power_of_d", choices=3))
    yield "cluster power_of_d", pod, {"rate": 0.8 * pod.capacity}
    mixed = qm.Cluster([plain, node], router=qm.Router("random", weights=[1, 3]))
    yield "cluster weighted", mixed, {"rate": 0.5 * mixed.capacity}
    yield "cluster lo finite", qm.Cluster(qm.Node(aff(1e-3, 0.2e-3), max_batch_size=4,
                                                  max_queue_size=6), count=3,
                                          router="least_outstanding"), {"rate": 2500.0}


def fingerprint(system, kwargs, backend) -> dict:
    r = qm.simulate(system, requests=300_000, seed=17, backend=backend, **kwargs)
    return {"sha256": hashlib.sha256(np.ascontiguousarray(r.samples).tobytes()).hexdigest(),
            "requests": int(r.requests), "throughput": r.throughput,
            "utilization": r.utilization, "rejection_fraction": r.rejection_fraction,
            "batch_size_distribution": {str(k): v for k, v in
                                        r.batch_size_distribution.items()}}


def collect(backend: str, sims_only: bool) -> dict:
    out: dict = {"predict": {}, "simulate": {}}
    start = time.perf_counter()
    if not sims_only:
        for gen in (grid_systems, holdout_systems, router_systems, other_systems):
            for name, system, load in gen():
                out["predict"][name] = predicted(system, load)
        for name, system, load, scv in renewal_systems():
            out["predict"][name] = predicted(system, load, scv)
        print(f"{len(out['predict'])} predictions in {time.perf_counter() - start:.0f} s",
              flush=True)
    for name, system, kwargs in sim_systems():
        out["simulate"][name] = fingerprint(system, kwargs, backend)
    print(f"{len(out['simulate'])} simulations ({backend}) done at "
          f"{time.perf_counter() - start:.0f} s", flush=True)
    return out


def _close(a, b, rtol) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isfinite(a) and abs(a - b) <= rtol * max(abs(a), abs(b)))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y, rtol) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k], rtol) for k in a)
    return a == b


def compare(before: dict, now: dict, rtol: float) -> list[str]:
    bad = []
    for section, tol in (("predict", rtol), ("simulate", 0.0)):
        for name, old in before.get(section, {}).items():
            new = now[section].get(name)
            if new is None or not _close(old, new, tol):
                bad.append(f"{section} {name}: before {old} now {new}")
    return bad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    act = ap.add_mutually_exclusive_group(required=True)
    act.add_argument("--record", type=Path, help="write the answers to this JSON file")
    act.add_argument("--check", type=Path, help="compare with the answers in this JSON file")
    act.add_argument("--update", type=Path,
                     help="in this JSON file, replace only the predictions that changed by "
                          "more than --rtol (after a model change: the others keep their "
                          "recorded last bits); prints each one replaced")
    ap.add_argument("--backend", choices=("numpy", "cupy"), default="numpy")
    ap.add_argument("--sims-only", action="store_true", help="skip the predictions")
    ap.add_argument("--rtol", type=float, default=1e-9)
    args = ap.parse_args(argv)
    key = "numpy" if args.backend == "numpy" else "cupy"
    now = collect(args.backend, args.sims_only)
    if args.update:
        stored = json.loads(args.update.read_text())
        recorded = stored[key].setdefault("predict", {})
        for name, answer in now["predict"].items():
            if name not in recorded or not _close(recorded[name], answer, args.rtol):
                print(f"UPDATED predict {name}: {recorded.get(name)} -> {answer}")
                recorded[name] = answer
        args.update.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n")
        return 0
    if args.record:
        stored = json.loads(args.record.read_text()) if args.record.exists() else {}
        if args.sims_only:
            stored.setdefault(key, {})["simulate"] = now["simulate"]
        else:
            stored[key] = now
        args.record.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n")
        print(f"recorded in {args.record}")
        return 0
    before = json.loads(args.check.read_text()).get(key)
    if before is None:
        print(f"{args.check} holds no {key} answers")
        return 1
    if args.sims_only:
        before = {"simulate": before["simulate"]}
    bad = compare(before, now, args.rtol)
    total = sum(len(before.get(s, {})) for s in ("predict", "simulate"))
    for line in bad:
        print("CHANGED", line)
    print(f"{total - len(bad)} of {total} answers unchanged "
          f"(predictions within {args.rtol:g} relative, simulations bit-identical)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
