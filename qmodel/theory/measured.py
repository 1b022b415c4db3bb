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
import re
from functools import lru_cache
from pathlib import Path

from ..latency import ErrorRange, MeasuredError

__all__ = ["DESCRIPTIONS", "TABLE_FILE", "CLUSTER_FAMILIES", "FEATURES", "family_of",
           "several_instance_family", "prefetch_family", "delay_acts",
           "configuration_features", "router_choices", "measured", "measured_table", "write_table"]

TABLE_FILE = Path(__file__).with_name("measured_errors.json")

# family key -> which configurations it covers (completes "measured on N ..."); where each
# was measured, feature by feature, is its domain (MeasuredError.domain)
DESCRIPTIONS = {
    "batch_one_instance": "one-instance batching nodes with a delay",
    "batch_one_instance_preferred": "one-instance batching nodes with preferred sizes below "
                                    "max_batch_size",
    "batch_several_deterministic_no_delay":
        "several-instance batching nodes, deterministic service, no delay",
    "batch_several_deterministic_delay":
        "several-instance batching nodes, deterministic service, with a delay",
    "batch_several_bunched":
        "several-instance batching nodes, deterministic service (or jitter cv up to 0.02), "
        "no delay (or up to 0.02 S(1)), whose instances free together (the bunched model)",
    "batch_several_jittery_no_delay":
        "several-instance batching nodes, jittery service, no delay",
    "batch_several_jittery_delay":
        "several-instance batching nodes, jittery service, with a delay",
    "batch_renewal_one_instance": "one-instance batching nodes under renewal arrivals",
    "batch_renewal_several_instances": "several-instance batching nodes under renewal arrivals",
    "round_robin": "round-robin clusters",
    "power_of_two_mean_field": "power-of-two clusters (mean-field model)",
    "least_outstanding_balanced": "least-outstanding clusters of one-request nodes",
    "least_outstanding_as_round_robin":
        "least-outstanding clusters of batching nodes, max_batch_size 8 or more",
    "least_outstanding_as_round_robin_b4":
        "least-outstanding clusters of batching nodes, max_batch_size 4-7",
    "least_outstanding_as_round_robin_renewal":
        "least-outstanding clusters of batching nodes under renewal arrivals",
    "least_outstanding_several_delay":
        "least-outstanding clusters of batching nodes of several instances with a delay (as "
        "round robin)",
    "least_outstanding_several_no_delay":
        "least-outstanding clusters of batching nodes of several instances without a delay "
        "(as round robin)",
    "round_robin_several_delay":
        "round-robin clusters of batching nodes of several instances with a delay",
    "round_robin_several_no_delay":
        "round-robin clusters of batching nodes of several instances without a delay",
    "power_of_two_several_delay":
        "power-of-two clusters of batching nodes of several instances with a delay (as round "
        "robin over 2)",
    "power_of_two_several_no_delay":
        "power-of-two clusters of batching nodes of several instances without a delay (as "
        "round robin over 2)",
    "fast_server": "several-instance nodes without batching (GI/G/c)",
    "prefetch_one_instance":
        "one-instance nodes of Triton's prefetching batcher, as forming batches when the "
        "instance frees",
    "prefetch_several_instances":
        "several-instance nodes of Triton's prefetching batcher, as forming batches when an "
        "instance frees",
    "ensemble": "ensembles of 2-4 batching stages (chains, fan-out, fan-in)",
    "traffic_pointwise_stationary":
        "20 s windows of traffic that changes (steps, ramps, a compressed day, autoscaled "
        "flash sales), each second at its stationary law",
    "extrapolated": "answers given outside their family's measured domain "
                    "(extrapolate=True), configurations drawn at random",
    "traffic_fluid_backlog":
        "20 s windows of overloads and their drain (a backlog held, or near capacity), by "
        "the fluid and diffusion backlog",
}


# families measured on whole clusters: their errors cover the nodes' models inside them
CLUSTER_FAMILIES = frozenset({"round_robin", "power_of_two_mean_field",
                              "least_outstanding_balanced", "least_outstanding_as_round_robin",
                              "least_outstanding_as_round_robin_b4",
                              "least_outstanding_as_round_robin_renewal",
                              "least_outstanding_several_delay",
                              "least_outstanding_several_no_delay",
                              "power_of_two_several_delay", "power_of_two_several_no_delay",
                              "round_robin_several_delay", "round_robin_several_no_delay"})

