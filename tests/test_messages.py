"""Bad input gets a ValueError that names the field, says what was given and what to do.

One test per kind of input: the arguments of a latency result (times and probabilities),
durations, service-time tables that would extrapolate, routers that cannot fit the cluster,
hostile values for every constructor of the description, and the command line's errors.
"""

import math
import re
import subprocess
import sys
import warnings
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

import qmodel as qm
from qmodel.theory import mmc

ROOT = Path(__file__).resolve().parent.parent
SVC = qm.ServiceTime.affine(1e-3, 1e-4)
NODE = qm.Node(SVC, max_batch_size=4)


# --- the arguments of a latency result --------------------------------------------------------
@pytest.fixture(scope="module")
def results():
    """One result of each kind: predicted (lattice), simulated (samples), closed form (queue)."""
    return {"predicted": qm.predict(NODE, rate=300.0),
            "simulated": qm.simulate(NODE, rate=300.0, requests=20_000, seed=1),
            "closed form": mmc(300.0, 1000.0, 1)}


def time_methods(r):
    """Every public method of ``r`` that evaluates the distribution at times t."""
    names = ["cdf", "sf"] + [n for n in ("waiting_cdf", "waiting_sf") if hasattr(r, n)]
    return {n: getattr(r, n) for n in names}


def level_methods(r):
    """Every public method of ``r`` that takes a probability (a quantile level)."""
    out = {"quantile": r.quantile}
    if hasattr(r, "waiting_quantile"):
        out["waiting_quantile"] = r.waiting_quantile
    if hasattr(r, "ci"):
        out["ci"] = r.ci
        out["section_quantiles"] = r.section_quantiles
    return out


@pytest.mark.parametrize("kind", ["predicted", "simulated", "closed form"])
@pytest.mark.parametrize("t, given", [
    ("x", "'x'"), ("0.005", "'0.005' (a string"), (None, "None"), (True, "True"),
    ([0.001, "a"], "[0.001, 'a']"), (1 + 2j, "(1+2j)"), ([[1e-3], [1e-3, 2e-3]], "[[0.001]"),
])
def test_a_time_that_is_no_number_is_refused_by_name(results, kind, t, given):
    for name, method in time_methods(results[kind]).items():
        with pytest.raises(ValueError) as err:
            method(t)
        message = str(err.value)
        assert message.startswith("t must be a time in seconds (a number or an array of "
                                  "numbers)"), (name, message)
        assert f"got {given}" in message, (name, message)


@pytest.mark.parametrize("kind", ["predicted", "simulated", "closed form"])
def test_a_nan_time_is_refused_and_infinite_or_negative_times_answer(results, kind):
    for name, method in time_methods(results[kind]).items():
        for t in (float("nan"), [1e-3, float("nan")]):
            with pytest.raises(ValueError, match=r"^t must be a time in seconds, got .*NaN"):
                method(t)
        below, above = method([-1.0, math.inf])
        assert (below, above) == ((0.0, 1.0) if "cdf" in name else (1.0, 0.0))


@pytest.mark.parametrize("kind", ["predicted", "simulated", "closed form"])
@pytest.mark.parametrize("p, hint", [
    ("0.99", r"got '0\.99' \(a string: write the number without quotes\)"),
    ("x", "got 'x'"), (None, "got None"), (True, "got True"), (1j, r"got 1j"),
    ([0.5, "0.9"], r"got \[0\.5, '0\.9'\] \(strings: pass numbers\)"),
    (float("nan"), r"got nan \(NaN is no probability; for the 99th percentile pass 0\.99\)"),
    (float("inf"), r"got inf \(for the 99th percentile pass 0\.99\)"), (-math.inf, "got -inf"),
    (0, r"got 0 \(0 and 1 themselves are excluded; for the 99th percentile pass 0\.99\)"),
    (1, r"got 1 \(0 and 1 themselves are excluded; for the 99th percentile pass 0\.99\)"),
    (1.5, "got 1.5"), (-0.01, "got -0.01"),
    (99, r"got 99 \(for the 99th percentile pass 0\.99, not 99\)"),
])
def test_a_level_outside_0_1_or_no_number_is_refused_by_name(results, kind, p, hint):
    for name, method in level_methods(results[kind]).items():
        with pytest.raises(ValueError) as err:
            method(p)
        message = str(err.value)
        assert message.startswith("quantile level p must "), (name, message)
        assert "strictly between 0 and 1" in message, (name, message)
        assert re.search(hint, message), (name, message)


