"""Checked conversions of user input: durations with units, whole numbers, rates, arrays.

The description (:mod:`qmodel.system`, :mod:`qmodel.routers`), the results
(:mod:`qmodel.latency`) and the entry points (``simulate``, the CLI) validate their input with
these, once, so that every message names the field, what was given and the fix in the same
words.
"""

from __future__ import annotations

import math
import numbers
import re

import numpy as np

__all__ = ["parse_duration", "positive_duration", "positive_int", "positive_rate", "real_array",
           "shown", "LONGEST_PLAUSIBLE_SECONDS", "MOST_REQUESTS_PER_BATCH", "MOST_INSTANCES",
           "MOST_NODES", "MOST_QUEUED", "MOST_RENEWAL_SCV", "LEAST_RATE", "UnstableError", "check_below_capacity",
           "read_json"]

# A Triton max_queue_delay is configured in microseconds; a value this large in seconds almost
# certainly came over without conversion.
LONGEST_PLAUSIBLE_SECONDS = 60.0

# Counts beyond any deployment: a larger one is a typo or a unit slip, and would otherwise end
# deep inside a solver or the simulator in an integer overflow or an allocation of that size.
MOST_REQUESTS_PER_BATCH = 65_536     # max_batch_size, preferred and measured batch sizes
MOST_INSTANCES = 4_096               # model instances of one node
MOST_NODES = 65_536                  # nodes of a cluster (and nodes sampled by power of d)
MOST_QUEUED = 1_000_000_000          # max_queue_size (the simulator counts it in int64)
# the largest interarrival scv a renewal stream is described with (gamma gaps): beyond it a
# few huge gaps dominate, which the gamma family does not model well
MOST_RENEWAL_SCV = 100.0
# below this an arrival rate is a unit mistake, and the simulator's clock (float64 seconds)
# would lose the service times against arrival times of 1e9 s and more
LEAST_RATE = 1e-3                    # requests per second: one every 17 minutes
# requests per second: ten billion is beyond any cluster (a million instances of 0.1 ms
# batches of 1,000), so a larger rate is a unit mistake or an overflow, not a workload
MOST_RATE = 1e10

# "µs" is the micro sign (U+00B5), "μs" the Greek mu (U+03BC): keyboards give either
_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ns": 1e-9}
_NUMBER = r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
_WITH_UNIT = re.compile(rf"\s*({_NUMBER})\s*([^\s0-9.]+)\s*")
_BARE_NUMBER = re.compile(rf"\s*({_NUMBER})\s*")
_UNIT_NAMES = "s, ms, us or ns"
_EXAMPLES = "'2ms', '500us', '1.5s'"


def shown(value, width: int = 60) -> str:
    """``repr(value)`` cut to ``width`` characters, for error messages that quote the input.

    Examples
    --------
    >>> shown("2ms"), shown(list(range(100)), width=20)
    ("'2ms'", '[0, 1, 2, 3, 4, 5...')
    """
    text = repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."


def parse_duration(value, name: str = "duration") -> float:
    """Seconds (>= 0) from a number (already seconds) or a string with a unit.

    Parameters
    ----------
    value : float or str
        ``0.002``, ``"2ms"``, ``"500us"``, ``"1.5 s"``, ``"250ns"``.
    name : str
        The field name used in error messages.

    Raises
    ------
    ValueError
        Naming ``name``, what was given and what is accepted: for a negative or non-finite
        duration, a string without a unit or with an unknown one, or anything else.

    Examples
    --------
    >>> parse_duration("2ms"), parse_duration("500us"), parse_duration(0.25)
    (0.002, 0.0005, 0.25)
    >>> parse_duration("-2ms", "Node.max_queue_delay")
    Traceback (most recent call last):
    ...
    ValueError: Node.max_queue_delay='-2ms' is negative: a duration must be >= 0 (seconds, or a string such as '2ms')
    """
    if isinstance(value, str):
        seconds = _seconds_from_text(value, name)
    elif isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number of seconds or a string with a unit such as "
                         f"{_EXAMPLES}; got {shown(value)}")
    else:
        seconds = float(value)
    if math.isnan(seconds) or (math.isinf(seconds) and seconds > 0):
        raise ValueError(f"{name}={shown(value)} is not finite; give a duration in seconds, or "
                         f"a string such as '2ms'")
    if seconds < 0:
        raise ValueError(f"{name}={shown(value)} is negative: a duration must be >= 0 (seconds, "
                         f"or a string such as '2ms')")
    return seconds + 0.0        # -0.0 becomes 0.0


