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
    ("2 hours", "Node.max_queue_delay='2 hours': qmodel does not read the unit 'hours'; use s, "
                "ms, us or ns, as in '2ms', '500us', '1.5s'"),
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

