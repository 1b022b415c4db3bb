"""Textbook approximations, kept as baselines to report next to qmodel's own results.

These are the formulas people reach for first: Kingman's GI/G/1 and Allen-Cunneen's GI/G/c mean
waiting times, and the exponential tail fitted to a probability of waiting and a mean wait. They
are fast and often close, but their error is not bounded: on M/D/c the exponential tail, even fed
the exact P(Wq > 0) and E[Wq], overstates the waiting p99 by 3-17% over c = 1..10 and
rho = 0.7..0.9 (and understates it at light load with many servers, where P(Wq > 0) is close to
0.01). Use them to show what a model improves on, not as the model.

References
----------
- J. F. C. Kingman (1961), "The single server queue in heavy traffic", Proc. Cambridge Phil.
  Soc. 57, 902-904.
- A. O. Allen (1990), "Probability, Statistics, and Queueing Theory", 2nd ed., Academic Press,
  (the Allen-Cunneen approximation for GI/G/c).
- W. Whitt (1993), "Approximations for the GI/G/m queue", Production and Operations Management
  2(2), 114-161: two-moment GI/G/m approximations, among them an exponential conditional
  waiting time, P(Wq > t) = P(Wq > 0) exp(-P(Wq > 0) t / E[Wq]).
"""

from __future__ import annotations

import math
import numbers

from ..latency import Accuracy, Approximation
from .arguments import check_duration, check_rate, check_scv, check_servers, check_stable
from .classical import erlang_c
from .service_law import ServiceLaw, service_law
from .tails import ExponentialWaitLatency

__all__ = ["kingman_wait", "allen_cunneen_wait", "exponential_tail", "baseline_latency"]

_METHODS = ("kingman", "allen_cunneen")


def _checked_queue(rate, mean_service, service_scv, servers, arrival_scv):
    """Checked (rate, mean service, cs2, c, ca2, rho), or ValueError / UnstableError."""
    rate = check_rate(rate, "rate")
    mean_service = check_duration(mean_service, "mean_service")
    cs2 = check_scv(service_scv, "service_scv")
    ca2 = check_scv(arrival_scv, "arrival_scv")
    servers = check_servers(servers)
    capacity = servers / mean_service
    check_stable(rate, capacity, f"{servers} server(s) with mean_service={mean_service:g} s",
                 servers, "shorten the service time")
    return rate, mean_service, cs2, servers, ca2, rate * mean_service / servers


def kingman_wait(rate, mean_service, service_scv, arrival_scv=1.0) -> float:
    """Kingman's approximation of the mean waiting time in queue of a GI/G/1 queue.

    E[Wq] ~= rho / (1 - rho) * (c_a^2 + c_s^2) / 2 * E[S] (Kingman 1961): exact for M/G/1
    (it is then the Pollaczek-Khinchine mean), asymptotically exact in heavy traffic, an
    approximation otherwise.

    Parameters
    ----------
    rate : float
        Arrival rate lambda (requests per second).
    mean_service : float or str
        E[S] (seconds, or a string such as ``"2ms"``).
    service_scv : float
        Squared coefficient of variation of the service time, c_s^2 >= 0.
    arrival_scv : float
        Squared coefficient of variation of the interarrival times, c_a^2 >= 0 (1: Poisson).

    Returns
    -------
    float
        The mean waiting time in queue (seconds).

    Raises
    ------
    ValueError
        For a non-positive rate or mean_service, or a negative SCV.
    UnstableError
        If rho = lambda E[S] >= 1.

    Examples
    --------
    >>> round(kingman_wait(0.8, 1.0, service_scv=1.0), 12)     # M/M/1: rho / (mu - lambda)
    4.0
    >>> round(kingman_wait(0.8, 1.0, service_scv=0.0), 12)     # M/D/1: half of that
    2.0
    """
    rate, m, cs2, _, ca2, rho = _checked_queue(rate, mean_service, service_scv, 1, arrival_scv)
    return rho / (1.0 - rho) * (ca2 + cs2) / 2.0 * m


