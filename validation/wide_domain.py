"""Predict against simulate over random configurations far wider than the grids: where do the
approximations hold?

The measured families (qmodel/theory/measured_errors.json) state their errors on the
configurations the grids ran, and predict answers with a model only inside that measured
domain. This campaign draws configurations at random (seeded) over wide ranges and measures
the models there, so the domains can grow where the errors stay small and stop where they
do not:

- one node: S(k) = a + b k with a 0.2-20 ms and b / a 0.003-1 (or 0), deterministic,
  exponential, gamma or lognormal jitter (cv 0.1-1), max_batch_size 2-128, 1-8 instances,
  max_queue_delay 0 or 0.05-4 S(1), some with a preferred size below B, loads 0.05-0.97;
- clusters of 2-64 such one-instance nodes under round robin, least outstanding and power
  of two.

Each configuration is predicted with ``extrapolate=True, fallback="raise"`` (the model's
answer, inside its domain or not; a declined one records why) and simulated with
:func:`qmodel.campaign.budget.requests_for` requests (between --least and --most), seeded.
The row keeps the configuration's features (:func:`qmodel.theory.measured.configuration_features`),
the families the answer quotes, and the predicted and simulated p50/p95/p99 with the
simulation's 99% confidence intervals.

With ``--ordinary`` the configurations are drawn instead from the distribution of
validation/model_coverage.py (the deployments issue 35 tried as a new user would: B 1-64,
1-8 instances, delays 0-5 ms, lognormal cv 0-0.5, 2-16 nodes behind each router), with
another seed than that script's check, so the domains grow where users deploy and the
coverage script stays a held-out measurement. A random router over identical nodes is an
exact split of Poisson traffic into independent nodes, so such a draw is run as one node.

Run: ``python validation/wide_domain.py --configs 2000 --workers 16 --deadline 540`` (a
16-core machine: about 9 minutes); rows are written as they finish, so a run cut by the
deadline keeps what it measured. Results: validation/results/wide_domain.json and .txt;
``python validation/wide_domain.py --ordinary --configs 2400 --seed 3501 --workers 2 --out
validation/results/ordinary_domain`` for the ordinary draws (12 minutes on 2 cores), and
the same with ``--seed 3502 --out validation/results/ordinary_domain_2`` for 2,400 more.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import resource
import signal
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np

import qmodel as qm
from qmodel.campaign.budget import cluster_requests, requests_for
from qmodel.theory.measured import configuration_features, router_choices

sys.path.insert(0, str(Path(__file__).parent))
from model_coverage import draw as coverage_draw  # noqa: E402  (a sibling script)

ROUTERS = ("round_robin", "least_outstanding", "power_of_two")
JITTERS = ("deterministic", "exponential", "gamma", "lognormal")
LEVELS = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))


def draw(rng: np.random.Generator, index: int) -> dict:
    """One random configuration as plain data (JSON-able, rebuilt by :func:`system_of`)."""
    base = float(np.exp(rng.uniform(np.log(0.2e-3), np.log(20e-3))))
    ratio = 0.0 if rng.random() < 0.1 else float(np.exp(rng.uniform(np.log(0.003), 0.0)))
    jitter = JITTERS[rng.integers(len(JITTERS))]
    cv = {"deterministic": 0.0, "exponential": 1.0}.get(jitter, float(rng.uniform(0.1, 1.0)))
    B = int(np.round(np.exp(rng.uniform(np.log(2), np.log(128)))))
    d = 0.0 if rng.random() < 0.4 else float(np.exp(rng.uniform(np.log(0.05), np.log(4.0))))
    cluster = rng.random() < 0.3
    spec = {"index": index, "base": base, "per_item": base * ratio, "jitter": jitter, "cv": cv,
            "B": B, "d": d, "c": 1 if cluster else int(rng.integers(1, 9)),
            "preferred": [], "load": float(rng.uniform(0.05, 0.97))}
    if not cluster and B >= 4 and rng.random() < 0.2:
        spec["preferred"] = [int(rng.integers(1, B)), B]
    if cluster:
        spec["router"] = ROUTERS[rng.integers(len(ROUTERS))]
        spec["N"] = int(np.round(np.exp(rng.uniform(np.log(2), np.log(64)))))
    return spec


def ordinary(rng: np.random.Generator, index: int) -> dict:
    """One configuration of validation/model_coverage.py's distribution, in this script's
    fields (a random router's draw as the one node it splits Poisson traffic into)."""
    spec = coverage_draw(rng, index)
    per_item = spec["growth"] * spec["s1"]
    row = {"index": index, "base": spec["s1"] - per_item, "per_item": per_item,
           "jitter": "deterministic" if spec["cv"] == 0 else "lognormal", "cv": spec["cv"],
           "B": spec["B"], "d": spec["delay"] / spec["s1"], "c": spec["c"],
           "preferred": spec["preferred"], "load": spec["load"]}
    if spec["router"] not in (None, "random"):
        row["router"], row["N"] = spec["router"], spec["N"]
    return row


def system_of(spec: dict):
    j = spec["jitter"]
    jitter = j if j in ("deterministic", "exponential") else (j, spec["cv"])
    service = qm.ServiceTime.affine(spec["base"], spec["per_item"], jitter=jitter)
    node = qm.Node(service, max_batch_size=spec["B"],
                   max_queue_delay=spec["d"] * float(service.mean(1)),
                   preferred_batch_sizes=tuple(spec["preferred"]), instances=spec["c"])
    if "router" in spec:
        return qm.Cluster(node, count=spec["N"], router=spec["router"]), node
    return node, node


class _TimeUp(Exception):
    pass


def _alarm(signum, frame):
    raise _TimeUp()


def _init_worker(memory_gib: float) -> None:
    limit = int(memory_gib * 2 ** 30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    signal.signal(signal.SIGALRM, _alarm)
    warnings.simplefilter("ignore")


def run_one(job) -> dict:
    spec, seed, least, most, timeout = job
    row = dict(spec)
    system, node = system_of(spec)
    rate = spec["load"] * system.capacity
    N = spec.get("N", 1)
    # a power-of-two cluster's d is a feature its family's domain bounds: without it no
    # measured point of such a row could ever be a neighbour
    row["features"] = configuration_features(node, spec["load"], 1.0, nodes=N,
                                             choices=router_choices(system))

    def work(row):
        started = time.perf_counter()
        pred = qm.predict(system, rate=rate, fallback="raise", extrapolate=True)
        row["predict_seconds"] = time.perf_counter() - started
        row["method"] = pred.method
        row["exactness"] = pred.accuracy.exactness
        row["families"] = [m.family for m in pred.accuracy.measured]
        row["outside"] = pred.accuracy.approximation("outside_measured_domain") is not None
        row["lattice_step"] = pred.accuracy.lattice_step
        if isinstance(system, qm.Node):
            requests = requests_for(system, rate, least, most)
        else:
            requests = min(max(cluster_requests(system, rate), least), most)
        simulated_levels(row, system, rate, pred, requests, seed)

    return guarded(row, timeout, work)


def guarded(row: dict, timeout: int, work) -> dict:
    """``row`` after ``work(row)`` under the worker's alarm of ``timeout`` seconds: a decline,
    the alarm, a memory error or any other exception is recorded in it, not raised."""
    signal.alarm(timeout)
    try:
        work(row)
    except NotImplementedError as err:
        row["declined"] = str(err)
    except _TimeUp:
        row["timeout"] = timeout
    except MemoryError:
        row["memory_error"] = True
    except Exception as err:                       # recorded, not hidden: a defect to fix
        row["exception"] = f"{type(err).__name__}: {err}"
    finally:
        signal.alarm(0)
    return row


def simulated_levels(row: dict, system, rate: float, pred, requests: int, seed: int):
    """Simulate ``system`` (``requests``, ``seed``) and record in ``row``, for each of LEVELS,
    ``pred``'s quantile against the simulated one with its 99% CI; the simulation returned."""
    predicted = {name: float(pred.quantile(p)) for name, p in LEVELS}
    started = time.perf_counter()
    sim = qm.simulate(system, rate=rate, requests=requests, seed=seed)
    row["simulate_seconds"] = time.perf_counter() - started
    row["requests"] = requests
    for name, p in LEVELS:
        lo, hi = sim.ci(p, level=0.99)
        s = float(sim.quantile(p))
        row[name] = {"predicted": predicted[name], "simulated": s, "ci99": [lo, hi],
                     "error": predicted[name] / s - 1}
    return sim


def run_and_store(task, jobs, workers: int, out: Path, command: str, summary) -> list:
    """Run ``task`` over ``jobs`` on ``workers`` processes (each with _init_worker's memory
    limit and timeout), store the rows sorted by index as ``out``.json and ``summary(rows)``
    under ``command`` as ``out``.txt; return the rows."""
    start = time.perf_counter()
    with mp.get_context("fork").Pool(workers, _init_worker, (6.0,),
                                     maxtasksperchild=20) as pool:
        rows = sorted(pool.map(task, jobs, chunksize=1), key=lambda r: r["index"])
    out.with_suffix(".json").write_text(json.dumps(rows, indent=0) + "\n")
    text = summary(rows)
    out.with_suffix(".txt").write_text(
        f"{command}: {len(rows)} rows in {time.perf_counter() - start:.0f} s on {workers} "
        f"workers\n\n{text}\n")
    print(text)
    return rows


def summarise(rows) -> str:
    answered = [r for r in rows if "p99" in r]
    lines = [f"{len(rows)} configurations: {len(answered)} answered by a model and simulated, "
             f"{sum('declined' in r for r in rows)} declined, "
             f"{sum('timeout' in r for r in rows)} timed out, "
             f"{sum('memory_error' in r for r in rows)} out of memory, "
             f"{sum('exception' in r for r in rows)} exceptions", ""]
    by_family = defaultdict(list)
    for r in answered:
        by_family[",".join(r["families"]) or r["exactness"]].append(r)
    lines.append(f"{'family':58} {'n':>4} {'in dom':>6}  p99 error: {'median|e|':>9} "
                 f"{'low':>7} {'high':>7} {'>25%':>5}")
    for fam, group in sorted(by_family.items()):
        e = np.array([r["p99"]["error"] for r in group])
        inside = sum(not r["outside"] for r in group)
        lines.append(f"{fam[:58]:58} {len(group):4} {inside:6}  {np.median(abs(e)):9.1%} "
                     f"{e.min():+7.1%} {e.max():+7.1%} {np.sum(abs(e) > 0.25):5}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=2021)
    ap.add_argument("--workers", type=int, default=mp.cpu_count())
    ap.add_argument("--least", type=int, default=400_000)
    ap.add_argument("--most", type=int, default=4_000_000)
    ap.add_argument("--timeout", type=int, default=120, help="seconds per configuration")
    ap.add_argument("--memory-gib", type=float, default=6.0, help="per worker")
    ap.add_argument("--deadline", type=float, default=math.inf,
                    help="stop handing out configurations after this many seconds")
    ap.add_argument("--out", type=Path, default=Path("validation/results/wide_domain"))
    ap.add_argument("--ordinary", action="store_true",
                    help="draw from validation/model_coverage.py's distribution")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    specs = [(ordinary if args.ordinary else draw)(rng, i) for i in range(args.configs)]
    jobs = [(s, args.seed + s["index"], args.least, args.most, args.timeout) for s in specs]
    start, rows = time.perf_counter(), []
    with mp.get_context("fork").Pool(args.workers, _init_worker, (args.memory_gib,),
                                     maxtasksperchild=20) as pool:
        pending = [pool.apply_async(run_one, (job,)) for job in jobs]
        for i, result in enumerate(pending):
            left = args.deadline - (time.perf_counter() - start)
            if left <= 0:
                break
            try:
                rows.append(result.get(timeout=min(left + args.timeout, 1e6)))
            except mp.TimeoutError:
                break
            if len(rows) % 50 == 0:
                print(f"{len(rows)} done, {time.perf_counter() - start:.0f} s", flush=True)
        pool.terminate()
    rows.sort(key=lambda r: r["index"])
    args.out.with_suffix(".json").write_text(json.dumps(rows, indent=0) + "\n")
    text = summarise(rows)
    args.out.with_suffix(".txt").write_text(
        f"python validation/wide_domain.py{' --ordinary' * args.ordinary} "
        f"--configs {args.configs} --seed {args.seed} "
        f"--least {args.least} --most {args.most}: {len(rows)} rows in "
        f"{time.perf_counter() - start:.0f} s on {args.workers} workers\n\n{text}\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
