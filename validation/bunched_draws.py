"""Random nodes inside and near the bunched-instance rule: the bunched model, the staggered
chain it replaced, and the simulator.

The bunched model (qmodel/theory/batch/bunched.py) answers several deterministic instances
without a delay whose queue refills faster than they serve. Its family's measured error first
came from 63 stored rows, few of them flat with few arrivals per instance; a review's 760
draws inside the first rule (3 arrivals per instance in S(1), any growth up to the per-item
threshold) found 19% of its answers outside that range. This campaign measures the family
where it answers and chose the rule's thresholds (docs/notes/batch-model.md):

- S(k) = a + b k, deterministic; a log-uniform in 0.3-30 ms; max_batch_size B log-uniform in
  2-128 (rounded), 2-8 instances, c B <= 512;
- the load through two numbers: the per-item work arriving, rate x b in instances, 0 for a
  fifth of the draws, else log-uniform in 0.01-2.5; and the arrivals per instance in S(1),
  rate S(1) / c, log-uniform from half to 16 times what the rule asks at that per-item work
  (FLAT_ARRIVALS below FLAT_ITEM_WORK, else BUNCH_ARRIVALS); loads up to 0.95;
- three draws in five inside the rule (a tenth of them on its arrivals bound, a tenth on its
  per-item bound), the others outside it: there the staggered chain answers, and its family
  needs measured points near the rule's edge (its domain would otherwise reach in from far).

Each row (validation/wide_domain.py's fields, its ``run_one``: predict with
``extrapolate=True``, 400,000 to 4,000,000 simulated requests) also keeps the staggered
chain's p99 for the same node (``staggered_p99``). validation/measured_errors.py counts the
rows as the family's points and misses.

With ``--delays LO HI`` each node gets a max_queue_delay of d S(1), d log-uniform in LO-HI,
drawn after the node and load (the rule's verdict is the one without the delay, ``inside``;
a tenth of those inside it on the bound TINY_DELAY):
up to TINY_DELAY the bunched model answers, from there to SPREAD_DELAY no model does, past it
the staggered chain. Rows inside the rule keep the staggered chain's p99 and the bunched
model's (the wide instance with the delay), against one simulation, whatever predict says;
this chose and checks the delay's thresholds (docs/notes/batch-model.md).

With ``--jitter LO HI`` the service time gets a lognormal or gamma jitter (one or the other
at random) of cv log-uniform in LO-HI instead, drawn the same way (``inside``: the rule's
verdict on the deterministic node).

Run: ``python validation/bunched_draws.py --configs 1200 --seed 3560 --workers 2`` (about 2
minutes on 2 cores). Results: validation/results/bunched_draws.json and .txt. With delays:
``python validation/bunched_draws.py --configs 1200 --seed 3561 --delays 0.002 1 --workers 2
--out validation/results/bunched_delays``; with jitter: ``python validation/bunched_draws.py
--configs 1200 --seed 3562 --jitter 0.002 0.2 --workers 2 --out
validation/results/bunched_jitter``.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

import qmodel as qm                                                        # noqa: E402
from qmodel.campaign.budget import requests_for                            # noqa: E402
from qmodel.theory.batch import batch_node                                 # noqa: E402
from qmodel.theory.batch.bunched import (BUNCH_ARRIVALS, BUNCH_ITEM_WORK,  # noqa: E402
                                         FAMILY, FLAT_ARRIVALS, FLAT_ITEM_WORK,
                                         MAX_WIDE_BATCH, SPREAD_DELAY, SPREAD_JITTER,
                                         BUNCH_JITTER, TINY_DELAY, bunched_node, bunches)
from wide_domain import run_and_store, run_one, summarise, system_of      # noqa: E402


def draw(rng: np.random.Generator, index: int, delays: tuple | None = None,
         jitter: tuple | None = None) -> dict:
    """One node and load as wide_domain.py's plain data: inside the rule (three draws in
    five), else near it, where the staggered chain answers (at least half the arrivals the
    rule asks, at most twice its per-item work); with ``delays`` (LO, HI), then a delay of
    d S(1), d log-uniform in LO-HI, with ``jitter`` (LO, HI) a lognormal or gamma jitter of
    cv log-uniform in LO-HI, and ``inside`` the rule's verdict without them."""
    inside = rng.random() < 0.6
    while True:
        B = int(round(2 ** rng.uniform(1, 7)))
        c = int(rng.integers(2, 9))
        if c * B > MAX_WIDE_BATCH:
            continue
        a = float(10 ** rng.uniform(-3.5, -1.5))
        # per-item work w = rate b (instances) and arrivals per instance in S(1), x
        w = 0.0 if rng.random() < 0.2 else float(10 ** rng.uniform(-2, math.log10(2.5)))
        least = BUNCH_ARRIVALS if w >= FLAT_ITEM_WORK else FLAT_ARRIVALS
        x = float(least * 2 ** rng.uniform(-1, 4))
        edge = rng.random()
        if inside and edge < 0.1:
            x = least * (1 + 1e-9)
        elif inside and edge < 0.2 and w > 0:
            w = BUNCH_ITEM_WORK * (1 - 1e-9)
        # rate S(1) / c = x with S(1) = a + b and rate b = w: rate = (x c - w) / a
        rate = (x * c - w) / a
        if rate <= 0:
            continue
        spec = {"index": index, "base": a, "per_item": w / rate, "jitter": "deterministic",
                "cv": 0.0, "B": B, "d": 0.0, "c": c, "preferred": [], "load": 0.0}
        node = system_of(spec)[0]
        if rate >= 0.95 * node.capacity:
            continue
        spec["load"] = rate / node.capacity
        if bunches(node, spec["load"] * node.capacity) == inside:
            # a tenth of the nodes inside the rule on the delay's or the jitter's bound
            # (Triton's 100 us on a 5 ms service is 0.02 S(1))
            on_bound = inside and rng.random() < 0.1
            if delays is not None:
                low, high = np.log10(delays)
                spec["d"] = (TINY_DELAY if on_bound else float(10 ** rng.uniform(low, high)))
                spec["inside"] = inside
            if jitter is not None:
                low, high = np.log10(jitter)
                spec["jitter"] = "lognormal" if rng.random() < 0.5 else "gamma"
                spec["cv"] = (BUNCH_JITTER if on_bound
                              else float(10 ** rng.uniform(low, high)))
                spec["inside"] = inside
            return spec


