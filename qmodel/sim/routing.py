"""Routers: which node each request goes to.

Static routers (random, round robin) ignore node state, so the assignment of every request is
drawn up front and the nodes decouple. Dynamic routers (least outstanding, power of d) look at
each node's outstanding requests (queued + in service) when the request arrives.
"""

from __future__ import annotations

import numpy as np

__all__ = ["static_assignment", "split_by_node", "choose_node", "tie_bits"]

# Ties are broken by 16 random low bits under the outstanding count: tied nodes are chosen
# uniformly, except that two tied nodes drawing the same 16 bits (probability 2**-16) fall to
# the lower index, a bias far below any Monte Carlo error. Cheaper than a float per node.
TIE_BITS = 16


def static_assignment(bk, router, nodes: int, shape):
    """Node index of every request for a static router, shape ``shape`` = (replicas, n)."""
    xp, rng = bk.xp, bk.rng
    if nodes == 1:
        return xp.zeros(shape, dtype=np.int64)
    if router.policy == "random":
        if router.weights is None:
            return rng.integers(0, nodes, shape)
        cum = xp.asarray(np.cumsum(router.weights)[:-1])
        return xp.searchsorted(cum, rng.random(shape), side="right")
    if router.policy == "round_robin":
        start = rng.integers(0, nodes, (shape[0], 1))
        return (xp.arange(shape[1])[None, :] + start) % nodes
    raise AssertionError(f"{router.policy} is not a static router")


def split_by_node(bk, times, assign, nodes: int, pad: int):
    """Regroup replica streams into one row per (replica, node), keeping time order.

    Parameters
    ----------
    times : array (replicas, n)
        Arrival times, +inf padded.
    assign : int array (replicas, n)
        Node of each request.
    pad : int
        Extra +inf columns at the end of every row (look-ahead room for the engine).

    Returns
    -------
    node_times : array (replicas * nodes, m + pad)
        Row r * nodes + i holds node i's arrivals in replica r.
    counts : int array (replicas * nodes,)
    """
    xp = bk.xp
    replicas, n = times.shape
    groups = replicas * nodes
    valid = xp.isfinite(times)
    key = xp.where(valid, xp.arange(replicas)[:, None] * nodes + assign, groups).ravel()
    if bk.name == "numpy":
        order = np.argsort(key, kind="stable")
    else:  # CuPy's sorts are stable radix sorts
        order = xp.argsort(key)
    key_sorted = key[order]
    counts_all = xp.bincount(key, minlength=groups + 1)
    start = xp.cumsum(counts_all) - counts_all
    pos = xp.arange(key.size) - start[key_sorted]
    counts = counts_all[:groups]
    width = int(counts.max()) + pad
    out = xp.full((groups + 1, width), xp.inf)
    keep = key_sorted < groups
    out[key_sorted[keep], pos[keep]] = times.ravel()[order][keep]
    return out[:groups], counts


def tie_bits(bk, router, steps, lanes, nodes):
    """Random tie-breakers for ``steps`` routing decisions, drawn in one call."""
    width = nodes if router.policy == "least_outstanding" else router.choices
    return bk.random_bits16((steps, lanes, width))


def choose_node(bk, router, outstanding, ties):
    """Node chosen in each lane by a dynamic router.

    Parameters
    ----------
    outstanding : int array (lanes, nodes)
        Queued + in-service requests per node.
    ties : int array (lanes, nodes) for least_outstanding, (lanes, d) for power_of_d
        Random 16-bit tie-breakers from :func:`tie_bits`.
    """
    xp, rng = bk.xp, bk.rng
    lanes, nodes = outstanding.shape
    if router.policy == "least_outstanding":
        return xp.argmin((outstanding << TIE_BITS) | ties, axis=1)
    if router.policy == "power_of_d":
        d = router.choices
        # Floyd's algorithm: a uniformly random d-subset of the nodes per lane in d draws.
        chosen = xp.empty((lanes, d), dtype=np.int64)
        for i, j in enumerate(range(nodes - d, nodes)):
            t = rng.integers(0, j + 1, lanes)
            if i:
                t = xp.where((chosen[:, :i] == t[:, None]).any(axis=1), j, t)
            chosen[:, i] = t
        seen = xp.take_along_axis(outstanding, chosen, axis=1)
        return chosen[xp.arange(lanes), xp.argmin((seen << TIE_BITS) | ties, axis=1)]
    raise AssertionError(f"{router.policy} is not a dynamic router")
