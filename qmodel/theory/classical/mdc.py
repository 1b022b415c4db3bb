"""The FIFO M/D/1 and M/D/c queues: constant service times, exact waiting-time laws.

M/D/1 by Erlang's formula summed in high precision; M/D/c by Crommelin's relation between the
waiting time and the number waiting at an earlier epoch, whose stationary law is computed with
positive terms only from the ladder-height (Wiener-Hopf) factorisation, exact up to a stated
truncation.

References
----------
- A. K. Erlang (1909): the M/D/1 waiting-time distribution.
- C. D. Crommelin (1932), "Delay probability formulae when the holding times are constant",
  P.O. Elect. Engrs. J. 25: the M/D/c waiting time.
- G. J. Franx (2001), "A simple solution for the M/D/c waiting time distribution",
  Oper. Res. Letters 29(5), 221-229.
- W. Feller (1971), "An Introduction to Probability Theory and Its Applications", vol. II,
  ch. XII (ladder variables, Wiener-Hopf factorisation, duality lemma).
- A. J. E. M. Janssen and J. S. H. van Leeuwaarden (2005), "Analytic computation schemes for the
  discrete-time bulk service queue", Queueing Systems 50: the roots of z^c = exp(a(z - 1)).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
from scipy import optimize, signal, special, stats

from ...latency import Accuracy
from ..arguments import check_duration, check_rate, check_servers, check_stable
from ..queue_latency import QueueLatency

__all__ = ["md1", "mdc", "MD1Latency", "MDcLatency"]


# --------------------------------------------------------------------------------------------
# the roots of z^c = exp(a (z - 1)) and the ladder heights of the M/D/c queue
# --------------------------------------------------------------------------------------------
def _outer_root(servers: int, load: float) -> float:
    """The real root z* > 1 of z^c = exp(a (z - 1)); P(Wq > t) decays like exp(-c ln(z*) t / D)."""
    g = lambda z: servers * math.log(z) - load * (z - 1.0)
    lo = servers / load                  # g is concave with its maximum (> 0) here
    hi = 2.0 * lo
    while g(hi) > 0:
        hi *= 2.0
    return optimize.brentq(g, lo, hi, xtol=1e-15, rtol=1e-15)


def _inner_roots(servers: int, rho: float) -> np.ndarray:
    """The c roots of z^c = exp(c rho (z - 1)) in the closed unit disk, z_0 = 1.

    Root k solves z = w^k exp(rho (z - 1)), w = exp(2 pi i / c) (a contraction on the disk), so
    z_k = -W_0(-rho e^{-rho} w^k) / rho with W_0 the principal Lambert W branch; two Newton
    steps on z - w^k exp(rho (z - 1)) polish it.
    """
    k = np.arange(servers)
    w = np.exp(2j * np.pi * k / servers)
    z = -special.lambertw(-rho * math.exp(-rho) * w, 0) / rho
    for _ in range(2):
        e = w * np.exp(rho * (z - 1.0))
        z = z - (z - e) / (1.0 - rho * e)
    z[0] = 1.0
    return z


def _descending_ladder(servers: int, rho: float) -> np.ndarray:
    """h[r-1] = P(strict descending ladder height = r), r = 1..c, of the walk Poisson(c rho) - c.

    Wiener-Hopf: z^c (1 - H_-(z)) = z^c - sum_r h_r z^{c-r} = prod_k (z - z_k) over the c roots
    in the unit disk. The coefficients are read off by an FFT of the product's values on the
    unit circle, where they are bounded by 2, so the absolute error is ~ c * 1e-16.
    """
    if servers == 1:
        return np.array([1.0])
    z = _inner_roots(servers, rho)[1:]
    m = 1 << int(math.ceil(math.log2(servers + 1)))
    grid = np.exp(2j * np.pi * np.arange(m) / m)
    logs = np.zeros(m, dtype=complex)
    for start in range(0, z.size, 256):              # bounded memory for large c
        logs += np.log(grid[:, None] - z[None, start:start + 256]).sum(axis=1)
    values = (grid - 1.0) * np.exp(logs)
    coef = np.fft.fft(values).real / m                 # coef[n] of z^n, n = 0..c
    h = np.clip(-coef[servers - 1::-1][:servers], 0.0, None)
    return h / h.sum()


class _DeterministicService(QueueLatency):
    """Sojourn = waiting time + D: a shift of the waiting-time distribution by D."""

    service_time: float

    def _cdf(self, t):
        return self._shifted(self._wait_cdf, t, before=0.0)

    def _sf(self, t):
        return self._shifted(self._wait_sf, t, before=1.0)

    def _shifted(self, wait_fn, t, before: float):
        """A waiting-time function evaluated at t - D; ``before`` where t < D."""
        t = np.asarray(t, dtype=float)
        w = t - self.service_time
        out = np.full(t.shape, before)
        ok = w >= 0
        if ok.any():
            out[ok] = wait_fn(w[ok])
        return out

    def _quantile(self, p):
        q = 1.0 - p.ravel()
        wait = np.zeros(q.size)
        waits = q < self.waiting_probability              # the others are 0
        if waits.any():
            wait[waits] = self._wait_quantiles(q[waits])
        return (self.service_time + wait).reshape(p.shape)

    def _wait_guess(self, q):
        """A first guess of the waiting time with P(Wq > t) = q (exponential tail)."""
        return np.log(self.waiting_probability / q) / self.tail_rate

    def _wait_sf_at(self, w: np.ndarray) -> np.ndarray:
        return np.asarray(self._wait_sf(np.asarray(w, dtype=float)), dtype=float)

    def _wait_quantiles(self, q: np.ndarray) -> np.ndarray:
        """The waiting times t with P(Wq > t) = q, for every level of ``q`` (each below the
        waiting probability) at once.

        The waiting-time cdf is continuous on (0, inf) and smooth between multiples of D: each
        level's D-interval is found from the exponential-tail guess, then solved inside it
        by the Illinois variant of regula falsi (Dowell and Jarratt 1971), one evaluation of
        the sf for all levels per step, to the last bits of float64 (the bracket within 4
        ulps, as Brent's method was asked for before).
        """
        d = self.service_time
        k = np.maximum(np.floor(self._wait_guess(q) / d), 0.0)
        # the interval [k D, (k + 1) D] with sf(k D) > q >= sf((k + 1) D), both ends in one
        # evaluation (sf(0) is the waiting probability, above every level here)
        while True:
            ends = self._wait_sf_at(np.concatenate([k * d, (k + 1) * d]))
            fa, fb = ends[:k.size] - q, ends[k.size:] - q
            down = (k > 0) & (fa <= 0)
            up = ~down & (fb > 0)
            if not (down.any() or up.any()):
                break
            k = k - down + up
        a, b = k * d, (k + 1) * d
        side = np.zeros(q.size)                # +1: b moved last, -1: a moved last
        for _ in range(200):
            open_ = (b - a) > 4 * np.finfo(float).eps * b
            if not open_.any():
                break
            denominator = fb - fa
            c = np.where(denominator != 0, (a * fb - b * fa) / np.where(
                denominator != 0, denominator, 1.0), 0.5 * (a + b))
            c = np.where((c > a) & (c < b), c, 0.5 * (a + b))   # rounding: bisect
            fc = np.where(open_, self._wait_sf_at(np.where(open_, c, a)) - q, 0.0)
            exact = open_ & (fc == 0.0)
            right = open_ & (fc < 0.0)           # the root lies left of c: c becomes b
            left = open_ & (fc > 0.0)
            fa = np.where(right & (side == 1), fa / 2, fa)
            fb = np.where(left & (side == -1), fb / 2, fb)
            b, fb = np.where(right, c, b), np.where(right, fc, fb)
            a, fa = np.where(left, c, a), np.where(left, fc, fa)
            side = np.where(right, 1.0, np.where(left, -1.0, side))
            a, b = np.where(exact, c, a), np.where(exact, c, b)
        return 0.5 * (a + b)

    @property
    def mean(self) -> float:
        """Mean sojourn time: D + E[Wq]."""
        return self.service_time + self.waiting_mean


# --------------------------------------------------------------------------------------------
# M/D/1
# --------------------------------------------------------------------------------------------
class MD1Latency(_DeterministicService):
    """Sojourn time of the FIFO M/D/1 queue (built by :func:`md1`).

    Attributes
    ----------
    rate, service_time : float
        lambda and D.
    servers : int
        1.
    waiting_probability : float
        P(Wq > 0) = rho.
    """

    # Working precision: decimal digits lost to cancellation + this many kept.
    GUARD_DIGITS = 25

    def __init__(self, rate: float, service_time: float):
        self.rate, self.service_time, self.servers = rate, service_time, 1
        rho = rate * service_time
        self.waiting_probability = rho
        self._time_scale = service_time
        zstar = _outer_root(1, rho)
        self.tail_rate = math.log(zstar) / service_time
        # Cramer-Lundberg: P(Wq > t) ~ (1 - rho) / (rho z* - 1) exp(-tail_rate t).
        self._tail_constant = (1.0 - rho) / (rho * zstar - 1.0)
        super().__init__(model="md1",
                         method="M/D/1 exact (Erlang)", throughput=rate, utilization=rho,
                         accuracy=Accuracy("exact", "Erlang's formula summed in mpmath at a "
                                                    "working precision of (decimal digits of the "
                                                    "largest term) + (digits of the tail) + 25; "
                                                    "cdf and sf correct to float64 rounding"),
                         batch_size_distribution={1: 1.0})

    def _erlang(self, w: float) -> tuple[float, float]:
        """(P(Wq <= w), P(Wq > w)) by Erlang's alternating sum in high precision."""
        lam, d = self.rate, self.service_time
        n = int(math.floor(w / d))
        # |term k| = x^k / k! e^x with x = lambda (w - k D) >= 0; find the largest in float.
        biggest = 0.0
        for k in range(n + 1):
            x = lam * (w - k * d)
            if x > 0:
                biggest = max(biggest, (k * math.log(x) - math.lgamma(k + 1) + x) / math.log(10))
        # sf = 1 - cdf keeps its relative accuracy if the digits it is below 1 are kept as well
        # (sf ~ exp(-tail_rate w)).
        tail_digits = self.tail_rate * w / math.log(10)
        with mpmath.workdps(int(biggest + tail_digits) + self.GUARD_DIGITS):
            lam_m, d_m, w_m = mpmath.mpf(lam), mpmath.mpf(d), mpmath.mpf(w)
            # term k = [lambda (kD - w)]^k / k! e^{-lambda (kD - w)}
            #        = e^{lambda w} [lambda (kD - w) e^{-lambda D}]^k / k!
            shrink = mpmath.exp(-lam_m * d_m)
            inverse_factorial = mpmath.mpf(1)
            total = mpmath.mpf(1)
            for k in range(1, n + 1):
                inverse_factorial /= k
                total += (lam_m * (k * d_m - w_m) * shrink) ** k * inverse_factorial
            cdf = (1 - lam_m * d_m) * mpmath.exp(lam_m * w_m) * total
            return float(cdf), float(1 - cdf)

    def _wait_cdf(self, w):
        return np.array([self._erlang(float(x))[0] for x in np.ravel(w)]).reshape(np.shape(w))

    def _wait_sf(self, w):
        return np.array([self._erlang(float(x))[1] for x in np.ravel(w)]).reshape(np.shape(w))

    def _wait_guess(self, q):
        return np.log(self._tail_constant / q) / self.tail_rate

    def _wait_quantiles(self, q: np.ndarray) -> np.ndarray:
        """Level by level: each sf evaluation here is a sum in high precision, so the fewest
        points win, which Brent's method on each level's D-interval spends (about half of
        the all-levels search's, whose cost is the number of numpy calls)."""
        d = self.service_time
        out = []
        for level in q:
            cache = {}

            def sf(w):
                if w not in cache:
                    cache[w] = float(self._wait_sf(np.array([w]))[0])
                return cache[w]

            k = max(0, int(math.floor(float(self._wait_guess(level)) / d)))
            while k > 0 and sf(k * d) <= level:
                k -= 1
            while sf((k + 1) * d) > level:
                k += 1
            lo, hi = k * d, (k + 1) * d
            out.append(optimize.brentq(lambda w: sf(w) - level, lo, hi, xtol=1e-15 * hi,
                                       rtol=1e-15, maxiter=500))
        return np.array(out)

    @property
    def waiting_mean(self) -> float:
        """E[Wq] = rho D / (2 (1 - rho)) (Pollaczek-Khinchine)."""
        rho = self.utilization
        return rho * self.service_time / (2.0 * (1.0 - rho))


def md1(rate, service_time) -> MD1Latency:
    """Sojourn-time distribution of the FIFO M/D/1 queue, by Erlang's formula.

    The waiting time (Erlang 1909; e.g. Iversen & Staalhagen 1999, Gross & Harris) is

        P(Wq <= t) = (1 - rho) sum_{k=0}^{floor(t/D)} [lambda (kD - t)]^k / k! e^{-lambda (kD - t)},

    an alternating sum whose terms grow like e^{2 lambda t} while the result stays below 1, so
    float64 loses every digit for large t or rho near 1. It is summed here in mpmath with the
    working precision chosen from the size of the largest term, plus the decimal order of the
    tail probability, plus 25 guard digits, which makes the cdf and the survival function
    (computed as 1 - cdf before rounding to float) correct to float64 rounding. The sojourn
    time is Wq + D; its cdf is 0 below D and jumps by 1 - rho at D. The mean is
    Pollaczek-Khinchine's, D + rho D / (2 (1 - rho)).

    Parameters
    ----------
    rate : float
        Poisson arrival rate lambda (requests per second).
    service_time : float or str
        The constant service time D (seconds, or a string such as ``"2ms"``).

    Returns
    -------
    MD1Latency
        ``method="M/D/1 exact (Erlang)"``.

    Raises
    ------
    ValueError
        For a non-positive rate or service_time.
    UnstableError
        If rho = lambda D >= 1.

    Examples
    --------
    >>> r = md1(rate=0.8, service_time=1.0)
    >>> round(r.waiting_cdf(2.0), 6), round(r.waiting_quantile(0.99), 5)
    (0.63452, 10.35589)
    >>> round(r.p99, 5), round(r.mean, 12)
    (11.35589, 3.0)
    """
    rate = check_rate(rate, "rate")
    service_time = check_duration(service_time, "service_time")
    check_stable(rate, 1.0 / service_time,
                  f"an M/D/1 queue (service_time={service_time:g} s)", 1,
                  "shorten service_time")
    return MD1Latency(rate, service_time)


# --------------------------------------------------------------------------------------------
# M/D/c
# --------------------------------------------------------------------------------------------
class MDcLatency(_DeterministicService):
    """Sojourn time of the FIFO M/D/c queue (built by :func:`mdc`).

    Attributes
    ----------
    rate, service_time : float
        lambda and D.
    servers : int
        c.
    load : float
        a = lambda D.
    queue_after_epoch : ndarray
        P(B = n), n = 0..N: the stationary number of customers still waiting just after the
        customers present at a time s have been served or started, B = (Q(s) - c)^+.
    truncation : float
        P(B > N), the probability mass beyond the stored range (extrapolated geometrically).
    waiting_probability : float
        P(Wq > 0) = P(all c servers busy) at an arrival.
    """

    TAIL = 1e-22          # stop the stationary law where P(B = n) falls below this

    def __init__(self, rate: float, service_time: float, servers: int):
        self.rate, self.service_time, self.servers = rate, service_time, servers
        c = servers
        a = self.load = rate * service_time
        rho = a / c
        self._time_scale = service_time
        self._solve(c, a, rho)
        self.waiting_probability = float(self._wait_sf(np.array([0.0]))[0])
        super().__init__(
            model="mdc", method="M/D/c exact (Crommelin/Franx)", throughput=rate,
            utilization=rho,
            accuracy=Accuracy("numerical", f"stationary queue law by ladder heights (Wiener-Hopf"
                                           f"), positive terms only; truncation mass "
                                           f"{self.truncation:.1e} and Poisson cut 1e-18, "
                                           f"cdf absolute error < 1e-12"),
            batch_size_distribution={1: 1.0})

    # --- the stationary law of B = (Q - c)^+ --------------------------------------------------
    def _solve(self, c: int, a: float, rho: float) -> None:
        # B' = (B + A - c)^+ with A ~ Poisson(a): a Lindley recursion, so B =d the maximum M of
        # the random walk with steps A - c. With weak ascending ladder heights h+ (defective,
        # support >= 0), M = sum of a geometric number of them: pi = (1 - |h+|) delta_0
        # + h+ * pi. By the duality lemma (Feller XII.2), h+(k) = sum_{j >= 0} u(j) P(A = k+j+c),
        # u the renewal measure of the strict descending ladder heights h- (support 1..c), and by
        # Wiener-Hopf 1 - |h+| = (c - a) / E[h-]. Every step adds positive terms.
        h_desc = _descending_ladder(c, rho)
        mean_desc = float(np.dot(np.arange(1, c + 1), h_desc))
        top = max(int(math.ceil(a + 40.0 * math.sqrt(a) + 40.0)), c + 2)
        p_jump = stats.poisson.pmf(np.arange(c, top + 1), a)        # P(A = c + s), s >= 0
        size = p_jump.size
        u = np.zeros(size)
        u[0] = 1.0
        for j in range(1, size):
            r = min(j, c)
            u[j] = np.dot(h_desc[:r], u[j - 1::-1][:r])
        h_asc = np.array([np.dot(u[:size - k], p_jump[k:]) for k in range(size)])
        defect = (c - a) / mean_desc                                 # 1 - |h+|
        scale = defect + h_asc[1:].sum()                             # 1 - h+(0), no cancellation
        # Geometric decay rate of the tail: P(B = n) ~ z*^-n, z* > 1 the real root of
        # z^c = exp(a (z - 1)).
        zstar = _outer_root(c, a)
        self.tail_rate = c * math.log(zstar) / self.service_time
        self.decay_ratio = 1.0 / zstar
        log_z = math.log(zstar)
        n = size + c + int(math.ceil(math.log(1.0 / self.TAIL) / log_z))
        # pi(x) = sum_{k>=1} h+(k) pi(x-k) / (1 - h+(0)): an all-positive IIR filter.
        feedback = np.concatenate(([1.0], -h_asc[1:] / scale))
        while True:
            impulse = np.zeros(n + 1)
            impulse[0] = defect / scale
            pi = signal.lfilter([1.0], feedback, impulse)
            if pi[-1] < self.TAIL or n > 50_000_000:
                break
            n *= 2
        self.queue_after_epoch = pi
        tail_beyond = pi[-1] * self.decay_ratio / (1.0 - self.decay_ratio)
        self.truncation = float(tail_beyond)
        # T(n) = P(B > n) for n = 0..N by positive reverse sums; Pi(n) = P(B <= n).
        self._tail = np.cumsum(pi[::-1])[::-1] - pi + tail_beyond
        self._head = np.cumsum(pi)
        # Poisson(lambda v), v <= D, beyond this index is below 1e-18 and dropped.
        tails = stats.poisson.sf(np.arange(top + 1), a)
        self._jmax = int(np.argmax(tails < 1e-18)) + 1 if (tails < 1e-18).any() else top

    def _tail_at(self, n: np.ndarray) -> np.ndarray:
        """P(B > n) for integer arrays n (1 for n < 0, geometric beyond the stored range)."""
        last = self._tail.size - 1
        inside = np.clip(n, 0, last)
        out = self._tail[inside]
        beyond = n > last
        if beyond.any():
            out = np.where(beyond, self._tail[last]
                           * self.decay_ratio ** np.maximum(n - last, 0).astype(float), out)
        return np.where(n < 0, 1.0, out)

    def _head_at(self, n: np.ndarray) -> np.ndarray:
        """P(B <= n) for integer arrays n (0 for n < 0)."""
        last = self._head.size - 1
        out = self._head[np.clip(n, 0, last)]
        return np.where(n < 0, 0.0, out)

    # --- the waiting time --------------------------------------------------------------------
    def _wait_terms(self, w: np.ndarray):
        """For w = kD + u: m = (k+1)c - 1, the Poisson(lambda (D - u)) pmf on 0..J, and j."""
        d, c = self.service_time, self.servers
        k = np.floor(w / d)
        u = np.clip(w - k * d, 0.0, d)
        m = (k.astype(np.int64) + 1) * c - 1
        mean = self.rate * np.maximum(d - u, 0.0)
        j = np.arange(self._jmax + 1)
        # Poisson pmf as scipy.stats computes it, without its per-call argument handling (the
        # quantiles' root search evaluates this a few dozen times per answer)
        pmf = np.exp(special.xlogy(j[None, :], mean[:, None]) - special.gammaln(j[None, :] + 1)
                     - mean[:, None])
        return m, mean, j, pmf

    def _wait_both(self, w, with_cdf: bool = True):
        """(P(Wq <= w), P(Wq > w)), each summed directly over positive terms; without
        ``with_cdf`` the first is None (the quantiles' root search needs the sf only)."""
        # W <= kD + u  <=>  B + N(lambda (D - u)) <= (k+1)c - 1  (derivation in mdc's docstring)
        w = np.asarray(w, dtype=float).ravel()
        cdf, sf = np.empty(w.size), np.empty(w.size)
        for s in range(0, w.size, 512):
            m, mean, j, pmf = self._wait_terms(w[s:s + 512])
            idx = m[:, None] - j[None, :]
            if with_cdf:
                cdf[s:s + 512] = (pmf * self._head_at(idx)).sum(axis=1)
            sf[s:s + 512] = (np.where(idx >= 0, pmf * self._tail_at(idx), 0.0).sum(axis=1)
                             + special.pdtrc(m, mean))       # P(Poisson(mean) > m)
        if not with_cdf:
            return None, np.clip(sf, 0.0, 1.0)
        # The smaller of the two is accurate relative to its size; take the other from it.
        cdf = np.where(sf < 0.5, 1.0 - sf, cdf)
        return np.clip(cdf, 0.0, 1.0), np.clip(sf, 0.0, 1.0)

    def _wait_sf(self, w):
        return self._wait_both(w, with_cdf=False)[1]

    def _wait_cdf(self, w):
        return self._wait_both(w)[0]

    @property
    def waiting_mean(self) -> float:
        """E[Wq] = (1/lambda) sum_j P(A > j) E[floor((B + j) / c)], A ~ Poisson(lambda D).

        From E[Wq] = int_0^inf P(Wq > t) dt, the relation above and
        int_0^D P(Poisson(lambda v) = j) dv = P(A > j) / lambda.
        """
        c = self.servers
        j = np.arange(self._jmax + 1)
        weight = stats.poisson.sf(j, self.load)                     # P(A > j)
        last = self._tail.size - 1
        # Rows j, columns k = 1..K with K c - j - 1 > last for every j: the stored part...
        kmax = (last + j.max() + 1) // c + 2
        k = np.arange(1, kmax + 1)
        idx = k[None, :] * c - j[:, None] - 1                       # P(B >= kc - j) = T(kc-j-1)
        inside = np.where(idx <= last, self._tail_at(np.minimum(idx, last)), 0.0).sum(axis=1)
        # ...then a geometric series from the first index beyond the stored range.
        first = ((last + j + 1) // c + 1) * c - j - 1
        ratio = self.decay_ratio
        beyond = self._tail[last] * ratio ** (first - last).astype(float) / (-math.expm1(
            c * math.log(ratio)))
        floor_mean = inside + beyond
        return float(np.dot(weight, floor_mean)) / self.rate


def mdc(rate, service_time, servers=1) -> MDcLatency:
    """Sojourn-time distribution of the FIFO M/D/c queue, exact up to a stated truncation.

    Derivation (Crommelin 1932; Franx 2001, who gives the same all-positive expression).
    Let Q(s) be the number in system at time s. With FIFO and the constant service time D,
    the min(Q(s), c) customers in service at s all leave by s + D, while those waiting at s
    and those arriving after s are all still present at s + D. Hence, for every s,
    Q(s + D) = (Q(s) - c)^+ + A(s, s + D], and the customers that arrived before a tagged
    arrival at time t, counted at t + x, obey the same rule without new arrivals. The tagged
    customer has started by t + x iff at most c - 1 of them remain. Writing x = kD + u,
    0 <= u < D, and s = t + u - D:

        Wq <= kD + u  <=>  B + N <= (k + 1) c - 1,

    where B = (Q(s) - c)^+ has the stationary law of B' = (B + A - c)^+, A ~ Poisson(lambda D),
    and N ~ Poisson(lambda (D - u)) counts the arrivals in (s, t), independent of B (PASTA).
    So P(Wq <= kD + u) = sum_j P(N = j) P(B <= (k+1)c - 1 - j), a sum of positive terms.

    B is the maximum of the random walk with steps A - c (a Lindley recursion). Its law is
    computed with positive terms only from the ladder-height (Wiener-Hopf) factorisation: the
    strict descending ladder heights (support 1..c) are the coefficients of prod_k (z - z_k)
    over the c roots of z^c = exp(lambda D (z - 1)) in the unit disk (Lambert W, as in Janssen &
    van Leeuwaarden 2005); the duality lemma (Feller 1971, XII) turns their renewal measure
    into the weak ascending ladder heights; a renewal recursion gives P(B = n), with
    P(B = 0) fixed exactly by 1 - |h+| = (c - lambda D) / E[descending ladder height]. The
    law is kept until P(B = n) < 1e-22 and extrapolated geometrically (ratio 1/z*, z* > 1 the
    real root of z^c = exp(lambda D (z - 1))) beyond. Poisson terms below 1e-18 are dropped.
    With c = 1 it reproduces Erlang's M/D/1 formula (see :func:`md1`).

    Parameters
    ----------
    rate : float
        Poisson arrival rate lambda (requests per second).
    service_time : float or str
        The constant service time D (seconds, or a string such as ``"2ms"``).
    servers : int
        c >= 1.

    Returns
    -------
    MDcLatency
        ``method="M/D/c exact (Crommelin/Franx)"``, accuracy ``numerical``.

    Raises
    ------
    ValueError
        For a non-positive rate or service_time, or servers not a whole number >= 1.
    UnstableError
        If rho = lambda D / c >= 1.

    Examples
    --------
    >>> r = mdc(rate=1.6, service_time=1.0, servers=2)     # rho = 0.8
    >>> round(r.waiting_probability, 6), round(r.waiting_mean, 6)
    (0.701898, 0.903284)
    >>> round(r.waiting_quantile(0.99), 5), round(r.p99, 5)
    (5.06955, 6.06955)
    """
    rate = check_rate(rate, "rate")
    service_time = check_duration(service_time, "service_time")
    servers = check_servers(servers)
    check_stable(rate, servers / service_time,
                  f"an M/D/{servers} queue (servers={servers}, service_time={service_time:g} s)",
                  servers, "shorten service_time")
    return MDcLatency(rate, service_time, servers)
