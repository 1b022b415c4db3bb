"""Verdicts: whether a measured configuration's prediction lies within its stated tolerance.

:func:`judge` adds a verdict to a row of :mod:`qmodel.campaign.measure` against a
:class:`Tolerance`; it reads only the stored numbers, so a changed tolerance needs no rerun.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Tolerance", "judge"]


@dataclass(frozen=True)
class Tolerance:
    """When a prediction passes, quantile by quantile (p95 and p99 by default).

    - ``exact`` and ``numerical`` results must lie inside the simulator's 99% confidence
      interval widened by the result's lattice step h (0 for closed forms);
    - ``approximation`` results must lie within ``approx`` (relative) of the simulated
      quantile, plus the interval's half-width and h.

    Every band also gets ``slack`` (relative) for the simulator's float32 samples, so that an
    atom of the distribution (a quantile where every replica agrees and the interval has zero
    width) is not failed by rounding. p50 is reported, not judged by default: the tool's claims
    are about the tail.
    """

    approx: float = 0.08
    slack: float = 1e-6
    judged: tuple = ("p95", "p99")

    def describe(self) -> str:
        return (f"exact/numerical: inside the simulator's 99% CI widened by the "
                f"lattice step h; approximation: within {self.approx:.0%} of the simulated "
                f"value plus the CI half-width and h; judged on {', '.join(self.judged)}")


def judge(row: dict, tolerance: Tolerance = Tolerance()) -> dict:
    """Add ``verdict`` ("pass", "fail", "not modelled" or "error") and ``checks`` to a row.

    Examples
    --------
    >>> row = {"modelled": True, "family": "exact", "lattice_step": 0.0,
    ...        "predicted": {"p95": 1.0, "p99": 2.0},
    ...        "simulated": {"p95": 1.01, "p99": 2.2, "ci99": {"p95": [0.98, 1.04],
    ...                                                      "p99": [2.1, 2.3]}}}
    >>> judge(row)["verdict"], row["checks"]["p99"]["ok"]
    ('fail', False)
    """
    if row.get("error_message"):
        row["verdict"], row["checks"] = "error", {}
        return row
    if not row["modelled"]:
        row["verdict"], row["checks"] = "not modelled", {}
        return row
    h = row.get("lattice_step") or 0.0
    checks = {}
    for name in tolerance.judged:
        q, s = row["predicted"][name], row["simulated"][name]
        lo, hi = row["simulated"]["ci99"][name]
        pad = h + tolerance.slack * s
        if row["family"] in ("exact", "numerical"):
            band = (lo - pad, hi + pad)
        else:
            width = tolerance.approx * s + (hi - lo) / 2 + pad
            band = (s - width, s + width)
        checks[name] = {"ok": bool(band[0] <= q <= band[1]), "band": list(band)}
    row["checks"] = checks
    row["verdict"] = "pass" if all(c["ok"] for c in checks.values()) else "fail"
    return row
