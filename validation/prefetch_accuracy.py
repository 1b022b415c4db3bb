"""How far is Triton's prefetching batcher from the model of a batcher that forms batches when
an instance frees?

No model carries Triton's prefetch (docs/triton-semantics.md, "Prefetch"): with a delay the
batcher forms a batch while every instance is busy, as soon as its oldest request's delay
runs out, and a request that queues after that joins it only if the batcher wakes before an
instance picks it up (``Node.prefetch``, the probability that it does). ``predict`` simulates
such a node; sizing ranks it by the model of the same node without prefetch
(``Node(prefetch=None)``: the batch formed at the instance's freeing). This campaign measures
how far that answer is from the simulated prefetching node, so that the ranking states that
error (:func:`qmodel.sizing.trust.model_answer`) rather than the at-free node's own.

Configurations are drawn as validation/model_coverage.py draws single nodes (seeded), with a
delay always (without one prefetch changes nothing) and a prefetch share:

- S(k) = a + b k: S(1) log-uniform on 1-10 ms, b / S(1) log-uniform on 0.01-0.5;
- service jitter: deterministic a third of the time, else lognormal with cv uniform 0.05-0.5;
- max_batch_size: 2^u rounded, u uniform on 1-6 (2-64); instances 1, 2, 4 or 8, equally likely;
- max_queue_delay: uniform on 0.05-5 ms;
- preferred sizes: with max_batch_size >= 4, 20% of the time (a size uniform below B, and B);
- prefetch: 0 a tenth of the time, 1 a tenth, else uniform on 0-1 (Triton's own range:
  0.09-0.66 on the real-server campaign);
- Poisson arrivals at a load uniform on 0.1-0.95 of the node's capacity.

Each node is predicted without its prefetch (``extrapolate=True``, so outside the at-free
family's domain too) and simulated with it (:func:`qmodel.campaign.budget.requests_for`
requests between --least and --most, seeded). A row keeps the node's features
(:func:`qmodel.theory.measured.configuration_features` with ``prefetch``), the at-free
answer's families and whether it lay inside their domain, and the predicted and simulated
p50/p95/p99 with the simulation's 99% confidence intervals.

Run: ``python validation/prefetch_accuracy.py --configs 3600 --seed 3701 --workers 2``
(5 minutes on 2 cores; results: validation/results/prefetch_accuracy.json and .txt, which
validation/measured_errors.py turns into the families ``prefetch_one_instance`` and
``prefetch_several_instances``).

``--heldout`` judges the ranking answer on draws the families never saw: each prefetching
node's :func:`qmodel.sizing.trust.model_answer`, where it lies inside its family's measured
domain, is simulated and judged as validation/model_coverage.py judges (a miss: the stated
p99 range does not meet the simulated p99's 99% CI): ``python validation/prefetch_accuracy.py
--heldout --configs 600 --seed 3702 --workers 2 --out validation/results/prefetch_heldout``.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np

import qmodel as qm
from qmodel.campaign.budget import requests_for
from qmodel.theory.measured import configuration_features

sys.path.insert(0, str(Path(__file__).parent))
from model_coverage import service_draw  # noqa: E402  (sibling scripts)
from model_coverage import system_of as coverage_node  # noqa: E402
from wide_domain import guarded, run_and_store, simulated_levels  # noqa: E402

OUT = Path(__file__).parent / "results" / "prefetch_accuracy"


def draw(rng: np.random.Generator, index: int) -> dict:
    """One prefetching node of the distribution above, as plain data."""
    service = service_draw(rng)
    B = int(round(2 ** rng.uniform(1, 6)))
    spec = {"index": index, **service, "B": B,
            "c": int((1, 2, 4, 8)[rng.integers(4)]),
            "delay": float(rng.uniform(0.05e-3, 5e-3)), "preferred": [],
            "prefetch": float(rng.choice([0.0, 1.0, rng.uniform(0.0, 1.0)], p=[0.1, 0.1, 0.8])),
            "load": float(rng.uniform(0.1, 0.95))}
    if B >= 4 and rng.random() < 0.2:
        spec["preferred"] = [int(rng.integers(1, B)), B]
    return spec


def node_of(spec: dict) -> qm.Node:
    """The prefetching node: model_coverage.py's single node with the draw's prefetch."""
    return replace(coverage_node({**spec, "router": None}), prefetch=spec["prefetch"])


def run_one(job) -> dict:
    spec, seed, least, most, timeout = job
    node = node_of(spec)
    rate = spec["load"] * node.capacity

    def work(row):
        pred = qm.predict(replace(node, prefetch=None), rate=rate, fallback="raise",
                          extrapolate=True)
        outside = pred.accuracy.approximation("outside_measured_domain")
        row["at_free_inside"] = outside is None
        if outside is not None:
            row["at_free_outside"] = outside.text[:300]
        row["families"] = [m.family for m in pred.accuracy.measured]
        row["predicted_mean_batch"] = pred.mean_batch_size
        sim = simulated_levels(row, node, rate, pred, requests_for(node, rate, least, most),
                               seed)
        row["simulated_mean_batch"] = float(sim.mean_batch_size)

    row = dict(spec, features=configuration_features(node, spec["load"], 1.0))
    return guarded(row, timeout, work)


def judge_one(job) -> dict:
    """Held out: the ranking answer for the prefetching node inside its family's domain (or
    why it lies outside), judged against the simulated p95 and p99's 99% CIs."""
    from qmodel.sizing.trust import model_answer
    spec, seed, least, most, timeout = job
    node = node_of(spec)
    rate = spec["load"] * node.capacity

    def work(row):
        pred = model_answer(node, rate)
        outside = pred.accuracy.approximation("outside_measured_domain")
        if outside is not None:
            raise NotImplementedError(outside.text)
        row["families"] = [m.family for m in pred.accuracy.measured]
        sim = qm.simulate(node, rate=rate, requests=requests_for(node, rate, least, most),
                          seed=seed)
        half_bin = getattr(sim, "resolution", 0.0) / 2
        step = pred.accuracy.quantile_error or pred.accuracy.lattice_step or 0.0
        for name, level in (("p95", 0.95), ("p99", 0.99)):
            # the family's range of this quantile's errors, as accuracy.p99_bounds states p99's
            errors = getattr(pred.accuracy.measured[0], name)
            q, s = float(pred.quantile(level)), float(sim.quantile(level))
            low, high = (q - step) / (1 + errors.high), (q + step) / (1 + errors.low)
            s_low, s_high = sim.ci(level, level=0.99)
            s_low, s_high = s_low * (1 - half_bin), s_high * (1 + half_bin)
            row[name] = {"predicted": q, "simulated": s, "ci99": [s_low, s_high],
                         "stated": [low, high], "error": q / s - 1,
                         "miss": bool(high < s_low or low > s_high)}

    return guarded(dict(spec), timeout, work)


