"""Checked conversions of user input: durations with units, whole numbers, rates.

The description (:mod:`qmodel.system`, :mod:`qmodel.routers`) and the entry points
(``simulate``, the CLI) validate their input with these, once, so that every message names the
field and the fix in the same words.
"""

from __future__ import annotations

import math
import numbers
import re

__all__ = ["parse_duration", "positive_duration", "positive_int", "positive_rate",
           "LONGEST_PLAUSIBLE_SECONDS", "UnstableError", "check_below_capacity"]

# A Triton max_queue_delay is configured in microseconds; a value this large in seconds almost
# certainly came over without conversion.
LONGEST_PLAUSIBLE_SECONDS = 60.0

_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_duration(value, name: str = "duration") -> float:
    """Seconds from a number (already seconds) or a string with a unit.

    Parameters
    ----------
    value : float or str
        ``0.002``, ``"2ms"``, ``"500us"``, ``"1.5 s"``, ``"250ns"``.
    name : str
        The field name used in error messages.

    Examples
    --------
    >>> parse_duration("2ms"), parse_duration("500us"), parse_duration(0.25)
    (0.002, 0.0005, 0.25)
    """
    if isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(s|ms|us|µs|ns)\s*", value)
        if not m:
            raise ValueError(f"{name}={value!r} is not a duration; write a number of seconds or "
                             "a number with a unit: '2ms', '500us', '1.5s'")
        return float(m.group(1)) * _UNITS[m.group(2)]
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number of seconds or a string like '2ms', "
                         f"got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name}={value} is not finite; give a duration in seconds")
    return value


def positive_duration(value, name: str, allow_zero: bool = False) -> float:
    seconds = parse_duration(value, name)
    if seconds < 0 or (seconds == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name}={seconds!r} s must be {bound} (seconds)")
    if seconds > LONGEST_PLAUSIBLE_SECONDS:
        raise ValueError(
            f"{name}={seconds:g} s is longer than {LONGEST_PLAUSIBLE_SECONDS:g} s: qmodel takes "
            f"seconds, so this looks like micro- or milliseconds; write {seconds * 1e-6:g} "
            f"(from us) or {seconds * 1e-3:g} (from ms), or a string such as '2ms'")
    return seconds


def positive_int(value, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    if not isinstance(value, numbers.Integral):
        if isinstance(value, numbers.Real) and float(value).is_integer():
            value = int(value)
        else:
            raise ValueError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name}={value} must be >= {minimum}")
    return int(value)


def positive_rate(value, name: str = "rate") -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number of requests per second, got {value!r}")
    if value <= 0:
        raise ValueError(f"{name}={value} must be > 0 requests per second")
    return float(value)


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
