"""The stationary law of a banded Markov chain, solved with LAPACK's banded LU.

The chain of dispatch records (:mod:`.chain`) steps its queue down by at most a batch per
dispatch and up by a blocking's arrivals, so with its states numbered by queue length its
transition matrix lies in a band. :class:`BandedChain` gathers the transitions straight into
band storage and solves the balance equations there.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import blas, lapack

from .. import budget

__all__ = ["BandedChain"]


class BandedChain:
    """A Markov chain's transitions gathered straight into LAPACK band storage, and its
    stationary law.

    The balance equations pi (T - I) = 0 are solved as a banded system (LAPACK gbsv, LU with
    partial pivoting) with the states numbered by ``index`` (state -> row of the system; -1
    for states left out, which keep probability 0). The batch chain's queue steps down by at
    most a batch per dispatch and up by up to a service's arrivals, so the matrix lies in a
    band; numbered from the longest queue down, the narrow side (the step down) is below the
    diagonal, which keeps the LU's fill to the band (measured on the
    benchmarks/predict_speed.py grid: 2-6x faster than SuperLU on the same system in natural
    order, same answers to 1e-11).

    Transitions come as triplets (:meth:`add`) or as a block whose destination depends on
    the queue length n = m + x alone (:meth:`add_block`): the long-queue part of the chain,
    which holds most of the entries, goes into the band with one bincount when small, else
    one slice per arrival count x, with no triplet lists to build, concatenate and sort into
    place. A transition from or to a state left out is a programming error and raises.
    """

    SMALL_BLOCK = 20_000      # entries up to which a block goes in with one bincount

    def __init__(self, index: np.ndarray, model: str = "the chain"):
        self.index = np.asarray(index)
        self.size = int(self.index.max()) + 1
        self.triplets = []        # (rows i, columns j, values) of the system, T' entry (i, j)
        self.blocks = []          # (j per m, i per n, values, n_min)
        self.lo, self.hi = 0, 0   # extremes of i - j
        self.model = model        # its name in the budget's messages

    @staticmethod
    def _check(i, j):
        if (i.size and i.min() < 0) or (j.size and j.min() < 0):
            raise ValueError("a transition from or to a state left out of the banded system")

    def _extent(self, diff):
        if diff.size:
            self.lo, self.hi = min(self.lo, int(diff.min())), max(self.hi, int(diff.max()))

    def add(self, frm, to, vals):
        """T[frm, to] += vals (arrays broadcast together)."""
        frm, to, vals = (a.ravel() for a in np.broadcast_arrays(frm, to, vals))
        i, j = self.index[to], self.index[frm]
        self._check(i, j)
        self._extent(i - j)
        self.triplets.append((i, j, np.asarray(vals, float)))

    def add_block(self, frm, to_of_n, vals, n_min: int):
        """T[frm[m - 1], to_of_n[m + x]] += vals[m - 1, x] for m = 1..len(frm), x < J, and
        m + x >= n_min; ``vals`` is (len(frm), J), or (J,) when it does not depend on m."""
        j = self.index[frm]
        J = vals.shape[-1]
        i_of_n = self.index[to_of_n[:len(frm) + J]]
        self._check(i_of_n[1:], j)
        # i - j over the entries, as a strided view over m (no copy) less j
        window = np.lib.stride_tricks.sliding_window_view(i_of_n, J)[1:len(frm) + 1]
        top = min(max(n_min - 1, 0), len(frm))      # rows with some m + x < n_min
        n = np.arange(1, top + 1)[:, None] + np.arange(J)[None, :]
        self._extent((window[:top] - j[:top, None])[n >= n_min])
        if top < len(frm):
            self._extent(np.concatenate([window[top:].min(axis=1) - j[top:],
                                         window[top:].max(axis=1) - j[top:]]))
        self.blocks.append((j, i_of_n, vals, n_min))

    @staticmethod
    def _entries(block):
        """A block's entries as (row i, column j, value) of T' in the system's numbering."""
        j, i_of_n, vals, n_min = block
        N, J = len(j), vals.shape[-1]
        n = np.arange(1, N + 1)[:, None] + np.arange(J)[None, :]
        on = n >= n_min
        return (i_of_n[n][on], np.broadcast_to(j[:, None], on.shape)[on],
                np.broadcast_to(vals, on.shape)[on])

    def transitions(self):
        """All transitions as (row i, column j, value) of T' in the system's numbering, the
        blocks expanded (for checks: the solve writes the large blocks into the band
        directly)."""
        parts = list(self.triplets) + [self._entries(block) for block in self.blocks]
        return tuple(np.concatenate(z) for z in zip(*parts))

    def stationary(self) -> np.ndarray:
        """pi over the states (0 for those left out). One balance equation is redundant; it is
        replaced by a normalisation over the states that its row of the band reaches, so the
        band stays intact. That needs those states to carry stationary mass; where they carry
        none (transient states, e.g. an overloaded finite queue that never empties) the
        system is singular or nearly so and the solve is garbage. So each solve is checked by
        its residual max |pi T - pi| (1e-9 of the largest probability), and a failed one is
        retried with the row of its most likely state, then with rows a quarter window apart.
        """
        size = self.size
        kl, ku = max(self.hi, 1), max(-self.lo, 1)
        height = 2 * kl + ku + 1                        # gbsv's storage: kl more rows for the fill
        # (T - I)' in band storage: entry (i, j) at [kl + ku + i - j, j]; the triplets and
        # the small blocks (one bincount beats J slices) go in together
        parts, large = list(self.triplets), []
        for block in self.blocks:
            if len(block[0]) * block[2].shape[-1] > self.SMALL_BLOCK:
                large.append(block)
            else:
                parts.append(self._entries(block))
        # in LAPACK's (column-major) order, so that neither the solve's copy nor the
        # residual's product needs another
        if parts:
            i, j, v = (np.concatenate(z) for z in zip(*parts))
            band = np.bincount(j * height + kl + ku + i - j, v, height * size)
        else:
            band = np.zeros(height * size)
        band = band.reshape(size, height).T
        for j, i_of_n, vals, n_min in large:
            N, J = len(j), vals.shape[-1]
            for x in range(J):                     # m = m_lo..N: distinct columns j, no clash
                m_lo = max(1, n_min - x)
                if m_lo > N:
                    continue
                cols = j[m_lo - 1:]
                band[kl + ku + i_of_n[m_lo + x:N + x + 1] - cols, cols] += (
                    vals[m_lo - 1:, x] if vals.ndim == 2 else vals[x])
        band[kl + ku] -= 1.0
        live = self.index >= 0

        def solve(row):
            """pi (system order) with balance equation ``row`` replaced by sum(pi[window]) =
            1, the window being every column that row has in the band, and whether it
            balances."""
            window = np.arange(max(row - kl, 0), min(row + ku + 1, size))
            ab = band.copy(order="F")
            ab[kl + ku + row - window, window] = 1.0
            rhs = np.zeros(size)
            rhs[row] = 1.0
            _, _, x, info = lapack.dgbsv(kl, ku, ab, rhs, overwrite_ab=True, overwrite_b=True)
            del ab                                      # the band's size: free it at once
            x = np.clip(x, 0.0, None)
            if info != 0 or not x.sum() > 0:
                return None, False                      # singular: the window holds no mass
            x = x / x.sum()
            # (T - I)' x, the band whole (its first kl rows, the solve's room for the fill,
            # are zero diagonals above: no copy); the wrapper wants at least as many rows as
            # the band, and the rows beyond the system's are zero in it
            rows = max(size, height)
            residual = np.abs(blas.dgbmv(rows, size, kl, kl + ku, 1.0, band, x)[:size]).max()
            return x, bool(residual <= 1e-9 * x.max())

        # the row of the chain's first state; if that fails, the row of the state the failed
        # solve put most mass on, then rows a quarter window apart until one balances
        x, ok = solve(size - 1)
        retries = [int(np.argmax(x))] if x is not None else []
        retries += list(range(size - 1, -1, -max(1, (kl + ku + 1) // 4)))[1:]
        for row in retries:
            if ok:
                break
            # the first solve is in the chain's estimate; the retries are not
            budget.charge(budget.flops(2.0 * size * kl * (kl + ku)), self.model,
                          "another solve of its balance equations (the last one did not "
                          "balance)")
            x, ok = solve(row)
        if not ok:
            raise ArithmeticError("the batch chain's balance equations could not be solved "
                                  "with any normalisation tried")
        pi = np.zeros(self.index.size)
        pi[live] = x[self.index[live]]
        return pi
