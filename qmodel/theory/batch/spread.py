"""Probability masses over (batch size, wait on the lattice), gathered cheaply.

The tagged request's law before its batch's service is built from many small pieces: point
masses and masses spread evenly over a range of waits (a request's age uniform over an
interval). :class:`Spread` collects them and sums them once.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Spread"]


class Spread:
    """Probability masses over (batch size, wait on the lattice): points and uniform blocks.

    Uniform blocks go into a difference array, so one costs O(1) whatever its length; all adds
    are collected and summed once in :meth:`result`.
    """

    def __init__(self, B: int, length: int):
        self.B, self.length = B, length
        self.dense = np.zeros((B + 1, length))
        self._idx, self._w = [], []           # point masses, flat (k, wait) index
        self._lo, self._hi, self._per = [], [], []

    def points(self, k, idx, w):
        """Mass w at lattice point idx for batch size k (arrays broadcast together)."""
        flat = np.asarray(k) * self.length + np.minimum(np.maximum(idx, 0), self.length - 1)
        w = np.asarray(w, float)
        shape = np.broadcast(flat, w).shape
        self._idx.append(np.broadcast_to(flat, shape).ravel())
        self._w.append(np.broadcast_to(w, shape).ravel())

    def uniform(self, k, lo, hi, w):
        """Mass w spread evenly over lattice points lo..hi (inclusive)."""
        lo = np.minimum(np.maximum(lo, 0), self.length - 1)
        hi = np.minimum(np.maximum(hi, 0), self.length - 1)
        base = np.asarray(k) * (self.length + 1)
        start, stop = base + lo, base + hi + 1
        per = np.asarray(w, float) / (hi - lo + 1)
        shape = np.broadcast(start, stop, per).shape
        self._lo.append(np.broadcast_to(start, shape).ravel())
        self._hi.append(np.broadcast_to(stop, shape).ravel())
        self._per.append(np.broadcast_to(per, shape).ravel())

    def result(self) -> np.ndarray:
        size = (self.B + 1) * self.length
        out = self.dense.copy()
        if self._idx:
            out += np.bincount(np.concatenate(self._idx), np.concatenate(self._w),
                               size).reshape(self.B + 1, self.length)
        if self._lo:
            per = np.concatenate(self._per)
            n = (self.B + 1) * (self.length + 1)
            diff = (np.bincount(np.concatenate(self._lo), per, n)
                    - np.bincount(np.concatenate(self._hi), per, n))
            out += np.cumsum(diff.reshape(self.B + 1, self.length + 1), axis=1)[:, :-1]
        return out
