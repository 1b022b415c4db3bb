"""Do the measured domains keep their promise on configurations they never saw?

A family's measured error (qmodel/theory/measured_errors.json) is quoted for a configuration
only inside its measured domain: every feature within the range of its campaigns' good rows,
within :data:`qmodel.accuracy.NEIGHBOURHOOD` of one of them and of none of its misses. This
campaign draws fresh configurations from validation/wide_domain.py's distribution with another
seed, predicts each with ``extrapolate=True`` (so every model answer is kept, with why it lies
outside where it does), simulates the ones a model answered and asks, per answer:

- where is it: inside (box and a measured neighbour, no miss near), inside the box only (no
  good configuration near, or a miss near), or outside the box;
- does the simulated p99 lie where the answer's families say (the interval of
  :meth:`qmodel.accuracy.Accuracy.p99_bounds` without the extrapolation), with the
  simulation's 99% confidence interval: a miss is an answer whose stated error range and the
  simulation's interval do not meet.

The share of misses among answers inside the domain is the figure the domains are judged by
(issue 35: at most 5%); the other two classes show what the box alone would have let in.

Run: ``python validation/domain_check.py --configs 1000 --seed 35 --workers 2`` (about 9
minutes on 2 cores); ``--rejudge`` judges the stored rows again after the table changed (no
simulation), ``--sweep 0.75 1 1.5 2`` shows how the radii were chosen, ``--judge FILE``
judges another campaign's stored rows (validation/wide_domain.py's) by today's table and
prints the misses by family (no simulation; nothing stored). Results:
validation/results/domain_check.json and .txt.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

import qmodel as qm                                                     # noqa: E402
from qmodel.theory.measured import measured_table                       # noqa: E402
from wide_domain import draw, run_and_store, run_one, system_of     # noqa: E402


def where(system, rate: float) -> str:
    """'inside', 'box_only' or 'outside_box' for a model's answer, 'declined' without one."""
    try:
        result = qm.predict(system, rate=rate, fallback="raise", extrapolate=True)
    except NotImplementedError:
        return "declined"
    note = result.accuracy.approximation("outside_measured_domain")
    if note is None:
        return "inside"
    return "box_only" if "near this one" in note.text else "outside_box"



def check(job) -> dict:
    """Predict and simulate one configuration (validation/wide_domain.py's row) and judge it."""
    return judged(run_one(job))


def judged(row: dict) -> dict:
    """``row`` with where its answer lies and whether it misses, by today's table."""
    system, _ = system_of(row)
    row["where"] = where(system, row["load"] * system.capacity)
    if "p99" in row and row["families"]:
        table = measured_table()
        # the answer's own families: the extrapolated family is measured on these rows
        own = [f for f in row["families"] if f != "extrapolated"]
        low = min(table[f].p99.low for f in own)
        high = max(table[f].p99.high for f in own)
        p, (lo, hi) = row["p99"]["predicted"], row["p99"]["ci99"]
        # the errors the simulation allows, against the ones the families state
        row["stated"] = [low, high]
        row["miss"] = bool(p / hi - 1 > high or p / lo - 1 < low)
    return row


def summarise(rows) -> str:
    judged = [r for r in rows if "miss" in r]
    count = Counter(r["where"] for r in rows)
    lines = [f"{len(rows)} configurations: " + ", ".join(
        f"{k} {v}" for k, v in sorted(count.items())), "",
        f"{'where':12} {'answers':>7} {'misses':>6} {'share':>6}  worst p99 errors"]
    for place in ("inside", "box_only", "outside_box"):
        group = [r for r in judged if r["where"] == place]
        if not group:
            continue
        misses = sum(r["miss"] for r in group)
        e = np.array([r["p99"]["error"] for r in group])
        lines.append(f"{place:12} {len(group):7} {misses:6} {misses / len(group):6.1%}  "
                     f"{e.min():+.1%} .. {e.max():+.1%}")
    return "\n".join(lines)


