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
- least outstanding and power of two over nodes of several instances
  (several_instance_routers.json.gz);
- bunched instances (bunched_draws.json, bunched_delays.json and bunched_jitter.json, with
  the stored rows of the batch model's campaigns that the rule takes);
- the GI/G/c fast server (renewal_multi_server.txt);
- Triton's prefetching batcher, as forming batches when an instance frees
  (prefetch_accuracy.json);
- ensembles of 2-4 stages (ensemble_accuracy.json);
- the time-varying model, window by window, pointwise stationary and fluid backlog
  (traffic_accuracy.json);
- answers given outside their family's measured domain, over random configurations
  (domain_check.json).

tests/test_measured.py recomputes the table and fails when the stored one is stale. After
rerunning a campaign: ``python validation/measured_errors.py --write``, then
``python -m qmodel.campaign.doc_tables --write`` (the docs' tables quote the same figures).
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from qmodel.campaign.grids import GRID_SERVICE, HOLDOUT_SERVICE
from qmodel.campaign.results import stored_log, stored_results
from qmodel.campaign.summaries import (declined_behind_router, figures, mean_errors,
                                       printed_errors, router_class, router_error,
                                       several_instance_error)
from qmodel.latency import ErrorRange, MeasuredError
from qmodel.theory import measured as table
from qmodel.theory.batch.bunched import FAMILY as BUNCHED, bunches

GRID = "validation/predict_accuracy.py"


# A configuration whose p95 or p99 error lies beyond this (the grids' largest is 19.7%) is a
# miss: its family's domain keeps it out, with every configuration within NEIGHBOURHOOD of it.
TOLERANCE = 0.2
WIDE = "validation/wide_domain.py"


@dataclass
class Row:
    """One measured configuration of a family: its errors and features, and who measured it."""
    p50: float | None
    p95: float
    p99: float
    features: dict
    source: str

    @property
    def good(self) -> bool:
        return abs(self.p95) <= TOLERANCE and abs(self.p99) <= TOLERANCE


def _features(B, load, d=0.0, c=1, cv=0.0, scv=1.0, nodes=1, preferred=(),
              service=GRID_SERVICE) -> dict:
    """A grid configuration's features (the names of
    :func:`qmodel.theory.measured.configuration_features`); the grids' S(k) = a + b k;
    ``preferred``: the preferred batch sizes below B."""
    growth = None if B == 1 else service.per_item / service.s1
    return {"max_batch_size": B, "instances": c, "load": load, "delay_over_s1": d,
            "jitter_cv": cv, "service_growth": growth, "arrival_scv": scv, "nodes": nodes,
            "preferred_below_max": len(preferred),
            "smallest_preferred_over_max": min((*preferred, B)) / B, "queue_limit": 0}


def _cv(service, jitter: str) -> float:
    return 0.0 if jitter == "deterministic" else service.cv


# ---- the batch model ----------------------------------------------------------------------
def _grid_family(r, service) -> str:
    """The family of a grid or holdout row's batch node (``service``'s): the bunched model's
    where its instances bunch, else by instances, jitter and delay."""
    node = service.node(r["B"], r["D_over_S1"], r["c"], r["jitter"])
    if bunches(node, r["load"] * node.capacity):
        return BUNCHED
    return table.family_of(r["c"], r["jitter"] == "deterministic", r["D_over_S1"] > 0)


def _batch_rows():
    """(family, Row) of every batch-model approximation the grids ran."""
    for r in stored_results("predict_accuracy.json"):
        # every batching node (max_batch_size > 1) is the batch model's
        if r["family"] == "approximation" and r["B"] > 1:
            fam = _grid_family(r, GRID_SERVICE)
            yield fam, Row(None, r["p95"]["error"], r["p99"]["error"], _features(
                r["B"], r["load"], r["D_over_S1"], r["c"], _cv(GRID_SERVICE, r["jitter"])),
                GRID)
    for r in stored_results("multi_instance_holdout.json"):    # with the shipped pass count
        fam = _grid_family(r, HOLDOUT_SERVICE)
        yield fam, Row(None, several_instance_error(r, "p95"), several_instance_error(r, "p99"),
                       _features(r["B"], r["load"], r["D_over_S1"], r["c"],
                                 _cv(HOLDOUT_SERVICE, r["jitter"]), service=HOLDOUT_SERVICE),
                       "validation/multi_instance_holdout.py")
    for r in stored_results("single_instance_holdout.json"):
        if r["family"] == "approximation":
            fam = table.family_of(1, r["jitter"] == "deterministic", r["D_over_S1"] > 0,
                                  preferred=r["preferred"] != "B")
            yield fam, Row(None, r["p95"]["error"], r["p99"]["error"], _features(
                r["B"], r["load"], r["D_over_S1"], 1, _cv(HOLDOUT_SERVICE, r["jitter"]),
                preferred=(r["B"] // 2,) if r["preferred"] == "B/2,B" else (),
                service=HOLDOUT_SERVICE),
                "validation/single_instance_holdout.py")
    for r in stored_results("renewal_batch.json"):
        yield (table.family_of(r["c"], True, True, renewal=True),
               Row(None, r["p95"]["error"], r["p99"]["error"], _features(
                   r["B"], r["load"], r["D_over_S1"], r["c"], _cv(GRID_SERVICE, r["jitter"]),
                   scv=r["scv"]), "validation/renewal_batch.py"))


def _batch_mean_rows():
    """(family, mean batch size error, utilization error): the grid's batch-model
    approximations (one instance: the nodes with a delay; without one it is numerical) and
    the renewal campaign."""
    for r in stored_results("batch_size_accuracy.json"):
        if r["c"] > 1 or r["D_over_S1"] > 0:
            yield _grid_family(r, GRID_SERVICE), *mean_errors(r)
    for r in stored_results("renewal_batch.json"):
        yield table.family_of(r["c"], True, True, renewal=True), *mean_errors(r)


# ---- routers --------------------------------------------------------------------------------
def _router_rows():
    """(family, Row) of the router grid (:func:`qmodel.campaign.summaries.router_class`,
    which also groups the docs' router table): one-instance deterministic GRID_SERVICE
    nodes."""
    for r in stored_results("router_accuracy_full.json"):
        fam = None if "declined" in r else router_class(r).family
        if fam is not None:
            features = _features(r["B"], r["load"], r["D"], nodes=r["N"])
            if r["router"] == "power_of_two":       # the grid samples d = 2 nodes
                features["choices"] = 2
            yield fam, Row(*(router_error(r, q) for q in ("p50", "p95", "p99")), features,
                           "validation/router_accuracy.py")


def _log_features(line) -> dict:
    """Features of a configuration a least-outstanding log prints ("B=4 D=0xS(1) N=2
    load=0.3 ..." or "B=8 N=4 scv=0.5 load=0.5 ..."): one-instance deterministic
    GRID_SERVICE nodes."""
    field = dict(re.findall(r"(B|D|N|scv|load)=([\d.]+)", line))
    return _features(int(field["B"]), float(field["load"]), float(field.get("D", 0)),
                     scv=float(field.get("scv", 1.0)), nodes=int(field["N"]))


def _least_outstanding_rows():
    """(family, Row): least outstanding as round robin at max_batch_size 4 and under
    renewal arrivals, from those campaigns' logs."""
    for fam, log, keep in (
            ("least_outstanding_as_round_robin_b4", "least_outstanding_small_batch",
             lambda line: line.startswith("B=4 ")),
            ("least_outstanding_as_round_robin_renewal", "least_outstanding_renewal",
             lambda line: True)):
        lines = [line for line in stored_log(f"{log}.txt")
                 if keep(line) and "model error" in line]
        for line, e in zip(lines, printed_errors(lines)):
            yield fam, Row(*e, _log_features(line), f"validation/{log}.py")


def _several_instance_router_rows():
    """(family, Row): least outstanding and power of two over batching nodes of several
    instances, as round robin (validation/several_instance_routers.py's grid), by delay:
    without one the grid's misses lie elsewhere (light loads, where the router finds an idle
    instance), and one domain for both would keep neither's."""
    for r in stored_results("several_instance_routers.json.gz"):
        # a family is measured on what its model answers: predict declines the nodes
        # whose instances free together behind these routers
        if "error" in r["p99"] and not declined_behind_router(r):
            yield table.several_instance_family(r["router"], r["d"] > 0), Row(
                *(r[q]["error"] for q in ("p50", "p95", "p99")), dict(r["features"]),
                "validation/several_instance_routers.py")


def _fast_server_rows():
    """(family, Row): the GI/G/c fast server, from its campaign's log and the accuracy
    grid's several-instance nodes without batching (lognormal; deterministic ones are
    M/D/c, exact)."""
    for line in stored_log("renewal_multi_server.txt"):
        found = re.findall(r"([-+][\d.]+)%", line)
        if len(found) == 2:
            # "jitter c scv load ...": a law's name, with its cv unless it has only one
            words = line.split()
            if words[0] in ("deterministic", "exponential"):
                cv, rest = float(words[0] == "exponential"), words[1:]
            else:
                cv, rest = float(words[1]), words[2:]
            c, scv, load = rest[:3]
            yield "fast_server", Row(None, *(float(x) / 100 for x in found), _features(
                1, float(load), c=int(c), cv=cv, scv=float(scv)),
                "validation/renewal_multi_server.py")
    for r in stored_results("predict_accuracy.json"):
        if r["family"] == "approximation" and r["B"] == 1:
            yield "fast_server", Row(None, r["p95"]["error"], r["p99"]["error"], _features(
                1, r["load"], c=r["c"], cv=_cv(GRID_SERVICE, r["jitter"])), GRID)


# ---- random configurations ------------------------------------------------------------------
def _wide_rows():
    """(family, Row) of the random configurations of validation/wide_domain.py (its wide
    draws and its ordinary ones, model_coverage.py's distribution under seeds 3501 and 3502) and
    validation/several_instance_jitter.py, the grid of validation/preferred_grid.py and the
    draws of validation/bunched_draws.py (rows
    of the same fields; those the self-check had refused measured again by
    validation/rerun_declined.py) that a model answered: a
    cluster's family where the answer quotes one (it covers the nodes' models), else the
    node's."""
    rows = [(r, WIDE) for r in stored_results("wide_domain.json")]
    rows += [(r, WIDE + " --ordinary") for name in ("ordinary_domain.json",
                                                    "ordinary_domain_2.json")
             for r in stored_results(name)]
    rows += [(r, "validation/preferred_grid.py") for r in stored_results("preferred_grid.json")]
    rows += [(r, "validation/bunched_draws.py") for r in stored_results("bunched_draws.json")]
    rows += [(r, "validation/bunched_draws.py --delays")
             for r in stored_results("bunched_delays.json")]
    rows += [(r, "validation/bunched_draws.py --jitter")
             for r in stored_results("bunched_jitter.json")]
    rows += [(r, "validation/several_instance_jitter.py")
             for name in ("several_instance_jitter.json", "several_instance_jitter_spread.json",
                          "several_instance_jitter_edge.json")
             for r in stored_results(name)]
    for r, source in rows:
        if "p99" not in r or not r["families"]:
            continue
        outer = [f for f in r["families"] if f in table.CLUSTER_FAMILIES]
        fam = outer[0] if outer else r["families"][0]
        if fam in table.CLUSTER_FAMILIES and "_several_" in fam:
            # by the delay feature, 0 where the delay does nothing (max_batch_size 1), as
            # predict now tells them; rows recorded before it did named the delay's family
            fam = table.several_instance_family(fam.split("_several_")[0],
                                                r["features"]["delay_over_s1"] > 0)
        features = dict(r["features"])
        below = [p for p in r["preferred"] if p < r["B"]]
        features["smallest_preferred_over_max"] = min((*below, r["B"])) / r["B"]
        if fam == "batch_one_instance" and features["preferred_below_max"]:
            fam = "batch_one_instance_preferred"   # rows recorded before the family split
        yield fam, Row(r["p50"]["error"], r["p95"]["error"], r["p99"]["error"], features,
                       source)


def _prefetch_rows():
    """(family, Row): prefetching nodes answered by the model of the same node forming
    batches when an instance frees, against the prefetching node simulated
    (validation/prefetch_accuracy.py), by instances. Nodes with preferred sizes below
    max_batch_size are left out, so that neither family covers them: a batch formed ahead at
    a preferred size grows only to a larger one, and inside such a domain 7% of 453 held-out
    answers missed their stated p99 range (25% with one instance; review of issue 35)."""
    for r in stored_results("prefetch_accuracy.json"):
        if "p99" in r and not r["features"]["preferred_below_max"]:
            yield table.prefetch_family(r["c"]), Row(
                *(r[q]["error"] for q in ("p50", "p95", "p99")), dict(r["features"]),
                "validation/prefetch_accuracy.py")


# ---- ensembles ------------------------------------------------------------------------------
def _ensemble_rows():
    """(family, Row): the ensembles of validation/ensemble_accuracy.py that the model
    answered, with the features of qmodel.theory.pipeline.ensemble_features."""
    for r in stored_results("ensemble_accuracy.json"):
        if "p99" in r:
            yield "ensemble", Row(r["p50"]["error"], r["p95"]["error"], r["p99"]["error"],
                                  dict(r["features"]), "validation/ensemble_accuracy.py")


def _extrapolated_rows():
    """(family, Row): the answers of validation/domain_check.py given outside their
    family's measured domain (the errors of an answer with ``extrapolate=True``)."""
    for r in stored_results("domain_check.json"):
        if "p99" in r and r["where"] in ("box_only", "outside_box"):
            yield "extrapolated", Row(r["p50"]["error"], r["p95"]["error"], r["p99"]["error"],
                                      {}, "validation/domain_check.py")


def _traffic_rows():
    """(family, Row): the 20 s windows of validation/traffic_accuracy.py, each of the family
    of the rule that answered it, with its node's features at the window's highest load."""
    for r in stored_results("traffic_accuracy.json"):
        yield r["family"], Row(r["p50"]["error"], r["p95"]["error"], r["p99"]["error"],
                               dict(r["features"]), "validation/traffic_accuracy.py")


# ---- domains --------------------------------------------------------------------------------
def _box(rows) -> dict:
    """feature -> [lowest, highest] over the rows (features without a value skipped)."""
    box = {}
    for f in rows[0].features:
        values = [r.features[f] for r in rows if r.features.get(f) is not None]
        if values:
            box[f] = [min(values), max(values)]
    return box


def _snapped(features: dict) -> dict:
    """Features to 12 significant digits: a grid value computed two ways (b / (a + b) for
    b / S(1) = 0.1 is 0.09999999999999998 or 0.10000000000000002) is one value, a neighbour
    of both, as :meth:`qmodel.latency.MeasuredError.outside` (which allows 1e-9 of slack)
    will judge them."""
    return {k: v if not isinstance(v, float) else float(f"{v:.12g}")
            for k, v in features.items()}


_BATCH_SOURCES = {
    "batch_one_instance": (GRID, "validation/single_instance_holdout.py",
                           "validation/batch_size_accuracy.py"),
    "batch_one_instance_preferred": ("validation/single_instance_holdout.py",),
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


def _family(fam: str, rows: list, means: list) -> MeasuredError:
    """The family's MeasuredError: its domain and the errors of the rows inside (the
    extrapolated answers: every row, no domain).

    The domain keeps every measured row: those within TOLERANCE as ``points``, the others as
    ``misses``. A configuration is inside within the range of the good rows, within
    NEIGHBOURHOOD of one of them and not within MISS_REACH of the radii of a miss
    (:meth:`qmodel.latency.MeasuredError.outside`); the family states the errors of the good
    rows that rule keeps inside (a good row next to a miss is not).
    """
    if fam == "extrapolated":
        box, inside, misses = {}, rows, []
    else:
        good = [r for r in rows if r.good]
        misses = [r for r in rows if not r.good]
        if not good:
            raise ValueError(f"family {fam!r}: none of its {len(rows)} configurations is "
                             f"within {TOLERANCE:.0%}; it has no domain to answer in")
        box = _box(good)
        probe = MeasuredError(fam, "", 0, ErrorRange(0, 0, 0), ErrorRange(0, 0, 0), (),
                              domain=tuple((f, lo, hi) for f, (lo, hi) in box.items()),
                              points=_points(box, good), misses=_points(box, misses))
        inside = [r for r in good if probe.outside(r.features) is None]
    sources = tuple(dict.fromkeys(r.source for r in rows))
    if fam in _BATCH_SOURCES or fam.startswith("batch_several"):
        sources = tuple(dict.fromkeys(_BATCH_SOURCES.get(fam, _SEVERAL_SOURCES) + sources))
    p50 = ([r.p50 for r in inside] if inside and all(r.p50 is not None for r in inside)
           else None)
    m = np.array(means) if means else None
    return MeasuredError(
        family=fam, description=table.DESCRIPTIONS[fam], configurations=len(inside),
        p95=_error_range([r.p95 for r in inside]), p99=_error_range([r.p99 for r in inside]),
        sources=sources, p50=None if p50 is None else _error_range(p50),
        batch_configurations=0 if m is None else len(m),
        mean_batch_size=None if m is None else _signed_range(m[:, 0]),
        utilization=None if m is None else _signed_range(m[:, 1]),
        domain=tuple((f, lo, hi) for f, (lo, hi) in box.items()),
        points=_points(box, inside), misses=_points(box, misses))


def _points(box, rows) -> tuple:
    """The rows' features in the order of ``box`` (full precision: a rounded point could
    fall outside its own box), each once."""
    def value(v):
        return None if v is None else float(v)
    return tuple(dict.fromkeys(tuple(value(r.features.get(f)) for f in box) for r in rows))


def measured() -> dict:
    """family -> MeasuredError, from the stored results."""
    rows, means = defaultdict(list), defaultdict(list)
    for source in (_batch_rows, _router_rows, _least_outstanding_rows,
                   _several_instance_router_rows, _fast_server_rows,
                   _wide_rows, _prefetch_rows, _ensemble_rows, _traffic_rows, _extrapolated_rows):
        for fam, row in source():
            row.features = _snapped(row.features)
            rows[fam].append(row)
    for fam, eb, eu in _batch_mean_rows():
        means[fam].append((eb, eu))
    return {fam: _family(fam, rows[fam], means.get(fam)) for fam in sorted(rows)}


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
