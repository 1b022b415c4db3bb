"""The result type of the FIFO queue solvers: sojourn = waiting time + own service.

:class:`QueueLatency` is a :class:`~qmodel.latency.Latency` of the sojourn time that also
exposes the waiting time in queue (``waiting_cdf``, ``waiting_sf``, ``waiting_quantile``; a
subclass adds ``waiting_mean`` and ``waiting_probability``). The classical queues
(:mod:`qmodel.theory.classical`) and the exponential-tail approximations
(:mod:`qmodel.theory.tails`, :mod:`qmodel.theory.baselines`) return its subclasses.
"""

from __future__ import annotations

import numpy as np
from scipy import optimize

from ..latency import Latency, checked_levels, evaluate

__all__ = ["QueueLatency", "brent_sf"]


def brent_sf(sf, q: float, lo: float, step: float) -> float:
    """The t > lo with sf(t) = q, for a continuous decreasing sf with sf(lo) > q.

    Examples
    --------
    >>> import math
    >>> round(brent_sf(lambda t: math.exp(-t), 0.01, 0.0, 1.0), 12)       # ln(100)
    4.605170185988
    """
    hi = lo + step
    while sf(hi) > q:
        lo, hi = hi, lo + 2.0 * (hi - lo)
        if hi > 1e12 * step:
            raise ArithmeticError(f"survival function never falls to {q}")
    return optimize.brentq(lambda x: sf(x) - q, lo, hi, xtol=1e-15 * hi, rtol=1e-15,
                           maxiter=500)


class QueueLatency(Latency):
    """Sojourn time = waiting time + own service, with the waiting time exposed as well.

    A subclass implements ``_wait_sf`` and sets ``waiting_probability`` (P(Wq > 0)) and
    ``_time_scale`` (a first step for the quantile search); it may override ``_wait_cdf`` and
    ``_wait_quantile`` where it knows better.
    """

    def _wait_sf(self, w: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _wait_cdf(self, w: np.ndarray) -> np.ndarray:
        return 1.0 - self._wait_sf(w)

    # --- public, checked ------------------------------------------------------------------
    def waiting_cdf(self, t):
        """P(waiting time in queue <= t); t scalar or array."""
        return evaluate(self._wait_cdf, t, below_zero=0.0)

    def waiting_sf(self, t):
        """P(waiting time in queue > t); t scalar or array."""
        return evaluate(self._wait_sf, t, below_zero=1.0)

    def waiting_quantile(self, p):
        """The p-quantile of the waiting time in queue (0 where p <= 1 - waiting_probability)."""
        arr = checked_levels(p)
        out = np.array([self._wait_quantile(float(pi)) for pi in arr.ravel()]).reshape(arr.shape)
        return float(out) if out.ndim == 0 else out

    def _wait_quantile(self, p: float) -> float:
        q = 1.0 - p
        if q >= self.waiting_probability:
            return 0.0
        return brent_sf(lambda w: float(self._wait_sf(np.array([w]))[0]), q, 0.0,
                        self._time_scale)
