"""The docs' tables of measured figures, generated from the stored campaign results.

README.md and docs/accuracy.md quote the validation campaigns in tables that sit between
``<!-- BEGIN GENERATED: name -->`` and ``<!-- END GENERATED: name -->`` markers. This module
writes every such block from data, never from typed numbers:

- the measured error of an approximate family (p95/p99 median and worst |error|, signed
  ranges, mean batch size and utilization ranges) from the one table the results of
  ``qmodel.predict`` state, :func:`qmodel.theory.measured.measured_table`;
- every other figure from the campaigns' stored results in validation/results/: their rows
  (``.json``), or their logs (``.txt``) where a campaign stores no rows.

The groups of rows and their figures come from :mod:`qmodel.campaign.summaries`, which the
validation scripts' text summaries format too; this module only lays them out as Markdown.
The rows of the README's summary that are not approximate families (the exact and numerical
solvers, the random router, the textbook baseline) are such groups of the stored rows, not
stored in measured_errors.json: that table holds what an approximate result states, and no
result states these.

Run from the repository root (it reads the checkout's validation/results/)::

    python -m qmodel.campaign.doc_tables            # print every block
    python -m qmodel.campaign.doc_tables --check    # exit 1 and show the diff if one is stale
    python -m qmodel.campaign.doc_tables --write    # rewrite the stale blocks in place

After rerunning a campaign: ``python validation/measured_errors.py --write`` (the families'
table), then ``python -m qmodel.campaign.doc_tables --write``. tests/test_docs.py fails while
a block differs from what this module generates.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from pathlib import Path

import numpy as np

from ..theory.batch import PASSES
from ..theory.measured import measured_table, prefetch_family, several_instance_family
from .measure import QUANTILES
from .results import RESULTS, stored_log, stored_results
from .summaries import (HOLDOUT_MISS, baseline_group, batch_size_groups,
                        declined_behind_router, exact_and_numerical_group, figures,
                        grid_groups, pooled_figures, printed_errors, renewal_groups,
                        router_groups, several_instance_groups, single_instance_groups,
                        worst_rows)

__all__ = ["MARKER", "ROOT", "RESULTS", "DOCUMENTS", "COMMAND", "BLOCKS", "generate",
           "blocks_in", "refreshed", "stale", "write", "main", "simulator_vs_exact"]

ROOT = RESULTS.parents[1]
DOCUMENTS = ("README.md", "docs/accuracy.md", "docs/ensembles.md")
MARKER = re.compile(r"<!-- (BEGIN|END) GENERATED: ([\w.-]+) -->")
COMMAND = "python -m qmodel.campaign.doc_tables --write"


# ---- formatting ---------------------------------------------------------------------------
def _pct(x: float, digits: int = 1) -> str:
    return f"{x:.{digits}%}"


def _signed(x: float) -> str:
    return f"{x:+.1%}"


def _median_worst(f) -> str:
    """'median / worst' |error| of :class:`~qmodel.campaign.summaries.Figures` (or of a
    family's :class:`~qmodel.latency.ErrorRange`).

    Examples
    --------
    >>> from qmodel.campaign.summaries import figures
    >>> _median_worst(figures([0.01, -0.03, 0.02]))
    '2.0% / 3.0%'
    """
    return f"{_pct(f.median)} / {_pct(f.worst)}"


def _median_signed_worst(f) -> str:
    """'median |error| / signed worst' of :class:`~qmodel.campaign.summaries.Figures`.

    Examples
    --------
    >>> from qmodel.campaign.summaries import figures
    >>> _median_signed_worst(figures([0.01, -0.03, 0.02]))
    '2.0% / -3.0%'
    """
    return f"{_pct(f.median)} / {_signed(f.signed_worst)}"


def _table(header: list[str], rows: list[list]) -> list[str]:
    """A Markdown table.

    Examples
    --------
    >>> _table(["a", "b"], [[1, "x"]])
    ['| a | b |', '|---|---|', '| 1 | x |']
    """
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + [
        "| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]


def _in_ci(shares) -> str:
    """The shares of p95 and p99 inside the simulator's 99% CI widened by h."""
    return ", ".join(_pct(share, 0) for share in shares)


# ---- the blocks ---------------------------------------------------------------------------
# README's summary: (label, what the answer is, source): an approximate family of
# measured_table(), or the name of a row group computed here. Every family appears once.
SUMMARY = (
    ("M/M/c, M/D/c, M/G/1; batch node, one instance, no delay", "exact or numerical",
     "exact_and_numerical"),
    ("batch node, one instance, a delay", "approximation", "batch_one_instance"),
    ("batch node, one instance, preferred sizes below B", "approximation",
     "batch_one_instance_preferred"),
    ("batch node, several instances, deterministic, no delay", "approximation",
     "batch_several_deterministic_no_delay"),
    ("batch node, several instances that free together (bunched; deterministic or cv <= 0.02)",
     "approximation", "batch_several_bunched"),
    ("batch node, several instances, deterministic, a delay", "approximation",
     "batch_several_deterministic_delay"),
    ("batch node, several instances, jittery, no delay", "approximation",
     "batch_several_jittery_no_delay"),
    ("batch node, several instances, jittery, a delay", "approximation",
     "batch_several_jittery_delay"),
    ("batch node, renewal arrivals, one instance", "approximation",
     "batch_renewal_one_instance"),
    ("batch node, renewal arrivals, several instances", "approximation",
     "batch_renewal_several_instances"),
    ("several instances without batching (GI/G/c as one fast server)", "approximation",
     "fast_server"),
    ("random router (the errors are the simulator's)", "exact decomposition", "random"),
    ("round robin (Erlang-N arrivals per node)", "approximation", "round_robin"),
    ("power of two (mean field, inside its domain)", "approximation",
     "power_of_two_mean_field"),
    ("least outstanding, max_batch_size 1 (balanced queues)", "approximation",
     "least_outstanding_balanced"),
    ("least outstanding, max_batch_size >= 8 (as round robin)", "approximation",
     "least_outstanding_as_round_robin"),
    ("least outstanding, max_batch_size 4 (as round robin)", "approximation",
     "least_outstanding_as_round_robin_b4"),
    ("least outstanding, renewal arrivals (as round robin)", "approximation",
     "least_outstanding_as_round_robin_renewal"),
    ("round robin, several instances (with and without a delay)", "approximation",
     ("round_robin_several_delay", "round_robin_several_no_delay")),
    ("least outstanding, several instances (as round robin)", "approximation",
     ("least_outstanding_several_delay", "least_outstanding_several_no_delay")),
    ("power of two, several instances (as round robin over 2)", "approximation",
     ("power_of_two_several_delay", "power_of_two_several_no_delay")),
    ("Triton's prefetching batcher, sizing's ranking only (predict simulates it)",
     "approximation", ("prefetch_one_instance", "prefetch_several_instances")),
    ("ensembles of 2-4 stages (stage models combined)", "approximation", "ensemble"),
    ("traffic over time, 20 s windows: pointwise stationary", "approximation",
     "traffic_pointwise_stationary"),
    ("traffic over time, 20 s windows: fluid backlog of an overload", "approximation",
     "traffic_fluid_backlog"),
    ("any family outside its measured domain (extrapolate=True)", "approximation",
     "extrapolated"),
    ("textbook baseline (Kingman / Allen-Cunneen)", "not used: for comparison", "baseline"),
)


def accuracy_summary() -> list[str]:
    """README: one row per solver family, median and worst |error| of p95 and p99.

    Approximate families from :func:`measured_table`; the exact and numerical solvers from
    the accuracy grid and the one-instance holdout, the random router from the router grid,
    the baseline from the accuracy grid.
    """
    families = measured_table()
    named = {f for _, _, source in SUMMARY
             for f in (source if isinstance(source, tuple) else (source,))}
    missing = set(families) - named
    if missing:
        raise ValueError(f"families without a row in the README's summary: {sorted(missing)}")
    grid = stored_results("predict_accuracy.json")
    groups = {"exact_and_numerical": exact_and_numerical_group(
                  grid, stored_results("single_instance_holdout.json")),
              "baseline": baseline_group(grid),
              "random": next(g for g in router_groups(stored_results("router_accuracy_full.json"))
                             if g.name == "random")}
    out = []
    for label, answers, source in SUMMARY:
        if isinstance(source, tuple):
            group = (prefetch_group if source[0].startswith("prefetch")
                     else several_instance_group)(source)
            out.append([label, answers, len(group["p99"]), _median_worst(figures(group["p95"])),
                        _median_worst(figures(group["p99"]))])
            continue
        if source in families:
            m = families[source]
            out.append([label, answers, m.configurations, _median_worst(m.p95),
                        _median_worst(m.p99)])
            continue
        group = groups[source]
        out.append([label, answers, len(group.rows), _median_worst(group.figures["p95"]),
                    _median_worst(group.figures["p99"])])
    return _table(["solver family", "answers", "configs", "p95 median / worst",
                   "p99 median / worst"], out)


def _pooled_group(keys, rows, family_of) -> dict:
    """The p95 and p99 errors of the measured ``rows`` inside the domain of their family
    (``family_of(row)``, one of ``keys``), as the README's row pools them."""
    families = measured_table()
    errors = {"p95": [], "p99": []}
    for r in rows:
        family = family_of(r)
        if family in keys and "error" in r.get("p99", {}) and \
                families[family].outside(r["features"]) is None:
            for q in errors:
                errors[q].append(r[q]["error"])
    return errors


def prefetch_group(keys) -> dict:
    """validation/prefetch_accuracy.py's prefetching nodes, pooled over the families
    ``keys`` (:func:`_pooled_group`)."""
    return _pooled_group(keys, stored_results("prefetch_accuracy.json"),
                         lambda r: prefetch_family(r["c"]))


def several_instance_group(keys) -> dict:
    """validation/several_instance_routers.py's configurations, pooled over ``keys`` (a
    router's families over nodes of several instances, with and without a delay;
    :func:`_pooled_group`)."""
    rows = [r for r in stored_results("several_instance_routers.json.gz")
            if not declined_behind_router(r)]
    return _pooled_group(keys, rows, lambda r: several_instance_family(r["router"], r["d"] > 0))


# accuracy.md's batch families, in its order
BATCH_FAMILIES = (
    ("1 instance, a delay", "batch_one_instance"),
    ("1 instance, preferred sizes below max_batch_size", "batch_one_instance_preferred"),
    ("renewal arrivals (measured at scv 0.5 and 2), 1 instance", "batch_renewal_one_instance"),
    ("renewal arrivals (measured at scv 0.5 and 2), several instances",
     "batch_renewal_several_instances"),
    ("several instances, deterministic, no delay", "batch_several_deterministic_no_delay"),
    ("several instances, bunched (deterministic or jitter cv <= 0.02, delay <= 0.02 S(1))",
     "batch_several_bunched"),
    ("several instances, deterministic, with a delay", "batch_several_deterministic_delay"),
    ("several instances, jittery, no delay", "batch_several_jittery_no_delay"),
    ("several instances, jittery, with a delay", "batch_several_jittery_delay"),
)


def accuracy_families() -> list[str]:
    """The batch node's families: signed ranges and median |error| of p95 and p99, and the
    signed ranges of mean batch size and utilization, from :func:`measured_table`."""
    families = measured_table()

    def span(low, high):
        return f"{_signed(low)} / {_signed(high)}"

    def means(pair):               # not every family's campaign recorded the means
        return "-" if pair is None else span(*pair)

    rows = []
    for label, key in BATCH_FAMILIES:
        m = families[key]
        rows.append([label, m.configurations, span(m.p95.low, m.p95.high),
                     span(m.p99.low, m.p99.high), f"{_pct(m.p95.median)}, {_pct(m.p99.median)}",
                     m.batch_configurations, means(m.mean_batch_size), means(m.utilization)])
    return _table(["family", "nodes", "p95 lowest / highest", "p99 lowest / highest",
                   "median \\|error\\| (p95, p99)", "nodes with means",
                   "mean batch size lowest / highest", "utilization lowest / highest"], rows)


def accuracy_grid() -> list[str]:
    """The accuracy grid by answer kind (approximations also by instance count), and the
    textbook baseline: predict_accuracy.json."""
    rows = stored_results("predict_accuracy.json")
    out = [[g.name, len(g.rows), _median_worst(g.figures["p95"]),
            _median_worst(g.figures["p99"]), _in_ci(g.figures["in_ci"])]
           for g in grid_groups(rows)]
    base = baseline_group(rows)
    out.append([base.name, len(base.rows), _median_worst(base.figures["p95"]),
                _median_worst(base.figures["p99"]), ""])
    return _table(["family", "configs", "p95 median / worst", "p99 median / worst",
                   "inside the simulator's 99% CI ± h (p95, p99)"], out)


def holdout_single_instance() -> list[str]:
    """The one-instance holdout by answer kind, and its two worst p99:
    single_instance_holdout.json."""
    rows = stored_results("single_instance_holdout.json")
    out = [[g.name, len(g.rows), _median_worst(g.figures["p95"]),
            _median_worst(g.figures["p99"]), _in_ci(g.figures["in_ci"])]
           for g in single_instance_groups(rows)]
    lines = _table(["family", "nodes", "p95 median / worst", "p99 median / worst",
                    "inside the simulator's 99% CI ± h (p95, p99)"], out)
    lines += ["", "Worst p99:", ""]
    for r in worst_rows(rows, lambda r: r["p99"]["error"], 2):
        lines.append(f"- B={r['B']} D={r['D_over_S1']}xS(1) preferred {r['preferred']} load "
                     f"{r['load']} {r['jitter']} ({r['family']}): {_signed(r['p99']['error'])}")
    return lines


def holdout_several_instances() -> list[str]:
    """The several-instance holdout for every pass count measured, then by instance count
    with the shipped pass count: multi_instance_holdout.json."""
    rows = stored_results("multi_instance_holdout.json")
    passes = sorted(rows[0]["predicted"], key=int)
    shipped = str(PASSES)
    out = [[g.name, g.figures["passes"], _median_worst(g.figures["p95"]),
            _median_worst(g.figures["p99"]), g.figures["beyond"]]
           for g in several_instance_groups(rows, passes)
           if g.name == "all" or g.figures["passes"] == shipped]
    return _table(["nodes", "passes", "p95 median / worst", "p99 median / worst",
                   f"p99 beyond {HOLDOUT_MISS:.0%}"], out)


def preferred_sizes() -> list[str]:
    """Eight nodes with preferred sizes below max_batch_size, signed errors, and the median
    and worst |error| of p95 and p99 over them: preferred_sizes.json."""
    rows = stored_results("preferred_sizes.json")
    out = [[r["node"].removeprefix("Node(").removesuffix(")"), f"{r['load']:.2f}",
            *(_signed(r[q]["error"]) for q, _ in QUANTILES)] for r in rows]
    f = pooled_figures(rows)
    return _table(["node", "load", "p50", "p95", "p99"], out) + [
        "", f"p95/p99 |error|: median {_pct(f.median)}, worst {_pct(f.worst)}"]


def renewal_batch() -> list[str]:
    """The renewal campaign, all nodes and by instance count and arrival scv, median and
    signed worst: renewal_batch.json."""
    out = [[g.name, len(g.rows), _median_signed_worst(g.figures["p95"]),
            _median_signed_worst(g.figures["p99"])]
           for g in renewal_groups(stored_results("renewal_batch.json"))]
    return _table(["nodes", "configs", "p95 median / worst", "p99 median / worst"], out)


def batch_size_means() -> list[str]:
    """Mean batch size and utilization on the grid's batching nodes by instance count,
    jitter and delay, median and signed worst, and how many had the utilization capped:
    batch_size_accuracy.json."""
    out = [[g.name, len(g.rows), _median_signed_worst(g.figures["batch"]),
            _median_signed_worst(g.figures["utilization"]), g.figures["capped"]]
           for g in batch_size_groups(stored_results("batch_size_accuracy.json"))]
    return _table(["family", "nodes", "mean batch size median / worst",
                   "utilization median / worst", "utilization capped at 1"], out)


def multi_server() -> list[str]:
    """The GI/G/c fast server: the 'fast_server' family of :func:`measured_table`."""
    m = measured_table()["fast_server"]
    return _table(["quantile", "configs", "median \\|error\\|", "worst"],
                  [[q, m.configurations, _pct(r.median), _pct(r.worst)]
                   for q, r in (("p95", m.p95), ("p99", m.p99))])


def router_families() -> list[str]:
    """The router grid by router and model, p99/p95/p50 median and worst:
    router_accuracy_full.json."""
    out = [[g.name, len(g.rows), *(_median_worst(g.figures[q]) for q in ("p99", "p95", "p50"))]
           for g in router_groups(stored_results("router_accuracy_full.json"))]
    return _table(["family", "configs", "p99 median / worst", "p95 median / worst",
                   "p50 median / worst"], out)


def least_outstanding_extra() -> list[str]:
    """Least outstanding beyond the router grid: max_batch_size 2 (outside predict) from the
    rows of least_outstanding_small_batch.txt; max_batch_size 4, renewal arrivals and nodes of
    several instances (power of two too) from their families in :func:`measured_table`."""
    small = printed_errors(stored_log("least_outstanding_small_batch.txt"),
                           keep=lambda line: line.startswith("B=2 "))
    rows = [["max_batch_size 2", len(small),
             *(_pct(figures(small[:, k]).worst) for k in range(3))]]
    families = measured_table()
    for label, key in (("max_batch_size 4", "least_outstanding_as_round_robin_b4"),
                       ("renewal arrivals (scv 0.5, 2), max_batch_size 8 and 32",
                        "least_outstanding_as_round_robin_renewal"),
                       ("nodes of several instances, a delay (inside its domain)",
                        "least_outstanding_several_delay"),
                       ("nodes of several instances, no delay (inside its domain)",
                        "least_outstanding_several_no_delay"),
                       ("power of two, several instances, a delay",
                        "power_of_two_several_delay"),
                       ("power of two, several instances, no delay",
                        "power_of_two_several_no_delay"),
                       ("round robin, several instances, a delay",
                        "round_robin_several_delay"),
                       ("round robin, several instances, no delay",
                        "round_robin_several_no_delay")):
        m = families[key]
        rows.append([label, m.configurations, *(_pct(r.worst) for r in (m.p50, m.p95, m.p99))])
    return _table(["campaign", "configs", "worst \\|error\\| p50", "p95", "p99"], rows)


_LATTICE_LINE = re.compile(r"^(\w+)\s+\((\d+), (\d+), (\d+)\)\s+([\d.]+%)\s+([\d.]+%)\s+"
                           r"([\d.]+%)\s+([\d.]+%)\s+([\d.]+ ms)")


def lattice_resolution() -> list[str]:
    """The batch model on coarser lattices against a finer reference: the table of
    lattice_resolution.txt."""
    out = []
    for line in stored_log("lattice_resolution.txt"):
        m = _LATTICE_LINE.match(line)
        if m:
            name, res, svc, delay, m95, w95, m99, w99, seconds = m.groups()
            out.append([name, f"{res}, {svc}, {delay}", f"{m95} / {w95}", f"{m99} / {w99}",
                        seconds])
    return _table(["lattice", "(steps per S(1), per service, per delay)", "p95 median / worst",
                   "p99 median / worst", "median time per prediction"], out)


def simulator_vs_exact(rows=None) -> list[str]:
    """Exact and simulated p95/p99 of classical queues with the simulator's 99% CI:
    sim_vs_exact.json, or ``rows`` of that form (validation/sim_vs_exact.py prints its own)."""
    out = []
    for r in stored_results("sim_vs_exact.json") if rows is None else rows:
        for q, _ in QUANTILES[1:]:
            lo, hi = r[q]["ci99"]
            out.append([r["queue"], q, f"{r[q]['exact'] * 1e3:.4f}",
                        f"{r[q]['simulated'] * 1e3:.4f}", f"[{lo * 1e3:.4f}, {hi * 1e3:.4f}]"])
    return _table(["queue", "p", "exact (ms)", "simulated (ms)", "99% CI (ms)"], out)


_BIAS_NODE = re.compile(r"^B = (\d+), (.+), load ([\d.]+): R = ([\d,]+) arrivals")
_BIAS_RUN = re.compile(r"^\s+([\d.]+) R .*p99 error\s+([-+][\d.]+%).*CI holds the model (\d+/\d+)")


def replica_length() -> list[str]:
    """The simulated p99's start-up bias against replica length, per node: replica_bias.txt.

    A row is one replica length the script asked for; its label is the row's shortest
    replica (whole replicas make them a little longer) to two significant figures.
    """
    columns, runs = [], []
    for line in stored_log("replica_bias.txt"):
        if m := _BIAS_NODE.match(line):
            B, jitter, load, R = m.groups()
            jitter = re.sub(r"\('(\w+)', ([\d.]+)\)", r"\1 \2", jitter)
            columns.append(f"B = {B}, {jitter}, load {load} (R = {R})")
            runs.append([])
        elif m := _BIAS_RUN.match(line):
            runs[-1].append((float(m.group(1)), f"{m.group(2)} ({m.group(3)})"))
    out = []
    for row in zip(*runs):
        shortest = min(length for length, _ in row)
        out.append([f"{float(f'{shortest:.2g}'):g} R", *(cell for _, cell in row)])
    return _table(["replica length", *columns], out)


def ensemble_accuracy() -> list[str]:
    """Ensembles predicted against simulated, by shape and service
    (ensemble_accuracy.json): configurations answered, median |error| and signed worst of
    p95 and p99, and the 'ensemble' family's measured domain and errors."""
    rows = [r for r in stored_results("ensemble_accuracy.json") if "p99" in r]
    groups: dict = {}
    for r in rows:
        key = (f"{'fan-in' if r['fan_in'] else 'chain'}, "
               f"{'jittery' if r['jittery'] else 'deterministic'}")
        groups.setdefault(key, []).append(r)
    groups["all answered"] = rows
    out = []
    for name, g in groups.items():
        cells = []
        for q in ("p95", "p99"):
            errors = np.array([r[q]["error"] for r in g])
            worst = errors[np.argmax(np.abs(errors))]
            cells.append(f"{_pct(np.median(np.abs(errors)))} / {_signed(worst)}")
        out.append([name, len(g), *cells])
    family = measured_table()["ensemble"]
    out.append(["inside the measured domain (family 'ensemble')", family.configurations,
                f"{_pct(family.p95.median)} / {_signed(family.p95.low)} to "
                f"{_signed(family.p95.high)}",
                f"{_pct(family.p99.median)} / {_signed(family.p99.low)} to "
                f"{_signed(family.p99.high)}"])
    return _table(["ensembles", "configurations", "p95 median / worst",
                   "p99 median / worst"], out)


BLOCKS = {
    "ensemble-accuracy": ensemble_accuracy,
    "accuracy-summary": accuracy_summary,
    "accuracy-families": accuracy_families,
    "accuracy-grid": accuracy_grid,
    "holdout-single-instance": holdout_single_instance,
    "holdout-several-instances": holdout_several_instances,
    "preferred-sizes": preferred_sizes,
    "renewal-batch": renewal_batch,
    "batch-size-means": batch_size_means,
    "multi-server": multi_server,
    "router-families": router_families,
    "least-outstanding-extra": least_outstanding_extra,
    "lattice-resolution": lattice_resolution,
    "simulator-vs-exact": simulator_vs_exact,
    "replica-length": replica_length,
}


# ---- the documents ------------------------------------------------------------------------
def generate() -> dict[str, list[str]]:
    """name -> the lines of every generated block."""
    return {name: render() for name, render in BLOCKS.items()}


def blocks_in(text: str) -> dict[str, tuple[int, int]]:
    """name -> (first, stop) line indices of each generated block's content in ``text``.

    Examples
    --------
    >>> blocks_in("a\\n<!-- BEGIN GENERATED: t -->\\nx\\ny\\n<!-- END GENERATED: t -->\\n")
    {'t': (2, 4)}
    """
    found, open_name = {}, None
    for number, line in enumerate(text.splitlines()):
        for kind, name in MARKER.findall(line):
            if kind == "BEGIN":
                if open_name is not None:
                    raise ValueError(f"line {number + 1}: BEGIN {name} inside {open_name}")
                open_name, first = name, number + 1
            else:
                if open_name != name:
                    raise ValueError(f"line {number + 1}: END {name} closes {open_name}")
                if name in found:
                    raise ValueError(f"block {name!r} appears twice")
                found[name], open_name = (first, number), None
    if open_name is not None:
        raise ValueError(f"BEGIN GENERATED: {open_name} never ends")
    return found


def refreshed(text: str, tables: dict[str, list[str]]) -> str:
    """``text`` with every generated block's content replaced by ``tables[name]``."""
    lines = text.splitlines()
    for name, (first, stop) in sorted(blocks_in(text).items(), key=lambda b: -b[1][0]):
        if name not in tables:
            raise ValueError(f"no generator for the block {name!r} (known: {sorted(tables)})")
        lines[first:stop] = tables[name]
    return "\n".join(lines) + "\n"


def _documents(root: Path) -> dict[str, str]:
    texts = {doc: (root / doc).read_text() for doc in DOCUMENTS}
    placed = [name for text in texts.values() for name in blocks_in(text)]
    missing = set(BLOCKS) - set(placed)
    if missing:
        raise ValueError(f"blocks generated but not placed in {DOCUMENTS}: {sorted(missing)}")
    return texts


def stale(root: Path = ROOT) -> list[str]:
    """A unified diff of each document whose generated blocks differ from a fresh run."""
    tables, diffs = generate(), []
    for doc, text in _documents(root).items():
        fresh = refreshed(text, tables)
        if fresh != text:
            diffs.append("\n".join(difflib.unified_diff(
                text.splitlines(), fresh.splitlines(), doc, f"{doc} (generated)",
                lineterm="")))
    return diffs


def write(root: Path = ROOT) -> list[str]:
    """Rewrite the generated blocks of every document; return the documents changed."""
    tables, changed = generate(), []
    for doc, text in _documents(root).items():
        fresh = refreshed(text, tables)
        if fresh != text:
            (root / doc).write_text(fresh)
            changed.append(doc)
    return changed


def main(argv=None) -> int:
    """``python -m qmodel.campaign.doc_tables [--check] [--write]``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help="exit 1 and print the diff when a generated block is stale")
    ap.add_argument("--write", action="store_true", help="rewrite the generated blocks")
    args = ap.parse_args(argv)
    if args.write:
        changed = write()
        print(f"rewrote {', '.join(changed)}" if changed else "every generated block is current")
        return 0
    if args.check:
        diffs = stale()
        for diff in diffs:
            print(diff)
        print(f"stale: regenerate with `{COMMAND}`" if diffs
              else "every generated block is current")
        return 1 if diffs else 0
    for name, lines in generate().items():
        print(f"<!-- {name} -->", *lines, "", sep="\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
