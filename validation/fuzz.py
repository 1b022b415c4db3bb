"""Is qmodel ever silently wrong? A seeded fuzz campaign of predict, simulate and the CLI.

Draws random *valid* systems over wide ranges (service laws: affine with every jitter law,
lognormal and gamma cv up to 2, monotone and non-monotone tables, empirical samples;
max_batch_size 1-128, max_queue_delay 0-50 ms, preferred sizes, 1-8 instances, finite queues;
clusters of 1-64 nodes, mixed or identical, under every router of
``qmodel.routers.ROUTER_NAMES``; Poisson or renewal arrivals at loads 1e-4 to 0.999 and above
capacity) and *hostile* inputs (wrong types, NaN, inf, negative, zero, strings, bad units,
bad command lines). Every call runs in a child process of its own, forked from this one, with
a time limit (``--timeout``) and an address-space limit (``--memory``), ``--workers`` at a
time. Each outcome is one of

    ok                 a model answered and every figure is in range
    fallback           predict answered by simulation (``accuracy.is_fallback``)
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
``--compare-requests`` (400,000) request simulation with a fixed seed, against which
predict's p99 is judged by :func:`p99_interval` (the stated error, widened by the
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
from qmodel.routers import ROUTER_NAMES

__all__ = ["p99_interval", "classify_error", "valid_case", "hostile_cases", "cli_cases",
           "run_case", "run_all", "OUTCOMES"]

OUTCOMES = ("ok", "fallback", "library_error", "foreign_exception", "crash", "hang",
            "memory_error", "bad_figures")
# the outcomes that are defects whatever the input
FAILURES = ("foreign_exception", "crash", "hang", "memory_error", "bad_figures")
KINDS = ("predict", "simulate", "hostile", "cli", "compare", "diagnose")
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


# ------------------------------------------------------------------------------------------
# the rule: what a result's Accuracy claims about its p99
# ------------------------------------------------------------------------------------------
def p99_interval(p99: float, accuracy) -> tuple[float, float]:
    """The interval [low, high] (seconds) in which a result's own Accuracy says the true p99
    lies, given the p99 it reports.

    - Lattice: ``quantile_error`` (or, without it, ``lattice_step``) seconds either side.
    - Measured approximations: every ``accuracy.measured`` family's p99 errors e = predicted /
      simulated - 1 lie in [low, high], so the true p99 lies in
      [p99 / (1 + high), p99 / (1 + low)]; with several families the widest range (the
      lowest low and the highest high).
    - Simulation (a fallback): the p99's 95% CI, ``simulation.p99_half_width`` relative.
    - Nothing stated ("exact", or an approximation without a measured family): the point.

    The truncated or discretised mass is not counted (a result whose mass reaches 0.01 says
    nothing about its p99; the fuzz flags that apart).

    Examples
    --------
    >>> from qmodel.latency import Accuracy, ErrorRange, MeasuredError
    >>> m = MeasuredError("demo", "demo nodes", 10, ErrorRange(-0.1, 0.1, 0.0),
    ...                   ErrorRange(-0.2, 0.25, 0.0), ("demo",))
    >>> p99_interval(1.0, Accuracy("approximation", measured=[m]))
    (0.8, 1.25)
    >>> p99_interval(1.0, Accuracy("numerical", quantile_error=0.01))
    (0.99, 1.01)
    """
    err = accuracy.quantile_error if accuracy.quantile_error is not None \
        else (accuracy.lattice_step or 0.0)
    low, high = p99 - err, p99 + err
    if accuracy.simulation is not None and accuracy.simulation.p99_half_width is not None:
        hw = accuracy.simulation.p99_half_width
        low, high = low - hw * p99, high + hw * p99
    ranges = [m.p99 for m in accuracy.measured if m.p99 is not None]
    if ranges:
        lo_rel = min(r.low for r in ranges)
        hi_rel = max(r.high for r in ranges)
        low = low / (1.0 + hi_rel)
        high = high / (1.0 + lo_rel) if lo_rel > -1.0 else math.inf
    return max(low, 0.0), high


# ------------------------------------------------------------------------------------------
# valid systems, drawn
# ------------------------------------------------------------------------------------------
def _num(x: float, digits: int = 3) -> str:
    """A short literal for a drawn number (repro lines stay readable)."""
    return repr(float(f"{x:.{digits}g}"))


def _logu(rng, lo: float, hi: float) -> float:
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def _jitter(rng) -> str:
    law = rng.choice(["deterministic", "exponential", "gamma", "lognormal"],
                     p=[0.3, 0.2, 0.2, 0.3])
    if law in ("deterministic", "exponential"):
        return "" if law == "deterministic" else ', jitter="exponential"'
    return f', jitter=("{law}", {_num(_logu(rng, 0.05, 2.0), 2)})'


def _sizes(rng, B: int) -> list:
    """Measured batch sizes: always 1 (no extrapolation below zero at the left), mostly B."""
    inner = list(range(2, B))
    n = int(rng.integers(0, min(5, len(inner)) + 1)) if inner else 0
    sizes = {1, *(int(k) for k in rng.choice(inner, size=n, replace=False))} if n else {1}
    if B > 1 and (rng.random() < 0.8 or len(sizes) == 1):
        sizes.add(B)
    return sorted(sizes)


def _means(rng, sizes: list, monotone: bool) -> list:
    first = _logu(rng, 1e-5, 0.05)
    if monotone:
        per = first * _logu(rng, 1e-3, 1.0)
        means = [first + per * (k - 1) * rng.uniform(0.7, 1.3) for k in sizes]
        means = list(np.maximum.accumulate(means))
    else:
        means = [first * _logu(rng, 0.3, 3.0) for _ in sizes]
        if len(means) >= 2 and means[-1] < means[-2]:
            # keep any extrapolation to the right increasing (never below zero)
            means[-1], means[-2] = means[-2], means[-1]
    return means


def _service(rng, B: int) -> str:
    kind = rng.choice(["affine", "table", "empirical"], p=[0.6, 0.25, 0.15])
    if kind == "affine":
        base = _logu(rng, 1e-5, 0.1)
        per = 0.0 if rng.random() < 0.2 else base * _logu(rng, 1e-3, 3.0)
        per_text = f", {_num(per)}" if per else ""
        return f"qm.ServiceTime.affine({_num(base)}{per_text}{_jitter(rng)})"
    sizes = _sizes(rng, B)
    means = _means(rng, sizes, monotone=rng.random() < 0.7)
    if kind == "table":
        body = ", ".join(f"{k}: {_num(m)}" for k, m in zip(sizes, means))
        return f"qm.ServiceTime.table({{{body}}}{_jitter(rng)})"
    items = []
    for k, m in zip(sizes, means):
        shape = 1.0 / _logu(rng, 0.05, 2.0) ** 2
        n, seed = int(_logu(rng, 3, 200)), int(rng.integers(0, 10_000))
        items.append(f"{k}: ({_num(m)} * np.random.default_rng({seed}).gamma("
                     f"{_num(shape)}, 1 / {_num(shape)}, {n})).tolist()")
    return f"qm.ServiceTime.empirical({{{', '.join(items)}}})"


def _node(rng) -> str:
    B = 1 if rng.random() < 0.15 else int(round(_logu(rng, 2, 128)))
    args = [_service(rng, B)]
    if B > 1:
        args.append(f"max_batch_size={B}")
    if rng.random() < 0.6:
        args.append(f"max_queue_delay={_num(_logu(rng, 1e-6, 0.05))}")
    if B > 1 and rng.random() < 0.25:
        n = int(rng.integers(1, min(3, B) + 1))
        prefs = sorted(int(p) for p in rng.choice(np.arange(1, B + 1), size=n, replace=False))
        args.append(f"preferred_batch_sizes={tuple(prefs)}")
    if rng.random() < 0.5:
        args.append(f"instances={int(rng.integers(2, 9))}")
    if rng.random() < 0.2:
        args.append(f"max_queue_size={int(rng.integers(1, 4 * B + 9))}")
    return f"qm.Node({', '.join(args)})"


def _system(rng) -> tuple[str, dict]:
    """(setup code that binds ``system``, a few facts about it for the report)."""
    if rng.random() < 0.5:
        return f"system = {_node(rng)}", {"nodes": 1, "router": None}
    N = int(round(_logu(rng, 1, 64)))
    router = str(rng.choice(ROUTER_NAMES))
    if router == "power_of_two":
        N = max(N, 2)
    extra = ""
    if router == "power_of_d":
        extra = f", choices={int(rng.integers(1, N + 1))}"
    if router == "random" and rng.random() < 0.3:
        extra = f", weights={[float(_num(rng.uniform(0.1, 10), 2)) for _ in range(N)]}"
    if N >= 2 and rng.random() < 0.15:
        kinds = int(rng.integers(2, min(N, 3) + 1))
        names = [f"n{i}" for i in range(kinds)]
        setup = "; ".join(f"{n} = {_node(rng)}" for n in names)
        reps, rest = divmod(N, kinds)
        nodes = f"[{', '.join(names)}] * {reps}" + (f" + [{', '.join(names[:rest])}]"
                                                    if rest else "")
        return (f"{setup}; system = qm.Cluster({nodes}, router={router!r}{extra})",
                {"nodes": N, "router": router, "mixed": True})
    return (f"system = qm.Cluster({_node(rng)}, count={N}, router={router!r}{extra})",
            {"nodes": N, "router": router})


def _load(rng) -> float:
    u = rng.random()
    if u < 0.70:
        return float(_num(_logu(rng, 1e-4, 0.999), 3))
    if u < 0.88:
        return float(_num(rng.uniform(0.9, 0.999), 4))
    if u < 0.90:
        return 1.0
    return float(_num(rng.uniform(1.0, 1.6), 3))


def _rng(seed: int, kind: str, i: int):
    return np.random.default_rng([seed, KINDS.index(kind), i])


def valid_case(seed: int, kind: str, i: int) -> dict:
    """The i-th drawn call of ``kind`` ("predict" or "simulate"), as code and facts."""
    rng = _rng(seed, kind, i)
    setup, facts = _system(rng)
    load = _load(rng)
    arrivals = "rate=rate"
    if rng.random() < 0.15:
        arrivals = f"arrivals=qm.Renewal(rate, scv={_num(_logu(rng, 0.1, 4.0), 2)})"
    if kind == "predict":
        call = f"qm.predict(system, {arrivals})"
    else:
        requests = int(_logu(rng, 100, 400_000))
        extra = f", requests={requests}, seed={int(rng.integers(0, 1000))}"
        if rng.random() < 0.2:
            # at least 2 arrivals per replica: fewer is a refused run, not a system
            extra += f", replicas={int(rng.integers(1, min(64, requests // 2) + 1))}"
        if rng.random() < 0.2:
            extra += f", warmup={_num(rng.uniform(0, 0.6), 2)}"
        call = f"qm.simulate(system, {arrivals}{extra})"
    return {"id": f"{kind}-{i}", "kind": kind, "setup": setup, "load": load, "call": call,
            "facts": facts, "expect": "answer"}


# ------------------------------------------------------------------------------------------
# hostile inputs, enumerated
# ------------------------------------------------------------------------------------------
NODE = "qm.Node(qm.ServiceTime.affine(2e-3, 2.5e-4), max_batch_size=8)"
BAD = ["None", "'abc'", "''", "float('nan')", "float('inf')", "-float('inf')", "-1", "0",
       "-1e-3", "1e9", "True", "[1, 2]", "{}", "object()", "1j", "np.float64('nan')",
       "np.int64(-3)", "'-2ms'", "'2 furlongs'", "'nan ms'", "2.5", "np.array([1.0, 2.0])",
       "'1e400'"]
# the generic values that are valid for some kinds of field (the call may then succeed)
VALID_FOR = {"duration": {"2.5"}, "duration0": {"2.5", "0"}, "int": {"1e9"},
             "int0": {"0", "1e9"}, "rate": {"2.5", "1e9"}, "fraction0": {"0"}, "seed": {"0"},
             "float0": {"2.5", "0"}}
# fields whose default is None (None asks for it)
DEFAULT_NONE = {"count", "requests", "seed", "replicas"}
# (field the message should name, kind of value, code with {v})
FIELDS = [
    ("base", "duration", "qm.ServiceTime.affine({v})"),
    ("per_item", "duration0", "qm.ServiceTime.affine(2e-3, {v})"),
    ("max_batch_size", "int", "qm.Node(qm.ServiceTime.affine(2e-3), max_batch_size={v})"),
    ("max_queue_delay", "duration0", "qm.Node(qm.ServiceTime.affine(2e-3), max_queue_delay={v})"),
    ("instances", "int", "qm.Node(qm.ServiceTime.affine(2e-3), instances={v})"),
    ("max_queue_size", "int0", "qm.Node(qm.ServiceTime.affine(2e-3), max_queue_size={v})"),
    ("count", "int", f"qm.Cluster({NODE}, count={{v}})"),
    ("choices", "int", f"qm.Cluster({NODE}, count=4, router='power_of_d', choices={{v}})"),
    ("rate", "rate", f"qm.predict({NODE}, rate={{v}})"),
    ("resolution", "int", f"qm.predict({NODE}, rate=1000.0, resolution={{v}})"),
    ("rate", "rate", f"qm.simulate({NODE}, rate={{v}}, requests=20_000, seed=1)"),
    ("requests", "int", f"qm.simulate({NODE}, rate=1000.0, requests={{v}}, seed=1)"),
    ("seed", "seed", f"qm.simulate({NODE}, rate=1000.0, requests=20_000, seed={{v}})"),
    ("replicas", "int", f"qm.simulate({NODE}, rate=1000.0, requests=20_000, replicas={{v}})"),
    ("warmup", "fraction0", f"qm.simulate({NODE}, rate=1000.0, requests=20_000, warmup={{v}})"),
    ("scv", "float0", "qm.Renewal(1000.0, scv={v})"),
    ("rate", "rate", "qm.Renewal({v})"),
]
# (field, code, expect): one-off hostile calls; expect "error", or "any" where it is valid
SPECIAL = [
    ("jitter", "qm.ServiceTime.affine(2e-3, jitter={v})", "error",
     ["'lognormal'", "('lognormal', -1)", "('lognormal', float('nan'))", "('lognormal', 'x')",
      "('gamma', 0)", "('gamma', 50)", "('weibull', 1.0)", "('exponential', 2.0)", "None",
      "42", "('lognormal', 0.3, 1)", "'lognormal:0.3'", "('lognormal', float('inf'))"]),
    ("table", "qm.ServiceTime.table({v})", "error",
     ["{}", "{0: 1e-3}", "{1: -1e-3}", "{1: float('nan')}", "{1: 'x'}", "{1.5: 1e-3, 2: 2e-3}",
      "{'a': 1e-3}", "[1e-3, 2e-3]", "None", "{2: 1e-3}", "{1: 1e-3, 2: 1e9}",
      "{1: 1e-3, 2: float('inf')}"]),
    ("table", "qm.Node(qm.ServiceTime.table({v}), max_batch_size=16)", "error",
     ["{4: 2e-3, 8: 1e-3}", "{2: 1e-3, 3: 3e-3}"]),
    ("empirical", "qm.ServiceTime.empirical({v})", "error",
     ["{1: []}", "{1: [float('nan')]}", "{1: [-1e-3]}", "{1: 'abc'}", "{1: [1e3]}", "None",
      "{1: [1e-3, 'x']}", "{0: [1e-3]}", "{1: [0.0]}"]),
    ("service", "qm.Node({v})", "error",
     ["None", "2e-3", "'2ms'", "qm.ServiceTime", "{1: 1e-3}"]),
    ("preferred_batch_sizes",
     "qm.Node(qm.ServiceTime.affine(2e-3), max_batch_size=8, preferred_batch_sizes={v})",
     "error", ["(0,)", "(16,)", "(4, 4)", "('a',)", "(2.5,)", "(-1,)", "'4'", "4.5",
               "(float('nan'),)", "[[4]]", "(True,)"]),
    ("router", f"qm.Cluster({NODE}, count=3, router={{v}})", "error",
     ["'roundrobin'", "None", "3", "'power_of_d'", "'RANDOM'", "qm.Router('bogus')", "''"]),
    ("weights", f"qm.Cluster({NODE}, count=3, weights={{v}})", "error",
     ["[1, 2]", "[1, -1, 1]", "[0, 0, 0]", "[float('nan'), 1, 1]", "['a', 'b', 'c']", "5",
      "[1, 1, float('inf')]", "'1,1,1'"]),
    ("weights", f"qm.Cluster({NODE}, count=3, router='round_robin', weights={{v}})", "error",
     ["[1, 1, 1]"]),
    ("count", f"qm.Cluster({NODE}, count={{v}}, router='power_of_two')", "error", ["1"]),
    ("nodes", "qm.Cluster({v})", "error",
     ["[]", "[1, 2]", "'node'", "None", f"[{NODE}, 'x']", "42"]),
    (None, f"qm.predict({NODE}, {{v}})", "error",
     # (each value one mistake: a call without a rate is refused for its rate first)
     ["arrivals='poisson'", "rate=1000.0, arrivals=qm.Poisson(1000.0)",
      "rate=1000.0, fallback='maybe'", "rate=1000.0, fallback=None", "arrivals=None"]),
    ("system", "qm.predict({v}, rate=1000.0)", "error",
     ["None", "'node'", "qm.ServiceTime.affine(2e-3)", f"[{NODE}]"]),
    ("system", "qm.simulate({v}, rate=1000.0, requests=20_000)", "error",
     ["None", "'node'", "qm.ServiceTime.affine(2e-3)"]),
    (None, f"qm.simulate({NODE}, rate=1000.0, requests=20_000, {{v}})", "error",
     ["backend='gpu'", "engine='fast'", "backend=None", "engine=3"]),
    ("times", "qm.Trace({v})", "error",
     ["[1.0]", "[2.0, 1.0]", "[0.0, float('nan')]", "'abc'", "[1.0, 1.0]", "None",
      "[[0.0, 1.0], [2.0]]"]),
    ("t", f"qm.predict({NODE}, rate=1000.0).cdf({{v}})", "error",
     ["'x'", "None", "'nan'", "[1e-3, 'a']", "float('nan')", "object()", "'1ms'", "1j"]),
    ("t", f"qm.predict({NODE}, rate=1000.0).sf({{v}})", "error", ["'x'", "None"]),
    ("quantile", f"qm.predict({NODE}, rate=1000.0).quantile({{v}})", "error",
     ["'0.99'", "99", "0", "1", "float('nan')", "None", "'abc'", "[0.5, 2]", "-0.5", "True"]),
    ("quantile", f"qm.simulate({NODE}, rate=1000.0, requests=20_000, seed=1).ci({{v}})",
     "error", ["'0.99'", "99", "float('nan')", "None"]),
    ("level", f"qm.simulate({NODE}, rate=1000.0, requests=20_000, seed=1).ci(0.99, level={{v}})",
     "error", ["1.5", "0", "'x'"]),
    ("duration", "qm.parse_duration({v})", "error",
     ["'-2ms'", "'ms'", "'2MS'", "'1,5ms'", "None", "float('nan')", "'2 minutes'", "[2]",
      "'--2ms'"]),
    ("rate", f"qm.check_stable({NODE}, {{v}})", "error",
     ["float('nan')", "'abc'", "None", "-1"]),
]


def hostile_cases() -> list:
    """Every hostile call: the generic bad values on every field, then the one-off ones."""
    out = []
    for field, kind, code in FIELDS:
        for v in BAD:
            if field == "requests" and v == "1e9":
                continue      # a valid, huge run: the simulator's budget, not its validation
            valid = v in VALID_FOR[kind] or (v == "None" and field in DEFAULT_NONE)
            expect = "any" if valid else "error"
            out.append((field, code.format(v=v), expect))
    for field, code, expect, values in SPECIAL:
        # field None: the (last) keyword the value sets
        out += [(field or v.rpartition("=")[0].rpartition(" ")[2], code.format(v=v), expect)
                for v in values]
    return [{"id": f"hostile-{i}", "kind": "hostile", "setup": "", "call": call, "field": field,
             "expect": expect} for i, (field, call, expect) in enumerate(out)]


CLI_PREDICT = ["predict", "--service-base", "2ms", "--per-item", "0.25ms", "--max-batch-size",
               "8", "--rate", "1000"]
CLI_SIMULATE = ["simulate", "--service-base", "2ms", "--max-batch-size", "8", "--rate", "1000",
                "--requests", "20000"]
# (command line, what it breaks); each must exit 2 (or 3) with one line of error
CLI_BAD = [
    ([], "no command"), (["predcit"], "misspelt command"), (["predict"], "no rate"),
    (["predict", "--rate"], "flag without value"), (["predict", "--rate", "abc"], "rate"),
    (["predict", "--rate", "-5"], "negative rate"), (["predict", "--rate", "nan"], "nan rate"),
    (["predict", "--rate", "inf"], "inf rate"), (["predict", "--rate", "0"], "zero rate"),
    (["predict", "--rate", "1e9"], "rate above capacity"),
    (CLI_PREDICT + ["--max-batch-size", "0"], "B 0"),
    (CLI_PREDICT + ["--max-batch-size", "-1"], "B negative"),
    (CLI_PREDICT + ["--max-batch-size", "2.5"], "B fractional"),
    (CLI_PREDICT + ["--max-batch-size", "abc"], "B text"),
    (CLI_PREDICT + ["--max-queue-delay", "-2ms"], "negative delay"),
    (CLI_PREDICT + ["--max-queue-delay", "2 furlongs"], "bad unit"),
    (CLI_PREDICT + ["--max-queue-delay", "1e9"], "delay in the wrong unit"),
    (CLI_PREDICT + ["--max-queue-delay", "2MS"], "unit case"),
    (CLI_PREDICT + ["--jitter", "lognormal:abc"], "jitter cv text"),
    (CLI_PREDICT + ["--jitter", "weibull"], "unknown jitter"),
    (CLI_PREDICT + ["--jitter", "lognormal:-1"], "negative cv"),
    (CLI_PREDICT + ["--jitter", "lognormal"], "jitter without cv"),
    (["predict", "--service-table", "1:3ms,8", "--rate", "100"], "table entry"),
    (["predict", "--service-table", "a:3ms", "--rate", "100"], "table size"),
    (["predict", "--service-table", "1:-3ms,2:4ms", "--rate", "100"], "table negative"),
    (["predict", "--service-table", "1:3ms", "--service-base", "2ms", "--rate", "100"],
     "table and base"),
    (CLI_PREDICT + ["--preferred", "4,x"], "preferred text"),
    (CLI_PREDICT + ["--preferred", "16"], "preferred above B"),
    (CLI_PREDICT + ["--nodes", "0"], "zero nodes"),
    (CLI_PREDICT + ["--nodes", "4", "--router", "foo"], "unknown router"),
    (CLI_PREDICT + ["--nodes", "4", "--choices", "3"], "choices with random"),
    (CLI_PREDICT + ["--nodes", "3", "--weights", "1,2"], "weights count"),
    (CLI_PREDICT + ["--nodes", "2", "--router", "power_of_d"], "power_of_d without choices"),
    (CLI_PREDICT + ["--trace", "/nonexistent/trace.txt"], "missing trace and rate"),
    (["predict", "--service-base", "2ms", "--trace", "/nonexistent/trace.txt"],
     "missing trace"),
    (CLI_PREDICT + ["--service-base", "0"], "zero service"),
    (CLI_PREDICT + ["--per-item", "-1ms"], "negative per item"),
    (CLI_PREDICT + ["--instances", "0"], "zero instances"),
    (CLI_PREDICT + ["--max-queue-size", "-1"], "negative queue"),
    (CLI_PREDICT + ["--arrival-scv", "-1"], "negative scv"),
    (CLI_PREDICT + ["--resolution", "0"], "zero resolution"),
    (CLI_PREDICT + ["--bogus-flag"], "unknown flag"),
    (CLI_SIMULATE + ["--requests", "0"], "zero requests"),
    (CLI_SIMULATE + ["--seed", "-1"], "negative seed"),
    (CLI_SIMULATE + ["--warmup", "2"], "warmup above 1"),
    (CLI_SIMULATE + ["--backend", "foo"], "unknown backend"),
    (CLI_SIMULATE + ["--replicas", "0"], "zero replicas"),
    (["simulate", "--rate", "1000", "--service-base", "2ms", "--requests", "1e2.5"],
     "requests text"),
    (["routers", "--service-base", "2ms", "--rate", "100", "--router", "random"],
     "router given to routers"),
    (["routers", "--service-base", "2ms", "--nodes", "4"], "routers without rate"),
]


def cli_cases() -> list:
    """Every bad command line."""
    return [{"id": f"cli-{i}", "kind": "cli", "argv": argv, "field": what, "expect": "error"}
            for i, (argv, what) in enumerate(CLI_BAD)]


def _pick(cases: list, n: int | None, seed: int, kind: str) -> list:
    """All the cases (n None), or a seeded sample of n, kept in order."""
    if n is None or n >= len(cases):
        return cases
    keep = np.sort(_rng(seed, kind, 10**9).choice(len(cases), size=n, replace=False))
    return [cases[i] for i in keep]


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
    fig = {"method": r.method, "exactness": r.accuracy.exactness,
           "fallback": r.accuracy.is_fallback}
    for name in ("p50", "p95", "p99"):
        fig[name] = float(getattr(r, name))
    fig["p999"] = float(r.quantile(0.999))
    for name in ("mean", "utilization", "throughput", "mean_batch_size", "rejection_fraction"):
        fig[name] = float(getattr(r, name))
    acc = r.accuracy
    for name in ("lattice_step", "quantile_error", "truncated_mass"):
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
    mass = fig["truncated_mass"]
    if mass is not None and not (_finite(mass) and 0 <= mass <= 1):
        problems.append("truncated mass outside [0, 1]")
    if isinstance(r, SampledLatency):
        fig["requests_measured"] = int(r.requests)
        if r.sections >= 2:
            lo, hi = r.ci(0.99)
            fig["p99_ci"] = [float(lo), float(hi)]
            if not (_finite(lo) and _finite(hi) and lo <= fig["p99"] <= hi):
                problems.append("p99 CI not finite or not around p99")
    elif all(map(_finite, qs)):
        fig["p99_interval"] = list(p99_interval(fig["p99"], acc))
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
    mass = fig.get("truncated_mass")
    if kind == "predict" and outcome == "ok" and mass is not None and _finite(mass) \
            and mass >= 0.01:
        out.append(("model answer with discretised mass >= 0.01", f"mass {mass:.3g}"))
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
    if rec["outcome"] == "library_error" and rec.get("error") == "NotImplementedError":
        return " (in the fallback simulation: the model declines)"
    if rec["outcome"] in ("ok", "bad_figures"):
        return f" (the model alone answers in {rec.get('wall_seconds', 0):.3g} s)"
    return f" (the model alone: {rec['outcome']})"


def compare_cases(cases: list, records: dict, n: int, seed: int, requests: int) -> list:
    """n of the predict calls answered by a model (not a fallback), to simulate."""
    eligible = [c for c in cases if c["kind"] == "predict"
                and records.get(c["id"], {}).get("outcome") == "ok" and not c["unstable"]]
    chosen = _pick(eligible, n, seed, "compare")
    out = []
    for c in chosen:
        arrivals = c["call"][len("qm.predict(system, "):-1]
        out.append({**c, "id": f"compare-{c['id']}", "kind": "compare", "of": c["id"],
                    "arrivals": arrivals, "requests": requests, "seed": seed})
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
        row |= {"method": p["method"], "exactness": p["exactness"],
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
    lines = [f"Predict against simulate (p99; stated error from p99_interval, widened by the "
             f"simulation's 95% CI): {len(done)} of {len(rows)} compared"]
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
        groups[f"method {r['method'].split(':')[0].split(' (')[0][:27]}"].append(r)
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
    if out["outcome"] == "library_error":
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
    cases += _pick(hostile_cases(), sizes["hostile"], args.seed, "hostile")
    cases += _pick(cli_cases(), sizes["cli"], args.seed, "cli")
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
    log(f"comparison: {len(compares)} simulations of {args.compare_requests:,} requests")
    records.update(run_all(compares, args.workers, args.timeout, memory, log))
    cases += compares
    rows = comparison_rows(compares, records)
    meta = {"seed": args.seed, "sizes": sizes, "workers": args.workers,
            "timeout": args.timeout, "memory": memory, "label": args.label,
            "compare_requests": args.compare_requests, "commit": _commit(),
            "machine": f"{platform.node()} ({os.cpu_count()} cpus, {platform.machine()}), "
                       f"Python {platform.python_version()}, numpy {np.__version__}",
            "seconds": round(time.time() - started, 1)}
    text = report(meta, cases, records, rows)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        body = ",\n".join(json.dumps(_stored(c, records[c["id"]]), sort_keys=True)
                          for c in cases)
        args.json.write_text(f'{{"meta": {json.dumps(meta, sort_keys=True)},\n'
                             f'"comparison": {json.dumps(_json_safe(rows))},\n'
                             f'"calls": [\n{body}\n]}}\n')
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
