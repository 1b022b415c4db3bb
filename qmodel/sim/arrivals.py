"""Arrival times for independent replications ("replicas") of the whole system.

Each replica gets its own stream; row r of the returned array holds replica r's arrival times in
increasing order, padded with +inf where a replica has fewer arrivals than the widest one. The
replica's measured window starts at a random phase and the stream runs on past it by a
cool-down (:mod:`qmodel.sim.window`).
"""

from __future__ import annotations

import numpy as np

from ..system import Poisson, Renewal, Trace

__all__ = ["replica_arrivals"]


def replica_arrivals(bk, arrivals, replicas: int, per_replica: int, pad: int = 0,
                     cool: int = 0, phase: int = 1, requests: int | None = None):
    """Arrival times of every replica, and where its measured window lies among them.

    Parameters
    ----------
    bk : Backend
    arrivals : Poisson, Renewal or Trace
    replicas : int
        Independent replications. A Trace is cut into this many consecutive segments.
    per_replica : int
        Arrivals per replica in its window, warm-up included (for a Trace: ignored, the
        segments share the trace).
    pad : int
        Extra +inf columns at the end of each row (look-ahead room for the engines).
    cool : int
        Arrivals each replica continues with after its window (the cool-down). A Trace
        segment continues with the arrivals that follow it in the trace, as many as there
        are up to ``cool``: the last segment of a whole trace has none.
    phase : int
        Each replica's window starts after a uniformly random number of arrivals from 0 to
        ``phase - 1`` (not for a Trace, whose windows are its segments).
    requests : int, optional
        For a Trace: the first ``requests`` arrivals are cut into segments (default all);
        the rest is only cool-down.

    Returns
    -------
    times : array (replicas, width + pad)
    start : int array (replicas,)
        Index of the first arrival of each replica's window.
    counts : int array (replicas,)
        Arrivals in the window (warm-up included): it ends at ``start + counts - 1``.
    totals : int array (replicas,)
        All real arrivals of the row, random phase and cool-down included: at least
        ``cool`` follow each window.

    Examples
    --------
    >>> import numpy as np
    >>> import qmodel as qm
    >>> from qmodel.sim.backend import get_backend
    >>> t, start, counts, totals = replica_arrivals(
    ...     get_backend("numpy"), qm.Trace(np.arange(7.0)), 2, 0, pad=1, cool=2, requests=6)
    >>> t.tolist()          # segments [0, 1, 2] and [3, 4, 5], each with its successors
    [[0.0, 1.0, 2.0, 3.0, 4.0, inf], [3.0, 4.0, 5.0, 6.0, inf, inf]]
    >>> start.tolist(), counts.tolist(), totals.tolist()
    ([0, 0], [3, 3], [5, 4])
    """
    xp = bk.xp
    if isinstance(arrivals, Trace):
        t = arrivals.times
        used = t.size if requests is None else requests
        cuts = np.linspace(0, used, replicas + 1).astype(np.int64)
        counts = np.diff(cuts)
        totals = np.minimum(cuts[1:] + cool, t.size) - cuts[:-1]
        out = np.full((replicas, totals.max() + pad), np.inf)
        for r in range(replicas):
            out[r, :totals[r]] = t[cuts[r]:cuts[r] + totals[r]]
        return (xp.asarray(out), xp.zeros(replicas, dtype=np.int64), xp.asarray(counts),
                xp.asarray(totals))
    extra = phase - 1 + cool
    out = xp.full((replicas, per_replica + extra + pad), xp.inf)
    # What follows the first per_replica arrivals (and the phase) is drawn after them, so
    # they are the same whatever the cool-down and the phase.
    _cumulative_gaps(bk, arrivals, (replicas, per_replica), out[:, :per_replica])
    counts = xp.full(replicas, per_replica, dtype=np.int64)
    if extra:
        tail = out[:, per_replica:per_replica + extra]
        _cumulative_gaps(bk, arrivals, (replicas, extra), tail, first=False)
        tail += out[:, per_replica - 1:per_replica]
    start = (bk.rng.integers(0, phase, replicas, dtype=np.int64) if phase > 1
             else xp.zeros(replicas, dtype=np.int64))
    # Every row is served to its end, so a replica whose window starts early cools down on
    # up to phase - 1 more arrivals: rows of one length keep the engines' fast paths.
    return out, start, counts, counts + extra


def _cumulative_gaps(bk, arrivals, shape, out, first=True):
    """Write the running sums of ``shape`` interarrival gaps of ``arrivals`` into ``out``;
    ``first``: the first gap of deterministic spacing is a random phase, else a whole gap."""
    xp, rng = bk.xp, bk.rng
    mean_gap = 1.0 / arrivals.rate
    # Gaps are drawn in float32 (relative resolution 6e-8, independent between gaps) and
    # accumulated in float64, where absolute times need the precision.
    if isinstance(arrivals, Poisson) or arrivals.scv == 1.0:
        gaps = rng.standard_exponential(shape, dtype=np.float32)
        gaps *= np.float32(mean_gap)
    elif arrivals.scv == 0.0:
        # Deterministic spacing; a random phase keeps replicas distinct.
        gaps = xp.full(shape, mean_gap)
        if first:
            gaps[:, 0] = rng.random(shape[0]) * mean_gap
    else:
        assert isinstance(arrivals, Renewal)
        k = 1.0 / arrivals.scv
        gaps = rng.standard_gamma(k, shape, dtype=np.float32)
        gaps *= np.float32(mean_gap / k)
    xp.cumsum(gaps, axis=1, dtype=np.float64, out=out)
