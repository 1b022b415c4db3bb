"""The docs' tables of measured figures, generated from the stored campaign results.

README.md and docs/accuracy.md quote the validation campaigns in tables that sit between
``<!-- BEGIN GENERATED: name -->`` and ``<!-- END GENERATED: name -->`` markers. This module
writes every such block from data, never from typed numbers:

- the measured error of an approximate family (p95/p99 median and worst |error|, signed
  ranges, mean batch size and utilization ranges) from the one table the results of
  ``qmodel.predict`` state, :func:`qmodel.theory.measured.measured_table`;
- every other figure from the campaigns' stored results in validation/results/: their rows
  (``.json``), or the summary lines of their logs (``.txt``) where a campaign stores no rows.

The rows of the README's summary that are not approximate families (the exact and numerical
solvers, the random router, the textbook baseline) are computed here from the stored rows,
not stored in measured_errors.json: that table holds what an approximate result states, and
no result states these.

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
import json
import re
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..routers import router_policy
from ..system import Cluster
from ..theory.batch import PASSES
from ..theory.measured import measured_table
from .grids import GRID_SERVICE
from .measure import QUANTILES
from .results import median_worst, signed_worst

__all__ = ["MARKER", "ROOT", "RESULTS", "DOCUMENTS", "COMMAND", "BLOCKS", "generate",
           "blocks_in", "refreshed", "stale", "write", "main"]

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "validation" / "results"
DOCUMENTS = ("README.md", "docs/accuracy.md")
MARKER = re.compile(r"<!-- (BEGIN|END) GENERATED: ([\w.-]+) -->")
COMMAND = "python -m qmodel.campaign.doc_tables --write"

# the multi-instance holdout counts the nodes whose p99 misses by more than this
HOLDOUT_MISS = 0.08


# ---- formatting ---------------------------------------------------------------------------
def _pct(x: float, digits: int = 1) -> str:
    return f"{x:.{digits}%}"


def _signed(x: float) -> str:
    return f"{x:+.1%}"


def _median_worst(errors) -> str:
    """'median / worst' |error| of relative errors.

    Examples
    --------
    >>> _median_worst([0.01, -0.03, 0.02])
    '2.0% / 3.0%'
    """
    median, worst = median_worst(errors)
    return f"{_pct(median)} / {_pct(worst)}"


def _median_signed_worst(errors) -> str:
    """'median |error| / signed worst'.

    Examples
    --------
    >>> _median_signed_worst([0.01, -0.03, 0.02])
    '2.0% / -3.0%'
    """
    return f"{_pct(float(np.median(np.abs(errors))))} / {_signed(signed_worst(errors))}"


def _range_cell(r) -> str:
    """'median / worst' of a family's :class:`~qmodel.latency.ErrorRange`."""
    return f"{_pct(r.median)} / {_pct(r.worst)}"


