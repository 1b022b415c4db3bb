"""The law of a batch's service time S(k): one class per family, and its lattice laws.

Each family of :class:`~qmodel.system.ServiceTime` (the name in its ``jitter`` field) has one
:class:`ServiceLaw` subclass in :data:`SERVICE_LAWS`, in the manner of scipy.stats'
distribution classes: the law of one S(k) with the transforms the classical solvers need
(Laplace-Stieltjes transform, sf, cdf, pdf, moment generating function), and, at the family
level, the lattice laws of S(k) for many k at once. The numeric batch models work on a lattice
of step ``h``: a law is a vector ``p`` with ``p[i]`` the probability of the cell around
``i * h``. How each family lands on the lattice:

- deterministic: the value ``x`` is split between the two lattice points around it, linearly,
  so the mean is kept exactly;
- exponential, gamma, lognormal jitter: ``p[i] = F((i + 1/2) h) - F((i - 1/2) h)`` with ``F`` the
  cdf of S(k) = mean(k) * J; the mean is kept to O(h^2);
- empirical samples: each sample (scaled for unmeasured sizes exactly as the simulator scales
  them) is split like a deterministic value.

Mass beyond the lattice's last point is put on that point, and the amount is reported so the
caller can state it.

The continuous families take their sf, cdf and isf from the unit-mean jitter laws of
:mod:`qmodel.jitter`, the ones the simulator draws from.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
from scipy import special, stats

from ..jitter import jitter_law
from ..system import ServiceTime
from . import budget
from .arguments import check_duration, check_servers

__all__ = ["lattice_cells", "service_lattice", "service_upper", "ServiceLaw", "DeterministicLaw",
           "JitteredLaw", "ExponentialLaw", "GammaLaw", "LognormalLaw", "EmpiricalLaw",
           "SERVICE_LAWS", "law_family", "service_law"]


def lattice_cells(law, scales, h: float, length: int):
    """Lattice laws of ``scale * J`` for each scale, J a unit-mean jitter law
    (:func:`qmodel.jitter.jitter_law`).

    ``p[r, i]`` is the probability of the cell around ``i * h`` (the first cell starts at 0);
    the mass beyond the last cell is put on the last point.

    Returns
    -------
    pmf : ndarray, shape (len(scales), length)
    tails : ndarray
        The mass moved onto the last point, per scale.

    Examples
    --------
    >>> p, tails = lattice_cells(jitter_law("exponential", 1.0), np.array([1.0]), 1.0, 3)
    >>> p.round(4).tolist(), bool(np.isclose(p.sum(), 1.0))
    ([[0.3935, 0.3834, 0.2231]], True)
    """
    scales = np.asarray(scales, float)
    edges = (np.arange(length + 1) - 0.5) * h
    edges[0] = 0.0
    pmf = np.diff(law.cdf(edges[None, :] / scales[:, None]), axis=1)
    tails = law.sf(edges[-1] / scales)
    pmf[:, -1] += tails
    return pmf, tails


def _means(service, sizes):
    with warnings.catch_warnings():
        # Building the Node already warned about extrapolated sizes.
        warnings.simplefilter("ignore")
        return np.atleast_1d(np.asarray(service.mean(np.asarray(sizes, dtype=float)), float))


def _empirical_samples(service, sizes):
    """Scaled samples per size, the way the simulator draws them (nearest measured size)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # as in _means
        return [service.scaled_samples(k) for k in sizes]


def service_upper(service, sizes, tail: float = 1e-10) -> float:
    """A time above which every S(k), k in ``sizes``, has probability below ``tail``.

    Examples
    --------
    >>> import qmodel as qm
    >>> service_upper(qm.ServiceTime.affine(1e-3, 1e-4), [1, 8])
    0.0018
    """
    return law_family(service).upper(service, sizes, tail)


def _split(values, weights, h, length, out_row):
    """Add point masses at ``values`` to ``out_row``, split linearly between lattice points."""
    pos = np.asarray(values, float) / h
    lo = np.floor(pos).astype(np.int64)
    frac = pos - lo
    hi = np.minimum(lo + 1, length - 1)
    lo = np.minimum(lo, length - 1)
    np.add.at(out_row, lo, weights * (1.0 - frac))
    np.add.at(out_row, hi, weights * frac)


