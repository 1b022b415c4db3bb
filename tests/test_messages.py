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