def _table(header: list[str], rows: list[list]) -> list[str]:
    """A Markdown table.

    Examples
    --------
    >>> _table(["a", "b"], [[1, "x"]])
    ['| a | b |', '|---|---|', '| 1 | x |']
    """
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + [
        "| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]


def _in_ci(rows) -> str:
    """The shares of rows whose p95 and p99 lie in the simulator's 99% CI widened by h."""
    return ", ".join(_pct(float(np.mean([r[q]["in_ci_with_lattice"] for r in rows])), 0)
                     for q in ("p95", "p99"))


# ---- the stored results -------------------------------------------------------------------
@lru_cache(maxsize=None)
def _rows(name: str) -> list:
    """The stored rows of validation/results/``name``."""
    return json.loads((RESULTS / name).read_text())


def _log(name: str) -> list[str]:
    """The lines of a stored campaign log, validation/results/``name``."""
    return (RESULTS / name).read_text().splitlines()


def _errors(rows, quantile: str) -> list:
    return [r[quantile]["error"] for r in rows]


def _exact_and_numerical() -> list:
    """The accuracy grid's and the one-instance holdout's nodes answered exactly or on a
    lattice (the grid's non-approximate nodes, the holdout's numerical ones)."""
    return ([r for r in _rows("predict_accuracy.json") if r["family"] != "approximation"]
            + [r for r in _rows("single_instance_holdout.json") if r["family"] == "numerical"])


def _baseline_rows() -> list:
    """The accuracy grid's nodes on which the textbook baseline has an answer."""
    return [r["baseline"] for r in _rows("predict_accuracy.json") if "p95" in r["baseline"]]


def _router_errors(rows, quantile: str) -> list:
    return [r[quantile]["model"] / r[quantile]["sim"] - 1 for r in rows]


def _router_groups() -> dict:
    """The router grid's answered rows by group, in the order the groups first appear:
    static routers by name; dynamic ones in or outside ``predict``'s current domain (the
    router registry's), and those answered by least outstanding's models split by their
    model (one-request nodes: balanced queues; batching nodes: as round robin)."""
    groups = {}
    for r in _rows("router_accuracy_full.json"):
        if "declined" in r:
            continue
        router = r["router"]
        key = router
        if not router_policy(router).static:
            cluster = Cluster(GRID_SERVICE.node(r["B"], r["D"]), count=r["N"], router=router)
            in_predict = router_policy(router).unmodelled(cluster, r["load"], 1.0) is None
            key += " (in predict)" if in_predict else " (outside predict)"
            # power of two over two nodes samples both: least outstanding's models
            if in_predict and (router == "least_outstanding" or r["N"] == 2):
                key = (key, r["B"] == 1)
        groups.setdefault(key, []).append(r)
    return {_router_label(key, rows): rows for key, rows in groups.items()}


def _router_label(key, rows) -> str:
    if isinstance(key, str):
        return key
    key, balanced = key
    label = key + (", B = 1 balanced" if balanced
                   else f", B >= {min(r['B'] for r in rows)} as round robin")
    if rows[0]["router"] != "least_outstanding":
        label += " (N = 2: least outstanding)"
    return label


# ---- the blocks ---------------------------------------------------------------------------
# README's summary: (label, what the answer is, source): an approximate family of
# measured_table(), or the name of a row group computed here. Every family appears once.
SUMMARY = (
    ("M/M/c, M/D/c, M/G/1; batch node, one instance, no delay", "exact or numerical",
     "exact_and_numerical"),
    ("batch node, one instance, a delay or preferred sizes", "approximation",
     "batch_one_instance"),
    ("batch node, several instances, deterministic, no delay", "approximation",
     "batch_several_deterministic_no_delay"),
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
    ("textbook baseline (Kingman / Allen-Cunneen)", "not used: for comparison", "baseline"),
)


def accuracy_summary() -> list[str]:
    """README: one row per solver family, median and worst |error| of p95 and p99.

    Approximate families from :func:`measured_table`; the exact and numerical solvers from
    the accuracy grid and the one-instance holdout, the random router from the router grid,
    the baseline from the accuracy grid.
    """
    families = measured_table()
    missing = set(families) - {source for _, _, source in SUMMARY}
    if missing:
        raise ValueError(f"families without a row in the README's summary: {sorted(missing)}")
    groups = {"exact_and_numerical": _exact_and_numerical(), "baseline": _baseline_rows(),
              "random": _router_groups()["random"]}
    out = []
    for label, answers, source in SUMMARY:
        if source in families:
            m = families[source]
            out.append([label, answers, m.configurations, _range_cell(m.p95), _range_cell(m.p99)])
            continue
        rows = groups[source]
        if source == "baseline":
            errors = {q: [r[q] for r in rows] for q in ("p95", "p99")}
        elif source == "random":
            errors = {q: _router_errors(rows, q) for q in ("p95", "p99")}
        else:
            errors = {q: _errors(rows, q) for q in ("p95", "p99")}
        out.append([label, answers, len(rows), _median_worst(errors["p95"]),
                    _median_worst(errors["p99"])])
    return _table(["solver family", "answers", "configs", "p95 median / worst",
                   "p99 median / worst"], out)


# accuracy.md's batch families, in its order
BATCH_FAMILIES = (
    ("1 instance, approximation", "batch_one_instance"),
    ("renewal arrivals (measured at scv 0.5 and 2), 1 instance", "batch_renewal_one_instance"),
    ("renewal arrivals (measured at scv 0.5 and 2), several instances",
     "batch_renewal_several_instances"),
    ("several instances, deterministic, no delay", "batch_several_deterministic_no_delay"),
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

    rows = []
    for label, key in BATCH_FAMILIES:
        m = families[key]
        rows.append([label, m.configurations, span(m.p95.low, m.p95.high),
                     span(m.p99.low, m.p99.high), f"{_pct(m.p95.median)}, {_pct(m.p99.median)}",
                     m.batch_configurations, span(*m.mean_batch_size), span(*m.utilization)])
    return _table(["family", "nodes", "p95 lowest / highest", "p99 lowest / highest",
                   "median \\|error\\| (p95, p99)", "nodes with means",
                   "mean batch size lowest / highest", "utilization lowest / highest"], rows)


def accuracy_grid() -> list[str]:
    """The accuracy grid by answer kind (approximations also by instance count), and the
    textbook baseline: predict_accuracy.json."""
    rows = _rows("predict_accuracy.json")
    groups = []
    for family in sorted({r["family"] for r in rows}):
        groups.append((family, [r for r in rows if r["family"] == family]))
        if family == "approximation":
            for c in sorted({r["c"] for r in rows}):
                groups.append((f"approximation, {c} instance{'s' if c > 1 else ''}",
                               [r for r in rows if r["family"] == family and r["c"] == c]))
    out = [[name, len(sel), _median_worst(_errors(sel, "p95")), _median_worst(_errors(sel, "p99")),
            _in_ci(sel)] for name, sel in groups if sel]
    base = _baseline_rows()
    out.append(["baseline (Kingman/Allen-Cunneen)", len(base),
                _median_worst([r["p95"] for r in base]), _median_worst([r["p99"] for r in base]),
                ""])
    return _table(["family", "configs", "p95 median / worst", "p99 median / worst",
                   "inside the simulator's 99% CI ± h (p95, p99)"], out)


def holdout_single_instance() -> list[str]:
    """The one-instance holdout by answer kind, and its two worst p99:
    single_instance_holdout.json."""
    rows = _rows("single_instance_holdout.json")
    out = []
    for family in sorted({r["family"] for r in rows}):
        sel = [r for r in rows if r["family"] == family]
        out.append([family, len(sel), _median_worst(_errors(sel, "p95")),
                    _median_worst(_errors(sel, "p99")), _in_ci(sel)])
    lines = _table(["family", "nodes", "p95 median / worst", "p99 median / worst",
                    "inside the simulator's 99% CI ± h (p95, p99)"], out)
    lines += ["", "Worst p99:", ""]
    for r in sorted(rows, key=lambda r: -abs(r["p99"]["error"]))[:2]:
        lines.append(f"- B={r['B']} D={r['D_over_S1']}xS(1) preferred {r['preferred']} load "
                     f"{r['load']} {r['jitter']} ({r['family']}): {_signed(r['p99']['error'])}")
    return lines


def holdout_several_instances() -> list[str]:
    """The several-instance holdout for every pass count measured, then by instance count
    with the shipped pass count: multi_instance_holdout.json."""
    rows = _rows("multi_instance_holdout.json")
    passes = sorted(rows[0]["predicted"], key=int)
    shipped = str(PASSES)

    def line(name, sel, n):
        e = np.array([[r["predicted"][n][i] / r["simulated"][i] - 1 for i in (0, 1)]
                      for r in sel])
        return [name, n, _median_worst(e[:, 0]), _median_worst(e[:, 1]),
                int((np.abs(e[:, 1]) > HOLDOUT_MISS).sum())]

    out = [line("all", rows, n) for n in passes]
    out += [line(f"c = {c}", [r for r in rows if r["c"] == c], shipped)
            for c in sorted({r["c"] for r in rows})]
    return _table(["nodes", "passes", "p95 median / worst", "p99 median / worst",
                   f"p99 beyond {HOLDOUT_MISS:.0%}"], out)


def preferred_sizes() -> list[str]:
    """Eight nodes with preferred sizes below max_batch_size, signed errors, and the median
    and worst |error| of p95 and p99 over them: preferred_sizes.json."""
    rows = _rows("preferred_sizes.json")
    out = [[r["node"].removeprefix("Node(").removesuffix(")"), f"{r['load']:.2f}",
            *(_signed(r[q]["error"]) for q, _ in QUANTILES)] for r in rows]
    median, worst = median_worst(_errors(rows, "p95") + _errors(rows, "p99"))
    return _table(["node", "load", "p50", "p95", "p99"], out) + [
        "", f"p95/p99 |error|: median {_pct(median)}, worst {_pct(worst)}"]


def renewal_batch() -> list[str]:
    """The renewal campaign, all nodes and by instance count and arrival scv, median and
    signed worst: renewal_batch.json."""
    rows = _rows("renewal_batch.json")
    groups = [("all", rows)] + [
        (f"{c} instance{'s' if c > 1 else ''}, scv {scv:g}",
         [r for r in rows if r["c"] == c and r["scv"] == scv])
        for c in sorted({r["c"] for r in rows}) for scv in sorted({r["scv"] for r in rows})]
    out = [[name, len(sel), _median_signed_worst(_errors(sel, "p95")),
            _median_signed_worst(_errors(sel, "p99"))] for name, sel in groups if sel]
    return _table(["nodes", "configs", "p95 median / worst", "p99 median / worst"], out)


def batch_size_means() -> list[str]:
    """Mean batch size and utilization on the grid's batching nodes by instance count,
    jitter and delay, median and signed worst, and how many had the utilization capped:
    batch_size_accuracy.json."""
    rows = _rows("batch_size_accuracy.json")
    out = []
    for c in sorted({r["c"] for r in rows}):
        for jitter in sorted({r["jitter"] for r in rows}):
            for delay in (False, True):
                sel = [r for r in rows if r["c"] == c and r["jitter"] == jitter
                       and (r["D_over_S1"] > 0) == delay]
                if not sel:
                    continue
                batch = [r["batch"][0] / r["batch"][1] - 1 for r in sel]
                util = [r["utilization"][0] / r["utilization"][1] - 1 for r in sel]
                out.append([f"{c} instance{'s' if c > 1 else ''}, {jitter}, "
                            f"{'with' if delay else 'no'} delay", len(sel),
                            _median_signed_worst(batch), _median_signed_worst(util),
                            sum(r["capped"] for r in sel)])
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
    out = [[name, len(sel), *(_median_worst(_router_errors(sel, q))
                              for q in ("p99", "p95", "p50"))]
           for name, sel in _router_groups().items()]
    return _table(["family", "configs", "p99 median / worst", "p95 median / worst",
                   "p50 median / worst"], out)


def least_outstanding_extra() -> list[str]:
    """Least outstanding beyond the router grid: max_batch_size 2 (outside predict) from the
    summary line of least_outstanding_small_batch.txt; max_batch_size 4 and renewal arrivals
    from their families in :func:`measured_table`."""
    log = _log("least_outstanding_small_batch.txt")
    summary = next(line for line in log if line.startswith("B=2: worst |error|"))
    worst = re.findall(r"p\d+ ([\d.]+%)", summary)
    rows = [["max_batch_size 2", sum(line.startswith("B=2 ") for line in log), *worst]]
    families = measured_table()
    for label, key in (("max_batch_size 4", "least_outstanding_as_round_robin_b4"),
                       ("renewal arrivals (scv 0.5, 2), max_batch_size 8 and 32",
                        "least_outstanding_as_round_robin_renewal")):
        m = families[key]
        rows.append([label, m.configurations, *(_pct(r.worst) for r in (m.p50, m.p95, m.p99))])
    return _table(["campaign", "configs", "worst \\|error\\| p50", "p95", "p99"], rows)


_LATTICE_LINE = re.compile(r"^(\w+)\s+\((\d+), (\d+), (\d+)\)\s+([\d.]+%)\s+([\d.]+%)\s+"
                           r"([\d.]+%)\s+([\d.]+%)\s+([\d.]+ ms)")


def lattice_resolution() -> list[str]:
    """The batch model on coarser lattices against a finer reference: the table of
    lattice_resolution.txt."""
    out = []
    for line in _log("lattice_resolution.txt"):
        m = _LATTICE_LINE.match(line)
        if m:
            name, res, svc, delay, m95, w95, m99, w99, seconds = m.groups()
            out.append([name, f"{res}, {svc}, {delay}", f"{m95} / {w95}", f"{m99} / {w99}",
                        seconds])
    return _table(["lattice", "(steps per S(1), per service, per delay)", "p95 median / worst",
                   "p99 median / worst", "median time per prediction"], out)


def simulator_vs_exact() -> list[str]:
    """Exact and simulated p95/p99 of classical queues with the simulator's 99% CI:
    sim_vs_exact.json."""
    out = []
    for r in _rows("sim_vs_exact.json"):
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
    for line in _log("replica_bias.txt"):
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


BLOCKS = {
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