def service_lattice(service, sizes, h: float, length: int):
    """Lattice laws of S(k) for each k in ``sizes``.

    Parameters
    ----------
    service : ServiceTime
    sizes : sequence of int
        Batch sizes, each >= 1.
    h : float
        Lattice step in seconds.
    length : int
        Number of lattice points (times 0, h, ..., (length - 1) h).

    Returns
    -------
    pmf : ndarray, shape (len(sizes), length)
        Rows sum to 1.
    overflow : float
        The largest probability moved onto the last point because it lay beyond the lattice.

    Examples
    --------
    >>> import qmodel as qm
    >>> p, lost = service_lattice(qm.ServiceTime.affine(1e-3, 0.5e-3), [1, 2], 1e-3, 4)
    >>> p.round(3).tolist(), lost
    ([[0.0, 0.5, 0.5, 0.0], [0.0, 0.0, 1.0, 0.0]], 0.0)
    """
    return law_family(service).lattice(service, list(sizes), h, length)


# --------------------------------------------------------------------------------------------
# one service time as a law, with its transforms: one class per family
# --------------------------------------------------------------------------------------------
def _complex_log1p(z: np.ndarray) -> np.ndarray:
    """log(1 + z) for complex z with Re(z) >= 0, accurate for small |z|.

    numpy's complex log1p computes log(1 + z) naively: for |z| = 1e-9 its real part is off by
    1e-7 relative, which wrecks the Pollaczek-Khinchine transform at large t (small s).
    Here log|1 + z| = log1p(x (2 + x) + y^2) / 2, a sum of non-negative terms.
    """
    z = np.asarray(z, dtype=complex)
    out = np.log1p(z)                       # fine (and overflow-free) for |z| >= 1
    small = np.abs(z) < 1.0
    x, y = z.real[small], z.imag[small]
    out[small] = 0.5 * np.log1p(x * (2.0 + x) + y * y) + 1j * np.arctan2(y, 1.0 + x)
    return out


