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
    largest : list of int
        The largest batch each type dispatches (its max_batch_size); the tables span the
        largest over the types, and a type's entries beyond its own are never drawn (its law
        need not be defined there: a table measured at size 1 only, in a cluster beside
        nodes of larger batches).
    """

    def __init__(self, bk, services, largest):
        self.bk = bk
        self.xp = bk.xp
        self.largest = list(largest)
        self.bmax = max(self.largest)
        self.width = self.bmax + 1
        means = np.zeros((len(services), self.width))
        with warnings.catch_warnings():
            # The Node already warned about extrapolated sizes when it was built.
            warnings.simplefilter("ignore")
            for t, (s, B) in enumerate(zip(services, self.largest)):
                means[t, 1:B + 1] = s.mean(np.arange(1, B + 1))
        self.families = [s.jitter for s in services]
        self.cvs = [s.cv for s in services]
        self.laws = [s.jitter_law for s in services]       # None: empirical samples
        self.homogeneous = len(set(zip(self.families, map(str, self.cvs)))) == 1
        self.mean_flat = self.xp.asarray(means.ravel())
        self._empirical = None
        if any(law is None for law in self.laws):
            self._empirical = self._empirical_tables(services, means)

    # ------------------------------------------------------------------------------------
    def sample(self, types, sizes):
        """Service times for lanes of the given types (int array or 0) and batch sizes."""
        xp = self.xp
        idx = sizes if isinstance(types, int) and types == 0 else types * self.width + sizes
        mean = self.mean_flat[idx]
        if self.homogeneous:
            return self._draw(self.laws[0], mean, idx)
        out = mean
        for t, law in enumerate(self.laws):
            if law is None or law.random:
                out = xp.where(types == t, self._draw(law, mean, idx), out)
        return out

    def _draw(self, law, mean, idx):
        """S(k) for every entry: the mean times a jitter draw, or an empirical sample."""
        if law is None:
            return self._empirical_draw(idx)
        if not law.random:
            return mean
        return mean * law.sample(self.xp, self.bk.rng, idx.shape)

    # ------------------------------------------------------------------------------------
    def _empirical_tables(self, services, means):
        """Flat pool of measured samples with per-(type, size) offset, count and scale."""
        pools, offset, count, scale = [], np.zeros(means.shape, np.int64), \
            np.ones(means.shape, np.int64), np.zeros(means.shape)
        start = 0
        for t, s in enumerate(services):
            if s.jitter_law is not None:
                continue
            base_of = {}
            for k, values in s.samples:
                pools.append(np.asarray(values))
                base_of[k] = (start, len(values), float(np.mean(values)))
                start += len(values)
            for k in range(1, self.largest[t] + 1):
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
