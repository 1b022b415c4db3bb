"""Measured errors of the approximate models, for their results' ``accuracy`` statements.

The batch model (:data:`MEASURED`, by family of node) and the router and multi-server models
(:data:`SUMMARIES`, by campaign family) state how far off they have been measured to be.

The batch model is exact up to its lattice for one instance without a delay; everywhere else it
approximates (see :mod:`qmodel.theory.batch`), and a result should say how far off such an
approximation has been measured to be on nodes like the one asked about. The figures below are
the relative errors of the predicted p95 and p99 against the simulator on the validation
campaigns' nodes:

- ``validation/predict_accuracy.py`` (the issue-3 grid: S(k) = 1.8874 ms + 0.1438 ms k,
  max_batch_size 1-32, delays 0-2 S(1), 1, 2 and 4 instances, loads 0.1-0.95, deterministic
  and lognormal cv 0.3 service);
- ``validation/multi_instance_holdout.py`` (S(k) = 4 ms + 0.4 ms k, B 2-64, 2, 3 and 8
  instances) and ``validation/single_instance_holdout.py`` (one instance, preferred sizes {B}
  and {B/2, B}, B 2-64);
- ``validation/batch_size_accuracy.py`` (the grid's mean batch size and utilisation, which the
  p95/p99 campaigns do not record);
- ``validation/renewal_batch.py`` (renewal arrivals of scv 0.5 and 2, one and two instances).

:data:`SUMMARIES` holds the summary lines that ``validation/router_accuracy.py`` (its full
run, validation/results/router_accuracy_full.txt: N = 2-128 nodes, B = 1, 8, 32, one instance)
and ``validation/renewal_multi_server.py`` (GI/G/c without batching) print.

``validation/measured_errors.py`` recomputes both tables from the stored results
(``validation/results/``), and tests/test_measured.py fails when they disagree, so a rerun
campaign cannot leave a stale statement behind.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["MEASURED", "Measured", "SUMMARIES", "family_of", "measured_statement",
           "summary_statement"]


class Measured(NamedTuple):
    """Signed relative errors of the prediction against the simulator over a family's nodes:
    (lowest, highest) of p95, p99, mean batch size and utilisation, and the median |error| of
    p95 and p99 together."""

    nodes: int
    p95: tuple
    p99: tuple
    median: float
    batch_nodes: int
    mean_batch_size: tuple
    utilization: tuple


MEASURED = {
    "1 instance, approximation": Measured(
        nodes=156, p95=(-0.014, 0.094), p99=(-0.02, 0.099), median=0.004,
        batch_nodes=84, mean_batch_size=(-0.007, 0.005), utilization=(-0.002, 0.005)),
    "renewal arrivals (measured at scv 0.5 and 2), 1 instance": Measured(
        nodes=48, p95=(-0.017, 0.034), p99=(-0.024, 0.071), median=0.013,
        batch_nodes=48, mean_batch_size=(-0.061, 0.026), utilization=(-0.022, 0.055)),
    "renewal arrivals (measured at scv 0.5 and 2), several instances": Measured(
        nodes=48, p95=(-0.163, 0.052), p99=(-0.142, 0.04), median=0.021,
        batch_nodes=48, mean_batch_size=(-0.187, 0.028), utilization=(-0.019, 0.125)),
    "several instances, deterministic, no delay": Measured(
        nodes=69, p95=(-0.189, 0.093), p99=(-0.154, 0.1), median=0.039,
        batch_nodes=42, mean_batch_size=(-0.303, 0.041), utilization=(-0.013, 0.103)),
    "several instances, deterministic, with a delay": Measured(
        nodes=111, p95=(-0.167, 0.044), p99=(-0.158, 0.035), median=0.006,
        batch_nodes=84, mean_batch_size=(-0.147, 0.048), utilization=(-0.015, 0.074)),
    "several instances, jittery, no delay": Measured(
        nodes=69, p95=(-0.197, 0.106), p99=(-0.157, 0.091), median=0.016,
        batch_nodes=42, mean_batch_size=(-0.435, 0.007), utilization=(-0.001, 0.091)),
    "several instances, jittery, with a delay": Measured(
        nodes=111, p95=(-0.013, 0.101), p99=(-0.007, 0.088), median=0.014,
        batch_nodes=84, mean_batch_size=(-0.087, 0.061), utilization=(-0.019, 0.044)),
}


def family_of(instances: int, deterministic: bool, delay: bool, renewal: bool = False) -> str:
    """The measured family a batch node with an approximation belongs to.

    Renewal (non-Poisson) arrivals have families of their own, by instance count only (their
    campaign is smaller than the Poisson ones).

    Examples
    --------
    >>> family_of(4, deterministic=True, delay=False)
    'several instances, deterministic, no delay'
    >>> family_of(1, deterministic=False, delay=True)
    '1 instance, approximation'
    >>> family_of(2, deterministic=True, delay=False, renewal=True)
    'renewal arrivals (measured at scv 0.5 and 2), several instances'
    """
    if renewal:
        count = "1 instance" if instances == 1 else "several instances"
        return f"renewal arrivals (measured at scv 0.5 and 2), {count}"
    if instances == 1:
        return "1 instance, approximation"
    return (f"several instances, {'deterministic' if deterministic else 'jittery'}, "
            f"{'with a delay' if delay else 'no delay'}")


def measured_statement(family: str) -> str:
    """One sentence: the measured p95/p99 errors of ``family``.

    Examples
    --------
    >>> print(measured_statement("1 instance, approximation"))  # doctest: +ELLIPSIS
    measured on 156 such nodes against the simulator: p95 -1.4% to +9.4%, p99 -2.0% to +9.9%, ...
    """
    if family not in MEASURED:
        raise ValueError(f"family must be one of {sorted(MEASURED)}, got {family!r}")
    m = MEASURED[family]
    return (f"measured on {m.nodes} such nodes against the simulator: p95 {m.p95[0]:+.1%} to "
            f"{m.p95[1]:+.1%}, p99 {m.p99[0]:+.1%} to {m.p99[1]:+.1%}, median |error| "
            f"{m.median:.1%}; on {m.batch_nodes} of them mean batch size "
            f"{m.mean_batch_size[0]:+.1%} to {m.mean_batch_size[1]:+.1%}, utilisation "
            f"{m.utilization[0]:+.1%} to {m.utilization[1]:+.1%} (family '{family}', "
            f"validation/measured_errors.py)")


# campaign family -> (configurations, p95 median, p95 worst, p99 median, p99 worst) of
# |relative error| against the simulator, as the campaign's summary prints them
SUMMARIES = {
    "round_robin": (150, 0.007, 0.038, 0.010, 0.067),
    "power_of_two (in predict)": (98, 0.016, 0.086, 0.020, 0.095),
    "least_outstanding (in predict), B = 1 balanced": (30, 0.005, 0.045, 0.005, 0.050),
    "GI/G/c fast server": (108, 0.010, 0.191, 0.009, 0.152),
}

_SOURCE = {"GI/G/c fast server": "validation/renewal_multi_server.py"}


def summary_statement(family: str) -> str:
    """One sentence: the measured p95/p99 errors of a router or multi-server ``family``.

    Examples
    --------
    >>> print(summary_statement("round_robin"))  # doctest: +ELLIPSIS
    measured on 150 configurations against the simulator: |error| of p95 median 0.7%, ...
    """
    if family not in SUMMARIES:
        raise ValueError(f"family must be one of {sorted(SUMMARIES)}, got {family!r}")
    n, m95, w95, m99, w99 = SUMMARIES[family]
    source = _SOURCE.get(family, "validation/router_accuracy.py")
    return (f"measured on {n} configurations against the simulator: |error| of p95 median "
            f"{m95:.1%}, worst {w95:.1%}; of p99 median {m99:.1%}, worst {w99:.1%} "
            f"({family}, {source})")
