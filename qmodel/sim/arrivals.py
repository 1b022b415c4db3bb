"""Arrival times for independent replications ("replicas") of the whole system.

Each replica gets its own stream; row r of the returned array holds replica r's arrival times in
increasing order, padded with +inf where a replica has fewer arrivals than the widest one.
"""

from __future__ import annotations

import numpy as np

from ..system import Poisson, Renewal, Trace

__all__ = ["replica_arrivals"]


def replica_arrivals(bk, arrivals, replicas: int, per_replica: int, pad: int = 0):
    """Arrival times (replicas, n + pad) and the number of real arrivals in each row.

    Parameters
    ----------
    bk : Backend
    arrivals : Poisson, Renewal or Trace
    replicas : int
        Independent replications. A Trace is cut into this many consecutive segments.
    per_replica : int
        Arrivals per replica (for a Trace: ignored, the segments share the trace).
    pad : int
        Extra +inf columns at the end of each row (look-ahead room for the engines).
    """
    xp, rng = bk.xp, bk.rng
    shape = (replicas, per_replica)
    if isinstance(arrivals, Trace):
        t = arrivals.times
        cuts = np.linspace(0, t.size, replicas + 1).astype(np.int64)
        counts = np.diff(cuts)
        out = np.full((replicas, counts.max() + pad), np.inf)
        for r in range(replicas):
            out[r, :counts[r]] = t[cuts[r]:cuts[r + 1]]
        return xp.asarray(out), xp.asarray(counts)
    mean_gap = 1.0 / arrivals.rate
    # Gaps are drawn in float32 (relative resolution 6e-8, independent between gaps) and
    # accumulated in float64, where absolute times need the precision.
    if isinstance(arrivals, Poisson) or arrivals.scv == 1.0:
        gaps = rng.standard_exponential(shape, dtype=np.float32)
        gaps *= np.float32(mean_gap)
    elif arrivals.scv == 0.0:
        # Deterministic spacing; a random phase keeps replicas distinct.
        gaps = xp.full(shape, mean_gap)
        gaps[:, 0] = rng.random(replicas) * mean_gap
    else:
        assert isinstance(arrivals, Renewal)
        k = 1.0 / arrivals.scv
        gaps = rng.standard_gamma(k, shape, dtype=np.float32)
        gaps *= np.float32(mean_gap / k)
    out = xp.full((replicas, per_replica + pad), xp.inf)
    xp.cumsum(gaps, axis=1, dtype=np.float64, out=out[:, :per_replica])
    return out, xp.full(replicas, per_replica, dtype=np.int64)