# the features a measured domain bounds (configuration_features computes them)
FEATURES = {
    "max_batch_size": "the node's max_batch_size",
    "instances": "instances per node",
    "load": "arrival rate over capacity",
    "delay_over_s1": "max_queue_delay in units of S(1)",
    "jitter_cv": "the service time's largest coefficient of variation over batch sizes",
    "service_growth": "(S(B) - S(1)) / ((B - 1) S(1)): what one more request adds to a "
                      "batch's service time, in units of S(1) (b / (a + b) for a + b k)",
    "arrival_scv": "squared coefficient of variation of the interarrival times",
    "nodes": "nodes behind the router",
    "choices": "nodes a power-of-d router samples per request (d)",
    "preferred_below_max": "preferred batch sizes below max_batch_size",
    "smallest_preferred_over_max": "the smallest preferred batch size over max_batch_size (1 "
                                   "without preferred sizes below it)",
    "queue_limit": "1 with a finite max_queue_size, 0 without",
    "prefetch": "the share of late requests that join a batch Triton's batcher formed ahead "
                "(Node.prefetch; none where the node does not prefetch)",
    "stages": "stages of an ensemble (its other features: the largest over its stages)",
    "utilization": "an ensemble's largest stage utilization, as its stages' models predict",
}


def configuration_features(node, load: float, arrival_scv: float = 1.0,
                           nodes: int = 1, choices: int | None = None) -> dict:
    """The features a measured domain bounds, of a node (or a cluster of ``nodes`` such
    nodes) at ``load`` under arrivals of interarrival scv ``arrival_scv``; ``choices``: the d
    of a power-of-d router (None for other routers, whose domains do not bound it).

    Examples
    --------
    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(2e-3, 0.5e-3, jitter=("gamma", 0.5)),
    ...                max_batch_size=8, max_queue_delay=1e-3, preferred_batch_sizes=(4, 8))
    >>> f = configuration_features(node, 0.7)
    >>> f["delay_over_s1"], f["jitter_cv"], f["preferred_below_max"]
    (0.4, 0.5, 1)
    >>> f["smallest_preferred_over_max"]
    0.5
    >>> round(f["service_growth"], 12)
    0.2
    """
    service, B = node.service, node.max_batch_size
    s1 = float(service.mean(1))
    cv = service.largest_cv(B)
    growth = None if B == 1 else (float(service.mean(B)) - s1) / ((B - 1) * s1)
    delay = node.max_queue_delay / s1 if delay_acts(node) else 0.0
    return {"max_batch_size": B, "instances": node.instances, "load": float(load),
            "delay_over_s1": delay, "jitter_cv": cv,
            "service_growth": growth,
            "arrival_scv": float(arrival_scv), "nodes": int(nodes),
            "preferred_below_max": sum(1 for p in node.preferred_batch_sizes if p < B),
            "smallest_preferred_over_max": min((*node.preferred_batch_sizes, B)) / B,
            "queue_limit": 1 if node.max_queue_size else 0, "choices": choices,
            "prefetch": node.prefetch if node.prefetches else None}


def prefetch_family(instances: int) -> str:
    """The family of a prefetching node's answer (the model of the node forming batches when
    an instance frees, measured against the prefetching node), by the node's instances.

    Examples
    --------
    >>> prefetch_family(1), prefetch_family(4)
    ('prefetch_one_instance', 'prefetch_several_instances')
    """
    return "prefetch_one_instance" if instances == 1 else "prefetch_several_instances"


def delay_acts(node) -> bool:
    """Whether ``node``'s max_queue_delay changes anything: not at max_batch_size 1, where a
    batch of one is full at once (Triton and the simulator dispatch alike with and without
    it), so a delay there is no feature and picks no family.

    Examples
    --------
    >>> import qmodel as qm
    >>> delay_acts(qm.Node(qm.ServiceTime.affine(1e-3), max_batch_size=1, max_queue_delay=1e-3))
    False
    """
    return node.max_queue_delay > 0 and node.max_batch_size > 1


