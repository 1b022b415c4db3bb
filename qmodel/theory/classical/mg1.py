"""The FIFO M/G/1 queue: the Pollaczek-Khinchine transform, inverted numerically.

References
----------
- F. Pollaczek (1930), A. Y. Khinchine (1932): the M/G/1 waiting-time transform; e.g. Kleinrock,
  "Queueing Systems" vol. I (1975), ch. 5.
- J. Abate and W. Whitt (1995), "Numerical inversion of Laplace transforms of probability
  distributions", ORSA J. on Computing 7(1), 36-43: the Euler summation algorithm.
- L. N. Trefethen and J. A. C. Weideman (2014), "The exponentially convergent trapezoidal rule",
  SIAM Review 56(3), 385-458: the quadrature behind the lognormal transform
  (:class:`~qmodel.theory.service_law.ServiceLaw`).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special

from ...latency import Accuracy
from ...checks import check_below_capacity
from ..arguments import check_rate, check_servers
from ..queue_latency import QueueLatency
from ..service_law import ServiceLaw, service_law
from .mdc import md1

__all__ = ["mg1", "MG1Latency"]


# Euler summation parameters (A, n, m) of Abate & Whitt (1995): discretisation error
# e^-A P(X > 3t) for an sf, and n + m + 1 transform values per point. A = 22 rather than their
# 18.4 buys 40x less discretisation error (3e-10) for ~10x more roundoff (still ~1e-12);
# n = 38 makes the Euler-accelerated tail of the series converge for the far tail.
_EULER = (22.0, 38, 11)
# Second inversions whose difference from the first estimates its error: a 5x longer series
# (the error next to kinks of the density, e.g. empirical service, decays like 1/n), or, for
# a service transform by quadrature (lognormal), where each term costs a quadrature, another A
# and halved quadrature steps.
_EULER_CHECK = (22.0, 200, 40)
_EULER_CHECK_QUADRATURE = (24.0, 60, 20)


def _euler_sf(transforms, t: np.ndarray, params=_EULER, refine: float = 1.0):
    """Invert Laplace transforms of functions bounded by 1 at t > 0 (Abate & Whitt 1995).

    ``transforms(s, refine)`` returns a tuple of arrays of transform values at s; the result is
    the tuple of inverted functions at t.
    """
    big_a, n, m = params
    k = np.arange(n + m + 1)
    s = (big_a + 2j * math.pi * k[None, :]) / (2.0 * t[:, None])
    sign = np.where(k % 2 == 0, 1.0, -1.0)
    sign[0] = 0.5                                       # the k = 0 term counts half
    binomial = special.comb(m, np.arange(m + 1)) / 2.0 ** m
    scale = math.exp(big_a / 2.0) / t
    out = []
    for values in transforms(s, refine):
        partial = np.cumsum(values.real * sign, axis=1)[:, n:]
        out.append(scale * (partial @ binomial))
    return tuple(out)


class MG1Latency(QueueLatency):
    """Sojourn time of the FIFO M/G/1 queue (built by :func:`mg1`).

    Attributes
    ----------
    rate : float
        lambda, the Poisson arrival rate of jobs.
    batch_size : int
        k: each job is served in one service of length S(k).
    servers : int
        1.
    service_mean, service_scv : float
        E[S(k)] and its squared coefficient of variation.
    load : float
        rho = lambda E[S(k)].
    waiting_probability : float
        P(Wq > 0) = rho.
    estimated_error : float
        Estimated absolute error of the sojourn and waiting-time cdf: the largest difference
        from a second Euler inversion with a 5x longer series (lognormal service: other
        parameters and halved quadrature steps) at points from half the mean service time to
        beyond the p99.9, and at least the discretisation error e^-22 = 3e-10.
    """

    def __init__(self, rate: float, law: ServiceLaw, batch_size: int):
        self.rate, self.batch_size, self.servers = rate, batch_size, 1
        self._law = law
        self.service_mean, self.service_scv = law.mean, law.scv
        self.load = rho = rate * law.mean
        self.waiting_probability = rho
        self._time_scale = law.mean
        self.estimated_error = self._estimate_error()
        how = law.transform_note
        super().__init__(
            model="mg1_transform",
            method="M/G/1 numerical (Pollaczek-Khinchine, Euler inversion)",
            accuracy=Accuracy("numerical",
                              f"Pollaczek-Khinchine transform inverted by Euler summation "
                              f"(Abate & Whitt 1995, A={_EULER[0]:g}, {_EULER[1]}+{_EULER[2]} "
                              f"terms, discretisation error <= 3e-10); {how}; estimated "
                              f"absolute cdf error {self.estimated_error:.0e} (difference "
                              f"from a second inversion, up to the p99.9)"),
            throughput=rate * batch_size, utilization=rho,
            batch_size_distribution={batch_size: 1.0})

    # --- transforms ---------------------------------------------------------------------------
    def _transforms(self, s, refine):
        """Laplace transforms of P(Wq > t) and of P(T > t) - (1 - rho) P(S > t).

        With om = 1 - S*(s) and D = s - lambda om, Pollaczek-Khinchine gives
        W*(s) = (1 - rho) s / D and 1 - W*(s) = (rho s - lambda om) / D. The sojourn
        T = Wq + S has 1 - W* S* = (1 - W*) + om W*; subtracting the part (1 - rho) P(S > t)
        (no wait) removes the service law's own jumps (empirical service), which the
        inversion would smear, and leaves a continuous function.
        """
        lam, rho = self.rate, self.load
        om = self._law.lst_complement(s, refine)
        d = s - lam * om
        one_minus_w = (rho * s - lam * om) / d
        wait_extra = (1.0 - rho) * lam * om / d                  # W*(s) - (1 - rho)
        return one_minus_w / s, (one_minus_w + om * wait_extra) / s

    def _invert(self, t, params=_EULER, refine=1.0):
        """(P(Wq > t), P(T > t)) for an array of t > 0."""
        t = np.asarray(t, dtype=float)
        wait, soj = np.empty(t.size), np.empty(t.size)
        for i in range(0, t.size, 256):
            w, g = _euler_sf(self._transforms, t[i:i + 256], params, refine)
            wait[i:i + 256] = w
            soj[i:i + 256] = (1.0 - self.load) * self._law.sf(t[i:i + 256]) + g
        if not (np.isfinite(wait).all() and np.isfinite(soj).all()):
            raise ArithmeticError(f"the M/G/1 transform inversion produced non-finite values "
                                  f"for service {self._law.label} at rate {self.rate:g}")
        return wait, soj

    def _both(self, t):
        """(P(Wq > t), P(T > t)) for t >= 0, clipped to their ranges."""
        t = np.asarray(t, dtype=float).ravel()
        wait = np.full(t.size, self.load)
        soj = np.ones(t.size)
        # Below 1e-250 s the Bromwich abscissa A / 2t overflows; the limits are exact there.
        # Far out, A / 2t underflows; there P(T > t) <= E[T] / t < 1e-30 (Markov), so 0.
        far = t > 1e30 * self.mean
        wait[far], soj[far] = 0.0, 0.0
        inside = (t > 1e-250) & ~far
        if inside.any():
            wait[inside], soj[inside] = self._invert(t[inside])
        return np.clip(wait, 0.0, self.load), np.clip(soj, 0.0, 1.0)

    def _estimate_error(self) -> float:
        """Largest |difference| from a second inversion, and at least the discretisation error.

        Points: half and one mean service time, the exponential-tail guesses of the sojourn
        p50 to p99.9, and, for service with point masses (empirical), the likeliest values and
        their doubles (when there are few), where the waiting-time density has its kinks and
        the inversion its largest error.
        """
        law, m, rho = self._law, self._law.mean, self.load
        scale = self.waiting_mean / rho
        t = [0.5 * m, m] + [m + scale * math.log(rho / q) for q in (0.5, 0.1, 1e-2, 1e-3)
                            if q < rho]
        values, probs = law.atoms
        if 0 < values.size <= 64:
            # (With many distinct samples each kink is small and the points would cost much.)
            likeliest = values[np.argsort(probs)[::-1][:8]]
            t += [x for x in np.concatenate([likeliest, 2.0 * likeliest]) if x <= t[-1]]
        t = np.array(t)
        w1, s1 = self._invert(t)
        if law.numeric_transform:
            w2, s2 = self._invert(t, _EULER_CHECK_QUADRATURE, refine=2.0)
        else:
            w2, s2 = self._invert(t, _EULER_CHECK)
        return float(max(np.abs(w1 - w2).max(), np.abs(s1 - s2).max(), math.exp(-_EULER[0])))

    # --- distribution functions ---------------------------------------------------------------
    def _wait_sf(self, w):
        w = np.asarray(w, dtype=float)
        return self._both(w)[0].reshape(w.shape)

    def _sf(self, t):
        t = np.asarray(t, dtype=float)
        return self._both(t)[1].reshape(t.shape)

    def _cdf(self, t):
        return 1.0 - self._sf(t)

    def _solve(self, which: int, q: float, guess: float) -> float:
        """The t with sf(t) = q (which = 0: waiting time, 1: sojourn), bracketing from guess."""
        f = lambda x: float(self._both(np.array([x]))[which][0]) - q
        lo, hi = 0.0, guess
        while f(hi) > 0:
            lo, hi = hi, 2.0 * hi
            if hi > 1e12 * self._law.mean:
                raise ArithmeticError(f"survival function of {self.method!r} never falls to {q}")
        # Brent keeps a sign change, so it also finds the jump point of a discontinuous sf.
        return optimize.brentq(f, lo, hi, xtol=1e-13 * hi, rtol=1e-13, maxiter=200)

    def _tail_guess(self, q: float) -> float:
        """Exponential-tail guess of the waiting time with P(Wq > t) = q."""
        rho = self.load
        return self.waiting_mean / rho * math.log(rho / q) if q < rho else 0.0

    def _wait_quantile(self, p: float) -> float:
        q = 1.0 - p
        if q >= self.waiting_probability:
            return 0.0
        return self._solve(0, q, max(self._tail_guess(q), 1e-3 * self._law.mean))

    def _quantile(self, p):
        return np.array([self._solve(1, 1.0 - float(pi),
                                     self._law.mean + self._tail_guess(1.0 - float(pi)))
                         for pi in p.ravel()]).reshape(p.shape)

    @property
    def waiting_mean(self) -> float:
        """E[Wq] = lambda E[S^2] / (2 (1 - rho)) (Pollaczek-Khinchine)."""
        return self.rate * self._law.second_moment / (2.0 * (1.0 - self.load))

    @property
    def mean(self) -> float:
        """Mean sojourn time, E[S] + E[Wq]."""
        return self._law.mean + self.waiting_mean


def mg1(rate, service, batch_size=1):
    """Sojourn-time distribution of the FIFO M/G/1 queue, by numerical transform inversion.

    Jobs arrive as a Poisson process of rate lambda and are served one at a time, first come
    first served, each for an independent time distributed as S(batch_size) of ``service``
    (so ``batch_size=1`` is a server without batching; ``batch_size=k`` models batches of k
    requests that arrive and are served together, e.g. client-side batching).

    The waiting time has the Pollaczek-Khinchine transform (Pollaczek 1930, Khinchine 1932)
    W*(s) = (1 - rho) s / (s - lambda + lambda S*(s)), and the sojourn time T = Wq + S the
    transform W*(s) S*(s). Both survival functions are inverted numerically by the Euler
    summation algorithm of Abate & Whitt (1995) (A = 22, 38 + 11 terms; discretisation error
    at most e^-22 = 3e-10). The sojourn's no-wait part (1 - rho) P(S > t) is added in closed form
    and only the continuous remainder is inverted. The service transform S*(s) is:

    - exponential, gamma: closed form, (1 + s m / a)^(-a) with shape a = 1/cv^2;
    - lognormal (no closed form): the trapezoidal rule in the standard normal variable, with a
      step that follows the oscillation of exp(-s x), exponentially convergent (Trefethen &
      Weideman 2014); |error| < 3e-13 against 30-digit mpmath quadrature;
    - empirical: the average of exp(-s x) over the samples (scaled to the batch size as the
      simulator does); its jumps stay out of the inversion (see above).

    Deterministic service is delegated to the exact :func:`md1` (Erlang's formula): the
    inversion would ring at the jumps of the waiting-time density at multiples of D.

    Measured accuracy: against the exact M/M/1 (:func:`mmc`) the sojourn and waiting-time sf
    agree to 3e-10 for rho from 0.1 to 0.99 and t up to 30 / (1 - rho) mean service times;
    quantiles from p50 to p99.9 to 2e-9 relative. Far in the tail the absolute error is
    roundoff, about 1e-12. Gamma service with cv -> 0 approaches the exact M/D/1
    (rho = 0.8: p99 4e-6 relative apart at cv 0.003, about the true effect cv^2 of the
    jitter). Empirical laws with few distinct samples (and near-deterministic ones) put kinks
    into the waiting-time density, where the inversion converges slowly: an empirical law with
    the single sample D is M/D/1, and there the cdf is off by up to 7e-4 next to multiples of D
    (p99 by 5e-6 relative). Each result states its own error estimate in ``accuracy`` (6e-4 in
    that case): the largest difference from a second inversion with a 5x longer series
    (lognormal service: A = 24, 60 + 20 terms and halved quadrature steps), at points from
    half the mean service time to beyond the p99.9 (and at the likeliest samples and their
    doubles), and at least the discretisation error 3e-10.

    Parameters
    ----------
    rate : float
        Poisson arrival rate lambda of jobs (per second).
    service : ServiceTime or float or str
        The service-time law (any jitter kind, table or empirical). A number or a string such as
        ``"2ms"`` is a constant service time.
    batch_size : int
        k >= 1: the service time of a job is S(k).

    Returns
    -------
    MG1Latency
        ``method="M/G/1 numerical (Pollaczek-Khinchine, Euler inversion)"``, accuracy
        ``numerical``; ``throughput`` counts requests (k lambda). For deterministic service an
        :class:`MD1Latency` (``method="M/D/1 exact (Erlang)"``) with the same interface.

    Raises
    ------
    ValueError
        For a non-positive rate, an invalid service or batch_size.
    UnstableError
        If rho = lambda E[S(k)] >= 1.

    Examples
    --------
    >>> from qmodel import ServiceTime
    >>> r = mg1(rate=0.8, service=ServiceTime.affine(1.0, jitter="exponential"))   # M/M/1
    >>> round(r.p99, 6), round(r.mean, 9)                # ln(100) / 0.2 and 1 / 0.2
    (23.025851, 5.0)
    >>> r = mg1(700.0, ServiceTime.affine(1e-3, jitter=("lognormal", 0.5)))
    >>> r.accuracy.exactness, round(r.waiting_probability, 3), round(r.p99 * 1e3, 3)
    ('numerical', 0.7, 9.565)
    >>> type(mg1(0.8, 1.0)).__name__                     # constant service: exact M/D/1
    'MD1Latency'
    """
    rate = check_rate(rate, "rate")
    law = service_law(service, batch_size)
    k = check_servers(batch_size, "batch_size")
    capacity = 1.0 / law.mean
    check_below_capacity(rate, capacity, f"an M/G/1 server ({law.label})",
                         "shorten the service time")
    if law.family == "deterministic":
        return md1(rate, law.mean)
    return MG1Latency(rate, law, k)
