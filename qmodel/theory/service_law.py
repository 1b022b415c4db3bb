"""Batch service-time laws S(k) as probability vectors on a time lattice.

The numeric batch models work on a lattice of step ``h``: a law is a vector ``p`` with ``p[i]``
the probability of the cell around ``i * h``. How each :class:`~qmodel.system.ServiceTime` kind
lands on the lattice:

- deterministic: the value ``x`` is split between the two lattice points around it, linearly,
  so the mean is kept exactly;
- exponential, gamma, lognormal jitter: ``p[i] = F((i + 1/2) h) - F((i - 1/2) h)`` with ``F`` the
  cdf of S(k) = mean(k) * J; the mean is kept to O(h^2);
- empirical samples: each sample (scaled for unmeasured sizes exactly as the simulator scales
  them) is split like a deterministic value.

Mass beyond the lattice's last point is put on that point, and the amount is reported so the
caller can state it.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy import special

__all__ = ["jitter_law", "unit_jitter", "lattice_cells", "service_lattice", "service_upper"]


class _Jitter:
    """A unit-mean jitter law with the few methods the lattice needs (cdf, sf, isf, mean, std).

    Written on scipy.special rather than as a frozen scipy.stats distribution: building and
    calling those costs milliseconds per law, a large share of a whole prediction.
    """

    def __init__(self, kind: str, cv: float):
        self.kind, self.cv = kind, float(cv)
        if kind == "lognormal":
            self.sigma = float(np.sqrt(np.log1p(self.cv ** 2)))
            self.mu = -self.sigma ** 2 / 2
        elif kind == "gamma":
            self.shape = 1.0 / self.cv ** 2

    def cdf(self, x):
        x = np.asarray(x, float)
        if self.kind == "exponential":
            return -np.expm1(-np.maximum(x, 0.0))
        if self.kind == "gamma":
            return special.gammainc(self.shape, self.shape * np.maximum(x, 0.0))
        with np.errstate(divide="ignore"):
            return special.ndtr((np.log(np.maximum(x, 0.0)) - self.mu) / self.sigma)

    def sf(self, x):
        x = np.asarray(x, float)
        if self.kind == "exponential":
            return np.exp(-np.maximum(x, 0.0))
        if self.kind == "gamma":
            return special.gammaincc(self.shape, self.shape * np.maximum(x, 0.0))
        with np.errstate(divide="ignore"):
            return special.ndtr(-(np.log(np.maximum(x, 0.0)) - self.mu) / self.sigma)

    def isf(self, q):
        q = np.asarray(q, float)
        if self.kind == "exponential":
            return -np.log(q)
        if self.kind == "gamma":
            return special.gammainccinv(self.shape, q) / self.shape
        return np.exp(self.mu - self.sigma * special.ndtri(q))

    def mean(self) -> float:
        return 1.0

    def std(self) -> float:
        return 1.0 if self.kind == "exponential" else self.cv


def unit_jitter(kind: str, cv: float) -> _Jitter:
    """The unit-mean law of ``kind`` ("exponential", "gamma" or "lognormal") with this cv.

    Examples
    --------
    >>> round(float(unit_jitter("gamma", 0.5).isf(0.5)), 4)          # the median
    0.918
    """
    return _Jitter(kind, cv)


def lattice_cells(law, scales, h: float, length: int):
    """Lattice laws of ``scale * J`` for each scale, J a unit-mean law from :func:`unit_jitter`.

    ``p[r, i]`` is the probability of the cell around ``i * h`` (the first cell starts at 0);
    the mass beyond the last cell is put on the last point.

    Returns
    -------
    pmf : ndarray, shape (len(scales), length)
    tails : ndarray
        The mass moved onto the last point, per scale.

    Examples
    --------
    >>> p, tails = lattice_cells(unit_jitter("exponential", 1.0), np.array([1.0]), 1.0, 3)
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


def jitter_law(service):
    """The unit-mean jitter J of a parametric ServiceTime (cdf, sf, isf, mean, std).

    Returns None for deterministic and empirical services.

    Examples
    --------
    >>> import qmodel as qm
    >>> law = jitter_law(qm.ServiceTime.affine(1e-3, jitter=("lognormal", 0.3)))
    >>> round(float(law.mean()), 12), round(float(law.std()), 12)
    (1.0, 0.3)
    >>> from scipy import stats                      # the same law as scipy's
    >>> ref = stats.lognorm(law.sigma, scale=np.exp(law.mu))
    >>> bool(np.allclose(law.cdf([0.5, 1.0, 2.0]), ref.cdf([0.5, 1.0, 2.0]), rtol=1e-12))
    True
    """
    if service.jitter in ("exponential", "gamma", "lognormal"):
        return unit_jitter(service.jitter, service.cv)
    return None


def _means(service, sizes):
    with warnings.catch_warnings():
        # Building the Node already warned about extrapolated sizes.
        warnings.simplefilter("ignore")
        return np.atleast_1d(np.asarray(service.mean(np.asarray(sizes, dtype=float)), float))


def _empirical_samples(service, sizes):
    """Scaled samples per size, the way the simulator draws them (nearest measured size)."""
    measured = dict(service.samples)
    means = _means(service, sizes)
    out = []
    for k, mean in zip(sizes, means):
        values = np.asarray(measured[service.nearest_measured(k)], float)
        out.append(values * (mean / values.mean()))
    return out


def service_upper(service, sizes, tail: float = 1e-10) -> float:
    """A time above which every S(k), k in ``sizes``, has probability below ``tail``.

    Examples
    --------
    >>> import qmodel as qm
    >>> service_upper(qm.ServiceTime.affine(1e-3, 1e-4), [1, 8])
    0.0018
    """
    means = _means(service, sizes)
    if service.jitter == "deterministic":
        return float(means.max())
    if service.jitter == "empirical":
        return float(max(s.max() for s in _empirical_samples(service, sizes)))
    return float(means.max() * jitter_law(service).isf(tail))


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
    sizes = list(sizes)
    pmf = np.zeros((len(sizes), length))
    means = _means(service, sizes)
    overflow = 0.0
    if service.jitter == "deterministic":
        for row, mean in zip(pmf, means):
            overflow = max(overflow, float(mean > (length - 1) * h))
            _split([mean], np.ones(1), h, length, row)
        return pmf, overflow
    if service.jitter == "empirical":
        for row, samples in zip(pmf, _empirical_samples(service, sizes)):
            overflow = max(overflow, float(np.mean(samples > (length - 1) * h)))
            _split(samples, np.full(samples.size, 1.0 / samples.size), h, length, row)
        return pmf, overflow
    pmf, tails = lattice_cells(jitter_law(service), means, h, length)
    return pmf, max(overflow, float(tails.max()))
