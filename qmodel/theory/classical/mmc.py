"""The FIFO M/M/c queue: Erlang C and the sojourn time in closed form.

References
----------
- A. K. Erlang (1917): the M/M/c delay formula (Erlang C); e.g. L. Kleinrock (1975),
  "Queueing Systems" vol. I, sec. 3.5.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from ...latency import Accuracy
from ..arguments import check_rate, check_servers, check_stable
from ..queue_latency import QueueLatency, brent_sf

__all__ = ["mmc", "MMcLatency", "erlang_c"]


def erlang_c(servers: int, load: float) -> float:
    """Erlang C by the Erlang B recursion B_k = a B_{k-1} / (k + a B_{k-1}) (stable, O(c))."""
    b = 1.0
    for k in range(1, servers + 1):
        b = load * b / (k + load * b)
    rho = load / servers
    return b / (1.0 - rho * (1.0 - b))


class MMcLatency(QueueLatency):
    """Sojourn time of the FIFO M/M/c queue (built by :func:`mmc`).

    Attributes
    ----------
    rate, service_rate : float
        lambda and mu.
    servers : int
    load : float
        Offered load a = lambda / mu (Erlangs).
    waiting_probability : float
        Erlang C, P(Wq > 0).
    """

    def __init__(self, rate: float, service_rate: float, servers: int):
        self.rate, self.service_rate, self.servers = rate, service_rate, servers
        self.load = rate / service_rate
        rho = self.load / servers
        self.waiting_probability = erlang_c(servers, self.load)
        self.decay = servers * service_rate - rate     # gamma: P(Wq > t) = C exp(-gamma t)
        self._time_scale = 1.0 / min(service_rate, self.decay)
        super().__init__(model="mmc", method="M/M/c exact", throughput=rate, utilization=rho,
                         accuracy=Accuracy("exact", "closed form (Erlang C, Erlang B "
                                                    "recursion); float64 rounding only"),
                         batch_size_distribution={1: 1.0})

    def _wait_sf(self, w):
        return self.waiting_probability * np.exp(-self.decay * np.asarray(w, dtype=float))

    def _sf(self, t):
        # S = Wq + X, X ~ Exp(mu), Wq = 0 w.p. 1 - C, else Exp(gamma):
        # P(S > t) = (1 - C) e^{-mu t} + C P(Exp(gamma) + Exp(mu) > t), and with
        # r1 = min, r2 = max, d = r2 - r1: P(Exp(r1) + Exp(r2) > t) = e^{-r1 t}(1 + r1 t phi(d t)).
        t = np.asarray(t, dtype=float)
        mu, gam, c = self.service_rate, self.decay, self.waiting_probability
        r1, r2 = min(mu, gam), max(mu, gam)
        conv = np.exp(-r1 * t) * (1.0 + r1 * t * special.exprel(-(r2 - r1) * t))
        return (1.0 - c) * np.exp(-mu * t) + c * conv

    def _cdf(self, t):
        return 1.0 - self._sf(t)

    def _quantile(self, p):
        return np.array([brent_sf(lambda x: float(self._sf(np.array([x]))[0]), 1.0 - float(pi),
                                   0.0, self._time_scale) for pi in p.ravel()]).reshape(p.shape)

    def _wait_quantile(self, p):
        q = 1.0 - p
        c = self.waiting_probability
        return 0.0 if q >= c else math.log(c / q) / self.decay

    @property
    def waiting_mean(self) -> float:
        """E[Wq] = C / (c mu - lambda)."""
        return self.waiting_probability / self.decay

    @property
    def mean(self) -> float:
        """Mean sojourn time, C / (c mu - lambda) + 1 / mu."""
        return self.waiting_mean + 1.0 / self.service_rate


def mmc(rate, service_rate, servers=1) -> MMcLatency:
    """Sojourn-time distribution of the FIFO M/M/c queue, in closed form.

    With a = lambda/mu and C the Erlang C probability of waiting, the waiting time has an atom
    1 - C at 0 and P(Wq > t) = C exp(-(c mu - lambda) t) (Erlang 1917; e.g. Kleinrock,
    "Queueing Systems" vol. I, 1975, sec. 3.5). The sojourn time adds an independent Exp(mu);
    the convolution is evaluated in a form that stays accurate when c mu - lambda is close to
    or equal to mu. Erlang C comes from the Erlang B recursion, stable for hundreds of servers.

    Parameters
    ----------
    rate : float
        Poisson arrival rate lambda (requests per second).
    service_rate : float
        mu, the service rate of one server (1 / mean service time).
    servers : int
        c >= 1.

    Returns
    -------
    MMcLatency
        ``method="M/M/c exact"``; ``utilization`` is rho = lambda / (c mu);
        ``waiting_probability`` is Erlang C.

    Raises
    ------
    ValueError
        For a non-positive rate or service_rate, or servers not a whole number >= 1.
    UnstableError
        If rho >= 1.

    Examples
    --------
    >>> r = mmc(rate=0.8, service_rate=1.0)            # M/M/1, rho = 0.8
    >>> round(r.p99, 4), round(r.mean, 6)              # Exp(0.2): ln(100)/0.2 and 1/0.2
    (23.0259, 5.0)
    >>> r = mmc(rate=8.0, service_rate=1.0, servers=10)
    >>> round(r.waiting_probability, 6)
    0.40918
    """
    rate = check_rate(rate, "rate")
    service_rate = check_rate(service_rate, "service_rate")
    servers = check_servers(servers)
    check_stable(rate, servers * service_rate, f"an M/M/{servers} queue "
                  f"(servers={servers}, service_rate={service_rate:g})", servers,
                  "raise service_rate")
    return MMcLatency(rate, service_rate, servers)