def test_an_array_of_levels_names_the_bad_ones(results):
    with pytest.raises(ValueError, match=r"got \[1\.0\] in p=\[0\.5, 1\.0\]"):
        results["predicted"].quantile([0.5, 1.0])
    with pytest.raises(ValueError, match=r"quantile level p must be one number here"):
        results["simulated"].ci([0.5, 0.99])
    assert results["predicted"].quantile(np.array([0.5, 0.99])).shape == (2,)


@pytest.mark.parametrize("level, match", [
    (95, r"^level must lie strictly between 0 and 1, got 95 \(for a 95% interval pass 0\.95, "
         r"not 95\)"),
    ("0.95", r"^level must be a probability strictly between 0 and 1 .*; got '0\.95'"),
    (float("nan"), "NaN is no probability"),
])
def test_the_confidence_level_of_ci_is_checked_the_same_way(results, level, match):
    with pytest.raises(ValueError, match=match):
        results["simulated"].ci(0.99, level=level)


# --- durations ---------------------------------------------------------------------------------
@pytest.mark.parametrize("value, message", [
    ("-2ms", "Node.max_queue_delay='-2ms' is negative: a duration must be >= 0 (seconds, or a "
             "string such as '2ms')"),
    (-0.002, "Node.max_queue_delay=-0.002 is negative: a duration must be >= 0"),
    ("2 hours", "Node.max_queue_delay='2 hours': 'hours' is not a unit of duration qmodel reads; "
                "use s, ms, us or ns, as in '2ms', '500us', '1.5s'"),
    ("0.002", "Node.max_queue_delay='0.002' has no unit; write a number of seconds without "
              "quotes (0.002) or add a unit"),
    ("1e400ms", "Node.max_queue_delay='1e400ms' is not finite"),
    ("fast", "Node.max_queue_delay='fast' is not a duration; write a number of seconds or a "
             "number with a unit"),
    (b"2ms", "Node.max_queue_delay must be a number of seconds or a string with a unit such as "
             "'2ms', '500us', '1.5s'; got b'2ms'"),
])
def test_parse_duration_names_the_field_what_was_given_and_the_fix(value, message):
    with pytest.raises(ValueError) as err:
        qm.parse_duration(value, "Node.max_queue_delay")
    assert str(err.value).startswith(message)


def test_durations_take_a_sign_and_either_micro_sign():
    assert qm.parse_duration("+2ms") == pytest.approx(2e-3)
    assert qm.parse_duration("5\u00b5s") == qm.parse_duration("5\u03bcs") == pytest.approx(5e-6)
    assert math.copysign(1.0, qm.parse_duration(-0.0)) == 1.0
    node = qm.Node(SVC, max_queue_delay=-0.0)
    assert "delay=0ms" in node.describe()
    with pytest.raises(ValueError, match="^ServiceTime.base='-2ms' is negative"):
        qm.ServiceTime.affine("-2ms")


