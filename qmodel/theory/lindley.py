"""GI/G/1: the waiting time of a single server under renewal arrivals, by Lindley's recursion.

The waiting time of successive customers obeys W' = max(0, W + S - A) (Lindley 1952), S the
service time of the customer ahead and A the time between the two arrivals. The stationary law
is the fixed point of that map; on a time lattice of step h the map is one convolution and one
fold of the negative part onto 0, iterated until the law stops moving (the discrete analogue of
the Wiener-Hopf equation; see Asmussen, "Applied Probability and Queues", 2003, ch. III and
VIII). Exact up to the lattice step and the stopping tolerance, both stated in the result.

With Poisson arrivals the same law has a closed form, the Pollaczek-Khinchine formula (Pollaczek
1930, Khinchine 1932): the wait is a geometric sum, P(N = n) = (1 - rho) rho^n, of independent
equilibrium residual service times, density P(S > t) / E[S] (Asmussen 2003, ch. VIII.5). On
the lattice that is one FFT, (1 - rho) / (1 - rho y^), instead of the recursion's thousands of
iterations near saturation (load 0.9 with 4 servers: 2,909 iterations, 450 ms, against 1.5 ms
for the same quantiles to the lattice step), so Poisson arrivals take that path.

Interarrival times are gamma with the given squared coefficient of variation (the law qmodel's
``Renewal`` simulates); service times are S(k) of a :class:`~qmodel.system.ServiceTime`.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import fft, stats

from ..latency import Accuracy, Approximation, LatticeLatency
from ..checks import check_below_capacity
from ..system import ServiceTime
from . import budget
from .classical import erlang_c
from .measured import measured
from .service_law import service_lattice, service_upper

__all__ = ["gig1", "gigc"]

# the result's model key for each way of computing the wait
LATTICE_MODELS = {"Pollaczek-Khinchine": "pollaczek_khinchine_lattice",
                  "Lindley recursion": "lindley_lattice"}

# Lindley's recursion charges its work to the budget this many iterations at a time
CHARGE_EVERY = 100


def _with_mean(pmf: np.ndarray, h: float, mean: float) -> np.ndarray:
    """Move a fraction of the mass one lattice step so that the mean is ``mean``.

    Examples
    --------
    >>> p = _with_mean(np.array([0.0, 1.0, 0.0]), 1.0, 1.25)
    >>> p.tolist(), float(p @ np.arange(3))
    ([0.0, 0.75, 0.25], 1.25)
    """
    gap = (mean - float(pmf @ np.arange(pmf.size)) * h) / h       # in lattice steps
    frac = min(abs(gap), 1.0)
    shifted = np.zeros_like(pmf)
    if gap >= 0:                  # one step later; the last point keeps its mass
        shifted[1:] = pmf[:-1]
        shifted[-1] += pmf[-1]
    else:                         # one step earlier; nothing goes below 0
        shifted[:-1] = pmf[1:]
        shifted[0] += pmf[0]
    return (1 - frac) * pmf + frac * shifted


def _checked(rate, arrival_scv) -> float:
    """The rate as a float, or a ValueError naming the bad argument."""
    rate = float(rate)
    if not (rate > 0 and math.isfinite(rate)):
        raise ValueError(f"rate must be a positive number of arrivals per second, got {rate}")
    if not (arrival_scv > 0 and math.isfinite(arrival_scv)):
        raise ValueError(f"arrival_scv must be a finite number > 0, got {arrival_scv}")
    return rate


def _service_pmf(service: ServiceTime, batch_size: int, h: float) -> np.ndarray:
    """S(batch_size) on the lattice of step h, its mean kept exact."""
    pmf = service_lattice(service, [batch_size], h, int(math.ceil(
        service_upper(service, [batch_size], 1e-12) / h)) + 2)[0][0]
    return _with_mean(pmf, h, float(service.mean(batch_size)))


def _lindley_wait(rate: float, service: ServiceTime, arrival_scv: float, batch_size: int,
                  points: int, tolerance: float, max_iterations: int, speedup: int = 1):
    """Stationary GI/G/1 waiting-time pmf on a lattice, for service times S(k) / ``speedup``.

    Returns ``(w, h, name, how)``: ``w[i]`` is P(Wq in cell i) on the lattice of step ``h``;
    ``name`` the method (the Pollaczek-Khinchine formula for Poisson arrivals, else Lindley's
    recursion) and ``how`` its numerical statement (iterations and stopping rule).
    A server ``speedup`` times faster serves in S/speedup; on a lattice of step speedup * h the
    law of S is the law of S/speedup on step h, so the service lattice is built at that step.
    """
    mean_s = float(service.mean(batch_size)) / speedup
    rho = rate * mean_s
    check_below_capacity(rate, 1 / mean_s, f"the service time {service.describe()}",
                         "shorten the service time")
    # service scv, only to size the lattice (empirical samples, which have no jitter law:
    # taken as 1, a safe overestimate for measured kernel times)
    jitter = service.jitter_law
    cs2 = 1.0 if jitter is None else jitter.scv
    # scale of the waiting time (Kingman) sets the lattice: its 1e-10 tail spans the lattice
    kingman = rho / (1 - rho) * (arrival_scv + cs2) / 2 * mean_s
    s_top = service_upper(service, [batch_size], 1e-12) / speedup
    a_law = stats.gamma(1.0 / arrival_scv, scale=arrival_scv / rate)
    span = 25 * kingman + s_top + a_law.isf(1e-12)
    h = span / points
    Ls = int(math.ceil(s_top / h)) + 2
    s_pmf = service_lattice(service, [batch_size], h * speedup, Ls)[0][0]
    if arrival_scv == 1.0:
        w = _pollaczek_khinchine_wait(_with_mean(s_pmf, h, mean_s), rho, points + Ls + 2)
        return w, h, "Pollaczek-Khinchine", "Pollaczek-Khinchine formula by one FFT, no iteration"
    La = int(math.ceil(a_law.isf(1e-14) / h)) + 2
    a_edges = np.concatenate([[0.0], (np.arange(La) + 0.5) * h])
    a_pmf = np.diff(a_law.cdf(a_edges))
    a_pmf /= a_pmf.sum()
    # heavy traffic amplifies any error in E[S - A] by 1/(1 - rho): keep both means exact
    a_pmf = _with_mean(a_pmf, h, 1.0 / rate)
    s_pmf = _with_mean(s_pmf, h, mean_s)
    # U = S - A on offsets -(La-1) .. Ls-1
    u_pmf = np.convolve(s_pmf, a_pmf[::-1])
    shift = La - 1
    L = points + Ls + 2
    n = fft.next_fast_len(L + u_pmf.size, real=True)
    u_hat = fft.rfft(u_pmf, n)
    w = np.zeros(L)
    w[0] = 1.0
    moved_before = 1.0
    # an iteration is two real FFTs of n points and a few passes over L: 100 us at n = 4,320
    # on the development machine (1.2 element operations per n log2 n), charged at 2.5, a
    # block at a time (near capacity it takes up to max_iterations)
    per_block = budget.elements(2.5 * n * math.log2(n) * CHARGE_EVERY)
    for it in range(max_iterations):
        if it % CHARGE_EVERY == 0:
            budget.charge(per_block, "Lindley's recursion (GI/G/1 on a lattice)",
                          f"iterations {it + 1:,} to {it + CHARGE_EVERY:,}")
        conv = fft.irfft(fft.rfft(w, n) * u_hat, n)[:L + shift]
        conv = np.clip(conv, 0.0, None)
        new = np.zeros(L)
        new[0] = conv[:shift + 1].sum()              # W + U <= 0 folds onto 0
        new[1:] = conv[shift + 1:shift + L]
        new /= new.sum()
        moved = float(np.abs(np.cumsum(new - w)).max())
        w = new
        # the iteration contracts geometrically: what is left to move is about
        # moved * r / (1 - r), r the ratio of successive moves
        r = min(moved / moved_before, 0.999999) if moved_before > 0 else 0.0
        moved_before = moved
        if it > 10 and moved * r / (1.0 - r) < tolerance:
            break
    else:
        raise ArithmeticError(f"Lindley's recursion had not converged after "
                              f"{max_iterations:,} iterations (remaining cdf movement about "
                              f"{moved * r / (1.0 - r):.2g}, tolerance {tolerance:g}): the "
                              f"load {rho:.4g} is too close to capacity for it")
    return w, h, "Lindley recursion", (f"{it + 1} iterations of Lindley's recursion, remaining "
                                       f"cdf movement below {tolerance:g} (geometric "
                                       f"extrapolation)")


def _pollaczek_khinchine_wait(s_pmf: np.ndarray, rho: float, length: int) -> np.ndarray:
    """M/G/1 waiting-time pmf on the lattice: (1 - rho) sum_n rho^n Y^{*n}, one FFT.

    Y is the equilibrium residual of the lattice service law S: cell k holds
    P(S > k h) h / E[S], spread uniformly over the cell, which is kept as half its mass at
    each end (that keeps every summand's mean exact). The FFT runs over twice ``length``
    points so that the geometric sum's tail beyond the lattice (below 1e-10 by the choice of
    the lattice) does not wrap onto it.
    """
    cell = np.clip(1.0 - np.cumsum(s_pmf), 0.0, None)      # P(S > k h), S on lattice points
    cell /= cell.sum()
    residual = np.zeros(cell.size + 1)
    residual[:-1] += 0.5 * cell
    residual[1:] += 0.5 * cell
    n = fft.next_fast_len(2 * length, real=True)
    w = fft.irfft((1.0 - rho) / (1.0 - rho * fft.rfft(residual, n)), n)[:length]
    w = np.clip(w, 0.0, None)
    return w / w.sum()


def gig1(rate, service: ServiceTime, arrival_scv: float, batch_size: int = 1,
         points: int = 4096, tolerance: float = 1e-9, max_iterations: int = 200_000):
    """Sojourn-time distribution of the FIFO GI/G/1 queue with gamma interarrival times.

    Parameters
    ----------
    rate : float
        Arrival rate (customers per second).
    service : ServiceTime
        Service law; a customer is served in S(batch_size).
    arrival_scv : float
        Squared coefficient of variation of the interarrival times (> 0; 1 is Poisson).
    batch_size : int
        Which S(k) serves a customer.
    points : int
        Lattice points across the waiting-time range (the step is the range over this).
    tolerance : float
        Stop when the cdf's remaining movement, extrapolated from the geometric rate of the
        last two iterations, is below this.

    Returns
    -------
    LatticeLatency
        With ``method`` "GI/G/1 numerical (...)" naming Lindley's recursion or, for Poisson
        arrivals, the Pollaczek-Khinchine formula, and the lattice step (and for the recursion
        the stopping rule) in ``accuracy``.

    Examples
    --------
    Poisson arrivals and exponential service: M/M/1, whose sojourn p99 is ln(100)/(mu - lambda)

    >>> import qmodel as qm
    >>> r = gig1(0.8, qm.ServiceTime.affine(1.0, jitter="exponential"), arrival_scv=1.0)
    >>> abs(r.p99 - math.log(100) / 0.2) < 2 * r.h
    True
    """
    rate = _checked(rate, arrival_scv)
    w, h, name, how = _lindley_wait(rate, service, arrival_scv, batch_size, points, tolerance,
                                    max_iterations)
    mean_s = float(service.mean(batch_size))
    s_pmf = _service_pmf(service, batch_size, h)
    sojourn = np.convolve(w, s_pmf)
    return LatticeLatency(
        sojourn, h, model=LATTICE_MODELS[name], method=f"GI/G/1 numerical ({name} on a lattice)",
        accuracy=Accuracy("numerical", how, lattice_step=h, quantile_error=2 * h),
        throughput=rate, utilization=rate * mean_s, batch_size_distribution={batch_size: 1.0})


def gigc(rate, service: ServiceTime, arrival_scv: float, servers: int,
         points: int = 4096, tolerance: float = 1e-9, max_iterations: int = 200_000):
    """Sojourn-time distribution of the FIFO GI/G/c queue: the fast-server approximation.

    The c servers are replaced by one server c times faster (service S/c), whose GI/G/1
    waiting time W1 comes from :func:`gig1`'s Lindley recursion; the probability of waiting is
    then scaled by Erlang C over rho, the ratio of the M/M/c and M/M/1 probabilities of
    waiting at the same load:

        P(Wq > t) = C(c, lambda E[S]) / rho * P(W1 > t),   rho = lambda E[S] / c,

    and the sojourn adds an independent S. This is exact for M/M/c (both sides are
    C exp(-(c mu - lambda) t)), reduces to GI/G/1 for c = 1, keeps Allen-Cunneen's mean wait
    in the Kingman regime, and follows the heavy-traffic limit of GI/G/c, which is that of
    the fast single server (Kollerstrom 1974, "Heavy traffic theory for queues with several
    servers. I", J. Appl. Prob. 11, 544-552). Elsewhere it is an approximation: its error
    against the simulator is measured in ``validation/renewal_multi_server.py``.

    Parameters
    ----------
    rate : float
        Arrival rate (customers per second).
    service : ServiceTime
        Service law S(1).
    arrival_scv : float
        Squared coefficient of variation of the gamma interarrival times.
    servers : int
        c >= 1.

    Returns
    -------
    LatticeLatency

    Examples
    --------
    M/M/2 at load 0.8: the sojourn p99 matches the exact M/M/c value within two lattice steps

    >>> import qmodel as qm
    >>> exp1 = qm.ServiceTime.affine(1.0, jitter="exponential")
    >>> r, exact = gigc(1.6, exp1, 1.0, servers=2), qm.theory.mmc(1.6, 1.0, 2)
    >>> abs(r.p99 - exact.p99) < 2 * r.h
    True
    """
    rate = _checked(rate, arrival_scv)
    if isinstance(servers, bool) or not isinstance(servers, int) or servers < 1:
        raise ValueError(f"servers must be an integer >= 1, got {servers!r}")
    if servers == 1:
        return gig1(rate, service, arrival_scv, points=points, tolerance=tolerance,
                    max_iterations=max_iterations)
    w, h, name, how = _lindley_wait(rate, service, arrival_scv, 1, points, tolerance,
                                    max_iterations, speedup=servers)
    mean_s = float(service.mean(1))
    load = rate * mean_s
    scale = erlang_c(servers, load) / (load / servers)
    wait = scale * w
    wait[0] = 1.0 - wait[1:].sum()
    s_pmf = _service_pmf(service, 1, h)
    return LatticeLatency(
        np.convolve(wait, s_pmf), h,
        model="fast_server",
        method=f"GI/G/{servers} fast-server approximation ({name} lattice, Erlang C scaling)",
        accuracy=Accuracy(
            "approximation", how, lattice_step=h, quantile_error=2 * h,
            approximations=[Approximation(
                "fast_server", "c servers as one c-times-faster server, probability of waiting "
                "scaled by Erlang C / rho (exact for M/M/c)")],
            measured=[measured("fast_server")]),
        throughput=rate, utilization=load / servers, batch_size_distribution={1: 1.0})