def allen_cunneen_wait(rate, mean_service, service_scv, servers, arrival_scv=1.0) -> float:
    """The Allen-Cunneen approximation of the mean waiting time in queue of a GI/G/c queue.

    E[Wq] ~= C(c, a) / (c mu - lambda) * (c_a^2 + c_s^2) / 2, where C(c, a) is Erlang's
    probability of waiting in M/M/c with offered load a = lambda / mu and C(c, a) /
    (c mu - lambda) is the M/M/c mean wait (Allen 1990). Exact for M/M/c; for c = 1
    it is Kingman's formula.

    Parameters
    ----------
    rate : float
        Arrival rate lambda (requests per second).
    mean_service : float or str
        E[S] = 1 / mu (seconds, or a string such as ``"2ms"``).
    service_scv : float
        c_s^2 >= 0.
    servers : int
        c >= 1.
    arrival_scv : float
        c_a^2 >= 0 (1: Poisson).

    Returns
    -------
    float
        The mean waiting time in queue (seconds).

    Raises
    ------
    ValueError
        For a non-positive rate or mean_service, a negative SCV or servers < 1.
    UnstableError
        If rho = lambda E[S] / c >= 1.

    Examples
    --------
    >>> from qmodel.theory import mmc
    >>> round(allen_cunneen_wait(8.0, 1.0, 1.0, servers=10), 9)      # M/M/10: exact
    0.204590075
    >>> round(mmc(8.0, 1.0, 10).waiting_mean, 9)
    0.204590075
    """
    rate, m, cs2, c, ca2, _ = _checked_queue(rate, mean_service, service_scv, servers,
                                             arrival_scv)
    return erlang_c(c, rate * m) / (c / m - rate) * (ca2 + cs2) / 2.0


def exponential_tail(p_wait, mean_wait, service, *, batch_size=1, rate=None,
                     servers=1) -> ExponentialWaitLatency:
    """The exponential-tail approximation of the waiting time, plus an independent service.

    P(Wq > t) = p exp(-p t / E[Wq]) for t >= 0 with p = P(Wq > 0): an atom 1 - p at 0 and an
    exponential conditional wait with the right mean (e.g. Whitt 1993). The sojourn time adds an
    independent service time (see :class:`~qmodel.theory.tails.ExponentialWaitLatency`).

    Parameters
    ----------
    p_wait : float
        P(Wq > 0), in (0, 1].
    mean_wait : float or str
        E[Wq] > 0 (seconds).
    service : ServiceTime or float or str
        The service time added to the wait: a ServiceTime (its law of S(batch_size)) or a
        constant in seconds (``0.002`` or ``"2ms"``).
    batch_size : int
        k >= 1, for a ServiceTime.
    rate : float, optional
        The request rate, only to fill in ``throughput`` and ``utilization`` (rate E[S] /
        servers); without it both are reported as 0.0 (unknown).
    servers : int
        c, for ``utilization``.

    Returns
    -------
    ExponentialWaitLatency
        Accuracy ``approximation`` ("baseline, error not bounded").

    Raises
    ------
    ValueError
        For p_wait outside (0, 1], a non-positive mean_wait, or an invalid service.

    Examples
    --------
    >>> from qmodel.theory import mdc
    >>> exact = mdc(rate=1.6, service_time=1.0, servers=2)
    >>> r = exponential_tail(exact.waiting_probability, exact.waiting_mean, 1.0)
    >>> round(r.waiting_quantile(0.99), 4), round(exact.waiting_quantile(0.99), 4)
    (5.4709, 5.0696)
    """
    if isinstance(p_wait, bool) or not isinstance(p_wait, numbers.Real) \
            or not (0 < p_wait <= 1):
        raise ValueError(f"p_wait is the probability of waiting, P(Wq > 0), and must lie in "
                         f"(0, 1], got {p_wait!r}")
    mean_wait = check_duration(mean_wait, "mean_wait")
    law = service_law(service, batch_size)
    k = check_servers(batch_size, "batch_size")
    c = check_servers(servers)
    throughput = utilization = 0.0
    if rate is not None:
        rate = check_rate(rate, "rate")
        throughput, utilization = rate, rate * law.mean / c
    return ExponentialWaitLatency(
        decay_rate=p_wait / mean_wait, constant=float(p_wait), cap=float(p_wait), law=law,
        model="exponential_tail", method="exponential-tail baseline",
        accuracy=Accuracy("approximation", approximations=[Approximation(
            "exponential_tail_baseline", "exponential tail P(Wq > 0) exp(-P(Wq > 0) t / E[Wq]) "
            "+ independent service: baseline, error not bounded")]),
        throughput=throughput, utilization=utilization, batch_size_distribution={k: 1.0})