# --- service-time tables beyond their measured sizes -----------------------------------------
@pytest.mark.parametrize("service, B, message", [
    # the means fall at the top: the line reaches 0 for the LARGER sizes
    (qm.ServiceTime.table({1: 5e-3, 4: 1e-3}), 8,
     "Node(max_batch_size=8) needs S(k) for k = 1..8, but ServiceTime.table measures batch sizes "
     "1, 4: the line through sizes 1 and 4 (5 ms, 1 ms) reaches S(k) <= 0 at the larger k = 5..8 "
     "(S(8) = -4.333 ms); measure the larger sizes: add the mean time of batch size 8 (the "
     "largest asked for), or keep max_batch_size <= 4"),
    # the means rise steeply at the bottom: the line reaches 0 for the SMALLER sizes
    (qm.ServiceTime.table({4: 1e-3, 8: 6e-3}), 8,
     "Node(max_batch_size=8) needs S(k) for k = 1..8, but ServiceTime.table measures batch sizes "
     "4, 8: the line through sizes 4 and 8 (1 ms, 6 ms) reaches S(k) <= 0 at the smaller k = 1..3 "
     "(S(1) = -2.75 ms); measure the smaller sizes: add the mean time of batch size 1 (and any "
     "sizes between it and 4)"),
    # both ends
    (qm.ServiceTime.table({3: 1e-3, 4: 3e-3, 6: 5e-3, 7: 3e-3}), 12,
     "at the smaller k = 1, 2 (S(1) = -3 ms); measure the smaller sizes: add the mean time of "
     "batch size 1 (and any sizes between it and 3); and the line through sizes 6 and 7 (5 ms, "
     "3 ms) reaches S(k) <= 0 at the larger k = 9..12 (S(12) = -7 ms); measure the larger sizes: "
     "add the mean time of batch size 12 (the largest asked for), or keep max_batch_size <= 7"),
    # one measured size: no line to extend, in either direction
    (qm.ServiceTime.table({1: 3e-3}), 16,
     "ServiceTime.table measures batch size 1 only, so S(k) for the larger k = 2..16 is unknown "
     "(one size gives no line to extend); measure the larger sizes: add the mean time of batch "
     "size 16, or use max_batch_size=1"),
    (qm.ServiceTime.empirical({4: [3e-3, 4e-3]}), 16,
     "ServiceTime.empirical measures batch size 4 only, so S(k) for the smaller k = 1..3 and "
     "larger k = 5..16 is unknown (one size gives no line to extend); measure the smaller and "
     "larger sizes: add samples of batch size 1 and samples of batch size 16"),
    (qm.ServiceTime.empirical({2: [1e-3], 8: [7e-3]}), 8,
     "ServiceTime.empirical measures batch sizes 2, 8: the line through sizes 2 and 8 (1 ms, "
     "7 ms) reaches S(k) <= 0 at the smaller k = 1 (S(1) = 0 ms); measure the smaller sizes: add "
     "samples of batch size 1"),
])
def test_a_table_that_cannot_extend_names_the_sizes_to_measure(service, B, message):
    with pytest.raises(ValueError) as err:
        qm.Node(service, max_batch_size=B)
    assert message in str(err.value)
    assert str(err.value).startswith(f"Node(max_batch_size={B}) needs S(k) for k = 1..{B}, but "
                                     f"ServiceTime.{service.kind} measures batch size")


def test_an_extrapolating_table_warns_with_the_sizes_to_add_on_each_side():
    table = qm.ServiceTime.table({2: 3e-3, 8: 7e-3})
    with pytest.warns(UserWarning) as record:
        qm.Node(table, max_batch_size=16)
    assert str(record[0].message) == (
        "service time extrapolated outside the measured batch sizes: ServiceTime.table measures "
        "batch sizes 2, 8; S(k) for the smaller k = 1 is extrapolated from sizes 2 and 8; add the "
        "mean time of batch size 1; S(k) for the larger k = 9..16 is extrapolated from sizes 2 "
        "and 8; add the mean time of batch size 16 or keep max_batch_size <= 8")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert table.mean(4) == pytest.approx(13e-3 / 3)     # inside: no warning
        assert qm.Node(qm.ServiceTime.table({1: 3e-3}), max_batch_size=1).capacity == \
            pytest.approx(1 / 3e-3)