def run(job) -> dict:
    """wide_domain.py's row, with the staggered chain's p99 for the same node; with a delay,
    inside the rule, the bunched model's too, and a simulation where predict declined."""
    row = run_one(job)
    spec, seed, least, most, _ = job
    node = system_of(row)[0]
    rate = row["load"] * node.capacity
    if spec.get("inside") and "p99" not in row and "declined" in row:
        sim = qm.simulate(node, rate=rate, requests=requests_for(node, rate, least, most),
                          seed=seed)
        row["simulated_p99"] = {"simulated": float(sim.quantile(0.99)),
                                "ci99": list(sim.ci(0.99, level=0.99))}
    simulated = (row["p99"] if "p99" in row else row.get("simulated_p99", {})).get("simulated")
    if simulated is None:
        return row
    if spec.get("inside") or (spec["d"] == 0 and row.get("families", [None])[0] == FAMILY):
        staggered = batch_node(node, rate).p99
        row["staggered_p99"] = {"predicted": staggered, "error": staggered / simulated - 1}
    if spec.get("inside"):
        wide = batch_node(bunched_node(node), rate).p99
        row["bunched_p99"] = {"predicted": wide, "error": wide / simulated - 1}
    return row


def summary(rows) -> str:
    text = summarise(rows)
    pairs = [(r["p99"]["error"], r["staggered_p99"]["error"]) for r in rows
             if "staggered_p99" in r and r.get("families", [None])[0] == FAMILY]
    if pairs:
        e = np.array(pairs)
        text += (f"\n\np99 error over the {len(e)} nodes the bunched model answers, bunched "
                 f"model / staggered chain: median "
                 f"|error| {np.median(abs(e[:, 0])):.1%} / {np.median(abs(e[:, 1])):.1%}, "
                 f"beyond 20% {np.sum(abs(e[:, 0]) > 0.2)} / {np.sum(abs(e[:, 1]) > 0.2)}, "
                 f"range {e[:, 0].min():+.1%}..{e[:, 0].max():+.1%} / "
                 f"{e[:, 1].min():+.1%}..{e[:, 1].max():+.1%}")
    inside = [r for r in rows if r.get("inside") and "bunched_p99" in r]
    if inside:
        jittery = any(r["cv"] > 0 for r in inside)
        key, edges = (("cv", (0.0, BUNCH_JITTER, 0.03, 0.05, SPREAD_JITTER, 0.1, 0.15, math.inf))
                      if jittery else
                      ("d", (0.0, TINY_DELAY, 0.05, 0.1, SPREAD_DELAY, 0.3, 0.5, math.inf)))
        text += ("\n\nNodes inside the rule without their " + ("jitter, by its cv" if jittery
                 else "delay, by delay / S(1)") + ": p99 error of the bunched model / the "
                 "staggered chain (median |error|, beyond 20%, range)")
        for low, high in zip(edges, edges[1:]):
            group = [r for r in inside if low < r[key] <= high]
            if not group:
                continue
            e = np.array([(r["bunched_p99"]["error"], r["staggered_p99"]["error"])
                          for r in group])
            text += "\n  " + f"{low:g}-{high:g}:".ljust(10) + f"{len(e):4} nodes  " + "  /  ".join(
                f"{np.median(abs(e[:, i])):5.1%} {np.sum(abs(e[:, i]) > 0.2):3} "
                f"{e[:, i].min():+6.1%}..{e[:, i].max():+6.1%}" for i in (0, 1))
    return text


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", type=int, default=1200)
    ap.add_argument("--seed", type=int, default=3560)
    ap.add_argument("--workers", type=int, default=mp.cpu_count())
    ap.add_argument("--least", type=int, default=400_000)
    ap.add_argument("--most", type=int, default=4_000_000)
    ap.add_argument("--timeout", type=int, default=120, help="seconds per configuration")
    ap.add_argument("--delays", type=float, nargs=2, metavar=("LO", "HI"),
                    help="a max_queue_delay of d S(1), d log-uniform in LO-HI")
    ap.add_argument("--jitter", type=float, nargs=2, metavar=("LO", "HI"),
                    help="a lognormal or gamma jitter of cv log-uniform in LO-HI")
    ap.add_argument("--out", type=Path, default=Path("validation/results/bunched_draws"))
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    specs = [draw(rng, i, args.delays, args.jitter) for i in range(args.configs)]
    jobs = [(s, args.seed + s["index"], args.least, args.most, args.timeout) for s in specs]
    command = ("python validation/bunched_draws.py " + " ".join(
        f"--{k} {v}" for k, v in (("configs", args.configs), ("seed", args.seed))))
    if args.delays:
        command += f" --delays {args.delays[0]:g} {args.delays[1]:g}"
    if args.jitter:
        command += f" --jitter {args.jitter[0]:g} {args.jitter[1]:g}"
    run_and_store(run, jobs, args.workers, args.out, command, summary)


if __name__ == "__main__":
    main()