def router_choices(system) -> int | None:
    """The ``choices`` feature of ``system``: the d of a power-of-d router, None for a node
    or any other router (whose domains do not bound it).

    Examples
    --------
    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(1e-3), max_batch_size=4)
    >>> router_choices(qm.Cluster(node, count=8, router="power_of_two"))
    2
    >>> router_choices(qm.Cluster(node, count=8, router="round_robin")) is None
    True
    """
    router = getattr(system, "router", None)
    return router.choices if router is not None and router.kind.name == "power_of_d" else None


def several_instance_family(router: str, delay: bool) -> str:
    """The measured family of ``router`` over batching nodes of several instances, with or
    without a delay (validation/several_instance_routers.py).

    Examples
    --------
    >>> several_instance_family("least_outstanding", delay=True)
    'least_outstanding_several_delay'
    """
    return f"{router}_several_{'delay' if delay else 'no_delay'}"


def family_of(instances: int, deterministic: bool, delay: bool, renewal: bool = False,
              preferred: bool = False) -> str:
    """The measured family of a batch node whose result is an approximation.

    Renewal (non-Poisson) arrivals have families of their own, by instance count only (their
    campaign is smaller than the Poisson ones). One instance splits by ``preferred`` (a
    preferred size below max_batch_size), whose passed-over requests are approximated.

    Examples
    --------
    >>> family_of(4, deterministic=True, delay=False)
    'batch_several_deterministic_no_delay'
    >>> family_of(1, deterministic=False, delay=True)
    'batch_one_instance'
    >>> family_of(2, deterministic=True, delay=False, renewal=True)
    'batch_renewal_several_instances'
    >>> family_of(1, deterministic=True, delay=True, preferred=True)
    'batch_one_instance_preferred'
    """
    if renewal:
        return ("batch_renewal_one_instance" if instances == 1
                else "batch_renewal_several_instances")
    if instances == 1:
        return "batch_one_instance_preferred" if preferred else "batch_one_instance"
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
    >>> m.sources
    ('validation/router_accuracy.py', 'validation/wide_domain.py', 'validation/wide_domain.py --ordinary')
    """
    table = measured_table()
    if family not in table:
        raise ValueError(f"family must be one of {sorted(table)}, got {family!r}")
    return table[family]


def write_table(families: dict) -> None:
    """Store family -> MeasuredError as measured_errors.json (validation/measured_errors.py)."""
    rows = {fam: _to_json(m) for fam, m in sorted(families.items())}
    # each innermost list (a range, a measured point) on one line
    text = re.sub(r"\[([^\[\]{}]*)\]", lambda m: "[" + " ".join(m.group(1).split()) + "]",
                  json.dumps(rows, indent=1))
    TABLE_FILE.write_text(text + "\n")
    measured_table.cache_clear()


def _to_json(m: MeasuredError) -> dict:
    def rng(r):
        return None if r is None else [r.low, r.high, r.median]
    return {"configurations": m.configurations, "p50": rng(m.p50), "p95": rng(m.p95),
            "p99": rng(m.p99), "sources": list(m.sources),
            "batch_configurations": m.batch_configurations,
            "mean_batch_size": None if m.mean_batch_size is None else list(m.mean_batch_size),
            "utilization": None if m.utilization is None else list(m.utilization),
            "domain": {f: [lo, hi] for f, lo, hi in m.domain},
            "points": [list(p) for p in m.points], "misses": [list(p) for p in m.misses]}


def _from_json(family: str, row: dict) -> MeasuredError:
    def rng(r):
        return None if r is None else ErrorRange(*r)
    return MeasuredError(
        family=family, description=DESCRIPTIONS[family], configurations=row["configurations"],
        p95=rng(row["p95"]), p99=rng(row["p99"]), sources=tuple(row["sources"]),
        p50=rng(row["p50"]), batch_configurations=row["batch_configurations"],
        mean_batch_size=None if row["mean_batch_size"] is None else tuple(row["mean_batch_size"]),
        utilization=None if row["utilization"] is None else tuple(row["utilization"]),
        domain=tuple((f, lo, hi) for f, (lo, hi) in row.get("domain", {}).items()),
        points=tuple(tuple(p) for p in row.get("points", ())),
        misses=tuple(tuple(p) for p in row.get("misses", ())))
