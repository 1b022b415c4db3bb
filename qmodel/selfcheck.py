"""Self-checks: may a model's answer be given as a model answer?

:func:`qmodel.predict` runs :func:`defects` on every answer a model gives. An answer with a
defect is not returned: predict falls back to the simulator and says why
(``accuracy.fallback_reason``), or raises NotImplementedError with the reason under
``fallback="raise"``. The checks look only at the answer, so they hold for every solver:

- every figure is finite: the distribution (a lattice's probabilities), its quantiles, mean,
  throughput and utilization; quantiles ordered, the cdf monotone in [0, 1] (up to ten times
  p99.9) and at least p at the p-quantile, utilization in [0, 1], mean batch size >= 1;
- the probability mass a numeric model left out or lost on its lattice
  (``accuracy.truncated_mass``) is below a bound: tight for a numerical answer (its only
  error is numeric), looser for an approximation, whose chains are not exactly stochastic;
- the lattice step (``accuracy.lattice_step``, the stated quantile error) is small against
  the median it reports: a step of 24.7 ms under a 1.1 ms median says nothing.

The bounds are set from the measured configurations of validation/ (docs/accuracy.md): none of
the configurations of the accuracy grid, the holdouts and the router grid trips them (largest
there: lost mass 1.6e-7 for a numerical answer and 0.64 for an approximation; lattice step 7%
of the median).

Examples
--------
>>> import qmodel as qm
>>> node = qm.Node(qm.ServiceTime.affine(2e-3, 0.2e-3), max_batch_size=8)
>>> r = qm.predict(node, rate=1000.0)
>>> defects(r) is None
True
"""

from __future__ import annotations

import math

import numpy as np

from .latency import Latency, LatticeLatency

__all__ = ["defects", "NUMERICAL_MASS_BOUND", "APPROXIMATION_MASS_BOUND", "STEP_FRACTION",
           "CHECKED_LEVELS"]

# mass a numerical answer may leave out: its truncation is 1e-7 by default (the largest
# measured is 1.6e-7); a coarse lattice that loses 0.18 of the mass is far past it
NUMERICAL_MASS_BOUND = 1e-4
# an approximation's mass defect: its chains are not exactly stochastic (up to 0.64 on the
# measured configurations: round robin over 128 nodes at load 0.9, whose p99 is still within
# its family's measured error); a defect of 1 or more means the distribution is meaningless
APPROXIMATION_MASS_BOUND = 1.0
# the lattice step (the stated quantile error) at most this fraction of the reported median
STEP_FRACTION = 0.1
# the quantiles checked for finiteness and order
CHECKED_LEVELS = (0.5, 0.95, 0.99, 0.999)


def defects(result: Latency) -> str | None:
    """Why ``result`` may not be given as a model answer, or None when it may.

    Parameters
    ----------
    result : Latency
        A model's answer (not a simulation).

    Returns
    -------
    str or None
        One sentence naming the figure that fails and the bound it breaks.
    """
    method = result.method
    if isinstance(result, LatticeLatency) and not np.all(np.isfinite(result.pmf)):
        return f"{method}: its distribution is not finite (the solver overflowed)"
    for name in ("throughput", "utilization", "rejection_fraction"):
        value = getattr(result, name)
        if not math.isfinite(value):
            return f"{method}: its {name} is not finite"
    if not -1e-9 <= result.utilization <= 1.0 + 1e-9:     # rounding of a saturated node
        return f"{method}: its utilization {result.utilization:.4g} is outside [0, 1]"
    if result.batch_size_distribution and result.mean_batch_size < 1.0:
        return f"{method}: its mean batch size {result.mean_batch_size:.4g} is below 1"
    accuracy = result.accuracy
    mass = accuracy.truncated_mass
    if mass is not None:
        bound = (NUMERICAL_MASS_BOUND if accuracy.exactness in ("exact", "numerical")
                 else APPROXIMATION_MASS_BOUND)
        if not mass <= bound:
            return (f"{method}: it lost or discretised {mass:.2g} of the probability mass "
                    f"(at most {bound:g} is trusted in an answer labelled "
                    f"{accuracy.exactness!r})")
    levels = np.array(CHECKED_LEVELS)
    quantiles = np.asarray(result.quantile(levels), float)
    if not np.all(np.isfinite(quantiles)) or quantiles[0] <= 0.0:
        return f"{method}: its quantiles {quantiles.tolist()} are not finite and positive"
    if np.any(np.diff(quantiles) < 0.0):
        return f"{method}: its quantiles {quantiles.tolist()} are not ordered"
    # from far below the median out to ten times p99.9, where numeric inversions go astray;
    # few points, as each costs an inversion for the transform solvers
    grid = np.unique(np.concatenate([[0.0], quantiles, np.geomspace(
        quantiles[0] / 100, 10 * quantiles[-1], 24)]))
    cdf = np.asarray(result.cdf(grid), float)
    if (not np.all(np.isfinite(cdf)) or cdf.min() < -1e-9 or cdf.max() > 1.0 + 1e-9
            or np.any(np.diff(cdf) < -1e-9)):
        return f"{method}: its cdf is not a distribution function (not monotone in [0, 1])"
    back = np.asarray(result.cdf(quantiles[:3]), float)
    if np.any(back < np.array(CHECKED_LEVELS[:3]) - 1e-6):
        return f"{method}: its cdf at its own quantiles falls short of their levels"
    if not math.isfinite(result.mean) or result.mean <= 0.0:
        return f"{method}: its mean {result.mean!r} is not finite and positive"
    step = accuracy.lattice_step
    if step and step > STEP_FRACTION * quantiles[0]:
        return (f"{method}: its lattice step {step * 1e3:.4g} ms (the stated quantile error) is "
                f"{step / quantiles[0]:.0%} of the median {quantiles[0] * 1e3:.4g} ms it "
                f"reports (at most {STEP_FRACTION:.0%} is trusted)")
    return None