# --- routers that cannot fit the cluster -------------------------------------------------------
@pytest.mark.parametrize("kwargs, message", [
    (dict(count=1, router="power_of_two"),
     "Cluster(node, count=1, router='power_of_two'): power_of_two sends each request to the less "
     "loaded of 2 distinct nodes sampled at random, so it needs at least 2 nodes, and this "
     "cluster has 1; give count >= 2, or for a single node router='random', 'round_robin' or "
     "'least_outstanding'"),
    (dict(router="power_of_two"),
     "Cluster(node, router='power_of_two'): power_of_two sends each request to the less loaded "
     "of 2 distinct nodes sampled at random, so it needs at least 2 nodes, and this cluster has "
     "1 (count defaults to 1); give count >= 2"),
    (dict(nodes=[NODE], router="power_of_two"),
     "Cluster([1 node], router='power_of_two'): power_of_two sends each request to the less "
     "loaded of 2 distinct nodes sampled at random, so it needs at least 2 nodes, and this "
     "cluster has 1; give a list of at least 2 nodes"),
    (dict(count=1, router=qm.Router("power_of_two")),
     "Cluster(node, count=1, router='power_of_two'): power_of_two sends"),
    (dict(count=3, router="power_of_d", choices=5),
     "Cluster(node, count=3, router='power_of_d', choices=5): choices=5 exceeds the 3 nodes; "
     "sample at most as many nodes as there are (choices=3 samples every node, which is "
     "least_outstanding), or give count >= 5"),
    (dict(count=3, router="power_of_d"),
     "router 'power_of_d' needs choices=d, how many nodes to sample per request, e.g. "
     "Cluster(node, count=8, router='power_of_d', choices=3); router='power_of_two' is "
     "choices=2"),
    (dict(count=3, router="power_of_two", weights=[1, 1, 1]),
     "Cluster.weights only apply to router='random', not 'power_of_two'"),
    (dict(count=3, router="round_robin", choices=2),
     "Cluster.choices only applies to router='power_of_d', not 'round_robin'"),
    (dict(count=3, router=qm.Router("power_of_two", choices=3)),
     "router 'power_of_two' samples 2 nodes; for another number use router='power_of_d' with "
     "choices=d"),
])
def test_a_router_that_cannot_fit_names_what_was_given(kwargs, message):
    kwargs = {"nodes": NODE, **kwargs}
    with pytest.raises(ValueError) as err:
        qm.Cluster(**kwargs)
    assert str(err.value).startswith(message)


def test_power_of_two_on_one_node_speaks_of_nodes_not_of_choices_nobody_gave():
    for kwargs in (dict(count=1), dict(), dict(count=1, router=qm.Router("power_of_two"))):
        with pytest.raises(ValueError) as err:
            qm.Cluster(NODE, **{"router": "power_of_two", **kwargs})
        assert "choices" not in str(err.value)


# --- hostile values for every constructor of the description ---------------------------------
class Pairs(Mapping):
    """A mapping that holds any keys, unhashable ones too (as a user's own mapping may)."""

    def __init__(self, items):
        self.items_ = list(items)

    def __getitem__(self, key):
        return next(v for k, v in self.items_ if k is key)

    def __iter__(self):
        return iter(k for k, _ in self.items_)

    def __len__(self):
        return len(self.items_)


HOSTILE = ["x", "", "nan", float("nan"), math.inf, -math.inf, -1, 0, True, False, None, 1e300,
           10**19, [1], (), {}, b"2ms", 1 + 2j, object()]
