"""Latency targets: the SLO keys qmodel reads and the one check of an SLO.

An SLO is a dict from a quantile key to a target in seconds, ``{"p95": 5e-3}``; the sizing
search, the time-varying results' ``within`` and the reports all read it through
:func:`checked_slo`.

Examples
--------
>>> checked_slo({"p99": 0.009, "p50": 0.002})
{'p99': 0.009, 'p50': 0.002}
>>> highest_quantile({"p50": 2e-3, "p99": 9e-3})
'p99'
"""

from __future__ import annotations

import math
import numbers

__all__ = ["LEVELS", "checked_slo", "highest_quantile"]

# SLO keys and their quantile levels
LEVELS = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p99.9": 0.999}


def checked_slo(slo, network: float = 0.0) -> dict:
    """The SLO as {key: seconds}, or a ValueError naming the key and the fix; every target
    must exceed ``network`` (the seconds of each target spent outside the servers)."""
    if not isinstance(slo, dict) or not slo:
        raise ValueError("slo must be a dict of targets in seconds, e.g. {'p95': 5e-3}")
    if isinstance(network, bool) or not isinstance(network, numbers.Real) \
            or not (network >= 0 and math.isfinite(network)):
        raise ValueError(f"network={network!r} must be seconds >= 0 spent outside the servers")
    network = float(network)
    out = {}
    for key, target in slo.items():
        if key not in LEVELS:
            raise ValueError(f"slo key {key!r} is not a quantile; use "
                             f"{', '.join(map(repr, LEVELS))}")
        if isinstance(target, bool) or not isinstance(target, numbers.Real) \
                or not math.isfinite(target) or target <= 0:
            raise ValueError(f"slo[{key!r}] must be a positive number, got {target!r}")
        target = float(target)
        if target > 60:
            raise ValueError(f"slo[{key!r}]={target:g} s is longer than a minute: qmodel takes "
                             "seconds; write 5e-3 for 5 ms")
        if target <= network:
            raise ValueError(f"slo[{key!r}]={target:g} s leaves nothing after network="
                             f"{network:g} s")
        out[key] = target
    return out


def highest_quantile(slo: dict) -> str:
    """The key of the highest quantile an SLO names (what reports and sweeps look at)."""
    return max(slo, key=lambda k: LEVELS[k])
