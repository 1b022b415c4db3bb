"""Does the range rule find the worst tail of a range of rates?

``qm.size(..., rate=(low, peak))`` checks a candidate at both ends of the range, on a
geometric grid between them and by a golden-section search around the grid's worst point
(:func:`qmodel.sizing.trust.worst_over_rates`). This script draws random nodes and clusters
(max_batch_size 1-32, delays 0-10 ms, 1-4 instances, jitter cv 0-0.5, preferred sizes
sometimes, 1-8 nodes behind random or round robin) and ranges (the peak at 30-95% of
capacity, the low end 3-30 times lower), and compares the worst trusted p95 and p99 the rule
finds (the quantile raised by its stated error, what the search checks against the target)
with the worst over 300 rates spread geometrically over the range (the dense reference),
counting the predictions each takes.

Run: ``python validation/range_grid.py --text validation/results/range_grid.txt`` (a few
minutes here).
"""

from __future__ import annotations

import argparse

import numpy as np

import qmodel as qm
from qmodel.campaign.results import add_output_arguments, write_outputs
from qmodel.sizing.trust import Rates, model_answer, trusted_quantile, worst_over_rates

DENSE = 300


def draw(rng):
    """A random system and range."""
    B = int(rng.choice([1, 2, 4, 8, 16, 32]))
    delay = 0.0 if B == 1 else float(rng.choice([0.0, 0.5e-3, 1e-3, 2e-3, 5e-3, 10e-3]))
    cv = float(rng.choice([0.0, 0.2, 0.5]))
    jitter = "deterministic" if cv == 0 else ("lognormal", cv)
    svc = qm.ServiceTime.affine(float(rng.uniform(0.5e-3, 3e-3)),
                                float(rng.uniform(0.02e-3, 0.3e-3)), jitter=jitter)
    preferred = ()
    if B >= 4 and rng.random() < 0.3:
        preferred = (B // 2, B)
    node = qm.Node(svc, max_batch_size=B, max_queue_delay=delay,
                   preferred_batch_sizes=preferred, instances=int(rng.choice([1, 1, 2, 4])))
    count = int(rng.choice([1, 1, 2, 4, 8]))
    system = node if count == 1 else qm.Cluster(node, count=count,
                                                router=str(rng.choice(["random",
                                                                       "round_robin"])))
    cap = node.capacity * count
    peak = float(rng.uniform(0.3, 0.95)) * cap
    return system, Rates(peak / float(rng.uniform(3, 30)), peak)


def run(cases: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    rows = []
    while len(rows) < cases:
        system, rates = draw(rng)
        dense = []
        try:
            for r in np.geomspace(rates.low, rates.peak, DENSE):
                a = model_answer(system, float(r))
                dense.append((trusted_quantile(a, 0.95), trusted_quantile(a, 0.99)))
        except (NotImplementedError, qm.UnstableError):
            continue                      # no model over the whole range: nothing to compare
        dense = np.array(dense)
        found = {}
        for key, col in (("p95", 0), ("p99", 1)):
            # a target just below the dense worst, so that the rule evaluates everything
            slo = {key: float(dense[:, col].max()) * 1e3}
            r = worst_over_rates(lambda x: model_answer(system, x), rates, slo,
                                 stop_at_miss=False)
            found[key] = (r.trusted[key], float(dense[:, col].max()), r.evaluated,
                          r.binding)
        rows.append({"system": system.describe(), "low": rates.low, "peak": rates.peak,
                     **{k: {"found": v[0], "dense": v[1], "predictions": v[2],
                            "binding": v[3], "shortfall": 1 - v[0] / v[1]}
                        for k, v in found.items()}})
    return rows


def summary(rows) -> str:
    lines = [f"range rule against {DENSE} rates spread over each range, {len(rows)} random "
             "systems and ranges: the worst trusted quantile (shortfall = 1 - the rule's worst "
             "/ the dense worst)", ""]
    for key in ("p95", "p99"):
        short = np.array([r[key]["shortfall"] for r in rows])
        preds = np.array([r[key]["predictions"] for r in rows])
        inside = np.array([r["low"] < r[key]["binding"] < r["peak"] for r in rows])
        lines.append(f"{key}: shortfall median {np.median(short):.2%}, 95th percentile "
                     f"{np.quantile(short, 0.95):.2%}, largest {short.max():.2%} "
                     f"({np.sum(short > 0.005)} of {short.size} above 0.5%); worst inside "
                     f"the range in {inside.sum()}; {preds.mean():.1f} predictions on average "
                     f"(dense: {DENSE})")
    worst = max(rows, key=lambda r: max(r["p95"]["shortfall"], r["p99"]["shortfall"]))
    lines += ["", f"largest shortfall: {worst['system']} over [{worst['low']:.0f}, "
                  f"{worst['peak']:.0f}] req/s"]
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=60)
    ap.add_argument("--seed", type=int, default=5)
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    rows = run(args.cases, args.seed)
    write_outputs(args, rows, summary(rows))


if __name__ == "__main__":
    main()
