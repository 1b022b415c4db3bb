"""Coverage: the share of ordinary configurations a model answers inside its measured domain.

Issue 35 measured it as a new user would; this script repeats that measurement, seeded, with
the distribution stated here (one configuration = one node, or N copies behind a router):

- router: none (a single node) half the time, else random, round robin, least outstanding or
  power of two, equally likely; N uniform on 2-16 nodes behind it;
- S(k) = a + b k: S(1) log-uniform on 1-10 ms, b / S(1) log-uniform on 0.01-0.5;
- service jitter: deterministic a third of the time, else lognormal with cv uniform 0.05-0.5;
- max_batch_size: 2^u rounded, u uniform on 0-6 (1-64); instances uniform on 1-8;
- max_queue_delay: none 30% of the time, else uniform 0-5 ms;
- preferred sizes: with max_batch_size >= 4, 20% of the time (a size uniform below B, and B);
- Poisson arrivals at a load uniform on 0.1-0.95 of the system's capacity.

Each configuration is predicted with ``fallback="raise"``: answered (a model inside its
family's measured domain; exact and numerical solvers always), or declined with the reason
(no model for the system; outside the measured domain; the model's self-check). With
``--simulate`` each answer is also simulated on the compiled engine (400,000 requests, seed
1) and judged as validation/domain_check.py judges: a miss is an answer whose stated p99 range
(``accuracy.p99_bounds``) does not meet the simulated p99's 99% confidence interval, widened
by half a bin of the engine's histogram (0.025%: an exact answer's range has no width).

(Named model_coverage, not coverage: a validation/coverage.py would shadow the coverage
package, which numba imports, in every script run from validation/.)

Run: ``python validation/model_coverage.py --configs 500 --seed 35 --simulate`` (under a
minute on 2 cores); ``--write`` stores validation/results/model_coverage.json and .txt.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import time
import warnings
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

OUT = Path(__file__).parent / "results" / "model_coverage"
ROUTERS = ("random", "round_robin", "least_outstanding", "power_of_two")
REQUESTS, SIM_SEED = 400_000, 1


def service_draw(rng: np.random.Generator) -> dict:
    """S(1), b / S(1) and the jitter's cv of the distribution above (its first three draws)."""
    s1 = float(np.exp(rng.uniform(np.log(1e-3), np.log(10e-3))))
    growth = float(np.exp(rng.uniform(np.log(0.01), np.log(0.5))))
    cv = 0.0 if rng.random() < 1 / 3 else float(rng.uniform(0.05, 0.5))
    return {"s1": s1, "growth": growth, "cv": cv}


def draw(rng: np.random.Generator, index: int) -> dict:
    """One configuration of the distribution above, as plain data."""
    service = service_draw(rng)
    B = int(round(2 ** rng.uniform(0, 6)))
    spec = {"index": index, **service, "B": B,
            "c": int(rng.integers(1, 9)),
            "delay": 0.0 if rng.random() < 0.3 else float(rng.uniform(0, 5e-3)),
            "preferred": [], "load": float(rng.uniform(0.1, 0.95)), "router": None, "N": 1}
    if B >= 4 and rng.random() < 0.2:
        spec["preferred"] = [int(rng.integers(1, B)), B]
    if rng.random() < 0.5:
        spec["router"] = ROUTERS[rng.integers(len(ROUTERS))]
        spec["N"] = int(rng.integers(2, 17))
    return spec


def system_of(spec: dict):
    import qmodel as qm
    b = spec["growth"] * spec["s1"]
    jitter = "deterministic" if spec["cv"] == 0 else ("lognormal", spec["cv"])
    node = qm.Node(qm.ServiceTime.affine(spec["s1"] - b, b, jitter=jitter),
                   max_batch_size=spec["B"], max_queue_delay=spec["delay"],
                   preferred_batch_sizes=tuple(spec["preferred"]), instances=spec["c"])
    if spec["router"] is None:
        return node
    return qm.Cluster(node, count=spec["N"], router=spec["router"])


def shape(spec: dict) -> str:
    """The node's shape, as the report groups it."""
    what = "one instance" if spec["c"] == 1 else "several instances"
    return what + (", B 1" if spec["B"] == 1 else "")


def why(reason: str) -> str:
    """A declined answer's kind."""
    if "measured near this one" in reason or "where family" in reason:
        return "outside the measured domain"
    if "self-check" in reason or "capped" in reason or "implied utilization" in reason:
        return "the model's self-check"
    return "no model"


