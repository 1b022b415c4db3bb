"""The dynamic-batching lab, predicted by the models and checked by the simulator.

The lab, a mini-Triton batcher load-tested against a one-request-at-a-time server and then
swept over ``max_batch_size``, teaches three results; it is a section of the built-in
campaigns (:func:`qmodel.campaign.grids.plan` sweeps B over ``Plan.lab_sizes``). Each result
is computed here twice, by :func:`qmodel.predict` and by :func:`qmodel.simulate`, for the same
node:

1. **Naive against dynamic batching.** ``max_batch_size`` 1 against a batching node: the largest
   sustainable throughput (capacity), the largest throughput whose p99 stays under the SLA wall,
   and p50/p99 at a common load.
2. **The sweep.** For each ``max_batch_size`` B, the node is driven at a fixed fraction of its
   own capacity (what a load test that pushes each configuration hard measures): throughput and
   p99 both grow with B.
3. **The rule.** "The largest batch whose p99 stays under the SLA wall": the largest B of the
   sweep whose predicted *and* simulated p99 are at most the wall
   (:func:`largest_under_wall`); not the B with the globally highest throughput.

Service time: S(k) = 1.8874 ms + 0.1438 ms x k (:data:`qmodel.campaign.grids.GRID_SERVICE`,
the V100 fit of Inoue 2021), with lognormal jitter of cv 0.1 (GPU kernels vary a little run
to run); max_queue_delay 1 ms; SLA wall 10 ms at p99 (for instance a 15 ms user-facing SLA
minus a 5 ms network and queueing budget).
"""

from __future__ import annotations

import time

import numpy as np

from ..predict import predict
from ..sim import simulate
from ..system import Node, ServiceTime
from .grids import GRID_SERVICE

__all__ = ["LAB", "lab_node", "lab_point", "max_rate_under_wall", "largest_under_wall",
           "lab_summary"]

# The lab's fixed choices, in seconds and requests per second (stated in the report).
LAB = {
    "base": GRID_SERVICE.base, "per_item": GRID_SERVICE.per_item,   # Inoue (2021), V100
    "jitter": ("lognormal", 0.1),
    "delay": 1e-3,
    "wall": 10e-3,
    "load": 0.8,                                    # the sweep's load, fraction of capacity
    "common_rate": 400.0,                           # 81% of the naive server's capacity
}

# Loads scanned (fractions of capacity) when searching the largest rate under the wall; the
# top stops short of 1 because a simulation that close to capacity needs very long replicas.
_SCAN = np.linspace(0.04, 0.96, 24)
_BISECTIONS = 7
# Throughputs under the wall within this fraction of the best count as tied (the bisection
# stops at 1/2^7 of a scan step, and a simulated p99 carries its own noise).
NEAR = 0.02


def lab_node(max_batch_size: int, delay: float = LAB["delay"], jitter=LAB["jitter"]) -> Node:
    """The lab's node with the given max_batch_size (1 is the naive server).

    Examples
    --------
    >>> round(lab_node(1).capacity), round(lab_node(16).capacity)
    (492, 3820)
    """
    svc = ServiceTime.affine(LAB["base"], LAB["per_item"], jitter=tuple(jitter)
                             if isinstance(jitter, list) else jitter)
    return Node(svc, max_batch_size=max_batch_size, max_queue_delay=delay)


def max_rate_under_wall(p99_at, capacity: float, wall: float, scan=_SCAN,
                        bisections: int = _BISECTIONS) -> tuple[float, bool]:
    """The largest arrival rate before p99 first crosses the wall.

    Scans the loads in ``scan`` (fractions of ``capacity``) upwards and bisects between the last
    load under the wall and the first one over it. The first crossing, not the last: p99 need
    not be monotone in the load, and an operator cannot run beyond a load that breaks the SLA.

    Parameters
    ----------
    p99_at : callable
        Rate (requests/s) to p99 (seconds).
    capacity : float
        Requests/s.
    wall : float
        The p99 budget in seconds.

    Returns
    -------
    (rate, capped) : (float, bool)
        ``rate`` 0 if even the lightest scanned load breaks the wall; ``capped`` True if no
        scanned load did (the answer is then the top of the scan, a lower bound).

    Examples
    --------
    >>> rate, capped = max_rate_under_wall(lambda r: 1e-3 / (1 - r / 100.0), 100.0, 4e-3)
    >>> round(rate, 1), capped                      # p99 = 4 ms at 75 req/s
    (75.0, False)
    """
    under = None
    for load in scan:
        if p99_at(load * capacity) > wall:
            if under is None:
                return 0.0, False
            lo, hi = under, load
            for _ in range(bisections):
                mid = 0.5 * (lo + hi)
                lo, hi = (mid, hi) if p99_at(mid * capacity) <= wall else (lo, mid)
            return float(lo * capacity), False
        under = load
    return float(scan[-1] * capacity), True


