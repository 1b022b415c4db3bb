"""Measured errors of the approximate models, one table for results and docs alike.

An approximation states how far off it has been measured to be on systems like the one asked
about: its result's ``accuracy.measured`` holds the :class:`~qmodel.latency.MeasuredError` of
its family (the relative errors of the predicted p95 and p99 against the simulator over a
validation campaign's configurations). The figures live in measured_errors.json beside this
module, written by ``validation/measured_errors.py --write`` from the campaigns' stored
results; tests/test_measured.py fails when the table and the stored results disagree, and the
docs' accuracy tables are generated from the same file
(``python -m qmodel.campaign.doc_tables --write``).

Families
--------
The batch model (:mod:`qmodel.theory.batch`) is exact up to its lattice for one instance
without a delay; elsewhere it approximates, and its families split by instance count, service
jitter and delay (:func:`family_of`). The router and multi-server models have one family each
(:data:`DESCRIPTIONS` says which configurations belong to which).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from ..latency import ErrorRange, MeasuredError

__all__ = ["DESCRIPTIONS", "TABLE_FILE", "family_of", "measured", "measured_table",
           "write_table"]

TABLE_FILE = Path(__file__).with_name("measured_errors.json")

# family key -> which configurations it covers (completes "measured on N ...")
DESCRIPTIONS = {
    "batch_one_instance": "one-instance batching nodes with a delay or several preferred sizes",
    "batch_several_deterministic_no_delay":
        "several-instance batching nodes, deterministic service, no delay",
    "batch_several_deterministic_delay":
        "several-instance batching nodes, deterministic service, with a delay",
    "batch_several_jittery_no_delay":
        "several-instance batching nodes, jittery service, no delay",
    "batch_several_jittery_delay":
        "several-instance batching nodes, jittery service, with a delay",
    "batch_renewal_one_instance":
        "one-instance batching nodes under renewal arrivals (scv 0.5 and 2)",
    "batch_renewal_several_instances":
        "several-instance batching nodes under renewal arrivals (scv 0.5 and 2)",
    "round_robin": "round-robin clusters (N = 2-128 nodes, max_batch_size 1, 8, 32)",
    "power_of_two_mean_field":
        "power-of-two clusters inside the mean-field model's domain (N = 4-128 nodes)",
    "least_outstanding_balanced":
        "least-outstanding clusters of one-request nodes (N = 2-128)",
    "least_outstanding_as_round_robin":
        "least-outstanding clusters of batching nodes, max_batch_size 8 and 32 (N = 2-128)",
    "least_outstanding_as_round_robin_b4":
        "least-outstanding clusters of batching nodes, max_batch_size 4 (N = 2-32)",
    "least_outstanding_as_round_robin_renewal":
        "least-outstanding clusters of batching nodes under renewal arrivals (scv 0.5 and 2, "
        "max_batch_size 8 and 32, N = 4-32)",
    "fast_server": "several-instance nodes without batching (GI/G/c: c = 2-8, arrival scv "
                   "0.25-2, four service laws)",
}


def family_of(instances: int, deterministic: bool, delay: bool, renewal: bool = False) -> str:
    """The measured family of a batch node whose result is an approximation.

    Renewal (non-Poisson) arrivals have families of their own, by instance count only (their
    campaign is smaller than the Poisson ones).

    Examples
    --------
    >>> family_of(4, deterministic=True, delay=False)
    'batch_several_deterministic_no_delay'
    >>> family_of(1, deterministic=False, delay=True)
    'batch_one_instance'
    >>> family_of(2, deterministic=True, delay=False, renewal=True)
    'batch_renewal_several_instances'
    """
    if renewal:
        return ("batch_renewal_one_instance" if instances == 1
                else "batch_renewal_several_instances")
    if instances == 1:
        return "batch_one_instance"
    return (f"batch_several_{'deterministic' if deterministic else 'jittery'}_"
            f"{'delay' if delay else 'no_delay'}")


@lru_cache(maxsize=1)
def measured_table() -> dict:
    """family -> MeasuredError, as stored in measured_errors.json."""
    return {fam: _from_json(fam, row)
            for fam, row in json.loads(TABLE_FILE.read_text()).items()}


def measured(family: str) -> MeasuredError:
    """The measured error of ``family``.

    Examples
    --------
    >>> m = measured("round_robin")
    >>> m.configurations, m.sources
    (150, ('validation/router_accuracy.py',))
    """
    table = measured_table()
    if family not in table:
        raise ValueError(f"family must be one of {sorted(table)}, got {family!r}")
    return table[family]


def write_table(families: dict) -> None:
    """Store family -> MeasuredError as measured_errors.json (validation/measured_errors.py)."""
    rows = {fam: _to_json(m) for fam, m in sorted(families.items())}
    TABLE_FILE.write_text(json.dumps(rows, indent=1) + "\n")
    measured_table.cache_clear()


def _to_json(m: MeasuredError) -> dict:
    def rng(r):
        return None if r is None else [r.low, r.high, r.median]
    return {"configurations": m.configurations, "p50": rng(m.p50), "p95": rng(m.p95),
            "p99": rng(m.p99), "sources": list(m.sources),
            "batch_configurations": m.batch_configurations,
            "mean_batch_size": None if m.mean_batch_size is None else list(m.mean_batch_size),
            "utilization": None if m.utilization is None else list(m.utilization)}


def _from_json(family: str, row: dict) -> MeasuredError:
    def rng(r):
        return None if r is None else ErrorRange(*r)
    return MeasuredError(
        family=family, description=DESCRIPTIONS[family], configurations=row["configurations"],
        p95=rng(row["p95"]), p99=rng(row["p99"]), sources=tuple(row["sources"]),
        p50=rng(row["p50"]), batch_configurations=row["batch_configurations"],
        mean_batch_size=None if row["mean_batch_size"] is None else tuple(row["mean_batch_size"]),
        utilization=None if row["utilization"] is None else tuple(row["utilization"]))
