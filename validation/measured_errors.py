"""The measured errors the approximate models state, recomputed from the stored campaigns.

Every approximate result of ``qmodel.predict`` carries the measured error of its family
(:class:`qmodel.latency.MeasuredError`) in ``accuracy.measured``; the docs quote the same
figures. They come from one table, qmodel/theory/measured_errors.json, which this script
writes from the campaigns' stored results in validation/results/:

- the batch model's families (one instance; several instances by jitter and delay; renewal
  arrivals) from predict_accuracy.json (the accuracy grid), multi_instance_holdout.json (with
  the shipped pass count), single_instance_holdout.json and renewal_batch.json, with mean
  batch size and utilization errors from batch_size_accuracy.json and renewal_batch.json;
- the router families from router_accuracy_full.json (N = 2-128 nodes, B = 1, 8, 32);
- least outstanding as round robin at max_batch_size 4 (least_outstanding_small_batch.txt)
  and under renewal arrivals (least_outstanding_renewal.txt);
- the GI/G/c fast server (renewal_multi_server.txt).

tests/test_measured.py recomputes the table and fails when the stored one is stale. After
rerunning a campaign: ``python validation/measured_errors.py --write``, then
``python -m qmodel.campaign.doc_tables --write`` (the docs' tables quote the same figures).
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict

import numpy as np

from qmodel.campaign.results import stored_log, stored_results
from qmodel.campaign.summaries import (figures, mean_errors, printed_errors, router_class,
                                       router_error, several_instance_error)
from qmodel.latency import ErrorRange, MeasuredError
from qmodel.theory import measured as table

GRID = "validation/predict_accuracy.py"


# ---- the batch model ----------------------------------------------------------------------
def _batch_rows():
    """(family, p95 error, p99 error) of every batch-model approximation the campaigns ran."""
    for r in stored_results("predict_accuracy.json"):
        # every batching node (max_batch_size > 1) is the batch model's
        if r["family"] == "approximation" and r["B"] > 1:
            fam = table.family_of(r["c"], r["jitter"] == "deterministic", r["D_over_S1"] > 0)
            yield fam, r["p95"]["error"], r["p99"]["error"]
    for r in stored_results("multi_instance_holdout.json"):    # with the shipped pass count
        fam = table.family_of(r["c"], r["jitter"] == "deterministic", r["D_over_S1"] > 0)
        yield fam, several_instance_error(r, "p95"), several_instance_error(r, "p99")
    for r in stored_results("single_instance_holdout.json"):
        if r["family"] == "approximation":
            yield (table.family_of(1, r["jitter"] == "deterministic", r["D_over_S1"] > 0),
                   r["p95"]["error"], r["p99"]["error"])
    for r in stored_results("renewal_batch.json"):
        yield (table.family_of(r["c"], True, True, renewal=True), r["p95"]["error"],
               r["p99"]["error"])


def _batch_mean_rows():
    """(family, mean batch size error, utilization error): the grid's batch-model
    approximations (one instance: the nodes with a delay; without one it is numerical) and
    the renewal campaign."""
    for r in stored_results("batch_size_accuracy.json"):
        if r["c"] > 1 or r["D_over_S1"] > 0:
            fam = table.family_of(r["c"], r["jitter"] == "deterministic", r["D_over_S1"] > 0)
            yield fam, *mean_errors(r)
    for r in stored_results("renewal_batch.json"):
        yield table.family_of(r["c"], True, True, renewal=True), *mean_errors(r)


_BATCH_SOURCES = {
    "batch_one_instance": (GRID, "validation/single_instance_holdout.py",
                           "validation/batch_size_accuracy.py"),
    "batch_renewal_one_instance": ("validation/renewal_batch.py",),
    "batch_renewal_several_instances": ("validation/renewal_batch.py",),
}
_SEVERAL_SOURCES = (GRID, "validation/multi_instance_holdout.py",
                    "validation/batch_size_accuracy.py")


def _error_range(errors) -> ErrorRange:
    f = figures(errors)
    return ErrorRange(round(f.low, 3), round(f.high, 3), round(f.median, 3))


def _signed_range(errors) -> tuple:
    f = figures(errors)
    return round(f.low, 3), round(f.high, 3)


def batch_families() -> dict:
    quantiles, means = defaultdict(list), defaultdict(list)
    for fam, e95, e99 in _batch_rows():
        quantiles[fam].append((e95, e99))
    for fam, eb, eu in _batch_mean_rows():
        means[fam].append((eb, eu))
    out = {}
    for fam in sorted(quantiles):
        e, m = np.array(quantiles[fam]), np.array(means[fam])
        out[fam] = MeasuredError(
            family=fam, description=table.DESCRIPTIONS[fam], configurations=len(e),
            p95=_error_range(e[:, 0]), p99=_error_range(e[:, 1]),
            sources=_BATCH_SOURCES.get(fam, _SEVERAL_SOURCES),
            batch_configurations=len(m), mean_batch_size=_signed_range(m[:, 0]),
            utilization=_signed_range(m[:, 1]))
    return out


# ---- routers --------------------------------------------------------------------------------
def router_families() -> dict:
    """The router grid's families (:func:`qmodel.campaign.summaries.router_class`, which also
    groups the docs' router table)."""
    errors = defaultdict(list)
    for r in stored_results("router_accuracy_full.json"):
        fam = None if "declined" in r else router_class(r).family
        if fam is not None:
            errors[fam].append([router_error(r, q) for q in ("p50", "p95", "p99")])
    return {fam: _with_quantiles(fam, np.array(e), ("validation/router_accuracy.py",))
            for fam, e in sorted(errors.items())}