class ServiceLaw:
    """The law of one service time S, with the transforms the queue solvers need.

    One subclass per family carries that family's formulas; :data:`SERVICE_LAWS` maps the
    family names to them. Build a law with :func:`service_law` (from a ServiceTime and a batch
    size) or :meth:`from_moments` (a mean and a squared coefficient of variation).

    Attributes
    ----------
    family : str
        "deterministic", "exponential", "gamma", "lognormal" or "empirical": the key of the
        class in :data:`SERVICE_LAWS`, and the ``jitter`` field of a ServiceTime of the family.
    mean, scv, second_moment : float
        E[S], Var[S] / E[S]^2 and E[S^2].
    cv : float
        sqrt(scv).
    maximum : float
        The largest value S takes (inf for the unbounded families).
    theta_max : float
        Supremum of the domain of the moment generating function E[exp(theta S)]: inf for
        bounded laws, 1/m (exponential), shape/m (gamma), 0 for the heavy-tailed lognormal.
    label : str
        A description for messages.
    transform_note : str
        How :meth:`lst_complement` computes the transform, for accuracy statements.
    numeric_transform : bool
        True when that transform is a quadrature whose step ``refine`` divides (a check of an
        inversion then refines it rather than only lengthening the series).
    """

    family: str = ""
    transform_note = "closed-form service transform"
    numeric_transform = False

    def __init__(self, mean: float, cv: float, label: str = "", scv: float | None = None):
        self.label = label or self.family
        self.mean, self.cv = float(mean), float(cv)
        self.scv = self.cv ** 2 if scv is None else scv
        self.second_moment = self.mean ** 2 * (1.0 + self.scv)

    @classmethod
    def from_moments(cls, mean: float, scv: float) -> "ServiceLaw":
        """Deterministic (scv 0), exponential (scv 1) or gamma with this mean and SCV.

        Examples
        --------
        >>> [ServiceLaw.from_moments(2.0, scv).family for scv in (0, 1, 0.25)]
        ['deterministic', 'exponential', 'gamma']
        """
        if scv == 0:
            return DeterministicLaw(mean, label=f"deterministic {mean:g} s")
        if scv == 1:
            return ExponentialLaw(mean, 1.0, label=f"exponential, mean {mean:g} s")
        return GammaLaw(mean, math.sqrt(scv), label=f"gamma, mean {mean:g} s, scv {scv:g}")

    # --- built from a ServiceTime; the family's lattice laws of S(k) for several k ---------------
    @classmethod
    def from_service(cls, service, k: int, label: str) -> "ServiceLaw":
        """The law of S(k) of ``service``, a ServiceTime of this family."""
        return cls(float(service.mean(k)), service.cv, label=label)

    @classmethod
    def upper(cls, service, sizes, tail: float) -> float:
        """:func:`service_upper` for a ServiceTime of this family."""
        raise NotImplementedError

    @classmethod
    def lattice(cls, service, sizes: list, h: float, length: int):
        """:func:`service_lattice` for a ServiceTime of this family (all sizes at once)."""
        raise NotImplementedError

    # --- the Laplace-Stieltjes transform --------------------------------------------------
    def lst_complement(self, s, refine: float = 1.0):
        """1 - E[exp(-s S)] for complex s with Re(s) > 0.

        Computed directly (as E[-expm1(-s S)], not as 1 minus the transform), so it keeps its
        relative precision for small |s|, where the Pollaczek-Khinchine transform needs it.
        ``refine`` > 1 shortens the steps of a transform computed by quadrature.
        """
        return self._complement(np.asarray(s, dtype=complex), refine)

    def _complement(self, s, refine):
        raise NotImplementedError

    # --- the distribution function ------------------------------------------------------------
    def sf(self, x) -> np.ndarray:
        """P(S > x) for real arrays x."""
        raise NotImplementedError

    def cdf(self, x) -> np.ndarray:
        """P(S <= x) for real arrays x."""
        x = np.asarray(x, dtype=float)
        return 1.0 - self.sf(x)

    def pdf(self, x) -> np.ndarray:
        """Density of the continuous families (exponential, gamma, lognormal)."""
        raise ValueError(f"the {self.label} service law has no density")

    @property
    def atoms(self) -> tuple[np.ndarray, np.ndarray]:
        """(values, probabilities) of the point masses of S, values increasing; empty arrays
        for the continuous families."""
        return np.empty(0), np.empty(0)

    # --- the moment generating function (light-tailed laws) -------------------------------------
    def log_mgf(self, theta: float) -> float:
        """log E[exp(theta S)] for 0 <= theta < theta_max, accurate for small theta too."""
        raise ValueError(f"the {self.label} service law has no moment generating function")

    def dlog_mgf(self, theta: float) -> float:
        """d/dtheta log E[exp(theta S)] = E[S exp(theta S)] / E[exp(theta S)]."""
        raise ValueError(f"the {self.label} service law has no moment generating function")

    def exp_weighted_cdf(self, theta: float, u) -> np.ndarray:
        """K(u) = E[exp(-theta (u - S)); S <= u] in [0, 1] for real arrays u (0 for u < 0).

        The convolution of an exponential tail with this service law: P(W + S > t) for
        P(W > w) = c exp(-theta w) is P(S > t) + c K(t), see ExponentialWaitLatency.
        """
        u = np.asarray(u, dtype=float)
        out = np.zeros(u.shape)
        ok = u >= 0
        if not ok.any():
            return out
        out[ok] = self._exp_weighted(theta, u[ok])
        return np.clip(out, 0.0, 1.0)

    def _exp_weighted(self, theta: float, v: np.ndarray) -> np.ndarray:
        """K(v) for v >= 0; by quadrature of the density unless a family knows better."""
        return [self._weighted_quad(theta, float(x)) for x in v]

    def _weighted_quad(self, theta: float, u: float) -> float:
        """K(u) by adaptive quadrature (heavier tails than the tilt allows)."""
        from scipy import integrate

        if u <= 0:
            return 0.0
        # e^{-theta (u - x)} < e^{-45} below u - 45/theta: that part is dropped.
        lo = max(0.0, u - 45.0 / theta)
        value, _ = integrate.quad(lambda x: math.exp(-theta * (u - x)) * float(self.pdf(x)),
                                  lo, u, limit=200, epsabs=1e-14, epsrel=1e-11)
        return value

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.label}>"