CONSTRUCTORS = {
    # label: (the field its messages name, a call that puts the value in that field)
    "affine base": ("ServiceTime.base", lambda v: qm.ServiceTime.affine(v)),
    "affine per_item": ("ServiceTime.per_item", lambda v: qm.ServiceTime.affine(1e-3, v)),
    "table mean": ("ServiceTime.table[1]", lambda v: qm.ServiceTime.table({1: v, 2: 2e-3})),
    "table size": ("ServiceTime.table",
                   lambda v: qm.ServiceTime.table(Pairs([(v, 1e-3), (2, 2e-3)]))),
    "table": ("ServiceTime.table", lambda v: qm.ServiceTime.table(v)),
    "empirical samples": ("ServiceTime.empirical[1]",
                          lambda v: qm.ServiceTime.empirical({1: v})),
    "empirical sample": ("ServiceTime.empirical[1]",
                         lambda v: qm.ServiceTime.empirical({1: [1e-3, v]})),
    "empirical": ("ServiceTime.empirical", lambda v: qm.ServiceTime.empirical(v)),
    "max_batch_size": ("Node.max_batch_size", lambda v: qm.Node(SVC, max_batch_size=v)),
    "max_queue_delay": ("Node.max_queue_delay", lambda v: qm.Node(SVC, max_queue_delay=v)),
    "preferred": ("Node.preferred_batch_sizes",
                  lambda v: qm.Node(SVC, max_batch_size=4, preferred_batch_sizes=v)),
    "instances": ("Node.instances", lambda v: qm.Node(SVC, instances=v)),
    "max_queue_size": ("Node.max_queue_size", lambda v: qm.Node(SVC, max_queue_size=v)),
    "service": ("Node.service", lambda v: qm.Node(v)),
    "nodes": ("Cluster.nodes", lambda v: qm.Cluster(v)),
    "count": ("Cluster.count", lambda v: qm.Cluster(NODE, count=v)),
    "router": ("Cluster.router", lambda v: qm.Cluster(NODE, count=2, router=v)),
    "weights": ("Cluster.weights", lambda v: qm.Cluster(NODE, count=2, weights=v)),
    "a weight": ("Cluster.weights", lambda v: qm.Cluster(NODE, count=2, weights=[1, v])),
    "choices": ("choices", lambda v: qm.Cluster(NODE, count=3, router="power_of_d", choices=v)),
    "Poisson": ("rate", lambda v: qm.Poisson(v)),
    "Renewal scv": ("Renewal.scv", lambda v: qm.Renewal(10.0, scv=v)),
    "Trace": ("Trace.times", lambda v: qm.Trace(v)),
    "a trace time": ("Trace.times", lambda v: qm.Trace([0.0, v])),
    "parse_duration": ("duration", lambda v: qm.parse_duration(v)),
    "check_stable": ("rate", lambda v: qm.check_stable(NODE, v)),
}


# (constructor, repr of the value): the hostile values that are valid there, and why
ACCEPTED = {
    ("affine per_item", "0"): "no per-request cost: S(k) = base",
    ("empirical samples", "[1]"): "one measured batch of one second",
    ("max_queue_delay", "0"): "no delay: Triton's default",
    ("preferred", "[1]"): "batches of one preferred",
    ("preferred", "()"): "no preferred sizes: Triton's default",
    ("max_queue_size", "0"): "an unlimited queue: Triton's default",
    ("count", "None"): "the count not given: the nodes listed, or one",
    ("weights", "None"): "no weights: an even split",
    ("a weight", "0"): "a node that takes no traffic (drained)",
    ("a weight", "1e+300"): "weights are relative: the first node's share is 1e-300",
    ("a weight", "10000000000000000000"): "weights are relative",
    ("Renewal scv", "0"): "deterministic arrivals",
    ("a trace time", "1e+300"): "a finite arrival time; where the trace is used, its rate "
                                "(1e-300 per second) is refused",
    ("a trace time", "10000000000000000000"): "a finite arrival time, as above",
    ("parse_duration", "0"): "zero seconds (a delay of 0)",
    ("parse_duration", "1e+300"): "a parser of units: each field checks its own range "
                                  "(Node.max_queue_delay=1e300 is refused)",
    ("parse_duration", "10000000000000000000"): "a parser of units, as above",
}


@pytest.mark.parametrize("label", CONSTRUCTORS)
def test_hostile_values_get_a_value_error_naming_the_field(label):
    """Each hostile value is refused with a ValueError that names the field, or is listed in
    ACCEPTED with the reason it is valid; anything else (a TypeError, an OverflowError, a
    RuntimeWarning, a value taken silently) fails."""
    field, build = CONSTRUCTORS[label]
    for value in HOSTILE:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            try:
                build(value)
            except ValueError as err:
                assert field in str(err), (label, value, str(err))
                assert "could not convert" not in str(err), (label, value, str(err))
                assert (label, repr(value)) not in ACCEPTED, (label, value, "listed as valid")
                continue
        assert (label, repr(value)) in ACCEPTED, (label, value, "accepted, not listed as valid")