def _seconds_from_text(text: str, name: str) -> float:
    m = _WITH_UNIT.fullmatch(text)
    if m and m.group(2) in _UNITS:
        return float(m.group(1)) * _UNITS[m.group(2)]
    if m:
        raise ValueError(f"{name}={text!r}: {m.group(2)!r} is not a unit of duration qmodel "
                         f"reads; use {_UNIT_NAMES}, as in {_EXAMPLES}")
    if _BARE_NUMBER.fullmatch(text):
        raise ValueError(f"{name}={text!r} has no unit; write a number of seconds without "
                         f"quotes ({text.strip()}) or add a unit: {_EXAMPLES}")
    raise ValueError(f"{name}={text!r} is not a duration; write a number of seconds or a "
                     f"number with a unit ({_UNIT_NAMES}): {_EXAMPLES}")


def positive_duration(value, name: str, allow_zero: bool = False) -> float:
    """Seconds from :func:`parse_duration`, > 0 (>= 0 with ``allow_zero``) and at most
    :data:`LONGEST_PLAUSIBLE_SECONDS`, or a ValueError naming ``name``."""
    seconds = parse_duration(value, name)
    if seconds == 0 and not allow_zero:
        raise ValueError(f"{name}={shown(value)} must be > 0 (seconds)")
    if seconds > LONGEST_PLAUSIBLE_SECONDS:
        raise ValueError(
            f"{name}={seconds:g} s is longer than {LONGEST_PLAUSIBLE_SECONDS:g} s: qmodel takes "
            f"seconds, so this looks like micro- or milliseconds; write {seconds * 1e-6:g} "
            f"(from us) or {seconds * 1e-3:g} (from ms), or a string such as '2ms'")
    return seconds


def positive_int(value, name: str, minimum: int = 1, maximum: int | None = None) -> int:
    """A whole number (an integral float such as 2.0 is accepted) in [minimum, maximum], or a
    ValueError naming ``name``.

    Examples
    --------
    >>> positive_int(8.0, "Node.max_batch_size")
    8
    >>> positive_int(1e300, "Node.instances", maximum=4096)
    Traceback (most recent call last):
    ...
    ValueError: Node.instances=1e+300 is larger than 4,096, beyond anything qmodel is built to model; check the value (a typo, or a unit slip?)
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or (
            not isinstance(value, numbers.Integral) and not float(value).is_integer()):
        raise ValueError(f"{name} must be a whole number >= {minimum}, got {shown(value)}")
    if value < minimum:
        raise ValueError(f"{name}={shown(value)} must be >= {minimum}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name}={shown(value)} is larger than {maximum:,}, beyond anything "
                         f"qmodel is built to model; check the value (a typo, or a unit slip?)")
    return int(value)


def positive_rate(value, name: str = "rate") -> float:
    """A finite rate > 0 (requests per second) as a float, or a ValueError naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) \
            or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number of requests per second, got "
                         f"{shown(value)}")
    if value <= 0:
        raise ValueError(f"{name}={shown(value)} must be > 0 requests per second")
    if value < LEAST_RATE:
        raise ValueError(f"{name}={shown(value)} requests per second is below {LEAST_RATE:g} "
                         f"(one request every 17 minutes): give the rate in requests per "
                         f"second")
    if value > MOST_RATE:
        raise ValueError(f"{name}={shown(value)} requests per second is above {MOST_RATE:g}, "
                         f"more than any cluster serves: give the rate in requests per second")
    return float(value)


