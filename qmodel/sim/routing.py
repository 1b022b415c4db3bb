"""Routers: which node each request goes to.

Static routers (random, round robin) ignore node state, so the assignment of every request is
drawn up front and the nodes decouple. Dynamic routers (least outstanding, power of d) look at
each node's outstanding requests (queued + in service) when the request arrives. What each
policy draws is its own (:mod:`qmodel.routers`); this module applies it to the engines' arrays.
"""

from __future__ import annotations

import numpy as np

__all__ = ["static_assignment", "split_by_node", "choose_node", "tie_bits"]

def static_assignment(bk, router, nodes: int, shape):
    """Node index of every request for a static router, shape ``shape`` = (replicas, n)."""
    if nodes == 1:
        return bk.xp.zeros(shape, dtype=np.int64)
    return router.kind.assign(router, bk.xp, bk.rng, nodes, shape)


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


def tie_bits(bk, router, steps, replicas, nodes):
    """Random tie-breakers for ``steps`` routing decisions, drawn in one call."""
    return bk.random_bits16((steps, replicas, router.kind.tie_width(router, nodes)))


def choose_node(bk, router, outstanding, ties):
    """Node chosen in each replica by a dynamic router (:meth:`RouterPolicy.choose`).

    Parameters
    ----------
    outstanding : int array (replicas, nodes)
        Queued + in-service requests per node.
    ties : int array
        Random 16-bit tie-breakers from :func:`tie_bits`.
    """
    return router.kind.choose(router, bk.xp, bk.rng, outstanding, ties)