def test_every_accepted_hostile_value_is_still_accepted():
    """The list of valid hostile values holds no stale entry."""
    hostile = {repr(v): v for v in HOSTILE}
    for (label, value), reason in ACCEPTED.items():
        assert reason and value in hostile, (label, value)
        CONSTRUCTORS[label][1](hostile[value])


@pytest.mark.parametrize("build, message", [
    # values that used to pass, end in a foreign exception or in numpy's words
    (lambda: qm.Cluster(NODE, count=1e300), "Cluster.count=1e+300 is larger than 65,536"),
    (lambda: qm.Cluster(NODE, count=3, router="power_of_d", choices=1e300),
     "Cluster.choices=1e+300 is larger than 65,536"),               # not its 301 digits
    (lambda: qm.Node(SVC, max_batch_size=10**19), "Node.max_batch_size=10000000000000000000 is "
                                                  "larger than 65,536"),
    (lambda: qm.Node(SVC, instances=1e300), "Node.instances=1e+300 is larger than 4,096"),
    (lambda: qm.Node(SVC, max_queue_size=10**19), "Node.max_queue_size=10000000000000000000 is "
                                                  "larger than 1,000,000,000"),
    (lambda: qm.ServiceTime.table({10**19: 1e-3, 2: 2e-3}), "ServiceTime.table batch size="),
    (lambda: qm.check_stable(NODE, "100"), "rate must be a finite number of requests per "
                                           "second, got '100'"),
    (lambda: qm.check_stable(NODE, float("nan")), "rate must be a finite number"),
    (lambda: qm.check_stable(NODE, -1.0), "rate=-1.0 must be > 0 requests per second"),
    (lambda: qm.ServiceTime.empirical({1: "x"}), "ServiceTime.empirical[1] must be a sequence "
                                                 "of measured times in seconds; got 'x'"),
    (lambda: qm.ServiceTime.empirical({1: ["2ms"]}), "ServiceTime.empirical[1] must be a "
                                                     "sequence of measured times in seconds; "
                                                     "got ['2ms'] (strings: pass numbers)"),
    (lambda: qm.ServiceTime.empirical({1: {}}), "ServiceTime.empirical[1] must be a sequence"),
    (lambda: qm.ServiceTime.empirical({1: True}), "ServiceTime.empirical[1] must be a sequence"),
    (lambda: qm.ServiceTime.empirical({1: [1e-3, -1e-3, 0.0]}),
     "ServiceTime.empirical[1] must hold positive finite seconds; 2 of its 3 samples are not, "
     "e.g. -0.001"),
    (lambda: qm.ServiceTime.empirical([1e-3]), "ServiceTime.empirical takes a non-empty mapping "
                                               "of batch size to measured seconds, e.g. {1: "
                                               "[3.1e-3, 3.4e-3], 8: [6.7e-3]}; got [0.001]"),
    (lambda: qm.Node(SVC, max_batch_size=8, preferred_batch_sizes=""),
     "Node.preferred_batch_sizes must be a sequence of whole numbers such as (4, 8), got ''"),
    (lambda: qm.Node(SVC, max_batch_size=8, preferred_batch_sizes="48"),
     "Node.preferred_batch_sizes must be a sequence of whole numbers such as (4, 8), got '48'"),
    (lambda: qm.Cluster(NODE, count=2, weights="nan"), "Cluster.weights must be one number per "
                                                       "node, e.g. [9, 1] for a 90/10 split; "
                                                       "got 'nan'"),
    (lambda: qm.Cluster("ab"), "Cluster.nodes must be a Node or a list of Nodes, got 'ab'"),
    (lambda: qm.Trace(["0", "1"]), "Trace.times must be a sequence of arrival times in seconds; "
                                   "got ['0', '1'] (strings: pass numbers)"),
    (lambda: qm.Trace([0.0, 1.0, math.inf]), "Trace.times contains NaN or infinite values, the "
                                             "first at index 2"),
])
def test_hostile_values_that_slipped_through_are_refused_by_name(build, message):
    with pytest.raises(ValueError) as err:
        build()
    assert str(err.value).startswith(message)