def _holds_booleans(value) -> bool:
    """Whether a (nested) sequence holds a boolean: True, np.True_, or a boolean array. The
    types of a flat list are gathered in C (``map``): a list of ten million floats takes
    a fraction of a second."""
    if not isinstance(value, (list, tuple)):
        return isinstance(value, (bool, np.bool_)) or (
            isinstance(value, np.ndarray) and value.dtype.kind == "b")
    kinds = set(map(type, value))
    if kinds & {bool, np.bool_}:
        return True
    return any(_holds_booleans(x) for x in value
               if isinstance(x, (list, tuple, np.ndarray))) if kinds & {list, tuple, np.ndarray} \
        else False


def real_array(value, name: str, expected: str) -> np.ndarray:
    """``value`` (a number or an array of numbers) as a float array, or a ValueError saying
    that ``name`` must be ``expected`` and what was given.

    NumPy alone would read the string "0.99" as a number and True as 1; here strings, booleans,
    None, complex numbers, dates and other objects are refused. NaN and infinities pass: what
    they mean depends on the caller.

    Examples
    --------
    >>> real_array([0.5, 2], "p", "a number").tolist()
    [0.5, 2.0]
    >>> real_array("0.99", "p", "a probability in (0, 1)")
    Traceback (most recent call last):
    ...
    ValueError: p must be a probability in (0, 1); got '0.99' (a string: write the number without quotes)
    """
    def refuse(why: str = ""):
        raise ValueError(f"{name} must be {expected}; got {shown(value)}{why}")

    if value is None or isinstance(value, (bool, np.bool_, bytes)):
        refuse()
    if isinstance(value, str):
        refuse(" (a string: write the number without quotes)" if _BARE_NUMBER.fullmatch(value)
               else "")
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):     # ragged nesting and the like
        refuse()
    if not isinstance(value, np.ndarray) and arr.dtype.kind in "iuf" and _holds_booleans(value):
        refuse(" (booleans: pass numbers)")     # NumPy reads [0.5, True] as [0.5, 1.0]
    kind = arr.dtype.kind
    if kind == "O":
        if not all(isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_))
                   for x in arr.flat):
            refuse()
    elif kind in "US":
        refuse(" (strings: pass numbers)")
    elif kind == "b":
        refuse(" (booleans: pass numbers)")
    elif kind not in "iuf":
        refuse()
    return np.asarray(arr, dtype=float)


class UnstableError(ValueError):
    """The load (arrival rate over capacity) reaches 1: queues grow without bound.

    The message states the capacity and what to change (fewer requests per second, more nodes or
    instances, a larger max_batch_size, or a finite max_queue_size to shed load).
    """


def check_below_capacity(rate: float, capacity: float, what: str, remedies: str) -> None:
    """The one stability rule and its message: UnstableError when ``rate`` reaches the
    ``capacity`` of ``what``; ``remedies`` follows "Lower rate below ..., or".

    Examples
    --------
    >>> check_below_capacity(900.0, 1000.0, "one server", "add servers")
    >>> check_below_capacity(1500.0, 1000.0, "one server", "add servers")
    Traceback (most recent call last):
    ...
    qmodel.checks.UnstableError: arrival rate 1500 req/s is 1.5 times the capacity 1000 req/s of one server (load 1.5 >= 1): queues grow without bound. Lower rate below 1000 req/s, or add servers.
    """
    if rate >= capacity:
        raise UnstableError(
            f"arrival rate {rate:g} req/s is {rate / capacity:.3g} times the capacity "
            f"{capacity:.6g} req/s of {what} (load {rate / capacity:.3g} >= 1): queues grow "
            f"without bound. Lower rate below {capacity:.6g} req/s, or {remedies}.")


def read_json(path, what: str, hint: str = ""):
    """The parsed JSON of a file (read gzipped where its name ends in .gz), or a ValueError
    that names the file: "cannot read <what> <path>: ..." or "<path>:<line>: not JSON (...)"
    followed by ``hint`` (what the file should be)."""
    import gzip
    import json
    from pathlib import Path

    path = Path(path)
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            return json.load(f)
    except OSError as err:                 # also a gzip file that is not one
        raise ValueError(f"cannot read {what} {path}: {err}") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}:{err.lineno}: not JSON ({err.msg})"
                         + (f"; {hint}" if hint else "")) from None
