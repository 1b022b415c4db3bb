"""Is qmodel ever silently wrong? A seeded fuzz campaign of predict, simulate and the CLI.

Draws (validation/fuzz_cases.py) random *valid* systems over wide ranges (service laws:
affine with every jitter law, lognormal and gamma cv up to 2, monotone and non-monotone
tables, empirical samples; max_batch_size 1-128, max_queue_delay 0-50 ms, preferred sizes,
1-8 instances, finite queues; clusters of 1-64 nodes, mixed or identical, under every router
of ``qmodel.routers.ROUTER_NAMES``; Poisson or renewal arrivals at loads 1e-4 to 0.999 and above
capacity) and *hostile* inputs (wrong types, NaN, inf, negative, zero, strings, bad units,
bad command lines). Every call runs in a child process of its own, forked from this one, with
a time limit (``--timeout``) and an address-space limit (``--memory``), ``--workers`` at a
time. Each outcome is one of

    ok                 a model answered and every figure is in range
    fallback           predict answered by simulation (``accuracy.is_fallback``)
    declined           predict refused with the numbers: neither a model nor a sound
                       simulation fits the budget (``qmodel.theory.budget.OverBudget``)
    library_error      ValueError (UnstableError included) or NotImplementedError with a
                       message, raised by qmodel's own code
    foreign_exception  anything else: another exception type, an empty message, or an error
                       raised inside numpy, scipy or Python rather than by qmodel
    crash              the child died without an answer
    hang               the child ran past the time limit
    memory_error       MemoryError (or numpy's) under the address-space limit
    bad_figures        NaN, inf or out-of-range figures: quantiles not ordered, cdf not
                       monotone or outside [0, 1], utilization outside [0, 1], mean batch size
                       below 1 with requests served, negative times, ...

and, beside it, the warnings the call let out (a RuntimeWarning, or any warning of numpy's
or scipy's, is a leak). A valid system below capacity must be answered, one above capacity
with an unlimited queue must raise UnstableError; a hostile input must raise a library error
(the rare hostile values that are in fact valid are marked so); a bad command line must exit
2 or 3 with one line of error and no traceback.

Comparison: on ``--compare`` of the systems that predict answered with a model, a
simulation with a fixed seed of ``--compare-requests`` (400,000) requests, or more where the
simulator's minimum of replicas needs more near capacity (up to 8M), against which
predict's p99 is judged by ``Accuracy.p99_bounds`` (the stated error, widened by the
simulation's 95% CI) and by a flat 25%.

Everything is seeded: the i-th call of each kind is drawn from ``(seed, kind, i)``, so a
smaller run is a prefix of a larger one and a rerun gives the same calls (the outcomes too,
except calls near the time limit, which depend on the machine).

Run from the repository root (Linux: fork and RLIMIT_AS)::

    PYTHONPATH=$PWD python validation/fuzz.py --quick
    PYTHONPATH=$PWD python validation/fuzz.py --workers 16 \\
        --json validation/results/fuzz.json --text validation/results/fuzz.txt
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import multiprocessing
import os
import platform
import re
import resource
import shlex
import subprocess
import sys
import time
import traceback
import warnings
from collections import Counter, defaultdict
from multiprocessing.connection import wait
from pathlib import Path

import numpy as np

import qmodel as qm
from qmodel.campaign.results import add_output_arguments
from qmodel.latency import Latency, SampledLatency
from qmodel.sim import replicas as sim_replicas
from qmodel.sim.cost import run_cost
from qmodel.system import arrivals_from, as_cluster
from qmodel.theory.budget import OverBudget

sys.path.insert(0, str(Path(__file__).resolve().parent))   # validation/ holds scripts
from fuzz_cases import KINDS, cli_cases, hostile_cases, pick, valid_case  # noqa: E402

__all__ = ["classify_error", "run_case", "run_all", "OUTCOMES"]

OUTCOMES = ("ok", "fallback", "declined", "library_error", "foreign_exception", "crash",
            "hang", "memory_error", "bad_figures")
# the outcomes that are defects whatever the input
FAILURES = ("foreign_exception", "crash", "hang", "memory_error", "bad_figures")
PACKAGE = Path(qm.__file__).resolve().parent
# how far a figure may stray from a bound before it counts as out of range (rounding)
SLACK = 1e-9
# Messages of numpy's and Python's own (from C code, so the raise site looks like qmodel's):
# a library error names the field and the fix instead.
FOREIGN_MESSAGES = re.compile(
    r"could not convert|setting an array element|argument must be|invalid literal|"
    r"truth value of an array|could not be broadcast|unsupported operand|only (length-1|integer "
    r"scalar) arrays|can't convert|cannot convert|math domain error|out of bounds|"
    r"not supported between|unhashable type|positional argument|unexpected keyword|"
    r"object of type|zero-size array|array is too big|negative dimensions|Cannot cast|"
    r"object has no attribute|is not iterable|not subscriptable")
NUMBER = re.compile(r"-?\d+(\.\d+)?(e[-+]?\d+)?")
QUICK = {"predict": 40, "simulate": 8, "hostile": 40, "cli": 12, "compare": 6}
FULL = {"predict": 3000, "simulate": 300, "hostile": None, "cli": None, "compare": 200}
# the comparison's simulations: up to this many requests where the load needs more than
# --compare-requests for replicas long against the start-up transient
COMPARE_MAX_REQUESTS = 8_000_000
# and at most this many seconds of estimated work (qmodel.sim.cost), well inside --timeout
COMPARE_SECONDS = 20.0


# ------------------------------------------------------------------------------------------
# one call, in a child process
# ------------------------------------------------------------------------------------------
def _where(err: BaseException) -> tuple[str, bool]:
    """(file:line of the raise site, whether it is qmodel's own code)."""
    frames = traceback.extract_tb(err.__traceback__)
    if not frames:
        return "?", False
    f = frames[-1]
    path = Path(f.filename)
    own = path.is_absolute() and PACKAGE in path.resolve().parents
    shown = (f"qmodel/{path.resolve().relative_to(PACKAGE)}" if own else
             (f.filename if not path.is_absolute() else "/".join(path.parts[-3:])))
    return f"{shown}:{f.lineno}", own


def classify_error(err: BaseException) -> dict:
    """The outcome of a call that raised ``err`` ("library_error" only for a ValueError or
    NotImplementedError with a message of qmodel's own, raised by qmodel's code), with the
    error's type, message, raise site and the end of its traceback.

    Examples
    --------
    >>> classify_error(ValueError("bad"))["outcome"]     # raised here, not by qmodel
    'foreign_exception'
    >>> import qmodel
    >>> try:
    ...     qmodel.Node(qmodel.ServiceTime.affine(1e-3), max_batch_size=-1)
    ... except ValueError as err:
    ...     classify_error(err)["outcome"]
    'library_error'
    """
    where, own = _where(err)
    message = str(err)
    if isinstance(err, MemoryError):
        outcome = "memory_error"
    elif isinstance(err, OverBudget) and own and message.strip():
        outcome = "declined"
    elif isinstance(err, (ValueError, NotImplementedError)) and own and message.strip() \
            and not FOREIGN_MESSAGES.search(message):
        outcome = "library_error"
    else:
        outcome = "foreign_exception"
    return {"outcome": outcome, "error": type(err).__name__, "message": message[:400],
            "where": where,
            "traceback": "".join(traceback.format_exception(type(err), err,
                                                            err.__traceback__)[-3:])[-1500:]}


def _leaked(w: warnings.WarningMessage) -> bool:
    """A warning the library let out of numpy or scipy (its own UserWarnings are messages)."""
    module = w.category.__module__.split(".")[0]
    return issubclass(w.category, RuntimeWarning) or module in ("numpy", "scipy")


def _warnings(caught) -> list:
    seen = {}
    for w in caught:
        key = (w.category.__name__, str(w.message)[:200])
        if key not in seen:
            seen[key] = {"category": key[0], "message": key[1], "leaked": _leaked(w),
                         "where": f"{'/'.join(Path(w.filename).parts[-3:])}:{w.lineno}"}
    return list(seen.values())


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def _figures(r: Latency, facts: dict) -> tuple[dict, list]:
    """The figures a user reads off a result, and the checks they fail."""
    fig = {"model": r.model, "method": r.method, "exactness": r.accuracy.exactness,
           "fallback": r.accuracy.is_fallback}
    for name in ("p50", "p95", "p99"):
        fig[name] = float(getattr(r, name))
    fig["p999"] = float(r.quantile(0.999))
    for name in ("mean", "utilization", "throughput", "mean_batch_size", "rejection_fraction"):
        fig[name] = float(getattr(r, name))
    acc = r.accuracy
    for name in ("lattice_step", "quantile_error", "truncated_mass", "mass_defect"):
        fig[name] = getattr(acc, name)
    if acc.fallback_reason:
        fig["fallback_reason"] = acc.fallback_reason[:300]
    problems = []
    for name in ("p50", "p95", "p99", "p999", "mean", "utilization", "throughput",
                 "mean_batch_size", "rejection_fraction"):
        if not _finite(fig[name]):
            problems.append(f"{name} not finite")
        elif fig[name] < 0:
            problems.append(f"{name} negative")
    qs = [fig[n] for n in ("p50", "p95", "p99", "p999")]
    if all(map(_finite, qs)) and any(b < a * (1 - SLACK) for a, b in zip(qs, qs[1:])):
        problems.append("quantiles not ordered")
    if all(map(_finite, qs)):
        ts = np.unique(np.concatenate([[0.0], qs, np.geomspace(max(qs[0] / 100, 1e-9),
                                                               10 * qs[-1] + 1e-9, 24)]))
        c = np.asarray(r.cdf(ts), float)
        if not np.all(np.isfinite(c)):
            problems.append("cdf not finite")
        elif np.any(c < -SLACK) or np.any(c > 1 + SLACK):
            problems.append("cdf outside [0, 1]")
        elif np.any(np.diff(c) < -SLACK):
            problems.append("cdf not monotone")
        back = np.asarray(r.cdf(np.array(qs[:3])), float)
        if np.all(np.isfinite(back)) and np.any(back < np.array([0.5, 0.95, 0.99]) - 1e-6):
            problems.append("cdf(quantile(p)) < p")
        if facts.get("deterministic_floor") and qs[0] < facts["deterministic_floor"] * (
                1 - 1e-6) - (acc.quantile_error or acc.lattice_step or 0.0):
            problems.append("p50 below the fastest batch's service time")
    if _finite(fig["utilization"]) and not -SLACK <= fig["utilization"] <= 1 + SLACK:
        problems.append("utilization outside [0, 1]")
    if _finite(fig["rejection_fraction"]) and not 0 <= fig["rejection_fraction"] <= 1:
        problems.append("rejection fraction outside [0, 1]")
    if _finite(fig["mean_batch_size"]) and fig["throughput"] > 0:
        if fig["mean_batch_size"] < 1 - SLACK:
            problems.append("mean batch size below 1 with requests served")
        if fig["mean_batch_size"] > facts.get("max_batch_size", math.inf) * (1 + SLACK):
            problems.append("mean batch size above max_batch_size")
    for name in ("truncated_mass", "mass_defect"):
        mass = fig[name]
        if mass is not None and not (_finite(mass) and 0 <= mass):
            problems.append(f"{name.replace('_', ' ')} not a finite non-negative number")
    if fig["truncated_mass"] is not None and fig["truncated_mass"] > 1:
        problems.append("truncated mass above 1")
    if isinstance(r, SampledLatency):
        fig["requests_measured"] = int(r.requests)
        if r.sections >= 2:
            lo, hi = r.ci(0.99)
            fig["p99_ci"] = [float(lo), float(hi)]
            if not (_finite(lo) and _finite(hi) and lo <= fig["p99"] <= hi):
                problems.append("p99 CI not finite or not around p99")
    elif all(map(_finite, qs)):
        fig["p99_interval"] = list(acc.p99_bounds(fig["p99"]))
    return fig, problems


def _facts(ns: dict) -> dict:
    """What the checks need to know of the system (largest B, the fastest batch if steady)."""
    system = ns.get("system")
    if system is None:
        return {}
    nodes = system.nodes if isinstance(system, qm.Cluster) else (system,)
    out = {"max_batch_size": max(n.max_batch_size for n in nodes)}
    if all(n.service.jitter == "deterministic" for n in nodes):
        out["deterministic_floor"] = min(
            float(np.min(n.service.mean(np.arange(1, n.max_batch_size + 1)))) for n in nodes)
    return out


def run_case(case: dict) -> dict:
    """Run one call here (the child) and return its record: outcome, figures, warnings."""
    rec = {"id": case["id"]}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        try:
            if case["kind"] == "cli":
                rec.update(_run_cli(case))
            else:
                rec.update(_run_api(case))
        except BaseException as err:      # noqa: BLE001 - classifying everything is the point
            rec.update(classify_error(err))
        rec["seconds"] = round(time.perf_counter() - start, 4)
    rec["warnings"] = _warnings(caught)
    return rec


def _run_api(case: dict) -> dict:
    ns = {"qm": qm, "np": np}
    out = {}
    if case["setup"]:
        exec(case["setup"], ns)
    if "rate" in case:
        ns["rate"] = case["rate"]
    call = case["call"]
    if case["kind"] == "compare":
        call = (f"qm.simulate(system, {case['arrivals']}, requests={case['requests']}, "
                f"seed={case['seed']})")
    start = time.perf_counter()
    value = eval(call, ns)
    out["call_seconds"] = round(time.perf_counter() - start, 4)
    if isinstance(value, Latency):
        fig, problems = _figures(value, _facts(ns))
        if case["kind"] == "compare":
            for name, p in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
                lo, hi = value.ci(p) if value.sections >= 2 else (math.nan, math.nan)
                fig[f"{name}_half_width"] = float((hi - lo) / 2)
        out["figures"] = fig
        out["problems"] = problems
        out["outcome"] = ("bad_figures" if problems else
                          "fallback" if value.accuracy.is_fallback else "ok")
    else:
        out["outcome"] = "ok"
        out["value"] = repr(value)[:200]
    return out


def _compare_requests(case: dict, least: int) -> int:
    """At least ``least`` requests, and as many as the simulator's MIN_REPLICAS replicas need
    to outlast the start-up transient (a flat count biases the tail low near capacity), up to
    COMPARE_MAX_REQUESTS and what :func:`qmodel.sim.cost.run_cost` estimates to fit in
    COMPARE_SECONDS (a shorter run then warns, and the comparison says so)."""
    ns = {"qm": qm, "np": np, "rate": case["rate"]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(case["setup"], ns)
        process = eval(f"arrivals_from({case['arrivals']})", ns | {"arrivals_from":
                                                                    arrivals_from})
    cluster = as_cluster(ns["system"])
    per_node = sim_replicas.arrivals_per_replica_node(cluster, process.rate, process.scv)
    sound = math.ceil(sim_replicas.MIN_REPLICAS * len(cluster.nodes) * per_node)
    requests = int(min(COMPARE_MAX_REQUESTS, max(least, sound)))
    while requests > least and run_cost(ns["system"], process, requests).seconds \
            > COMPARE_SECONDS:
        requests = max(least, requests // 2)
    return requests


def _run_cli(case: dict) -> dict:
    from qmodel.cli import main

    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = main(list(case["argv"]))
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
    err_lines = [line for line in stderr.getvalue().splitlines()
                 if line.strip() and not line.startswith("qmodel: warning:")]
    out = {"exit": code, "stderr": stderr.getvalue()[-600:], "stderr_lines": len(err_lines)}
    if code in (2, 3):
        out["outcome"] = "library_error"
    elif code == 0:
        out["outcome"] = "ok"
    else:
        out["outcome"] = "foreign_exception"
    return out


def _child(case: dict, conn, memory: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    try:
        rec = run_case(case)
        conn.send(rec)
    except BaseException as err:      # noqa: BLE001 - a record must come back if it can
        try:
            conn.send({"id": case["id"], "outcome": "crash",
                       "message": f"{type(err).__name__}: {err}"[:400]})
        except BaseException:         # noqa: BLE001
            pass
    conn.close()
    os._exit(0)


def run_all(cases: list, workers: int, timeout: float, memory: int, log=None) -> dict:
    """Run every case in a forked child, ``workers`` at a time; id -> record."""
    ctx = multiprocessing.get_context("fork")
    pending = list(reversed(cases))
    running = {}                      # connection -> (process, case, start)
    records = {}
    counts = Counter()
    last_report = time.monotonic()
    try:
        while pending or running:
            while pending and len(running) < workers:
                case = pending.pop()
                parent, child = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_child, args=(case, child, memory), daemon=True)
                proc.start()
                child.close()
                running[parent] = (proc, case, time.monotonic())
            now = time.monotonic()
            soonest = min(start for _, _, start in running.values()) + timeout
            for conn in wait(list(running), timeout=max(0.05, soonest - now)):
                proc, case, start = running.pop(conn)
                try:
                    rec = conn.recv()
                except (EOFError, OSError):
                    proc.join(5)
                    rec = {"id": case["id"], "outcome": "crash",
                           "message": f"child died, exit code {proc.exitcode}"}
                conn.close()
                proc.join(5)
                rec["wall_seconds"] = round(time.monotonic() - start, 3)
                records[case["id"]] = rec
                counts[rec["outcome"]] += 1
            now = time.monotonic()
            for conn, (proc, case, start) in list(running.items()):
                if now - start > timeout:
                    proc.kill()
                    proc.join(5)
                    conn.close()
                    del running[conn]
                    records[case["id"]] = {"id": case["id"], "outcome": "hang",
                                           "wall_seconds": round(now - start, 3),
                                           "message": f"killed after {timeout:g} s"}
                    counts["hang"] += 1
            if log and (time.monotonic() - last_report > 30 or not (pending or running)):
                last_report = time.monotonic()
                log(f"{len(records)}/{len(cases)} done: "
                    + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    finally:
        for conn, (proc, _, _) in running.items():
            proc.kill()
            proc.join(5)
    return records


# ------------------------------------------------------------------------------------------
# judging: expectations, defects, the comparison
# ------------------------------------------------------------------------------------------
def repro(case: dict) -> str:
    """One line that reproduces the call."""
    if case["kind"] == "cli":
        return "qmodel " + shlex.join(case["argv"])
    rate = case.get("rate")
    head = "import qmodel as qm, numpy as np; " + (case["setup"] + "; " if case["setup"] else "")
    if rate is not None:
        head += f"rate = {rate!r}; "
    call = case["call"]
    if case["kind"] == "compare":
        call = (f"qm.simulate(system, {case['arrivals']}, requests={case['requests']}, "
                f"seed={case['seed']})")
    return head + f"r = {call}"


def verdicts(case: dict, rec: dict) -> list:
    """The defects one call shows: (category, detail) pairs (a diagnosis rerun shows none of
    its own: it annotates the call it reruns)."""
    out = []
    if case["kind"] == "diagnose":
        return out
    outcome = rec["outcome"]
    if outcome in FAILURES:
        detail = {"foreign_exception": f"{rec.get('error')} at {rec.get('where')}: "
                                       f"{str(rec.get('message', ''))[:90]}",
                  "bad_figures": "; ".join(rec.get("problems", [])),
                  "hang": f"{rec.get('message', '')}{rec.get('diagnosis', '')}",
                  "crash": rec.get("message", ""),
                  "memory_error": f"at {rec.get('where')}{rec.get('diagnosis', '')}"}[outcome]
        if case["kind"] == "cli" and outcome == "foreign_exception":
            detail = f"exit {rec.get('exit')}: {str(rec.get('stderr', ''))[-120:]}"
        out.append((outcome, detail))
    leaked = [w for w in rec.get("warnings", []) if w["leaked"]]
    for w in leaked:
        out.append(("warning leaked", f"{w['category']} at {w['where']}: {w['message'][:80]}"))
    kind, expect = case["kind"], case.get("expect")
    if kind in ("predict", "simulate", "compare"):
        unstable = case.get("unstable", False)
        if unstable and outcome in ("ok", "fallback"):
            out.append(("answered above capacity", f"load {case['load']}"))
        if not unstable and outcome == "library_error":
            out.append(("refused a valid call", f"{rec.get('error')}: "
                                                  f"{str(rec.get('message'))[:90]}"))
        if unstable and outcome == "library_error" and rec.get("error") != "UnstableError":
            out.append(("wrong error above capacity", f"{rec.get('error')}"))
    if kind == "hostile" and expect == "error" and outcome == "ok":
        out.append(("hostile input accepted", case["field"]))
    if kind == "hostile" and outcome == "library_error" and case["field"] \
            and case["field"] not in str(rec.get("message", "")):
        out.append(("message does not name the field", case["field"]))
    if kind == "cli":
        if outcome == "ok":
            out.append(("bad command line accepted", case["field"]))
        elif outcome == "library_error" and rec.get("stderr_lines", 0) != 1:
            shape = ("usage block, then the error" if str(rec.get("stderr")).startswith("usage:")
                     else "several lines")
            out.append(("CLI error not one line", shape))
    fig = rec.get("figures") or {}
    # a tail left out beyond 1 - 0.99 leaves the p99 undetermined (records written before
    # the defect had its own field held both in truncated_mass)
    mass = fig.get("truncated_mass")
    if kind == "predict" and outcome == "ok" and mass is not None and _finite(mass) \
            and mass >= 0.01 and "mass_defect" in fig:
        out.append(("model answer with truncated mass >= 0.01", f"mass {mass:.3g}"))
    return out


def diagnose_cases(cases: list, records: dict) -> list:
    """The predict calls that hung, ran out of memory or crashed, again with
    fallback="raise": was it the model or the fallback simulation?"""
    return [{**c, "id": f"diagnose-{c['id']}", "kind": "diagnose", "of": c["id"],
             "call": c["call"][:-1] + ', fallback="raise")'}
            for c in cases if c["kind"] == "predict"
            and records[c["id"]]["outcome"] in ("hang", "memory_error", "crash")]


def diagnosis(rec: dict) -> str:
    """Where a predict call's trouble lies, from its rerun with fallback="raise"."""
    if rec["outcome"] in ("library_error", "declined") \
            and rec.get("error") in ("NotImplementedError", "OverBudget"):
        return " (in the fallback simulation: the model declines)"
    if rec["outcome"] in ("ok", "bad_figures"):
        return f" (the model alone answers in {rec.get('wall_seconds', 0):.3g} s)"
    return f" (the model alone: {rec['outcome']})"


def compare_cases(cases: list, records: dict, n: int, seed: int, requests: int) -> list:
    """n of the predict calls answered by a model (not a fallback), to simulate."""
    eligible = [c for c in cases if c["kind"] == "predict"
                and records.get(c["id"], {}).get("outcome") == "ok" and not c["unstable"]]
    chosen = pick(eligible, n, seed, "compare")
    out = []
    for c in chosen:
        arrivals = c["call"][len("qm.predict(system, "):-1]
        c = {**c, "id": f"compare-{c['id']}", "kind": "compare", "of": c["id"],
             "arrivals": arrivals, "seed": seed}
        out.append(c | {"requests": _compare_requests(c, requests)})
    return out


def _short_run(w: dict) -> bool:
    """Whether a recorded warning is the simulator's: too few requests for an unbiased tail."""
    return (w["category"] == "ShortRunWarning" or "replicas leave" in w["message"]
            or "too short" in w["message"])


def comparison_rows(compares: list, records: dict) -> list:
    rows = []
    for c in compares:
        sim, pred = records[c["id"]], records[c["of"]]
        row = {"id": c["of"], "outcome": sim["outcome"]}
        if sim["outcome"] not in ("ok", "bad_figures"):
            rows.append(row | {"message": sim.get("message")})
            continue
        s, p = sim["figures"], pred["figures"]
        low, high = p["p99_interval"]
        hw = s.get("p99_half_width", math.nan)
        hw = 0.0 if not _finite(hw) else hw
        row |= {"model": p["model"], "method": p["method"], "exactness": p["exactness"],
                "load": c["load"], "pred": {q: p[q] for q in ("p50", "p95", "p99")},
                "sim": {q: s[q] for q in ("p50", "p95", "p99")}, "sim_p99_half_width": hw,
                "stated": [low, high],
                "error": {q: p[q] / s[q] - 1 for q in ("p50", "p95", "p99")},
                "within_stated": bool(s["p99"] - hw <= high and s["p99"] + hw >= low),
                "within_25": bool(abs(p["p99"] / s["p99"] - 1) <= 0.25),
                "sim_warned": any(_short_run(w) for w in sim.get("warnings", []))}
        rows.append(row)
    return rows


# ------------------------------------------------------------------------------------------
# the report
# ------------------------------------------------------------------------------------------
def report(meta: dict, cases: list, records: dict, rows: list) -> str:
    lines = [f"qmodel fuzz: seed {meta['seed']}, {meta['workers']} workers, "
             f"{meta['timeout']:g} s and {meta['memory'] / 2**30:g} GiB per call"
             + (f" -- {meta['label']}" if meta.get("label") else ""),
             f"machine: {meta['machine']}; qmodel {meta['commit']}", "",
             "Outcomes (rows: kind of call; a call may also leak warnings)", ""]
    head = f"{'kind':10}" + "".join(f"{o:>10}" for o in ("calls",) + tuple(
        o.replace("_error", "_err").replace("_exception", "_exc")[:9] for o in OUTCOMES)) \
        + f"{'warn leak':>10}{'max s':>8}"
    lines += [head, "-" * len(head)]
    by_kind = defaultdict(list)
    for c in cases:
        by_kind[c["kind"]].append(records[c["id"]])
    for kind in KINDS:
        recs = by_kind.get(kind, [])
        if not recs:
            continue
        count = Counter(r["outcome"] for r in recs)
        leaks = sum(any(w["leaked"] for w in r.get("warnings", [])) for r in recs)
        slow = max(r.get("wall_seconds", 0) for r in recs)
        lines.append(f"{kind:10}{len(recs):>10}" + "".join(f"{count[o]:>10}" for o in OUTCOMES)
                     + f"{leaks:>10}{slow:>8.1f}")
    lines += ["", "Defects (each with the number of calls and the first one's repro)", ""]
    groups = defaultdict(list)
    for c in cases:
        for cat, detail in verdicts(c, records[c["id"]]):
            # one group per message, whatever the numbers in it
            groups[(cat, NUMBER.sub("#", detail))].append((c, detail))
    by_cat = defaultdict(list)
    for (cat, _), found in groups.items():
        by_cat[cat].append((found[0][1], [c for c, _ in found]))
    if not by_cat:
        lines.append("none")
    for cat in sorted(by_cat, key=lambda k: -sum(len(cs) for _, cs in by_cat[k])):
        items = sorted(by_cat[cat], key=lambda x: -len(x[1]))
        lines.append(f"* {cat}: {sum(len(cs) for _, cs in items)} calls")
        for detail, cs in items[:12]:
            first = cs[0]
            lines.append(f"  - {len(cs)} x {detail}  [{first['id']}]")
            lines.append(f"    {repro(first)}")
        if len(items) > 12:
            lines.append(f"  - ... and {len(items) - 12} more kinds")
    lines += ["", *comparison_text(rows, {c["id"]: c for c in cases if c["kind"] == "compare"},
                                   records)]
    return "\n".join(lines)


def comparison_text(rows: list, compares: dict, records: dict) -> list:
    done = [r for r in rows if "within_stated" in r]
    lines = [f"Predict against simulate (p99; stated error from Accuracy.p99_bounds, widened "
             f"by the simulation's 95% CI): {len(done)} of {len(rows)} compared"]
    if not rows:
        return lines
    lost = Counter(r["outcome"] for r in rows if "within_stated" not in r)
    if lost:
        lines.append("  simulations that did not answer: "
                     + ", ".join(f"{k} {v}" for k, v in lost.items()))
    lines += ["", f"{'group':36}{'n':>5}{'in stated':>11}{'in 25%':>8}{'median |e|':>12}"
                  f"{'worst e':>9}"]
    groups = defaultdict(list)
    for r in done:
        groups["all"].append(r)
        groups[f"exactness {r['exactness']}"].append(r)
        groups[f"model {r['model']}"].append(r)
        groups["simulation warned (too short)" if r["sim_warned"]
               else "simulation long enough"].append(r)
    for name, rs in sorted(groups.items(), key=lambda x: (x[0] != "all", x[0])):
        errs = np.array([r["error"]["p99"] for r in rs])
        worst = errs[np.argmax(np.abs(errs))]
        lines.append(f"{name:36}{len(rs):>5}{sum(r['within_stated'] for r in rs):>11}"
                     f"{sum(r['within_25'] for r in rs):>8}{np.median(np.abs(errs)):>12.1%}"
                     f"{worst:>+9.1%}")
    lines += ["", "Worst p99 errors (predicted / simulated - 1)", ""]
    for r in sorted(done, key=lambda r: -abs(r["error"]["p99"]))[:12]:
        c = compares[f"compare-{r['id']}"]
        lo, hi = r["stated"]
        lines.append(f"  {r['error']['p99']:+.1%}  p99 {r['pred']['p99'] * 1e3:.4g} ms vs "
                     f"{r['sim']['p99'] * 1e3:.4g} ms (stated [{lo * 1e3:.4g}, "
                     f"{hi * 1e3:.4g}] ms, {r['exactness']}, "
                     f"{'in' if r['within_stated'] else 'OUTSIDE'} stated"
                     f"{'; simulation warned: too short' if r['sim_warned'] else ''})"
                     f"  [{r['id']}]")
        lines.append(f"    {repro({**c, 'kind': 'predict'})}")
    return lines


# ------------------------------------------------------------------------------------------
# the command
# ------------------------------------------------------------------------------------------
def _json_safe(x):
    if isinstance(x, float) and not math.isfinite(x):
        return repr(x)
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


def _stored(case: dict, rec: dict) -> dict:
    """One call as the JSON file keeps it: the case, its record and its defects; figures to 6
    digits, tracebacks only where the error is not the library's (``repro`` rebuilds the
    one-line repro from the case; ``--report-from`` the report)."""
    out = {**case, **rec, "defects": [list(v) for v in verdicts(case, rec)]}
    if out["outcome"] in ("library_error", "declined"):
        out.pop("traceback", None)
    if "figures" in out:
        out["figures"] = {k: float(f"{v:.6g}") if isinstance(v, float) else v
                          for k, v in out["figures"].items()}
    return _json_safe(out)


def _commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(PACKAGE.parent), "describe", "--always",
                               "--dirty"], capture_output=True, text=True,
                              timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=21)
    ap.add_argument("--predict", type=int, default=None, help="predict calls (3000)")
    ap.add_argument("--simulate", type=int, default=None, help="simulate calls (300)")
    ap.add_argument("--hostile", type=int, default=None,
                    help="hostile calls (default: all of them)")
    ap.add_argument("--cli", type=int, default=None, help="bad command lines (default: all)")
    ap.add_argument("--compare", type=int, default=None,
                    help="predict answers to simulate (200)")
    ap.add_argument("--compare-requests", type=int, default=400_000)
    ap.add_argument("--quick", action="store_true", help="a smoke run: " + ", ".join(
        f"{v} {k}" for k, v in QUICK.items()))
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per call")
    ap.add_argument("--memory", type=float, default=4.0, help="GiB of address space per call")
    ap.add_argument("--label", default="", help="a note for the report's first line")
    ap.add_argument("--report-from", type=Path, default=None, metavar="JSON",
                    help="print the report of a stored run (--json) instead of running")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    if args.report_from:
        data = json.loads(args.report_from.read_text())
        calls = data["calls"]
        text = report(data["meta"], calls, {c["id"]: c for c in calls}, data["comparison"])
        print(text)
        if args.text:
            args.text.write_text(text + "\n")
        return 0
    sizes = dict(QUICK if args.quick else FULL)
    for kind in sizes:
        if getattr(args, kind) is not None:
            sizes[kind] = getattr(args, kind)
    memory = int(args.memory * 2**30)

    def log(text):
        print(f"[fuzz {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)

    cases = [valid_case(args.seed, kind, i) for kind in ("predict", "simulate")
             for i in range(sizes[kind])]
    for c in cases:
        c["rate"], c["unstable"] = _rate(c)
    cases += pick(hostile_cases(), sizes["hostile"], args.seed, "hostile")
    cases += pick(cli_cases(), sizes["cli"], args.seed, "cli")
    counts = Counter(c["kind"] for c in cases)
    log(f"{len(cases)} calls ({', '.join(f'{k} {v}' for k, v in counts.items())}), then "
        f"{sizes['compare']} comparisons")
    started = time.time()
    records = run_all(cases, args.workers, args.timeout, memory, log)
    diagnoses = diagnose_cases(cases, records)
    log(f"diagnosis: {len(diagnoses)} predict calls again with fallback='raise'")
    records.update(run_all(diagnoses, args.workers, args.timeout, memory, log))
    for d in diagnoses:
        records[d["of"]]["diagnosis"] = diagnosis(records[d["id"]])
    cases += diagnoses
    compares = compare_cases(cases, records, sizes["compare"], args.seed,
                             args.compare_requests)
    log(f"comparison: {len(compares)} simulations of at least {args.compare_requests:,} "
        f"requests")
    records.update(run_all(compares, args.workers, args.timeout, memory, log))
    cases += compares
    rows = comparison_rows(compares, records)
    meta = {"seed": args.seed, "sizes": sizes, "workers": args.workers,
            "timeout": args.timeout, "memory": memory, "label": args.label,
            "compare_requests": args.compare_requests, "commit": _commit(),
            "machine": f"{platform.node()} ({os.cpu_count()} cpus, {platform.machine()}), "
                       f"Python {platform.python_version()}, numpy {np.__version__}",
            "seconds": round(time.time() - started, 1)}
    if args.json:                     # first: the records outlive a failing report
        args.json.parent.mkdir(parents=True, exist_ok=True)
        body = ",\n".join(json.dumps(_stored(c, records[c["id"]]), sort_keys=True)
                          for c in cases)
        args.json.write_text(f'{{"meta": {json.dumps(meta, sort_keys=True)},\n'
                             f'"comparison": {json.dumps(_json_safe(rows))},\n'
                             f'"calls": [\n{body}\n]}}\n')
    text = report(meta, cases, records, rows)
    print(text)
    if args.text:
        args.text.parent.mkdir(parents=True, exist_ok=True)
        args.text.write_text(text + "\n")
    return 0


def _rate(case: dict) -> tuple:
    """(the drawn call's arrival rate, whether it must be refused as unstable: load >= 1 and
    an unlimited queue somewhere). Built here, in the parent: valid systems build in
    milliseconds, and the repro lines then carry the rate."""
    ns = {"qm": qm, "np": np}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(case["setup"], ns)
            system = ns["system"]
            capacity = system.capacity
    except Exception:                 # noqa: BLE001 - the child will record it
        return None, False
    nodes = system.nodes if isinstance(system, qm.Cluster) else (system,)
    unstable = case["load"] >= 1 and not all(n.max_queue_size > 0 for n in nodes)
    return case["load"] * capacity, unstable


if __name__ == "__main__":
    sys.exit(main())
