"""What the fuzz campaign calls (validation/fuzz.py runs them): drawn valid systems, hostile
inputs, bad command lines.

Valid systems span service laws (affine with every jitter law, lognormal and gamma cv up to 2,
monotone and non-monotone tables, empirical samples), max_batch_size 1-128, max_queue_delay
0-50 ms, preferred sizes, 1-8 instances, finite queues, clusters of 1-64 nodes (mixed or
identical) under every router, Poisson or renewal arrivals at loads 1e-4 to 0.999 and above
capacity. Each call is code (``setup`` binds ``system``, ``call`` is evaluated with ``rate``)
so that a report can print it as a one-line repro. The i-th call of each kind is drawn from
``(seed, kind, i)``: a smaller run is a prefix of a larger one.
"""

from __future__ import annotations

import math

import numpy as np

from qmodel.routers import ROUTER_NAMES

__all__ = ["KINDS", "valid_case", "hostile_cases", "cli_cases", "pick"]

KINDS = ("predict", "simulate", "hostile", "cli", "compare", "diagnose")


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


def _sizes(rng, B: int, reach: bool = False) -> list:
    """Measured batch sizes: always 1 (no extrapolation below zero at the left), mostly B
    (always where ``reach``)."""
    inner = list(range(2, B))
    n = int(rng.integers(0, min(5, len(inner)) + 1)) if inner else 0
    sizes = {1, *(int(k) for k in rng.choice(inner, size=n, replace=False))} if n else {1}
    if B > 1 and (reach or rng.random() < 0.8 or len(sizes) == 1):
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
    # samples' means wander from the drawn ones, so a line through the last two empirical
    # sizes may fall to zero before B (a valid refusal, not a test of the models): measure B
    sizes = _sizes(rng, B, reach=kind == "empirical")
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


def pick(cases: list, n: int | None, seed: int, kind: str) -> list:
    """All the cases (n None), or a seeded sample of n, kept in order."""
    if n is None or n >= len(cases):
        return cases
    keep = np.sort(_rng(seed, kind, 10**9).choice(len(cases), size=n, replace=False))
    return [cases[i] for i in keep]