def test_minus_zero_is_zero():
    assert math.copysign(1.0, qm.Renewal(10.0, scv=-0.0).scv) == 1.0
    assert math.copysign(1.0, qm.ServiceTime.affine(1e-3, -0.0).per_item) == 1.0


# --- the command line: every error is one line -------------------------------------------------
def run_cli(argv, capsys):
    """(exit status, stdout, stderr) of ``qmodel ARGV`` run in this process."""
    from qmodel.cli import main
    try:
        status = main(argv)
    except SystemExit as exit_:
        status = exit_.code
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("argv, line", [
    ([], "qmodel: error: the following arguments are required: COMMAND (see qmodel --help)"),
    (["simulat"], "qmodel: error: argument COMMAND: invalid choice: 'simulat' (choose from "
                  "'simulate', 'predict', 'routers', 'profile', 'size', 'ensemble', 'triton-check', 'derive', 'validate') (see qmodel --help)"),
    (["predict", "--rate", "abc"],
     "qmodel predict: error: argument --rate: 'abc' is not a number (see qmodel predict --help)"),
    (["predict", "--rate"],
     "qmodel predict: error: argument --rate: expected one argument (see qmodel predict --help)"),
    (["predict", "--rate", "100", "--bogus"],
     "qmodel predict: error: unrecognized arguments: --bogus (see qmodel predict --help)"),
    (["predict", "--rate", "100", "--max-batch-size", "2.5"],
     "qmodel predict: error: argument --max-batch-size: '2.5' is not a whole number (see "
     "qmodel predict --help)"),
    (["simulate", "--router", "fastest", "--rate", "10"],
     "qmodel simulate: error: argument --router: invalid choice: 'fastest' (choose from "
     "'random', 'round_robin', 'least_outstanding', 'power_of_d', 'power_of_two') (see qmodel "
     "simulate --help)"),
    (["simulate", "--max-queue-delay=-2ms", "--rate", "1"],
     "qmodel simulate: error: argument --max-queue-delay: TIME='-2ms' is negative: a duration "
     "must be >= 0 (seconds, or a string such as '2ms') (see qmodel simulate --help)"),
    (["simulate", "--rate", "100", "--warmup", "abc"],
     "qmodel simulate: error: argument --warmup: 'abc' is not a number (see qmodel simulate "
     "--help)"),
    (["routers", "--nodes", "x", "--rate", "10"],
     "qmodel routers: error: argument --nodes: 'x' is not a number (see qmodel routers --help)"),
    (["routers", "--rate", "10", "extra"],
     "qmodel routers: error: unrecognized arguments: extra (see qmodel routers --help)"),
    (["derive", "--format", "pdf"],
     "qmodel derive: error: argument --format: invalid choice: 'pdf' (choose from 'md', "
     "'html', 'both') (see qmodel derive --help)"),
    (["validate", "--bogus"],
     "qmodel validate: error: unrecognized arguments: --bogus (see qmodel validate --help)"),
    (["validate", "--quick", "--full"],
     "qmodel validate: error: argument --full: not allowed with argument --quick (see qmodel "
     "validate --help)"),
    # errors found after parsing take the same one line
    (["predict"], "qmodel: error: give the arrival rate: --rate REQ/S (or --trace FILE)"),
    (["predict", "--nodes", "1", "--router", "power_of_d", "--choices", "2", "--rate", "10"],
     "qmodel: error: Cluster(node, count=1, router='power_of_d', choices=2): choices=2 exceeds "
     "the 1 node; sample at most as many nodes as there are (choices=1 samples every node, "
     "which is least_outstanding), or give count >= 2"),
])
def test_every_command_line_error_is_one_line_with_status_2(argv, line, capsys):
    status, out, err = run_cli(argv, capsys)
    assert status == 2
    assert err == line + "\n"
    assert out == ""