class DeterministicLaw(ServiceLaw):
    """S = mean, always.

    Examples
    --------
    >>> law = DeterministicLaw(2.0)
    >>> law.sf([1.0, 2.0]).tolist(), law.log_mgf(0.5), law.theta_max
    ([1.0, 0.0], 1.0, inf)
    """

    family = "deterministic"
    theta_max = math.inf

    def __init__(self, mean: float, cv: float = 0.0, label: str = ""):
        if cv != 0:
            raise ValueError(f"a deterministic service law has cv 0, got {cv!r}")
        super().__init__(mean, 0.0, label)
        self.maximum = self.mean

    @classmethod
    def upper(cls, service, sizes, tail):
        return float(_means(service, sizes).max())

    @classmethod
    def lattice(cls, service, sizes, h, length):
        # the value is split between the two lattice points around it: the mean is exact
        pmf = np.zeros((len(sizes), length))
        overflow = 0.0
        for row, mean in zip(pmf, _means(service, sizes)):
            overflow = max(overflow, float(mean > (length - 1) * h))
            _split([mean], np.ones(1), h, length, row)
        return pmf, overflow

    def _complement(self, s, refine):
        return -np.expm1(-s * self.mean)

    def sf(self, x):
        x = np.asarray(x, dtype=float)
        return np.where(x < self.mean, 1.0, 0.0)

    def cdf(self, x):
        x = np.asarray(x, dtype=float)
        return np.where(x < self.mean, 0.0, 1.0)

    @property
    def atoms(self):
        return np.array([self.mean]), np.ones(1)

    def log_mgf(self, theta):
        return theta * self.mean

    def dlog_mgf(self, theta):
        return self.mean

    def _exp_weighted(self, theta, v):
        m = self.mean
        return np.where(v >= m, np.exp(-theta * np.maximum(v - m, 0.0)), 0.0)


class JitteredLaw(ServiceLaw):
    """S = mean * J, J a continuous unit-mean jitter law of :mod:`qmodel.jitter` (the one the
    simulator draws and the lattice laws use): its sf, cdf and isf are J's, rescaled."""

    def __init__(self, mean: float, cv: float, label: str = ""):
        super().__init__(mean, cv, label)
        self.maximum = math.inf
        self.jitter = jitter_law(self.family, self.cv)

    @classmethod
    def upper(cls, service, sizes, tail):
        return float(_means(service, sizes).max() * service.jitter_law.isf(tail))

    @classmethod
    def lattice(cls, service, sizes, h, length):
        # p[i] = F((i + 1/2) h) - F((i - 1/2) h): the mean is kept to O(h^2)
        pmf, tails = lattice_cells(service.jitter_law, _means(service, sizes), h, length)
        return pmf, max(0.0, float(tails.max()))

    def sf(self, x):
        x = np.asarray(x, dtype=float)
        return self.jitter.sf(x / self.mean)


class ExponentialLaw(JitteredLaw):
    """S ~ Exp(1/mean).

    Examples
    --------
    >>> law = ExponentialLaw(2.0)
    >>> round(float(law.sf(2.0)), 6), round(law.log_mgf(0.25), 6), law.theta_max
    (0.367879, 0.693147, 0.5)
    """

    family = "exponential"

    def __init__(self, mean: float, cv: float = 1.0, label: str = ""):
        if cv != 1:
            raise ValueError(f"an exponential service law has cv 1, got {cv!r}; for another "
                             f"cv use GammaLaw")
        super().__init__(mean, cv, label)
        self.theta_max = 1.0 / self.mean

    def _complement(self, s, refine):
        m = self.mean
        return s * m / (1.0 + s * m)

    def pdf(self, x):
        return stats.expon.pdf(x, scale=self.mean)

    def log_mgf(self, theta):
        return -math.log1p(-theta * self.mean)

    def dlog_mgf(self, theta):
        m = self.mean
        return m / (1.0 - theta * m)

    def _exp_weighted(self, theta, v):
        # mu int_0^u e^{-theta (u-x)} e^{-mu x} dx = mu u e^{-min u} phi(|theta - mu| u)
        mu = 1.0 / self.mean
        return mu * v * np.exp(-min(theta, mu) * v) * special.exprel(-abs(theta - mu) * v)


