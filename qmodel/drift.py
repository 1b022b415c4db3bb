"""Drift: executions whose speed changes over time (``Node.drift``).

A real server's executions do not only jitter batch by batch: their speed wanders over tenths
of a second to seconds (other processes, clock and cache states, a GPU's power management).
On the committed full-run Triton trace (docs/triton-server.md) the mean execution moved by
-4% to +7% from one second to the next, and batches 5-50 executions apart were still
correlated (0.10-0.16), which independent draws of S(k) do not reproduce.

:class:`Drift` is that speed as a stationary factor F(t) on every S(k): constant over steps of
``period`` seconds, its logarithm a Gaussian AR(1) process from step to step,

    F = exp(X - σ²/2),   X_(j+1) = ρ X_j + sqrt(1 - ρ²) σ ε_j,   σ² = ln(1 + cv²),

so F is lognormal with mean 1 and coefficient of variation ``cv`` at every step, and the
correlation of X between steps j apart is ρ^j (``correlation`` = ρ, a correlation time of
-period / ln ρ). A batch takes the factor of the step it starts in. The simulator's compiled
engine runs it (``qmodel.simulate``; each replica starts with X drawn from its stationary law
and the steps at a random phase); no analytic model carries it, so ``predict`` simulates.

:meth:`Drift.fit` measures it from a long trace of executions (their start times, sizes and
times): each execution's log time less its size's level, averaged over windows of one
period (sizes' levels and windows' means fitted together by least squares); the window
means' variance, less their sampling noise, and their lag-1 covariance are matched to the
model's (a moment estimator: the AR(1) model's two lowest moments).

Examples
--------
>>> import qmodel as qm
>>> d = qm.Drift(cv=0.03, period=0.1, correlation=0.6)
>>> round(d.correlation_time, 3)                 # seconds: -period / ln(correlation)
0.196
>>> round(d.window_cv(1.0), 4)                   # the factor's cv averaged over a second
0.0171
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from .checks import parse_duration, shown

__all__ = ["Drift", "fit_drift", "fit_drift_windows", "MIN_DRIFT_WINDOWS",
           "MAX_CORRELATION"]

# the fewest windows (periods) a trace must cover before its drift is measured: fewer give a
# variance whose own spread is as large as the effect (50 windows: a standard error of about a
# fifth on σ² where the windows are independent, more where they are correlated)
MIN_DRIFT_WINDOWS = 50
# alternations of the two-way fit of sizes' and windows' mean logs (each halves what is left
# of the confounding at least)
ITERATIONS = 30
# placements of the fit's windows, each shifted by a fraction of a period, whose moments are
# averaged
PHASES = 8
# a window of counters whose mean log time lies more than this many robust standard deviations
# (1.4826 median absolute deviations) from the median is left out of the counters' fit: a
# stall or a size's cold start (10-19 times its median on a fresh server) in one window
OUTLIER_SIGMAS = 6.0
# a counter window's size whose executions are fewer than this is left out of the counters'
# fit: the log of a mean of few jittered executions is biased by about -cv² / (2n), and n
# follows the queue (slow stretches run fewer, larger batches), which read as a drift that
# is not there (B 32 with lognormal jitter 0.3 near capacity, no drift: cv 0.12 with cells
# of one execution and more, 0.012 with three and more)
MIN_CELL_EXECUTIONS = 3
# the counters' fit clips the correlation here: a fit at the bound saw the speed move over the
# whole series (a trend, a level shift), which a stationary drift does not describe
MAX_CORRELATION = 0.99


@dataclass(frozen=True)
class Drift:
    """A stationary speed factor on every execution, constant over steps of ``period``.

    Parameters
    ----------
    cv : float
        Coefficient of variation of the factor F (lognormal, mean 1), in [0, 10]; 0 is no
        drift.
    period : float or str
        Seconds (or a string with a unit, "100ms") over which F holds one value.
    correlation : float
        Correlation ρ in [0, 1) between successive steps' log factors.

    Examples
    --------
    >>> Drift(cv=0.05, period="250ms", correlation=0.5).period
    0.25
    >>> Drift(cv=-0.1, period=1.0)
    Traceback (most recent call last):
    ...
    ValueError: Drift.cv=-0.1: give the speed factor's coefficient of variation, in [0, 10]
    """

    cv: float
    period: float
    correlation: float = 0.0

    def __post_init__(self):
        cv = self.cv
        if isinstance(cv, bool) or not isinstance(cv, numbers.Real) or not 0 <= cv <= 10:
            raise ValueError(f"Drift.cv={shown(cv)}: give the speed factor's coefficient of "
                             f"variation, in [0, 10]")
        period = parse_duration(self.period, "Drift.period")
        if not period > 0:
            raise ValueError(f"Drift.period={shown(self.period)}: give the seconds over which "
                             f"the speed holds, > 0 (e.g. 0.1 or '100ms')")
        rho = self.correlation
        if isinstance(rho, bool) or not isinstance(rho, numbers.Real) or not 0 <= rho < 1:
            raise ValueError(f"Drift.correlation={shown(rho)}: give the correlation between "
                             f"successive periods' speeds, in [0, 1) (1 would never change)")
        object.__setattr__(self, "cv", float(cv))
        object.__setattr__(self, "period", float(period))
        object.__setattr__(self, "correlation", float(rho))

    @property
    def sigma(self) -> float:
        """Standard deviation of the log factor X: sqrt(ln(1 + cv²))."""
        return math.sqrt(math.log1p(self.cv ** 2))

    @property
    def correlation_time(self) -> float:
        """Seconds over which the log factor's correlation falls by e: -period / ln ρ (the
        period itself where ρ is 0)."""
        if self.correlation == 0.0:
            return self.period
        return -self.period / math.log(self.correlation)

    def window_cv(self, seconds: float) -> float:
        """The standard deviation of the log factor averaged over ``seconds`` (a whole
        number of periods, at least one), as a window mean of a trace estimates it:
        σ² (m + 2 Σ_(k<m) (m - k) ρ^k) / m² for m periods."""
        if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real) \
                or not seconds > 0:
            raise ValueError(f"Drift.window_cv(seconds={shown(seconds)}): give a window > 0 "
                             f"seconds long")
        m = max(1, int(round(seconds / self.period)))
        k = np.arange(1, m)
        total = m + 2.0 * float(np.sum((m - k) * self.correlation ** k))
        return self.sigma * math.sqrt(total) / m

    @classmethod
    def fit(cls, starts, sizes, executions, period: float = 0.1) -> "Drift":
        """The drift of a trace of executions, or ValueError where it is too short
        (:func:`fit_drift`, which also gives the executions with the drift taken out).

        Parameters
        ----------
        starts : array
            Each execution's start, seconds.
        sizes : array of int
            Each execution's batch size.
        executions : array
            Each execution's time, seconds.
        period : float or str
            The window (default 0.1 s); the trace must cover at least
            :data:`MIN_DRIFT_WINDOWS` windows holding two executions or more.

        Examples
        --------
        A minute of executions of one size, 200 a second, each with its own 5% jitter and a
        speed that follows the model (cv 0.04, steps of 0.1 s, correlation 0.6):

        >>> rng = np.random.default_rng(1)
        >>> x = np.zeros(600)
        >>> for j in range(1, 600):
        ...     x[j] = 0.6 * x[j - 1] + 0.8 * 0.04 * rng.standard_normal()
        >>> starts = np.sort(rng.uniform(0, 60, 12_000))
        >>> executions = 2e-3 * np.exp(x[(starts // 0.1).astype(int)]
        ...                            + 0.05 * rng.standard_normal(12_000))
        >>> d = Drift.fit(starts, np.ones(12_000, int), executions, period=0.1)
        >>> round(d.cv, 3), round(d.correlation, 2)
        (0.037, 0.52)

        (600 steps: the fit's own sampling error is of that order.)
        """
        return fit_drift(starts, sizes, executions, period)[0]

    def describe(self) -> str:
        return (f"drift cv {self.cv:.3g} per {self.period * 1e3:g} ms, correlation "
                f"{self.correlation:.2f}")


def fit_drift(starts, sizes, executions, period: float = 0.1, keep=None) -> tuple:
    """(the trace's :class:`Drift`, its executions with the drift taken out), or ValueError
    where the trace covers fewer than :data:`MIN_DRIFT_WINDOWS` windows of ``period`` with
    two executions or more.

    The moments are averaged over :data:`PHASES` placements of the windows (shifted by a
    fraction of a period: on the committed 18 s trace one placement against another moved
    the lag-1 correlation from 0.58 to 0.73) and matched to those of the model's steps seen
    through windows at a random phase. Measured on replays of drifting nodes: unbiased within
    two standard errors for cv up to 0.05 at loads 0.5-0.95 and, without batching, up to 0.9;
    a large drift under batching reads low (cv 0.3 at load 0.9: 0.27), since slow steps run
    fewer, larger batches. A correlation of 0 reads about +0.015 (the fit clips at 0). The
    steady executions are each divided by its window's estimated factor (the window's mean
    log, shrunk towards 0 by its reliability): a service law drawn from them and then
    multiplied by the drift does not count the drift twice; each size keeps its mean.
    ``keep`` (a boolean array) names the executions the fit uses (default all: leave out
    cold starts and stalls, whose one value would move a window's mean); the others are
    divided by their window's factor too, where it was fitted.
    """
    period = Drift(0.0, period).period
    all_starts = np.asarray(starts, dtype=float)
    all_executions = np.asarray(executions, dtype=float)
    keep = np.ones(all_starts.shape, bool) if keep is None else np.asarray(keep, bool)
    sizes_in = sizes = np.asarray(sizes)
    if not (all_starts.shape == sizes.shape == all_executions.shape == keep.shape) \
            or all_starts.ndim != 1 or not np.all(all_executions > 0) \
            or not np.all(np.isfinite(all_executions)) or not np.all(np.isfinite(all_starts)):
        raise ValueError("Drift.fit takes three arrays of one length: starts, sizes and "
                         "positive, finite execution times (seconds)")
    if not keep.any():
        raise ValueError(f"Drift.fit needs {MIN_DRIFT_WINDOWS} windows of executions; it was "
                         f"given none")
    origin = all_starts.min()
    starts, sizes = all_starts[keep], sizes[keep]
    logs = np.log(all_executions[keep])
    fits = [_windows(starts - origin + shift * period / PHASES, sizes, logs, period)
            for shift in range(PHASES)]
    used = min(f["used"] for f in fits)
    if used < MIN_DRIFT_WINDOWS:
        raise ValueError(f"Drift.fit needs {MIN_DRIFT_WINDOWS} windows of {period:g} s "
                         f"with two executions or more; the trace has {used}: trace a "
                         f"longer stretch, or give a shorter period")
    # Windows placed at a phase u to the steps (u uniform: the steps' phase is unknown) see
    # V = σ² (2 + ρ) / 3 and C = σ² (1 + 4ρ + ρ²) / 6 (each window is (1 - u) of one step
    # and u of the next); solved for ρ from C / V, then σ²
    v = float(np.mean([f["sigma2"] for f in fits]))
    c = float(np.mean([f["lag1"] for f in fits]))
    rho, sigma2 = 0.0, 0.0
    if v > 0:
        r = c / v
        b = 4.0 - 2.0 * r
        rho = min(max((-b + math.sqrt(max(b * b - 4.0 * (1.0 - 4.0 * r), 0.0))) / 2.0, 0.0),
                  0.99)
        sigma2 = 3.0 * v / (2.0 + rho)
    drift = Drift(math.sqrt(math.expm1(sigma2)) if sigma2 > 0 else 0.0, period, rho)
    # each window's mean (the first placement) shrunk by its reliability (σ² against its
    # sampling noise, from the pooled spread within windows): the best linear predictor of
    # its log factor
    ids, counts, means, spread = (fits[0][k] for k in ("ids", "counts", "means", "spread"))
    pooled = float(spread.sum() / max(int((counts - 1).sum()), 1))
    weight = sigma2 / (sigma2 + pooled / counts) if sigma2 > 0 else np.zeros(counts.size)
    factor = np.exp(weight * (means - np.sum(counts * means) / counts.sum()))  # mean kept
    every = np.floor((all_starts - origin) / period).astype(np.int64)
    at = np.clip(np.searchsorted(ids, every), 0, ids.size - 1)
    steady = all_executions / np.where(ids[at] == every, factor[at], 1.0)
    # the factors are centred in logs, which moves the mean by about exp(-σ²/2): each size
    # keeps its own mean
    all_sizes = np.asarray(sizes_in)
    for k in np.unique(all_sizes):
        mine = all_sizes == k
        steady[mine] *= all_executions[mine].mean() / steady[mine].mean()
    return drift, steady


def _windows(starts, sizes, logs, period) -> dict:
    """One placement of the windows: each window's mean log time (sizes' levels and windows'
    means fitted together), the window means' variance less their sampling noise
    (``sigma2``), their lag-1 covariance over neighbouring windows (``lag1``) and how many
    windows held two executions or more (``used``)."""
    window = np.floor(starts / period).astype(np.int64)
    ids, inverse, counts = np.unique(window, return_inverse=True, return_counts=True)
    # each size's mean log and each window's, fitted together (two-way least squares by
    # alternation): batches grow while executions are slow, so a size's own mean alone
    # would take part of the drift into the size
    _, size_of, per_size = np.unique(sizes, return_inverse=True, return_counts=True)
    means = np.zeros(ids.size)
    for _ in range(ITERATIONS):
        level = np.bincount(size_of, weights=logs - means[inverse]) / per_size
        x = logs - level[size_of]
        means = np.bincount(inverse, weights=x) / counts
    spread = np.bincount(inverse, weights=(x - means[inverse]) ** 2)
    use = counts >= 2
    noise = spread[use] / (counts[use] - 1) / counts[use]   # each window mean's variance
    centred = means[use] - means[use].mean()
    nxt = np.flatnonzero(np.diff(ids[use]) == 1)
    return {"ids": ids, "counts": counts, "means": means, "spread": spread,
            "used": int(use.sum()),
            "sigma2": float(np.mean(centred ** 2) - np.mean(noise)) if use.any() else 0.0,
            "lag1": float(np.mean(centred[nxt] * centred[nxt + 1])) if nxt.size else 0.0}


def fit_drift_windows(counts, totals, period: float) -> Drift:
    """The drift seen through counters read every ``period`` seconds: a server's statistics
    polled during a run (:func:`qmodel.triton.calibrate` with a statistics series), where no
    trace gives each execution.

    Parameters
    ----------
    counts : array (windows, sizes)
        Executions of each batch size that ended in each window, windows in time order.
    totals : array (windows, sizes)
        Their summed execution seconds.
    period : float or str
        The windows' length, which becomes the drift's step.

    Each window's mean log time (sizes' levels and windows' means fitted together by
    least squares weighted by the executions, as :func:`fit_drift` does with single
    executions, each cell being the log of a size's mean time in the window) varies with the
    drift and with the sampling noise of its executions' jitter. The counters do not give
    that noise, so the fit matches the lag-1 and lag-2 covariances of the window means,
    which the noise does not reach (the windows' executions are disjoint): for windows as
    long as the steps, at a random phase to them, C_k = σ² ρ^(k - 1) (1 + 4ρ + ρ²) / 6, so
    ρ = C_2 / C_1 (up to :data:`MAX_CORRELATION`) and σ² = 6 C_1 / (1 + 4ρ + ρ²). A size's
    executions in a window count where they are :data:`MIN_CELL_EXECUTIONS` or more; windows
    beyond :data:`OUTLIER_SIGMAS` robust standard deviations (stalls, cold starts) are left
    out. ValueError where fewer than :data:`MIN_DRIFT_WINDOWS` pairs of windows one apart,
    or two apart, are left.

    What it reads is an AR(1) through the lag-1 and lag-2 covariances: a real server's wander
    has a fast and a slow part (the committed full traces' window means correlate 0.67, 0.61,
    0.50 and 0.50 at lags 1, 2, 3 and 5), and there the counters weight the slow part, so
    they read a longer correlation than a trace's fit (:func:`fit_drift`, lag 0 against lag
    1) of the same executions. A trend or a level shift over the series reads as a
    correlation at :data:`MAX_CORRELATION`. Without correlation between steps the lag-1
    covariance depends on the steps' unknown phase to the polls, so the cv read varies from
    run to run (0.03 to 0.12 for a true 0.1).

    Examples
    --------
    Two minutes of counters read every 0.1 s, 50 executions a window of 2 ms each with a 10%
    jitter, under a drift of cv 0.05 and correlation 0.5:

    >>> rng = np.random.default_rng(3)
    >>> x = np.zeros(1200)
    >>> for j in range(1, 1200):
    ...     x[j] = 0.5 * x[j - 1] + math.sqrt(0.75) * 0.05 * rng.standard_normal()
    >>> u = rng.uniform()                               # the steps' phase to the windows
    >>> factor = np.exp((1 - u) * x[:-1] + u * x[1:])
    >>> counts = np.full((1199, 1), 50)
    >>> totals = (2e-3 * factor * rng.gamma(100, 0.01, (50, 1199)).mean(axis=0))[:, None] * 50
    >>> d = fit_drift_windows(counts, totals, 0.1)
    >>> round(d.cv, 2), round(d.correlation, 1)
    (0.05, 0.5)
    """
    period = Drift(0.0, period).period
    counts = np.asarray(counts, dtype=float)
    totals = np.asarray(totals, dtype=float)
    if counts.ndim != 2 or counts.shape != totals.shape or not np.all(np.isfinite(counts)) \
            or not np.all(np.isfinite(totals)) or np.any(counts < 0) \
            or np.any((counts > 0) & ~(totals > 0)):
        raise ValueError("fit_drift_windows takes two arrays of one shape (windows, sizes): "
                         "executions per window and size, and their positive summed seconds")
    cell = counts >= MIN_CELL_EXECUTIONS
    weights = np.where(cell, counts, 0.0)
    logs = np.where(cell, np.log(np.where(cell, totals, 1.0) / np.where(cell, counts, 1.0)),
                    0.0)
    per_window = weights.sum(axis=1)
    per_size = weights.sum(axis=0)
    means = np.zeros(counts.shape[0])
    level = np.zeros(counts.shape[1])
    with np.errstate(invalid="ignore", divide="ignore"):
        for _ in range(ITERATIONS):
            level = np.where(per_size > 0, (weights * (logs - means[:, None])).sum(axis=0)
                             / np.where(per_size > 0, per_size, 1.0), 0.0)
            means = np.where(per_window > 0, (weights * (logs - level[None, :])).sum(axis=1)
                             / np.where(per_window > 0, per_window, 1.0), 0.0)
    use = per_window > 0
    if use.any():
        centre = float(np.median(means[use]))
        deviation = np.abs(means[use] - centre)
        spread = 1.4826 * float(np.median(deviation))
        if spread == 0 and np.any(deviation > 0):
            # more than half the windows alike: the spread of those that differ
            spread = 1.4826 * float(np.median(deviation[deviation > 0]))
        if spread > 0:
            use &= np.abs(means - centre) <= OUTLIER_SIGMAS * spread
    pairs = [int(np.sum(use[:-k] & use[k:])) for k in (1, 2)]
    if min(pairs) < MIN_DRIFT_WINDOWS:
        raise ValueError(f"the counters give {pairs[0]} pairs of neighbouring windows of "
                         f"{period:g} s and {pairs[1]} two apart, each window with a batch "
                         f"size executed {MIN_CELL_EXECUTIONS} times or more; the drift needs "
                         f"{MIN_DRIFT_WINDOWS} of each: read them over a longer run, or "
                         f"poll less often")
    centred = np.where(use, means - means[use].mean(), 0.0)

    def lag(k):
        both = use[:-k] & use[k:]
        return float(np.mean(centred[:-k][both] * centred[k:][both]))

    c1, c2 = lag(1), lag(2)
    if not c1 > 0:
        return Drift(0.0, period, 0.0)
    rho = min(max(c2 / c1, 0.0), MAX_CORRELATION)
    sigma2 = 6.0 * c1 / (1.0 + 4.0 * rho + rho * rho)
    cv = math.sqrt(math.expm1(sigma2))
    if cv > 10:
        raise ValueError(f"the counters' windows vary by a factor of cv {cv:.3g} from one to "
                         f"the next, beyond any drift (cv <= 10): the series spans runs or "
                         f"states of the server too unlike to be one")
    return Drift(cv, period, rho)