def test_the_installed_entry_prints_one_line_and_exits_2():
    # the entry point as the console script runs it: no usage block, no traceback
    for argv in (["predict", "--rate", "abc"], ["simulate", "--bogus"], ["nonsense"]):
        done = subprocess.run([sys.executable, "-c", "import sys; from qmodel.cli import main; "
                               "sys.exit(main())", *argv], capture_output=True, text=True,
                              cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": ""}, timeout=120)
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1 and done.stderr.startswith("qmodel"), done.stderr
        assert "usage:" not in done.stderr and "Traceback" not in done.stderr


def _free(monkeypatch, nbytes):
    from qmodel import machine

    monkeypatch.setattr(machine, "available_memory", lambda: nbytes)


def test_a_run_larger_than_the_free_memory_is_refused_before_it_starts(monkeypatch):
    """It died inside NumPy's allocator, or was killed by the system without a word; nodes,
    ensembles (whose stages take more per request) and traffic alike."""
    _free(monkeypatch, 2 * 2**30)
    node = qm.Node(qm.ServiceTime.affine(2e-3), max_batch_size=8)
    with pytest.raises(ValueError, match=r"requests=100,000,000 would need about 14.0 GiB of "
                                         r"memory by qmodel's estimate, more than the 2.0 GiB "
                                         r"free here; simulate at most about 14,316,557 "
                                         r"requests"):
        qm.simulate(node, rate=100.0, requests=100_000_000, seed=1)
    assert qm.simulate(node, rate=100.0, requests=20_000, seed=1).requests > 0
    chain = qm.Ensemble({f"s{i}": node for i in range(8)},
                        [(f"s{i}", f"s{i + 1}") for i in range(7)])
    with pytest.raises(ValueError, match=r"requests=6,000,000 would need about 2.6 GiB"):
        qm.simulate(chain, rate=100.0, requests=6_000_000, seed=1)
    day = qm.Traffic.constant(2e7, 3600)
    with pytest.raises(ValueError, match=r"the traffic's expected arrivals=72,000,000,000 "
                                         r"would need"):
        qm.simulate(qm.Cluster(node, count=40_000), arrivals=day, seed=1)


def test_predict_declines_a_fallback_that_the_free_memory_cannot_hold(monkeypatch):
    """The fallback's refusal reached the user as a ValueError about requests they never
    gave; the free memory now bounds the prediction's budget, so predict declines with both
    reasons; with a little more, it answers with a shorter run."""
    cluster = qm.Cluster(qm.Node(qm.ServiceTime.affine(1e-3, 1e-4), max_batch_size=8,
                                 instances=2), count=4, router="least_outstanding")
    _free(monkeypatch, 50 * 2**20)
    short = qm.predict(cluster, rate=0.7 * cluster.capacity)
    assert short.accuracy.is_fallback and short.accuracy.simulation.requests < 349_525
    _free(monkeypatch, 2**20)
    with pytest.raises(NotImplementedError, match=r"the shortest simulation that would answer "
                                                  r"instead, .*; free memory 1 MiB\)"):
        qm.predict(cluster, rate=0.7 * cluster.capacity)


def test_traffic_above_any_cluster_is_refused_by_name(tmp_path):
    path = tmp_path / "huge.csv"
    path.write_text("time,rate\n0,1000\n10,5e10\n20,1000\n")
    for build in (lambda: qm.Traffic.from_csv(path),
                  lambda: qm.Traffic.from_counter([0, 1, 2], [0, 2e10, 4e10]),
                  lambda: qm.Traffic.constant(1e9, 10).scaled(100)):
        with pytest.raises(ValueError, match=r"Traffic.rates\[\d\]=\S+ requests per second is "
                                             r"above 1e\+10"):
            build()