class GammaLaw(JitteredLaw):
    """S ~ Gamma(shape 1/cv², scale mean cv²).

    Examples
    --------
    >>> law = GammaLaw(2.0, 0.5)
    >>> law.shape, law.theta_max, round(law.log_mgf(0.5), 6)          # -4 log(1 - 1/4)
    (4.0, 2.0, 1.150728)
    """

    family = "gamma"

    def __init__(self, mean: float, cv: float, label: str = ""):
        super().__init__(mean, cv, label)
        self.shape = self.jitter.shape
        self.theta_max = self.shape / self.mean

    def _complement(self, s, refine):
        log_inv = self.shape * _complex_log1p(s * (self.mean / self.shape))   # -log E[exp(-sS)]
        return -np.expm1(-log_inv)

    def pdf(self, x):
        return stats.gamma.pdf(x, self.shape, scale=self.mean / self.shape)

    def log_mgf(self, theta):
        return -self.shape * math.log1p(-theta * self.mean / self.shape)

    def dlog_mgf(self, theta):
        m = self.mean
        return m / (1.0 - theta * m / self.shape)

    def _exp_weighted(self, theta, v):
        if theta >= self.theta_max:
            return super()._exp_weighted(theta, v)
        # Exponential tilting: e^{theta x} f(x) = M(theta) f_tilted(x), the tilted law a
        # gamma with the same shape and rate shape/m - theta.
        rate = self.shape / self.mean - theta
        log_k = (-theta * v + self.log_mgf(theta)
                 + stats.gamma.logcdf(v, self.shape, scale=1.0 / rate))
        return np.exp(log_k)