def run_one(job) -> dict:
    spec, simulate = job
    import qmodel as qm
    warnings.simplefilter("ignore")
    system = system_of(spec)
    rate = spec["load"] * system.capacity
    row = dict(spec)
    started = time.perf_counter()
    try:
        pred = qm.predict(system, rate=rate, fallback="raise")
    except NotImplementedError as err:
        row["declined"] = str(err)[:300]
        row["kind"] = why(str(err))
        return row
    row["predict_seconds"] = time.perf_counter() - started
    row["exactness"] = pred.accuracy.exactness
    row["families"] = [m.family for m in pred.accuracy.measured]
    if simulate:
        low, high = pred.accuracy.p99_bounds(pred.p99)
        sim = qm.simulate(system, rate=rate, requests=REQUESTS, seed=SIM_SEED, backend="cpu")
        s_low, s_high = sim.ci(0.99, level=0.99)
        # the compiled engine's quantiles are those of a histogram, within half a bin of the
        # sample's: an exact answer's zero-width range is judged against the bins it lies in
        half_bin = getattr(sim, "resolution", 0.0) / 2
        s_low, s_high = s_low * (1 - half_bin), s_high * (1 + half_bin)
        row["p99"] = {"predicted": pred.p99, "simulated": sim.p99, "ci99": [s_low, s_high],
                      "stated": [low, high], "error": pred.p99 / sim.p99 - 1,
                      "miss": bool(high < s_low or low > s_high)}
    return row


def _init():
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    warnings.simplefilter("ignore")


def summarise(rows) -> str:
    answered = [r for r in rows if "declined" not in r]
    lines = [f"{len(rows)} configurations: {len(answered)} answered by a model inside its "
             f"measured domain ({len(answered) / len(rows):.1%})"]
    kinds = Counter(r["kind"] for r in rows if "declined" in r)
    lines.append("declined: " + ", ".join(f"{k} {v}" for k, v in kinds.most_common()))
    lines += ["", f"{'router':19} {'node':24} {'configs':>7} {'answered':>8} {'share':>6}  "
              f"{'median |p99 error|':>18} {'misses':>6}"]
    groups = defaultdict(list)
    for r in rows:
        groups[(r["router"] or "single node", shape(r))].append(r)
    for (router, node), group in sorted(groups.items()):
        got = [r for r in group if "declined" not in r]
        judged = [r for r in got if "p99" in r]
        median = (f"{np.median([abs(r['p99']['error']) for r in judged]):.1%}" if judged
                  else "")
        misses = f"{sum(r['p99']['miss'] for r in judged)}" if judged else ""
        lines.append(f"{router:19} {node:24} {len(group):7} {len(got):8} "
                     f"{len(got) / len(group):6.0%}  {median:>18} {misses:>6}")
    judged = [r for r in answered if "p99" in r]
    if judged:
        e = np.array([abs(r["p99"]["error"]) for r in judged])
        misses = sum(r["p99"]["miss"] for r in judged)
        lines += ["", f"simulated {len(judged)} answers: median |p99 error| {np.median(e):.1%}, "
                      f"worst {e.max():.1%}; {misses} ({misses / len(judged):.1%}) outside "
                      f"their stated error and the simulation's 99% CI"]
    seconds = [r["predict_seconds"] for r in answered]
    if seconds:
        lines.append(f"predict: median {np.median(seconds) * 1e3:.1f} ms, p90 "
                     f"{np.quantile(seconds, 0.9) * 1e3:.1f} ms per answered configuration")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", type=int, default=500)
    ap.add_argument("--seed", type=int, default=35)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--simulate", action="store_true")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    specs = [draw(rng, i) for i in range(args.configs)]
    started = time.perf_counter()
    with mp.get_context("spawn").Pool(args.workers, initializer=_init) as pool:
        rows = pool.map(run_one, [(s, args.simulate) for s in specs], chunksize=4)
    text = summarise(rows)
    command = (f"python validation/model_coverage.py --configs {args.configs} "
               f"--seed {args.seed}"
               + (" --simulate" if args.simulate else ""))
    print(text)
    print(f"{command}: {time.perf_counter() - started:.0f} s on {args.workers} workers")
    if args.write:
        OUT.with_suffix(".json").write_text(json.dumps(rows, indent=0) + "\n")
        OUT.with_suffix(".txt").write_text(f"{command}\n\n{text}\n")
        print(f"wrote {OUT}.json and .txt")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
