"""Predict against simulate for ensembles: the error of the stage-by-stage model.

Configurations are drawn at random (seeded) over the space issue 23 names:

- shapes: chains of 2, 3 and 4 stages; a fan-out from one stage into two that join in a
  fourth (diamond); two entry stages joined by a third (the two-tower case study's shape);
  two stages side by side, the request done when both are (fan-in at the exit);
- each stage: S(k) = a + b k with a 0.2-2 ms and b / a 0-0.5, deterministic or lognormal
  jitter (cv 0.2-0.8; a configuration is "jittery" when any stage is), max_batch_size from
  1, 2, 4, 8, 16, 32, 1, 2, 4 or 8 instances, max_queue_delay 0 or 0.25-2 S(1), a quarter
  of the stages of B >= 4 with preferred sizes from 1, 2, 4, 8 below B;
- the rate puts the bottleneck stage at a load of 0.1-0.9 of its capacity (B / S(B) per
  instance: a stage with preferred size 1 runs small batches and is busier than that says);
  the arrivals are Poisson (half the configurations) or renewal with scv 0.25, 0.5 (a pod
  behind round robin) or 2.

Each is predicted with ``extrapolate=True, fallback="raise"`` (the model's own answer) and
simulated with 2,000,000 requests (seeded; longer where the simulator asks for more, up to
8,000,000). A row keeps the shape, the features of
:func:`qmodel.theory.pipeline.ensemble_features` (with the stages' predicted utilization
where the model answered), and predicted and simulated p50/p95/p99
with the simulation's 99% confidence intervals.

Run: ``python validation/ensemble_accuracy.py --configs 250 --workers 2`` (about 25 minutes
on the 2-core machine). Results: validation/results/ensemble_accuracy.json and .txt; the
ensemble family's measured error (qmodel/theory/measured_errors.json) is computed from them
by validation/measured_errors.py.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

import qmodel as qm
from qmodel.sim.ensemble import arrivals_per_replica
from qmodel.sim.replicas import MIN_REPLICAS
from qmodel.theory.pipeline import ensemble_features

SHAPES = {
    "chain2": (2, [(0, 1)]),
    "chain3": (3, [(0, 1), (1, 2)]),
    "chain4": (4, [(0, 1), (1, 2), (2, 3)]),
    "diamond": (4, [(0, 1), (0, 2), (1, 3), (2, 3)]),
    "two_towers": (3, [(0, 2), (1, 2)]),
    "side_by_side": (2, []),
}
FAN_IN = {"diamond", "two_towers", "side_by_side"}
LEVELS = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
REQUESTS, MOST_REQUESTS = 2_000_000, 8_000_000
RESULTS = Path(__file__).resolve().parent / "results"


# The model was developed on the draws of seed 2026; the committed table is of seed 2027,
# configurations it had not seen.
SEED = 2027


def draw(index: int, seed: int = SEED):
    """Configuration ``index``: (shape, Ensemble, rate), the same on every run."""
    rng = np.random.default_rng([seed, index])
    shape = list(SHAPES)[index % len(SHAPES)]
    count, edges = SHAPES[shape]
    jittery = bool(index // len(SHAPES) % 2)
    stages = {}
    for j in range(count):
        a = float(rng.uniform(0.2e-3, 2e-3))
        b = float(a * rng.choice([0.0, rng.uniform(0.02, 0.5)]))
        jitter = (("lognormal", round(float(rng.uniform(0.2, 0.8)), 2))
                  if jittery and rng.random() < 0.7 else "deterministic")
        B = int(rng.choice([1, 2, 4, 8, 16, 32]))
        delay = 0.0 if B == 1 or rng.random() < 0.4 else float(a * rng.uniform(0.25, 2.0))
        preferred = ()
        if B >= 4 and rng.random() < 0.25:       # the case study's kind: 1, 2, 4 below B
            preferred = tuple(k for k in (1, 2, 4, 8) if k < B)[:int(rng.integers(1, 4))]
        stages[f"s{j}"] = qm.Node(qm.ServiceTime.affine(a, b, jitter=jitter), max_batch_size=B,
                                  max_queue_delay=delay, preferred_batch_sizes=preferred,
                                  instances=int(rng.choice([1, 2, 4, 8])))
    ensemble = qm.Ensemble(stages, [(f"s{u}", f"s{v}") for u, v in edges])
    rate = float(rng.uniform(0.1, 0.9)) * ensemble.capacity
    # the arrivals at the ensemble: Poisson mostly; smoother (a pod behind round robin over
    # 2-4 pods) or burstier renewal streams
    scv = float(rng.choice([1.0, 1.0, 1.0, 0.25, 0.5, 2.0]))
    arrivals = qm.Poisson(rate) if scv == 1.0 else qm.Renewal(rate, scv)
    return shape, ensemble, arrivals


def measure(index: int, seed: int = SEED) -> dict:
    shape, ensemble, arrivals = draw(index, seed)
    row = {"index": index, "seed": seed, "shape": shape, "describe": ensemble.describe(),
           "rate": arrivals.rate, "arrival_scv": arrivals.scv, "fan_in": shape in FAN_IN,
           "jittery": any(n.service.scv(n.max_batch_size) > 0
                          for n in ensemble.stages.values()),
           "features": ensemble_features(ensemble, arrivals)}
    t0 = time.perf_counter()
    try:
        pred = qm.predict(ensemble, arrivals=arrivals, extrapolate=True, fallback="raise")
    except NotImplementedError as err:
        row["declined"] = str(err)
        return row
    row["predict_seconds"] = time.perf_counter() - t0
    row["features"] = ensemble_features(ensemble, arrivals, pred.stages)
    requests = int(min(MOST_REQUESTS, max(REQUESTS, 1.2 * MIN_REPLICAS
                                          * arrivals_per_replica(ensemble, arrivals))))
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sim = qm.simulate(ensemble, arrivals=arrivals, requests=requests, seed=index)
    row["simulate_seconds"] = time.perf_counter() - t0
    row["requests"] = requests
    for name, p in LEVELS:
        lo, hi = sim.ci(p, 0.99)
        predicted, simulated = float(pred.quantile(p)), float(sim.quantile(p))
        row[name] = {"predicted": predicted, "simulated": simulated, "ci": [lo, hi],
                     "error": predicted / simulated - 1.0}
    return row


def family(row) -> str:
    return (f"{'fan-in' if row['fan_in'] else 'chain'}, "
            f"{'jittery' if row['jittery'] else 'deterministic'}")


def summary(rows) -> str:
    """The table: per family, configurations answered, median and worst p95/p99 errors."""
    groups = defaultdict(list)
    for r in rows:
        if "p99" in r:
            groups[family(r)].append(r)
            groups["all"].append(r)
    lines = ["| family | configurations | p95 median abs | p95 worst | p99 median abs | "
             "p99 worst |", "|---|---|---|---|---|---|"]
    for name in sorted(groups, key=lambda g: (g == "all", g)):
        g = groups[name]
        cells = []
        for q in ("p95", "p99"):
            e = np.array([r[q]["error"] for r in g])
            cells += [f"{np.median(np.abs(e)):.1%}", f"{e[np.argmax(np.abs(e))]:+.1%}"]
        lines.append(f"| {name} | {len(g)} | " + " | ".join(cells) + " |")
    declined = [r for r in rows if "declined" in r]
    if declined:
        lines.append(f"\n{len(declined)} configurations declined by the model (stages no model "
                     "covers): " + "; ".join(f"#{r['index']}: {r['declined'][:120]}"
                                             for r in declined))
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", type=int, default=250)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--out", default=str(RESULTS / "ensemble_accuracy"))
    args = ap.parse_args(argv)
    rows = []
    with ProcessPoolExecutor(args.workers) as pool:
        for row in pool.map(measure, range(args.configs), [args.seed] * args.configs):
            rows.append(row)
            if "p99" in row:
                print(f"#{row['index']:3} {row['shape']:12} {family(row):24} "
                      f"load {row['features']['load']:.2f} p95 {row['p95']['error']:+.1%} "
                      f"p99 {row['p99']['error']:+.1%}", flush=True)
            else:
                print(f"#{row['index']:3} declined: {row['declined'][:100]}", flush=True)
    Path(args.out + ".json").write_text(json.dumps(rows, indent=1) + "\n")
    text = summary(rows)
    Path(args.out + ".txt").write_text(
        f"# validation/ensemble_accuracy.py --configs {args.configs} --seed {args.seed}\n\n"
        f"{text}\n")
    print(text)


if __name__ == "__main__":
    main()