def summarise_heldout(rows) -> str:
    answered = [r for r in rows if "p99" in r]
    lines = [f"{len(rows)} prefetching nodes held out: {len(answered)} ranked by the at-free "
             f"model inside a prefetch family's measured domain "
             f"({len(answered) / len(rows):.1%})", ""]
    lines.append(f"{'instances':10} {'nodes':>6} {'inside':>7} {'share':>6} "
                 f"{'median |p99 error|':>19} {'p95 misses':>10} {'p99 misses':>10}")
    for c in sorted({r["c"] for r in rows}):
        group = [r for r in rows if r["c"] == c]
        done = [r for r in group if "p99" in r]
        e = np.median([abs(r["p99"]["error"]) for r in done]) if done else np.nan
        lines.append(f"{c:<10} {len(group):6} {len(done):7} {len(done) / len(group):6.0%} "
                     f"{e:19.1%} {sum(r['p95']['miss'] for r in done):10} "
                     f"{sum(r['p99']['miss'] for r in done):10}")
    misses = [r for r in answered if r["p95"]["miss"] or r["p99"]["miss"]]
    lines += ["", f"{len(misses)} answers ({len(misses) / max(len(answered), 1):.1%}) outside "
              f"their stated p95 or p99 range and the simulation's 99% CI "
              f"({sum(r['p99']['miss'] for r in answered)} on p99)"]
    for r in misses:
        lines.append(f"  #{r['index']} B={r['B']} c={r['c']} delay={r['delay'] * 1e3:.2f} ms "
                     f"S(1)={r['s1'] * 1e3:.2f} ms prefetch={r['prefetch']:.2f} "
                     f"preferred={r['preferred']} load={r['load']:.2f}: "
                     f"p95 {r['p95']['error']:+.1%}, p99 {r['p99']['error']:+.1%}")
    return "\n".join(lines)


def summarise(rows) -> str:
    done = [r for r in rows if "p99" in r]
    lines = [f"{len(rows)} prefetching nodes: {len(done)} predicted without prefetch and "
             f"simulated with it; {sum('declined' in r for r in rows)} declined, "
             f"{sum('timeout' in r for r in rows)} timed out, "
             f"{sum('exception' in r for r in rows)} exceptions", ""]

    def table(title, key):
        groups = defaultdict(list)
        for r in done:
            groups[key(r)].append(r)
        lines.append(f"{title:28} {'n':>5} {'median|e| p99':>14} {'low':>7} {'high':>7} "
                     f"{'within 20%':>10}")
        for k, g in sorted(groups.items()):
            e = np.array([r["p99"]["error"] for r in g])
            good = np.mean([abs(r["p95"]["error"]) <= 0.2 and abs(r["p99"]["error"]) <= 0.2
                            for r in g])
            lines.append(f"{str(k):28} {len(g):5} {np.median(abs(e)):14.1%} {e.min():+7.1%} "
                         f"{e.max():+7.1%} {good:10.0%}")
        lines.append("")

    table("instances", lambda r: r["c"])
    table("prefetch", lambda r: f"{min(int(r['prefetch'] * 4), 3) / 4:.2f}-"
                                f"{min(int(r['prefetch'] * 4), 3) / 4 + 0.25:.2f}")
    table("load", lambda r: f"{min(int(r['load'] * 5), 4) / 5:.1f}-"
                            f"{min(int(r['load'] * 5), 4) / 5 + 0.2:.1f}")
    table("preferred sizes below B", lambda r: r["features"]["preferred_below_max"] > 0)
    table("at-free answer inside", lambda r: r["at_free_inside"])
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=3701)
    ap.add_argument("--workers", type=int, default=mp.cpu_count())
    ap.add_argument("--least", type=int, default=400_000)
    ap.add_argument("--most", type=int, default=2_000_000)
    ap.add_argument("--timeout", type=int, default=120, help="seconds per configuration")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--heldout", action="store_true",
                    help="judge predict's own answers (default --out: prefetch_heldout)")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    specs = [draw(rng, i) for i in range(args.configs)]
    jobs = [(s, args.seed + s["index"], args.least, args.most, args.timeout) for s in specs]
    command = (f"python validation/prefetch_accuracy.py{' --heldout' * args.heldout} "
               f"--configs {args.configs} --seed {args.seed} --least {args.least} "
               f"--most {args.most}")
    if args.heldout:
        run_and_store(judge_one, jobs, args.workers, args.out, command, summarise_heldout)
    else:
        run_and_store(run_one, jobs, args.workers, args.out, command, summarise)
    return 0


if __name__ == "__main__":
    sys.exit(main())