def by_family(rows) -> str:
    """The answers inside a domain and their misses, by the answer's first family."""
    count, missed = Counter(), Counter()
    for r in rows:
        if "miss" in r and r["where"] == "inside":
            family = next(f for f in r["families"] if f != "extrapolated")
            count[family] += 1
            missed[family] += r["miss"]
    return "\n".join(f"{f:45} {n:5} answers inside, {missed[f]:3} misses "
                     f"({missed[f] / n:.1%})" for f, n in sorted(count.items()))


def sweep(rows, factors) -> None:
    """Print, for each factor, the answers inside / inside the box only and their misses with
    the radii of :data:`qmodel.accuracy.NEIGHBOURHOOD` times that factor."""
    from qmodel import accuracy
    shipped = dict(accuracy.NEIGHBOURHOOD)
    rows = [r for r in rows if "p99" in r and r["families"]]
    try:
        for factor in factors:
            accuracy.NEIGHBOURHOOD.update(
                {k: (scale, radius * factor) for k, (scale, radius) in shipped.items()})
            measured_table.cache_clear()     # fresh families: each caches its scaled radii
            judged_rows = [judged(dict(r)) for r in rows]
            for place in ("inside", "box_only"):
                group = [r for r in judged_rows if r["where"] == place]
                misses = sum(r["miss"] for r in group)
                print(f"radii x{factor:g}: {place:9} {len(group):5} answers, {misses:4} "
                      f"misses ({misses / max(len(group), 1):.1%})", flush=True)
    finally:
        accuracy.NEIGHBOURHOOD.update(shipped)
        measured_table.cache_clear()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=35)
    ap.add_argument("--workers", type=int, default=mp.cpu_count())
    ap.add_argument("--least", type=int, default=400_000)
    ap.add_argument("--most", type=int, default=2_000_000)
    ap.add_argument("--timeout", type=int, default=120, help="seconds per configuration")
    ap.add_argument("--out", type=Path, default=Path("validation/results/domain_check"))
    ap.add_argument("--rejudge", action="store_true",
                    help="judge the stored rows again by today's table (no simulation)")
    ap.add_argument("--sweep", type=float, nargs="+", metavar="FACTOR",
                    help="judge the stored rows with every NEIGHBOURHOOD radius times each "
                         "FACTOR (how the radii were chosen); stores nothing")
    ap.add_argument("--judge", type=Path, metavar="FILE",
                    help="judge the rows of another stored campaign by today's table and "
                         "print the misses by family; stores nothing")
    args = ap.parse_args(argv)
    if args.judge:
        rows = [judged(r) for r in json.loads(args.judge.read_text())]
        print(f"{args.judge}, judged by today's table\n\n{summarise(rows)}\n\n"
              f"{by_family(rows)}")
        return 0
    if args.sweep:
        sweep(json.loads(args.out.with_suffix(".json").read_text()), args.sweep)
        return 0
    if args.rejudge:
        rows = [judged(r) for r in json.loads(args.out.with_suffix(".json").read_text())]
        args.out.with_suffix(".json").write_text(json.dumps(rows, indent=0) + "\n")
        head = args.out.with_suffix(".txt").read_text().splitlines()[0]
        text = summarise(rows)
        args.out.with_suffix(".txt").write_text(f"{head}\n\n{text}\n")
        print(text)
        return 0
    rng = np.random.default_rng(args.seed)
    specs = [draw(rng, i) for i in range(args.configs)]
    jobs = [(s, args.seed + s["index"], args.least, args.most, args.timeout) for s in specs]
    run_and_store(check, jobs, args.workers, args.out,
                  f"python validation/domain_check.py --configs {args.configs} --seed "
                  f"{args.seed} --least {args.least} --most {args.most}", summarise)
    return 0

if __name__ == "__main__":
    sys.exit(main())
