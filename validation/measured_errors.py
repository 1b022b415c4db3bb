"""The measured errors the models state, from the stored campaign results.

qmodel/theory/measured.py carries these figures into every batch-node result's
``accuracy`` statement; this script recomputes them from validation/results/*.json (the issue-3
grid, the several-instance holdout with the shipped pass count, the one-instance holdout, the
renewal-arrival campaign, and the grid's mean batch sizes and utilizations from
validation/batch_size_accuracy.py) and prints the table in the form that module holds.
tests/test_measured.py runs the same computation and fails when the module is stale. After
rerunning a campaign: run this and paste its output over ``MEASURED``.

Run from the repository root: ``python validation/measured_errors.py`` (seconds).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import numpy as np

from qmodel.campaign.measure import shipped_passes
from qmodel.theory.measured import Measured, family_of

RESULTS = Path(__file__).resolve().parent / "results"


def _rows():
    """(family, p95 error, p99 error) of every batch-model approximation the campaigns ran."""
    for r in json.loads((RESULTS / "predict_accuracy.json").read_text()):
        if r["family"] == "approximation" and r["method"].startswith("batch node"):
            fam = family_of(r["c"], r["jitter"] == "deterministic", r["D_over_S1"] > 0)
            yield fam, r["p95"]["error"], r["p99"]["error"]
    passes = str(shipped_passes())
    for r in json.loads((RESULTS / "multi_instance_holdout.json").read_text()):
        (q95, q99), (s95, s99) = r["predicted"][passes], r["simulated"]
        fam = family_of(r["c"], r["jitter"] == "deterministic", r["D_over_S1"] > 0)
        yield fam, q95 / s95 - 1, q99 / s99 - 1
    for r in json.loads((RESULTS / "single_instance_holdout.json").read_text()):
        if r["family"] == "approximation":
            yield family_of(1, r["jitter"] == "deterministic", r["D_over_S1"] > 0), \
                r["p95"]["error"], r["p99"]["error"]
    for r in _renewal():
        yield family_of(r["c"], True, True, renewal=True), r["p95"]["error"], r["p99"]["error"]


def _renewal():
    return json.loads((RESULTS / "renewal_batch.json").read_text())


def _mean_rows():
    """(family, mean batch size error, utilization error) of the grid's batch-model
    approximations (one instance: the nodes with a delay; without one it is numerical) and of
    the renewal campaign."""
    for r in json.loads((RESULTS / "batch_size_accuracy.json").read_text()):
        if r["c"] > 1 or r["D_over_S1"] > 0:
            fam = family_of(r["c"], r["jitter"] == "deterministic", r["D_over_S1"] > 0)
            (qb, sb), (qu, su) = r["batch"], r["utilization"]
            yield fam, qb / sb - 1, qu / su - 1
    for r in _renewal():
        (qb, sb), (qu, su) = r["batch"], r["utilization"]
        yield family_of(r["c"], True, True, renewal=True), qb / sb - 1, qu / su - 1


def _range(x):
    return round(float(np.min(x)), 3), round(float(np.max(x)), 3)


def measured() -> dict:
    """family -> Measured, the errors rounded to 0.1% as qmodel.theory.measured holds them."""
    quantiles, means = defaultdict(list), defaultdict(list)
    for fam, e95, e99 in _rows():
        quantiles[fam].append((e95, e99))
    for fam, eb, eu in _mean_rows():
        means[fam].append((eb, eu))
    out = {}
    for fam in sorted(quantiles):
        e, m = np.array(quantiles[fam]), np.array(means[fam])
        out[fam] = Measured(len(e), _range(e[:, 0]), _range(e[:, 1]),
                            round(float(np.median(np.abs(e))), 3), len(m), _range(m[:, 0]),
                            _range(m[:, 1]))
    return out


def _percent(text: str) -> float:
    return round(float(text.rstrip("%")) / 100, 3)


def summaries() -> dict:
    """qmodel.theory.measured.SUMMARIES as the campaigns' stored summaries give it."""
    out = {}
    lines = (RESULTS / "router_accuracy_full.txt").read_text().splitlines()
    lines = lines[next(i for i, x in enumerate(lines) if x.startswith("family ")):]  # summary
    for family in ("round_robin", "power_of_two (in predict)",
                   "least_outstanding (in predict), B = 1 balanced"):
        line = next(x for x in lines if x.startswith(family + "  "))
        n, m99, w99, m95, w95 = line[len(family):].split()[:5]
        out[family] = (int(n), _percent(m95), _percent(w95), _percent(m99), _percent(w99))
    text = (RESULTS / "renewal_multi_server.txt").read_text()
    found = {p: re.search(rf"^{p}: median \|error\| ([\d.]+%), worst ([\d.]+%) over (\d+) ",
                          text, re.M) for p in ("p95", "p99")}
    out["GI/G/c fast server"] = (int(found["p99"].group(3)),
                                 *(_percent(found[p].group(g)) for p in ("p95", "p99")
                                   for g in (1, 2)))
    return out


def main() -> None:
    print("MEASURED = {")
    for fam, m in measured().items():
        print(f"    {json.dumps(fam)}: Measured(\n"
              f"        nodes={m.nodes}, p95={m.p95}, p99={m.p99}, median={m.median},\n"
              f"        batch_nodes={m.batch_nodes}, mean_batch_size={m.mean_batch_size}, "
              f"utilization={m.utilization}),")
    print("}\n\nSUMMARIES = {")
    for family, value in summaries().items():
        print(f"    {json.dumps(family)}: {value},")
    print("}")


if __name__ == "__main__":
    main()
