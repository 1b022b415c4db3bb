"""Drawing batch service times S(k) for many lanes at once.

Each node kind ("type") has its own ServiceTime. A draw takes, per lane, a type and a batch size
and returns one service time. Size 0 (a finished lane) draws 0.
"""

from __future__ import annotations

import warnings

import numpy as np

__all__ = ["ServiceSampler"]


class ServiceSampler:
    """Vectorised S(k) draws for a list of ServiceTime objects (one per node type).

    Parameters
    ----------
    bk : Backend
        Array namespace and random generator.
    services : list of ServiceTime
        One per node type; types are indices into this list.
    bmax : int
        Largest batch size any type can dispatch.
    """

    def __init__(self, bk, services, bmax: int):
        self.bk = bk
        self.xp = bk.xp
        self.bmax = bmax
        self.width = bmax + 1
        sizes = np.arange(1, bmax + 1)
        means = np.zeros((len(services), self.width))
        with warnings.catch_warnings():
            # The Node already warned about extrapolated sizes when it was built.
            warnings.simplefilter("ignore")
            for t, s in enumerate(services):
                means[t, 1:] = s.mean(sizes)
        self.families = [s.jitter for s in services]
        self.cvs = [s.cv for s in services]
        self.homogeneous = len(set(zip(self.families, map(str, self.cvs)))) == 1
        self.mean_flat = self.xp.asarray(means.ravel())
        self._empirical = None
        if "empirical" in self.families:
            self._empirical = self._empirical_tables(services, means)

    # ------------------------------------------------------------------------------------
    def sample(self, types, sizes):
        """Service times for lanes of the given types (int array or 0) and batch sizes."""
        xp = self.xp
        idx = sizes if isinstance(types, int) and types == 0 else types * self.width + sizes
        mean = self.mean_flat[idx]
        if self.homogeneous:
            family, cv = self.families[0], self.cvs[0]
            if family == "deterministic":
                return mean
            if family == "empirical":
                return self._empirical_draw(idx)
            return mean * self._jitter(family, cv, sizes.shape)
        out = mean
        for t, (family, cv) in enumerate(zip(self.families, self.cvs)):
            mine = types == t
            if family == "deterministic":
                continue
            if family == "empirical":
                draw = self._empirical_draw(idx)
            else:
                draw = mean * self._jitter(family, cv, sizes.shape)
            out = xp.where(mine, draw, out)
        return out

    def _jitter(self, family, cv, shape):
        """Unit-mean multiplicative jitter with coefficient of variation cv."""
        rng, xp = self.bk.rng, self.xp
        if family == "exponential":
            return rng.standard_exponential(shape)
        if family == "gamma":
            shape_k = 1.0 / cv ** 2
            return rng.standard_gamma(shape_k, shape) / shape_k
        if family == "lognormal":
            sigma2 = float(np.log1p(cv ** 2))
            return xp.exp(rng.standard_normal(shape) * np.sqrt(sigma2) - sigma2 / 2)
        raise AssertionError(family)

    # ------------------------------------------------------------------------------------
    def _empirical_tables(self, services, means):
        """Flat pool of measured samples with per-(type, size) offset, count and scale."""
        pools, offset, count, scale = [], np.zeros(means.shape, np.int64), \
            np.ones(means.shape, np.int64), np.zeros(means.shape)
        start = 0
        for t, s in enumerate(services):
            if s.kind != "empirical":
                continue
            base_of = {}
            for k, values in s.samples:
                pools.append(np.asarray(values))
                base_of[k] = (start, len(values), float(np.mean(values)))
                start += len(values)
            for k in range(1, self.bmax + 1):
                o, n, m = base_of[s.nearest_measured(k)]
                offset[t, k], count[t, k], scale[t, k] = o, n, means[t, k] / m
        xp = self.xp
        return (xp.asarray(np.concatenate(pools)), xp.asarray(offset.ravel()),
                xp.asarray(count.ravel()), xp.asarray(scale.ravel()))

    def _empirical_draw(self, idx):
        pool, offset, count, scale = self._empirical
        u = self.bk.rng.random(idx.shape)
        pick = offset[idx] + (u * count[idx]).astype(np.int64)
        return pool[pick] * scale[idx]