class LognormalLaw(JitteredLaw):
    """S = mean exp(mu + sigma Z), Z standard normal, sigma² = ln(1 + cv²), mu = -sigma²/2:
    heavy-tailed (no moment generating function); its transform is a quadrature.

    Examples
    --------
    >>> law = LognormalLaw(1.0, 0.5)
    >>> round(law.sigma, 6), law.theta_max, law.numeric_transform
    (0.472381, 0.0, True)
    """

    family = "lognormal"
    theta_max = 0.0
    transform_note = ("lognormal service transform by the trapezoidal rule in log space "
                      "(|error| < 3e-13 against 30-digit quadrature)")
    numeric_transform = True

    # Lognormal transform by the trapezoidal rule in the standard normal variable z: the
    # Gaussian mass beyond +-NORMAL_CUT is 4e-21, below anything float64 resolves.
    NORMAL_CUT = 9.5
    # Step such that the phase of exp(-s x(z)) turns by at most this many radians per step
    # where the integrand matters: about half the Nyquist limit of 2 pi. The rule converges
    # exponentially for this analytic integrand (Trefethen & Weideman 2014); 2 to 6 radians all
    # gave |error| < 3e-13 (roundoff of the large phases) against 30-digit mpmath quadrature,
    # for cv 0.05 to 6, t from 0.01 to 100 mean service times and the s that Euler uses there.
    RADIANS_PER_STEP = 3.0
    # element operations per (s, z) cell: a complex exponential and a product-sum, measured
    # at 21-24 on the development machine (cv 1.6 and 4) and rounded up
    ELEMENTS_PER_CELL = 25

    def __init__(self, mean: float, cv: float, label: str = ""):
        super().__init__(mean, cv, label)
        self.sigma, self.mu = self.jitter.sigma, self.jitter.mu

    def _complement(self, s, refine):
        """1 - E[exp(-s m J)], J = exp(mu + sigma Z), by the trapezoidal rule in z, row by row.

        Each row of s (one Euler inversion point) gets its own grid: it ends where
        exp(-Re(s) x) < e^-45 and its step follows the fastest phase rotation of exp(-s x(z))
        on it (``RADIANS_PER_STEP / refine`` radians per step).
        """
        cut, m, mu, sigma = self.NORMAL_CUT, self.mean, self.mu, self.sigma
        rows = s.reshape(-1, s.shape[-1]) if s.ndim else s.reshape(1, 1)
        om = np.empty(rows.shape, complex)
        for i, row in enumerate(rows):
            re, im = float(row.real.min()), float(np.abs(row.imag).max())
            z_hi = cut
            if re * m * math.exp(mu + sigma * cut) > 45.0:
                z_hi = (math.log(45.0 / (re * m)) - mu) / sigma
            if z_hi <= -cut:                  # the whole law sits where exp(-s x) < e^-45
                om[i] = 1.0
                continue
            x_hi = m * math.exp(mu + sigma * z_hi)
            speed = im * sigma * x_hi                     # |d phase / dz| at most
            h = min(0.05, self.RADIANS_PER_STEP / (refine * speed)) if speed > 0 else 0.05
            n = int(math.ceil((z_hi + cut) / h)) + 1
            # a predict call may evaluate the transform thousands of times (a quantile's
            # search, a cluster's many nodes): each evaluation spends from its budget
            budget.charge(budget.elements(self.ELEMENTS_PER_CELL * row.size * n),
                          "the lognormal service transform", f"{row.size * n:,} grid cells")
            z = np.linspace(-cut, z_hi, n)
            w = np.exp(-0.5 * z * z) * ((z[1] - z[0]) / math.sqrt(2.0 * math.pi))
            w[0] *= 0.5
            w[-1] *= 0.5
            sx = row[:, None] * (m * np.exp(mu + sigma * z))[None, :]
            if z_hi < cut:
                # Cut where exp(-s x) is negligible but 1 - exp(-s x) is not, so integrate the
                # transform and subtract it from 1: here Re(s) m > 45 exp(-mu - sigma cut)
                # (> 0.5 for cv <= 1), so the transform is well below 1 in modulus and the
                # subtraction loses no digits that matter.
                om[i] = 1.0 - np.exp(-sx) @ w
            else:
                om[i] = -np.expm1(-sx) @ w
        return om.reshape(s.shape)

    def pdf(self, x):
        return stats.lognorm.pdf(x, self.sigma, scale=self.mean * math.exp(self.mu))


