"""Exponential tail approximations of the waiting time: Cramer-Lundberg asymptotics.

For a GI/G/1 queue with light-tailed service, the waiting time in queue has an exponential tail,
P(Wq > t) ~ C exp(-theta t) as t -> infinity, where theta > 0 solves E[exp(theta (S - A))] = 1
(S a service time, A an interarrival time). The approximation P(Wq > t) ~= C exp(-theta t) is
remarkably accurate at the 90th percentile and beyond (Abate, Choudhury & Whitt 1995), which is
where qmodel needs it; it is weaker at the median.

:class:`ExponentialWaitLatency` is the result type, shared with the textbook baselines of
:mod:`qmodel.theory.baselines`: a waiting time with an atom at 0 and an exponential tail, plus an
independent service time.

References
----------
- W. Feller (1971), "An Introduction to Probability Theory and Its Applications", vol. II,
  ch. XI-XII: the Cramer-Lundberg estimate for the maximum of a random walk.
- J. Abate, G. L. Choudhury and W. Whitt (1995), "Exponential approximations for tail
  probabilities in queues, I: waiting times", Operations Research 43(5), 885-901: the M/G/1
  asymptotic constant (1 - rho) / (lambda M_S'(theta) - 1), and the suggestion to approximate
  the GI/G/1 constant by theta times the mean waiting time.
- J. F. C. Kingman (1961), "The single server queue in heavy traffic", Proc. Cambridge Phil.
  Soc. 57, 902-904: the GI/G/1 mean-wait approximation used for that constant.
- L. Kleinrock (1975), "Queueing Systems" vol. I, ch. 6: the G/M/m queue, whose waiting
  time is exactly an atom at 0 plus an exponential tail.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize

from ..latency import Accuracy, Approximation
from ..checks import check_below_capacity
from .arguments import check_rate, check_scv
from .queue_latency import QueueLatency
from .service_law import ServiceLaw, service_law

__all__ = ["cramer_lundberg", "ExponentialWaitLatency", "CramerLundbergLatency", "decay_rate"]


class ExponentialWaitLatency(QueueLatency):
    """Sojourn time = waiting time with an exponential tail + an independent service time.

    The waiting time in queue has P(Wq > t) = min(cap, C exp(-theta t)) for t >= 0: an atom
    1 - min(cap, C) at 0, no mass on (0, t0] where t0 = max(0, ln(C / cap) / theta), and an
    exponential tail beyond. ``cap`` is what is known about P(Wq > 0) (rho for Poisson arrivals
    to one server), or 1. The sojourn time adds an independent service time S, so

        P(T > t) = P(S > t) + cap (F_S(t) - F_S(t - t0)) + c0 K(t - t0),

    with c0 = min(cap, C) and K(u) = E[exp(-theta (u - S)); S <= u], computed in closed form
    (deterministic, exponential, gamma by exponential tilting, empirical) or by adaptive
    quadrature (lognormal, or a gamma law whose moment generating function ends below theta).

    Built by :func:`cramer_lundberg` and by :func:`qmodel.theory.baselines.exponential_tail`.

    Attributes
    ----------
    decay_rate : float
        theta (per second).
    constant : float
        C, the tail's constant (it may exceed 1; the tail is capped).
    cap : float
        The upper bound put on P(Wq > t).
    waiting_probability : float
        P(Wq > 0) = min(cap, C).
    service_mean : float
        E[S].
    """

    def __init__(self, *, decay_rate: float, constant: float, cap: float, law: ServiceLaw,
                 model: str, method: str, accuracy: Accuracy, throughput: float,
                 utilization: float, batch_size_distribution):
        for name, value in (("decay_rate", decay_rate), ("constant", constant), ("cap", cap)):
            if not (math.isfinite(value) and value > 0):
                raise ArithmeticError(f"{method}: the tail's {name} is {value!r}, not a positive "
                                      f"number; the inputs give no exponential tail")
        self.decay_rate, self.constant, self.cap = float(decay_rate), float(constant), float(cap)
        self.waiting_probability = min(self.cap, self.constant)
        self._flat_until = max(0.0, math.log(self.constant / self.cap) / self.decay_rate)
        self._law = law
        self.service_mean = law.mean
        self._time_scale = law.mean + 1.0 / self.decay_rate
        super().__init__(model=model, method=method, accuracy=accuracy, throughput=throughput,
                         utilization=utilization, batch_size_distribution=batch_size_distribution)

    # --- waiting time -----------------------------------------------------------------------
    def _wait_sf(self, w):
        w = np.asarray(w, dtype=float)
        return np.minimum(self.cap, self.constant * np.exp(-self.decay_rate * w))

    def _wait_quantile(self, p: float) -> float:
        q = 1.0 - p
        if q >= self.waiting_probability:
            return 0.0
        return math.log(self.constant / q) / self.decay_rate

    @property
    def waiting_mean(self) -> float:
        """E[Wq] = cap t0 + min(cap, C) / theta."""
        return self.cap * self._flat_until + self.waiting_probability / self.decay_rate

    # --- sojourn time -------------------------------------------------------------------------
    def _sf(self, t):
        t = np.asarray(t, dtype=float)
        law = self._law
        if law.family == "deterministic":
            w = t - law.mean
            return np.where(w < 0, 1.0, self._wait_sf(np.maximum(w, 0.0)))
        t0 = self._flat_until
        out = law.sf(t) + self.waiting_probability * law.exp_weighted_cdf(self.decay_rate, t - t0)
        if t0 > 0:
            out = out + self.cap * (law.cdf(t) - law.cdf(t - t0))
        if not np.isfinite(out).all():
            raise ArithmeticError(f"{self.method}: the sojourn sf is not finite")
        return np.clip(out, 0.0, 1.0)

    def _cdf(self, t):
        return 1.0 - self._sf(t)

    def _quantile(self, p):
        law = self._law
        if law.family == "deterministic":
            return np.array([law.mean + self._wait_quantile(float(pi))
                             for pi in p.ravel()]).reshape(p.shape)
        out = []
        for pi in p.ravel():
            q = 1.0 - float(pi)
            f = lambda x: float(self._sf(np.array([x]))[0]) - q
            lo, hi = 0.0, law.mean + self._wait_quantile(float(pi)) + 1e-3 * law.mean
            while f(hi) > 0:
                lo, hi = hi, 2.0 * hi
                if hi > 1e12 * self._time_scale:
                    raise ArithmeticError(f"sojourn sf of {self.method!r} never falls to {q}")
            # Brent keeps a sign change, so it also finds a jump point (empirical service).
            out.append(optimize.brentq(f, lo, hi, xtol=1e-13 * hi, rtol=1e-13, maxiter=200))
        return np.array(out).reshape(p.shape)

    @property
    def mean(self) -> float:
        """Mean sojourn time, E[S] + E[Wq]."""
        return self.service_mean + self.waiting_mean


class CramerLundbergLatency(ExponentialWaitLatency):
    """The Cramer-Lundberg approximation of a GI/G/1 queue (built by :func:`cramer_lundberg`).

    Attributes
    ----------
    rate : float
        lambda.
    arrival_scv : float
        Squared coefficient of variation of the interarrival times (1: Poisson).
    batch_size : int
        k: the service time is S(k).
    load : float
        rho = lambda E[S(k)].
    decay_rate, constant, cap, waiting_probability
        See :class:`ExponentialWaitLatency`.
    """


def decay_rate(log_mgf, start: float, upper: float = math.inf) -> float:
    """The Cramer-Lundberg decay rate of a random walk: the theta > 0 with log_mgf(theta) = 0.

    ``log_mgf(theta)`` is log E[exp(theta X)] for the walk's step X, whose mean is negative:
    convex, 0 at theta = 0 and negative just above, so it has one positive root, with the
    function negative below it. The maximum of the walk (a queue's waiting time, or its
    length) then has the tail P(M > x) ~ C exp(-theta x) (Feller 1971, ch. XII).

    Parameters
    ----------
    log_mgf : callable
        theta -> log E[exp(theta X)], finite on (0, upper).
    start : float
        A first step for the search, about the scale of theta (1 / the step's scale).
    upper : float
        The end of log_mgf's domain (inf: it is finite everywhere, and the search doubles
        from ``start`` until it turns positive).

    Raises
    ------
    ArithmeticError
        When the step is never positive (no growth: no tail) or the mean step is too close to
        0 for the root to be told from 0.

    Examples
    --------
    A step S - A with S ~ Exp(mean 1) and A ~ Exp(mean 1.25), the M/M/1 queue at load 0.8,
    decays at mu - lambda = 0.2:

    >>> h = lambda t: -math.log1p(-t) - math.log1p(1.25 * t)
    >>> round(decay_rate(h, start=1.0, upper=1.0), 12)
    0.2
    """
    # a point with log_mgf > 0 (towards the end of its domain) ...
    if math.isfinite(upper):
        hi = upper * (1.0 - 1e-12)
    else:
        hi = start
        while log_mgf(hi) <= 0:
            hi *= 2.0
            if hi > 1e12 * start:
                raise ArithmeticError("no Cramer-Lundberg root: the random walk's step is "
                                      "never positive (the queue never grows)")
    # ... and one with log_mgf < 0 (halving from above reaches (0, theta))
    lo = 0.5 * hi
    while log_mgf(lo) >= 0:
        lo *= 0.5
        if lo < 1e-15 * hi:
            raise ArithmeticError("no Cramer-Lundberg root found: the random walk's mean step "
                                  "is too close to 0 (the load too close to 1)")
    return optimize.brentq(log_mgf, lo, hi, xtol=1e-300, rtol=1e-15, maxiter=500)


def _gig1_log_mgf(law: ServiceLaw, rate: float, arrival_scv: float):
    """theta -> log M_S(theta) + log M_A(-theta), A a gamma interarrival time."""
    if arrival_scv == 0:
        log_ma = lambda th: -th / rate                               # constant 1 / lambda
    else:
        # Gamma with mean 1/lambda and SCV c: shape 1/c, E[exp(-theta A)] = (1 + c theta /
        # lambda)^(-1/c); exponential (Poisson) for c = 1.
        log_ma = lambda th: -math.log1p(arrival_scv * th / rate) / arrival_scv
    return lambda th: law.log_mgf(th) + log_ma(th)


def cramer_lundberg(rate, service, arrival_scv=1.0, batch_size=1) -> CramerLundbergLatency:
    """Cramer-Lundberg exponential-tail approximation of the GI/G/1 waiting and sojourn times.

    The waiting time in queue of a FIFO single-server queue with light-tailed service has
    P(Wq > t) ~ C exp(-theta t) as t -> infinity (Feller 1971, ch. XI-XII), where theta > 0 solves
    E[exp(theta (S - A))] = 1. This function returns the approximation
    P(Wq > t) = min(cap, C exp(-theta t)) for all t >= 0, and the sojourn time Wq + S with S
    independent (a shift for deterministic service, a closed-form or quadrature convolution
    otherwise, see :class:`ExponentialWaitLatency`).

    - Poisson arrivals (``arrival_scv=1``): theta solves lambda (M_S(theta) - 1) = theta and
      C = (1 - rho) / (lambda M_S'(theta) - 1) (Abate, Choudhury & Whitt 1995); the tail is
      capped at cap = rho = P(Wq > 0), exact for M/G/1. Exact for M/M/1 (C = rho,
      theta = mu - lambda). For M/D/1 at rho = 0.9 the waiting p99 agrees with Erlang's exact
      value (:func:`md1`) to 4 decimals (in fact to 1e-14 D).
    - Renewal arrivals with SCV c != 1: the interarrival law is taken as gamma with mean
      1/lambda and SCV c (deterministic for c = 0), which fixes theta. The constant is then
      an approximation: for exponential service the GI/M/1 value C = 1 - theta E[S], exact for
      gamma interarrivals (Kleinrock 1975, ch. 6); otherwise C = theta E_K[Wq] with Kingman's
      mean E_K[Wq] = rho E[S] (c + c_s^2) / (2 (1 - rho)), Abate, Choudhury & Whitt's
      suggestion of matching the mean. cap = 1. (At c = 1 this choice would differ from the
      exact M/G/1 constant; for M/D/1 at rho = 0.9 by 0.12%.)

    Lognormal service is heavy-tailed: E[exp(theta S)] is infinite for every theta > 0 and
    the waiting-time tail is not exponential, so there is no Cramer-Lundberg approximation; use
    :func:`qmodel.theory.classical.mg1` (exact numerical M/G/1) instead.

    Parameters
    ----------
    rate : float
        Arrival rate lambda (per second).
    service : ServiceTime or float or str
        The service-time law (deterministic, exponential or gamma jitter, table or empirical);
        a number or a string such as ``"2ms"`` is a constant service time.
    arrival_scv : float
        Squared coefficient of variation of the interarrival times, >= 0 (1: Poisson).
    batch_size : int
        k >= 1: the service time of a job is S(k).

    Returns
    -------
    CramerLundbergLatency
        Accuracy ``exact`` for M/M/1, ``approximation`` otherwise, with a statement.

    Raises
    ------
    ValueError
        For a lognormal service law, a non-positive rate, a negative arrival_scv, an invalid
        service or batch_size, or deterministic arrivals that never wait.
    UnstableError
        If rho = lambda E[S(k)] >= 1.

    Examples
    --------
    >>> from qmodel.theory import md1
    >>> r = cramer_lundberg(rate=0.9, service=1.0)                      # M/D/1, rho = 0.9
    >>> round(r.waiting_quantile(0.99), 4), round(md1(0.9, 1.0).waiting_quantile(0.99), 4)
    (21.8982, 21.8982)
    >>> from qmodel import ServiceTime
    >>> r = cramer_lundberg(0.8, ServiceTime.affine(1.0, jitter="exponential"))   # M/M/1
    >>> round(r.decay_rate, 12), round(r.constant, 12), round(r.p99, 4)
    (0.2, 0.8, 23.0259)
    >>> r = cramer_lundberg(0.8, ServiceTime.affine(1.0, jitter=("gamma", 0.5)), arrival_scv=0.5)
    >>> r.accuracy.exactness, round(r.decay_rate, 4)
    ('approximation', 0.5467)
    """
    rate = check_rate(rate, "rate")
    law = service_law(service, batch_size)
    k = int(batch_size)
    ca2 = check_scv(arrival_scv, "arrival_scv")
    if law.theta_max <= 0:
        raise ValueError(
            f"the Cramer-Lundberg tail needs a light-tailed service law, but {law.label} is "
            f"{law.family} (heavy-tailed: E[exp(theta S)] is infinite for every theta > 0, and the "
            f"waiting-time tail is not exponential); for Poisson arrivals use "
            f"qmodel.theory.classical.mg1")
    rho = rate * law.mean
    if rho >= 1:
        check_below_capacity(rate, 1.0 / law.mean, f"a single server ({law.label})",
                             "shorten the service time")
    if ca2 == 0 and law.maximum <= 1.0 / rate:
        raise ValueError(
            f"with deterministic arrivals (arrival_scv=0) every {1.0 / rate:g} s and service "
            f"never longer than that ({law.label}), no job ever waits: Wq = 0 exactly and "
            f"there is no exponential tail")
    theta = decay_rate(_gig1_log_mgf(law, rate, ca2), 1.0 / law.mean, law.theta_max)
    if ca2 == 1:
        # lambda M_S'(theta) = (lambda + theta) d/dtheta log M_S, since M_S = 1 + theta / lambda
        constant = (1.0 - rho) / ((rate + theta) * law.dlog_mgf(theta) - 1.0)
        cap = rho
        if law.family == "exponential":
            accuracy = Accuracy("exact", "M/M/1: the waiting time is exactly rho exp(-(mu - "
                                         "lambda) t) beyond its atom; closed-form convolution")
        else:
            accuracy = Accuracy("approximation", approximations=[Approximation(
                "cramer_lundberg_tail",
                "Cramer-Lundberg asymptote P(Wq > t) ~ C exp(-theta t) of M/G/1 (Abate, "
                "Choudhury & Whitt 1995), capped at P(Wq > 0) = rho: relative error -> 0 as "
                "t -> inf; accurate from the p90 on (M/D/1 at rho 0.9: waiting p99 exact to "
                "4 decimals), weaker near the median")])
    elif law.family == "exponential":
        constant, cap = 1.0 - theta * law.mean, 1.0
        accuracy = Accuracy("approximation", approximations=[Approximation(
            "gamma_arrivals",
            f"GI/M/1 waiting time sigma exp(-mu (1 - sigma) t), exact for gamma interarrivals "
            f"with SCV {ca2:g}; other renewal laws with that SCV differ")])
    else:
        kingman = rho * law.mean * (ca2 + law.scv) / (2.0 * (1.0 - rho))
        constant, cap = theta * kingman, 1.0
        accuracy = Accuracy("approximation", approximations=[Approximation(
            "cramer_lundberg_tail",
            f"GI/G/1 Cramer-Lundberg decay rate for gamma interarrivals with SCV {ca2:g} "
            f"(asymptotically exact for that law); constant theta x Kingman mean wait (Abate, "
            f"Choudhury & Whitt 1995), an approximation with unbounded error; tail capped at 1")])
    result = CramerLundbergLatency(
        decay_rate=theta, constant=constant, cap=cap, law=law,
        model="cramer_lundberg",
        method=("Cramer-Lundberg tail" + (" (M/G/1)" if ca2 == 1 else " (GI/G/1)")),
        accuracy=accuracy, throughput=rate * k, utilization=rho,
        batch_size_distribution={k: 1.0})
    result.rate, result.arrival_scv, result.batch_size, result.load = rate, ca2, k, rho
    result.servers = 1
    return result
