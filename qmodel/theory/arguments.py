"""Checks of the plain-number arguments of the theory functions.

The classical queues, the tail approximations and the baselines take rates, durations,
server counts and squared coefficients of variation as plain numbers; these checks turn them
into floats and ints or raise a ValueError (UnstableError for a load at or above capacity)
whose message names the argument and what to change.
"""

from __future__ import annotations

import math
import numbers

from ..checks import check_below_capacity, parse_duration

__all__ = ["check_rate", "check_duration", "check_servers", "check_scv", "check_stable"]


def check_rate(value, name: str) -> float:
    """A positive finite rate (per second) as a float.

    Examples
    --------
    >>> check_rate(2, "rate")
    2.0
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number per second, got {value!r}")
    if value <= 0:
        raise ValueError(f"{name}={value!r} must be > 0")
    return float(value)


def check_duration(value, name: str) -> float:
    """A positive duration in seconds, from a number or a string such as ``"2ms"``.

    Examples
    --------
    >>> check_duration("2ms", "service_time")
    0.002
    """
    seconds = parse_duration(value, name)  # numbers or strings such as "2ms"
    if seconds <= 0:
        raise ValueError(f"{name}={seconds!r} must be > 0 (seconds)")
    return seconds


def check_servers(value, name: str = "servers") -> int:
    """A whole number >= 1 (an integral float such as 2.0 is accepted)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
    if not isinstance(value, numbers.Integral):
        if not (math.isfinite(value) and float(value).is_integer()):
            raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
        value = int(value)
    if value < 1:
        raise ValueError(f"{name}={value} must be >= 1")
    return int(value)


def check_scv(value, name: str) -> float:
    """A squared coefficient of variation: a finite number >= 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number >= 0 (a squared coefficient of "
                         f"variation: 0 deterministic, 1 exponential), got {value!r}")
    if value < 0:
        raise ValueError(f"{name}={value!r} must be >= 0 (it is a squared coefficient of "
                         f"variation)")
    return float(value)


def check_stable(rate: float, capacity: float, what: str, servers: int, fix: str) -> None:
    """UnstableError (:func:`qmodel.checks.check_below_capacity`) when ``rate`` reaches the
    ``capacity`` of ``what``; ``fix`` is the remedy offered after more servers."""
    need = math.floor(servers * rate / capacity) + 1
    check_below_capacity(rate, capacity, what, f"raise servers to at least {need}, or {fix}")