class EmpiricalLaw(ServiceLaw):
    """S takes ``values`` (increasing, distinct) with probabilities ``probs``.

    Examples
    --------
    >>> law = EmpiricalLaw([1.0, 3.0], [0.5, 0.5])
    >>> law.mean, law.scv, law.cdf([0.5, 1.0, 3.0]).tolist()
    (2.0, 0.25, [0.0, 0.5, 1.0])
    """

    family = "empirical"
    theta_max = math.inf
    transform_note = "service transform averaged over the samples"

    def __init__(self, values, probs, label: str = ""):
        self.values = np.asarray(values, dtype=float)
        self.probs = np.asarray(probs, dtype=float)
        mean = float(np.dot(self.probs, self.values))
        second = float(np.dot(self.probs, self.values ** 2))
        scv = max(second / mean ** 2 - 1.0, 0.0)
        super().__init__(mean, math.sqrt(scv), label, scv=scv)
        self._below = np.cumsum(self.probs)              # P(S <= values[i])
        self.maximum = float(self.values[-1])

    @classmethod
    def from_service(cls, service, k, label):
        # As the simulator draws (qmodel.sim.service): the samples of the nearest measured
        # size (the smaller one on a tie), scaled by the ratio of interpolated means.
        uniq, counts = np.unique(service.scaled_samples(k), return_counts=True)
        return cls(uniq, counts / counts.sum(), label=label)

    @classmethod
    def upper(cls, service, sizes, tail):
        return float(max(s.max() for s in _empirical_samples(service, sizes)))

    @classmethod
    def lattice(cls, service, sizes, h, length):
        # each sample is split like a deterministic value
        pmf = np.zeros((len(sizes), length))
        overflow = 0.0
        for row, samples in zip(pmf, _empirical_samples(service, sizes)):
            overflow = max(overflow, float(np.mean(samples > (length - 1) * h)))
            _split(samples, np.full(samples.size, 1.0 / samples.size), h, length, row)
        return pmf, overflow

    def _complement(self, s, refine):
        flat = s.reshape(-1)
        om = np.empty(flat.size, complex)
        step = max(1, 2_000_000 // self.values.size)        # bounded memory
        for i in range(0, flat.size, step):
            om[i:i + step] = -np.expm1(-flat[i:i + step, None] * self.values[None, :]) \
                @ self.probs
        return om.reshape(s.shape)

    def sf(self, x):
        x = np.asarray(x, dtype=float)
        idx = np.searchsorted(self.values, x, side="right")       # values <= x
        below = np.where(idx > 0, self._below[np.maximum(idx - 1, 0)], 0.0)
        return np.clip(1.0 - below, 0.0, 1.0)

    def cdf(self, x):
        x = np.asarray(x, dtype=float)
        idx = np.searchsorted(self.values, x, side="right")
        return np.where(idx > 0, self._below[np.maximum(idx - 1, 0)], 0.0)

    @property
    def atoms(self):
        return self.values, self.probs

    def log_mgf(self, theta):
        top = theta * self.maximum
        if top < 1.0:     # log(1 + E[expm1]) keeps the digits of a value close to 0
            return math.log1p(float(np.dot(self.probs, np.expm1(theta * self.values))))
        return top + math.log(float(np.dot(self.probs,
                                            np.exp(theta * (self.values - self.maximum)))))

    def dlog_mgf(self, theta):
        w = self.probs * np.exp(theta * (self.values - self.maximum))
        return float(np.dot(w, self.values) / w.sum())

    def _exp_weighted(self, theta, v):
        res = np.empty(v.size)
        step = max(1, 2_000_000 // self.values.size)
        for i in range(0, v.size, step):
            d = v[i:i + step, None] - self.values[None, :]
            res[i:i + step] = np.where(d >= 0, np.exp(-theta * np.maximum(d, 0.0)),
                                       0.0) @ self.probs
        return res


SERVICE_LAWS = {law.family: law for law in (DeterministicLaw, ExponentialLaw, GammaLaw,
                                            LognormalLaw, EmpiricalLaw)}


def law_family(service) -> type[ServiceLaw]:
    """The ServiceLaw class of a ServiceTime's family (its ``jitter`` field names it).

    Examples
    --------
    >>> import qmodel as qm
    >>> law_family(qm.ServiceTime.empirical({1: [1e-3]})).__name__
    'EmpiricalLaw'
    """
    return SERVICE_LAWS[service.jitter]


def service_law(service, batch_size=1, name: str = "service") -> ServiceLaw:
    """The law of S(batch_size) from a ServiceTime, or a constant from seconds ("2ms").

    Examples
    --------
    >>> import qmodel as qm
    >>> law = service_law(qm.ServiceTime.affine(1e-3, 1e-4, jitter=("gamma", 0.5)), 8)
    >>> type(law).__name__, round(law.mean, 6), law.scv
    ('GammaLaw', 0.0018, 0.25)
    >>> service_law("2ms")
    <DeterministicLaw deterministic 0.002 s>
    """
    k = check_servers(batch_size, "batch_size")
    if isinstance(service, ServiceTime):
        label = f"S({k}) of ServiceTime({service.describe()})"
        return law_family(service).from_service(service, k, label)
    if isinstance(service, (numbers.Real, str)) and not isinstance(service, bool):
        seconds = check_duration(service, name)
        return DeterministicLaw(seconds, label=f"deterministic {seconds:g} s")
    raise ValueError(f"{name} must be a qmodel.ServiceTime (e.g. ServiceTime.affine(1e-3, "
                     f"jitter=('gamma', 0.5))) or a constant service time in seconds such as "
                     f"0.002 or '2ms', got {service!r}")