def lab_point(max_batch_size: int, *, requests: int = 400_000, seed: int = 11,
              delay: float = LAB["delay"], jitter=LAB["jitter"], load: float = LAB["load"],
              wall: float = LAB["wall"], common_rate: float = LAB["common_rate"],
              search: bool = True) -> dict:
    """One B of the sweep: theory and simulation side by side (seconds, requests/s).

    Parameters
    ----------
    max_batch_size : int
    requests, seed : int
        Of each simulation.
    delay, jitter : float, str or (str, float)
        The node's max_queue_delay and service-time jitter.
    load : float
        The sweep's load, a fraction of this node's capacity.
    wall : float
        SLA wall on p99, seconds.
    common_rate : float
        The load (requests/s) at which every B is also compared (skipped where it exceeds
        capacity).
    search : bool
        Also find the largest rate under the wall, by theory and by simulation (the slow part).

    Returns
    -------
    dict
        Plain numbers, ready for JSON.
    """
    node = lab_node(max_batch_size, delay, jitter)
    cap = node.capacity
    t0 = time.perf_counter()
    out = {"B": max_batch_size, "capacity": cap, "wall": wall, "load": load,
           "rate": load * cap}
    for name, rate in (("sweep", load * cap), ("common", common_rate)):
        if rate >= cap:
            out[name] = None
            continue
        pred = predict(node, rate=rate)
        sim = simulate(node, rate=rate, requests=requests, seed=seed)
        out[name] = {
            "rate": rate,
            "throughput": {"predicted": pred.throughput, "simulated": sim.throughput},
            "mean_batch_size": {"predicted": pred.mean_batch_size,
                                "simulated": sim.mean_batch_size},
            "p50": {"predicted": pred.p50, "simulated": sim.p50},
            "p99": {"predicted": pred.p99, "simulated": sim.p99,
                    "ci99": list(sim.ci(0.99, level=0.99))},
        }
    if search:
        rate_p, capped_p = max_rate_under_wall(lambda r: predict(node, rate=r).p99, cap, wall)
        rate_s, capped_s = max_rate_under_wall(
            lambda r: simulate(node, rate=r, requests=requests, seed=seed).p99, cap, wall)
        check = None
        if rate_p > 0:
            # the simulator's p99 at the rate the theory says just meets the wall
            sim = simulate(node, rate=rate_p, requests=requests, seed=seed)
            check = {"p99": sim.p99, "ci99": list(sim.ci(0.99, level=0.99))}
        out["under_wall"] = {"predicted": rate_p, "predicted_capped": capped_p,
                             "simulated": rate_s, "simulated_capped": capped_s,
                             "simulated_at_predicted": check}
    out["seconds"] = time.perf_counter() - t0
    return out


def largest_under_wall(points, wall: float | None = None, by: str = "both"):
    """The lab's rule: the largest B whose p99 at the sweep's load stays under the wall.

    Parameters
    ----------
    points : iterable of dict
        From :func:`lab_point` (only ``B``, ``wall`` and ``sweep`` are read).
    wall : float, optional
        Seconds; default each point's own ``wall``.
    by : {"both", "predicted", "simulated"}
        Which p99 must stay under the wall; "both" asks it of theory and simulation.

    Returns
    -------
    int or None
        None if no B qualifies.

    Examples
    --------
    >>> pts = [{"B": b, "wall": 0.01, "sweep": {"p99": {"predicted": p, "simulated": s}}}
    ...        for b, p, s in ((1, 0.02, 0.02), (8, 0.006, 0.007), (16, 0.009, 0.0105),
    ...                        (32, 0.012, 0.013))]
    >>> largest_under_wall(pts), largest_under_wall(pts, by="predicted")
    (8, 16)
    """
    if by not in ("both", "predicted", "simulated"):
        raise ValueError(f"by={by!r}: use 'both', 'predicted' or 'simulated'")
    kinds = ("predicted", "simulated") if by == "both" else (by,)
    ok = [p["B"] for p in points if p.get("sweep") is not None
          and all(p["sweep"]["p99"][k] <= (p["wall"] if wall is None else wall) for k in kinds)]
    return max(ok) if ok else None


def lab_summary(points, wall: float = LAB["wall"]) -> dict:
    """The lab's headline numbers from its sweep points.

    Returns the rule's pick (by theory, simulation and both), the B with the highest throughput
    at the sweep's load (what maximising QPS alone would pick), the B with the most throughput
    under the wall (theory and simulation), and naive-against-pick ratios.
    """
    by_b = {p["B"]: p for p in points}
    out = {"wall": wall,
           "pick": largest_under_wall(points, wall),
           "pick_predicted": largest_under_wall(points, wall, by="predicted"),
           "pick_simulated": largest_under_wall(points, wall, by="simulated")}
    swept = [p for p in points if p.get("sweep")]
    if swept:
        out["highest_throughput"] = max(swept, key=lambda p: p["sweep"]["throughput"]
                                        ["simulated"])["B"]
    searched = [p for p in points if p.get("under_wall")]
    for kind in ("predicted", "simulated"):
        if searched:
            best = max(searched, key=lambda p: p["under_wall"][kind])
            out[f"sweet_spot_{kind}"] = best["B"]
            # sizes this close to the best are a tie within the search's own resolution
            top = best["under_wall"][kind]
            out[f"near_best_{kind}"] = [p["B"] for p in searched
                                        if p["under_wall"][kind] >= (1 - NEAR) * top]
    naive, pick = by_b.get(1), by_b.get(out["pick"])
    if naive and pick:
        out["capacity_ratio"] = pick["capacity"] / naive["capacity"]
        if naive.get("under_wall") and pick.get("under_wall"):
            for kind in ("predicted", "simulated"):
                base = naive["under_wall"][kind]
                out[f"under_wall_ratio_{kind}"] = (pick["under_wall"][kind] / base
                                                   if base > 0 else float("inf"))
    return out
