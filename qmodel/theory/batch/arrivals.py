"""Arrival counts in intervals of the time lattice: Poisson, and stationary renewal processes.

Every law of the batch model that involves arrivals (during a blocking, a formation, the time
a request waits) is a mix of "j arrivals in an interval of length t" over lattice times t; this
module computes those tables. Poisson arrivals are exact; gamma interarrival times with
squared coefficient of variation 1/k (Erlang-k) are exact through the phase construction of
:func:`erlang_counts`; other scv are two-moment approximations (:func:`renewal_counts`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

__all__ = ["Arrivals", "poisson_table", "renewal_counts", "erlang_counts"]


def poisson_table(rate: float, times: np.ndarray, count: int) -> np.ndarray:
    """P[t, j] = P(Poisson(rate * times[t]) = j), j < count (log space: no overflow).

    Examples
    --------
    >>> poisson_table(2.0, np.array([0.0, 0.5]), 3).round(4).tolist()
    [[1.0, 0.0, 0.0], [0.3679, 0.3679, 0.1839]]
    """
    mu = rate * np.asarray(times, float)[:, None]
    j = np.arange(count)[None, :]
    with np.errstate(divide="ignore"):
        log_mu = np.log(mu)
    logp = np.where(j == 0, 0.0, j * np.where(mu > 0, log_mu, 0.0)) - mu - special.gammaln(j + 1)
    out = np.exp(logp)
    out[(mu[:, 0] == 0), 1:] = 0.0
    return out


def renewal_counts(rate: float, scv: float, times: np.ndarray, count: int) -> np.ndarray:
    """P[t, j] = P(N(times[t]) = j) for a stationary renewal process with gamma interarrivals.

    Erlang-k interarrivals (scv = 1/k) are exact: N(t) = floor((P + U) / k), P ~ Poisson(k rate
    t) phases and U the stationary phase, uniform on 0..k-1. Other scv < 1 mix the two nearest
    Erlang laws so that the count variance rate/k matches; scv > 1 uses the negative binomial
    with the same mean rate t and variance scv rate t (a two-moment approximation).

    Examples
    --------
    >>> p = renewal_counts(10.0, 0.5, np.array([0.3]), 40)          # Erlang-2
    >>> round(float(p.sum()), 12), round(float(p[0] @ np.arange(40)), 9)
    (1.0, 3.0)
    """
    times = np.asarray(times, float)
    if scv == 1.0:
        return poisson_table(rate, times, count)
    if scv > 1.0:
        mu = rate * times[:, None]
        r = np.maximum(mu / (scv - 1.0), 1e-300)
        out = stats.nbinom.pmf(np.arange(count)[None, :], r, 1.0 / scv)
        out[times == 0] = 0.0
        out[times == 0, 0] = 1.0
        return out
    k = 1.0 / scv
    lo, hi = int(math.floor(k + 1e-9)), int(math.ceil(k - 1e-9))
    if lo == hi:
        return erlang_counts(rate, lo, times, count)
    # 1/k = w/lo + (1 - w)/hi
    w = (1.0 / k - 1.0 / hi) / (1.0 / lo - 1.0 / hi)
    return w * erlang_counts(rate, lo, times, count) + (1 - w) * erlang_counts(rate, hi,
                                                                              times, count)


def erlang_counts(rate: float, k: int, times: np.ndarray, count: int) -> np.ndarray:
    """P[t, n] = P(N(times[t]) = n), n < count, for the stationary Erlang-k renewal process.

    N(t) = floor((P + U) / k) with P ~ Poisson(k rate t) completed phases and U uniform on
    0..k-1 (the phase at time 0), so P(N = n) = sum_j P(P = j) max(0, 1 - |j - n k| / k): a
    triangular weighting of the Poisson law around n k. The Poisson law is cut into blocks
    of k (block n holds j = n k .. n k + k - 1); count n takes block n with weights
    (k - o) / k and block n - 1 with weights o / k (o the offset in the block). Positive
    terms only, and one Poisson table instead of 2k cdf evaluations per count.
    """
    times = np.asarray(times, float)
    length = count * k
    offset = np.arange(k)
    out = np.empty((times.size, count))
    rows = max(1, 2_000_000 // length)             # at most 2 million table entries at once
    for lo in range(0, times.size, rows):
        blocks = poisson_table(k * rate, times[lo:lo + rows], length).reshape(-1, count, k)
        out[lo:lo + rows] = blocks @ ((k - offset) / k)
        out[lo:lo + rows, 1:] += blocks[:, :-1] @ (offset / k)
    return out


@dataclass(frozen=True)
class Arrivals:
    """The arrival process: its rate (requests per second) and the squared coefficient of
    variation of its interarrival times (1: Poisson)."""

    rate: float
    scv: float = 1.0

    @property
    def poisson(self) -> bool:
        return self.scv == 1.0

    def counts(self, times, count: int) -> np.ndarray:
        """P[t, j]: j arrivals in an interval of length times[t] (Poisson, or renewal)."""
        return renewal_counts(self.rate, self.scv, times, count)