def baseline_latency(rate, mean_service, service_scv, servers=1, arrival_scv=1.0,
                     method="allen_cunneen") -> ExponentialWaitLatency:
    """The textbook baseline: a two-moment mean wait with an exponential tail.

    The mean wait is Kingman's (GI/G/1, :func:`kingman_wait`) or Allen-Cunneen's (GI/G/c,
    :func:`allen_cunneen_wait`); the probability of waiting is rho for Kingman and Erlang C for
    Allen-Cunneen (rho as well for one server); the tail is :func:`exponential_tail`. The
    sojourn time adds an independent service time with the given mean and SCV, taken as
    deterministic (SCV 0), exponential (SCV 1) or gamma (otherwise).

    Parameters
    ----------
    rate : float
        Arrival rate lambda (requests per second).
    mean_service : float or str
        E[S] (seconds, or a string such as ``"2ms"``).
    service_scv : float
        c_s^2 >= 0.
    servers : int
        c >= 1 (only 1 with ``method="kingman"``).
    arrival_scv : float
        c_a^2 >= 0 (1: Poisson).
    method : {"allen_cunneen", "kingman"}
        Which mean-wait formula.

    Returns
    -------
    ExponentialWaitLatency
        Accuracy ``approximation`` ("... baseline, error not bounded").

    Raises
    ------
    ValueError
        For an unknown method, ``"kingman"`` with servers > 1, or invalid inputs.
    UnstableError
        If rho = lambda E[S] / c >= 1.

    Examples
    --------
    >>> r = baseline_latency(0.8, 1.0, service_scv=1.0)            # M/M/1: exact here
    >>> round(r.p99, 4), round(r.mean, 9)
    (23.0259, 5.0)
    >>> baseline_latency(1.6, 1.0, 0.0, servers=2).accuracy.exactness
    'approximation'
    """
    if method not in _METHODS:
        raise ValueError(f"method={method!r} is unknown; use one of {_METHODS}")
    rate, m, cs2, c, ca2, rho = _checked_queue(rate, mean_service, service_scv, servers,
                                               arrival_scv)
    if method == "kingman":
        if c != 1:
            raise ValueError(f"Kingman's formula is for one server, got servers={c}; use "
                             f"method='allen_cunneen' for several")
        mean_wait, p_wait, name = kingman_wait(rate, m, cs2, ca2), rho, "Kingman"
    else:
        mean_wait = allen_cunneen_wait(rate, m, cs2, c, ca2)
        p_wait, name = erlang_c(c, rate * m), "Allen-Cunneen"
    law = ServiceLaw.from_moments(m, cs2)
    if mean_wait <= 0:                        # c_a^2 = c_s^2 = 0: D/D/c never waits
        raise ValueError("with arrival_scv=0 and service_scv=0 (D/D/c) no request waits; the "
                         "baseline has no tail. Use the service time itself.")
    return ExponentialWaitLatency(
        decay_rate=p_wait / mean_wait, constant=p_wait, cap=p_wait, law=law,
        model=method, method=f"{name} + exponential-tail baseline",
        accuracy=Accuracy("approximation", approximations=[Approximation(
            "exponential_tail_baseline", f"{name} mean wait, probability of waiting "
            f"{'rho' if method == 'kingman' else 'Erlang C'}, exponential tail, {law.family} "
            f"service: textbook baseline, error not bounded")]),
        throughput=rate, utilization=rho, batch_size_distribution={1: 1.0})