def _with_quantiles(fam, e, sources) -> MeasuredError:
    """A family from an (n, 3) array of p50/p95/p99 errors (or (n, 2) of p95/p99)."""
    p50 = _error_range(e[:, 0]) if e.shape[1] == 3 else None
    return MeasuredError(family=fam, description=table.DESCRIPTIONS[fam],
                         configurations=len(e), p95=_error_range(e[:, -2]),
                         p99=_error_range(e[:, -1]), sources=sources, p50=p50)


def least_outstanding_families() -> dict:
    small = printed_errors(stored_log("least_outstanding_small_batch.txt"),
                           keep=lambda line: line.startswith("B=4 "))
    renewal = printed_errors(stored_log("least_outstanding_renewal.txt"))
    return {
        "least_outstanding_as_round_robin_b4": _with_quantiles(
            "least_outstanding_as_round_robin_b4", small,
            ("validation/least_outstanding_small_batch.py",)),
        "least_outstanding_as_round_robin_renewal": _with_quantiles(
            "least_outstanding_as_round_robin_renewal", renewal,
            ("validation/least_outstanding_renewal.py",)),
    }


def fast_server_family() -> dict:
    rows = []
    for line in stored_log("renewal_multi_server.txt"):
        found = re.findall(r"([-+][\d.]+)%", line)
        if len(found) == 2:
            rows.append([float(x) / 100 for x in found])
    return {"fast_server": _with_quantiles("fast_server", np.array(rows),
                                           ("validation/renewal_multi_server.py",))}


def measured() -> dict:
    """family -> MeasuredError, from the stored results."""
    return (batch_families() | router_families() | least_outstanding_families()
            | fast_server_family())


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true",
                    help=f"write the table to {table.TABLE_FILE.name}")
    args = ap.parse_args(argv)
    families = measured()
    for m in families.values():
        print(f"{m.family:42} {m.configurations:4}  p95 {m.p95.low:+.1%}..{m.p95.high:+.1%}  "
              f"p99 {m.p99.low:+.1%}..{m.p99.high:+.1%}")
    if args.write:
        table.write_table(families)
        print(f"wrote {table.TABLE_FILE}")


if __name__ == "__main__":
    main()
