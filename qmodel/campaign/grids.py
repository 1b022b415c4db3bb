"""The named grids of the validation campaigns: their service times, nodes and loads.

Every campaign of the project, ``qmodel validate`` and the scripts in validation/ alike, takes
its nodes from here, so that a grid is written once and a node of one campaign is the same
node in every other. Two affine service families cover them:

- :data:`GRID_SERVICE`, S(k) = 1.8874 ms + 0.1438 ms x k, the V100 fit of Inoue (2021), with
  lognormal jitter of cv 0.3: the issue-3 grid (:func:`issue3_grid`, and the built-in
  campaigns of :func:`plan`), the router grid (:func:`router_grid`) and the renewal-arrival
  grid (:func:`renewal_grid`);
- :data:`HOLDOUT_SERVICE`, S(k) = 4 ms + 0.4 ms x k, with lognormal jitter of cv 0.2: the
  holdouts (:func:`multi_instance_holdout`, :func:`single_instance_holdout`), nodes the
  issue-3 grid does not hold, on which the models' accuracy is measured a second time.

A grid is a list of plain tuples (a jitter name, max_batch_size B, max_queue_delay D as a
multiple of S(1), instances c, load, ...) in the order the campaigns run and store them;
:meth:`ServiceFamily.node` turns one into a :class:`qmodel.Node` and :func:`grid_config` into a
campaign :class:`~qmodel.campaign.configs.Config`. The delay is a multiple of S(1) so that one
grid means the same thing for any service time.

Examples
--------
>>> node = GRID_SERVICE.node(8, d=0.5, c=2, jitter="lognormal")
>>> node.max_batch_size, node.instances, round(node.max_queue_delay * 1e3, 4)
(8, 2, 1.0156)
>>> len(issue3_grid()), len(multi_instance_holdout()), len(single_instance_holdout())
(420, 108, 108)
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ..routers import COMPARED_ROUTERS
from ..system import Node, ServiceTime
from .configs import Config, parse_config

__all__ = ["ServiceFamily", "GRID_SERVICE", "HOLDOUT_SERVICE", "JITTERS", "LOADS",
           "QUICK_LOADS", "ROUTERS", "batch_grid", "issue3_grid", "multi_instance_holdout",
           "single_instance_holdout", "router_grid", "renewal_grid", "grid_config", "Plan",
           "plan", "ROUTER_NODE"]


@dataclass(frozen=True)
class ServiceFamily:
    """An affine service time S(k) = base + per_item x k and the jitters a grid gives it.

    Parameters
    ----------
    base, per_item : float
        Seconds.
    cv : float
        The coefficient of variation of the "lognormal" jitter.
    source : str
        Where the numbers come from.
    """

    base: float
    per_item: float
    cv: float
    source: str = ""

    @property
    def s1(self) -> float:
        """S(1), the unit of the grids' max_queue_delay (seconds)."""
        return self.base + self.per_item

    def service(self, jitter: str = "deterministic") -> ServiceTime:
        """The service time with ``jitter`` "deterministic" or "lognormal" (cv ``self.cv``)."""
        if jitter not in JITTERS:
            raise ValueError(f"jitter={jitter!r}: the grids use {' or '.join(JITTERS)}")
        return ServiceTime.affine(self.base, self.per_item, jitter=(
            "deterministic" if jitter == "deterministic" else ("lognormal", self.cv)))

    def node(self, B: int, d: float = 0.0, c: int = 1, jitter: str = "deterministic",
             preferred: tuple = ()) -> Node:
        """The node with max_batch_size ``B``, max_queue_delay ``d`` x S(1), ``c`` instances.

        ``preferred`` are its preferred batch sizes (none: Triton's default, B only).
        """
        return Node(self.service(jitter), max_batch_size=B, max_queue_delay=d * self.s1,
                    preferred_batch_sizes=tuple(preferred), instances=c)


GRID_SERVICE = ServiceFamily(1.8874e-3, 0.1438e-3, cv=0.3, source="Inoue (2021), V100 fit")
HOLDOUT_SERVICE = ServiceFamily(4e-3, 0.4e-3, cv=0.2, source="the holdouts' own")

JITTERS = ("deterministic", "lognormal")
# Loads of the issue-3 grid, fractions of capacity (quick: three of them)
LOADS = (0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95)
QUICK_LOADS = (0.3, 0.7, 0.9)
# the routers the router grid measures: one per policy (qmodel.routers)
ROUTERS = COMPARED_ROUTERS


def batch_grid(loads, delays=(0.0, 0.5, 2.0), instances=(1, 2, 4), sizes=(1, 4, 8, 32),
               jitters=JITTERS) -> list[tuple]:
    """(jitter, B, D/S(1), c, load) over the given values, B = 1 with D = 0 only.

    With one request per batch the delay never binds, so B = 1 takes no other delay.
    """
    return [(jitter, B, d, c, load) for jitter in jitters for B in sizes
            for d in ((0.0,) if B == 1 else delays) for c in instances for load in loads]


def issue3_grid(quick: bool = False) -> list[tuple]:
    """The issue-3 grid of :data:`GRID_SERVICE` nodes: (jitter, B, D/S(1), c, load).

    B in {1, 4, 8, 32}; D in {0, 0.5, 2} x S(1); c in {1, 2, 4}; :data:`LOADS` (``quick``:
    :data:`QUICK_LOADS`); deterministic and lognormal (cv 0.3) service: 420 configurations,
    180 quick.

    Examples
    --------
    >>> issue3_grid()[0], len(issue3_grid(quick=True))
    (('deterministic', 1, 0.0, 1, 0.1), 180)
    """
    return batch_grid(QUICK_LOADS if quick else LOADS)


def multi_instance_holdout() -> list[tuple]:
    """The several-instance holdout of :data:`HOLDOUT_SERVICE` nodes: (B, c, D/S(1), load, jitter).

    B in {2, 16, 64}, c in {2, 3, 8}, D in {0, 1} x S(1), loads 0.5, 0.8 and 0.95,
    deterministic and lognormal (cv 0.2) service: 108 nodes.
    """
    return list(itertools.product((2, 16, 64), (2, 3, 8), (0.0, 1.0), (0.5, 0.8, 0.95),
                                  JITTERS))


def single_instance_holdout() -> list[tuple]:
    """The one-instance holdout of :data:`HOLDOUT_SERVICE` nodes: (B, D/S(1), preferred, load,
    jitter).

    B in {2, 16, 64}, D in {0, 0.5, 2} x S(1), preferred sizes "B" (Triton's default) or
    "B/2,B", loads 0.5, 0.8 and 0.95, deterministic and lognormal (cv 0.2) service: 108 nodes.
    """
    return list(itertools.product((2, 16, 64), (0.0, 0.5, 2.0), ("B", "B/2,B"),
                                  (0.5, 0.8, 0.95), JITTERS))


def router_grid(quick: bool = False) -> list[tuple]:
    """The router grid (issue 4): (router, N, B, D/S(1), load) of deterministic grid nodes.

    N in {2, 4, 8, 32, 128} nodes of one instance each; the four :data:`ROUTERS`; B in
    {1, 8, 32}; D in {0, 1} x S(1) (B = 1: 0 only); loads 0.3 to 0.95 of the cluster's
    capacity. ``quick``: N in {2, 8, 32, 128}, loads 0.3, 0.7 and 0.9.
    """
    nodes = (2, 8, 32, 128) if quick else (2, 4, 8, 32, 128)
    loads = (0.3, 0.7, 0.9) if quick else (0.3, 0.5, 0.7, 0.8, 0.9, 0.95)
    return [(router, N, B, d, load)
            for router in ("power_of_two", "least_outstanding", "round_robin", "random")
            for N in nodes for B in (1, 8, 32) for d in ((0.0,) if B == 1 else (0.0, 1.0))
            for load in loads]


def renewal_grid(quick: bool = False) -> list[tuple]:
    """The renewal-arrival grid: (jitter, B, D/S(1), c, arrival scv, load) of grid nodes.

    B in {4, 16}, D in {0, 1} x S(1), c in {1, 2}, gamma interarrival times of scv 0.5 and 2,
    loads 0.5, 0.8 and 0.9 (``quick``: 0.8), deterministic and lognormal (cv 0.3) service: 96
    nodes.
    """
    return [(jitter, B, d, c, scv, load)
            for jitter in JITTERS for B in (4, 16) for d in (0.0, 1.0)
            for c in (1, 2) for scv in (0.5, 2.0)
            for load in ((0.8,) if quick else (0.5, 0.8, 0.9))]


def grid_config(jitter: str, B: int, d: float, c: int, load: float, nodes: int = 1,
                router: str | None = None) -> Config:
    """A campaign configuration of a :data:`GRID_SERVICE` node.

    Parameters
    ----------
    jitter : {"deterministic", "lognormal"}
        Lognormal has cv 0.3.
    B, c : int
        max_batch_size and instances.
    d : float
        max_queue_delay as a multiple of S(1).
    load : float
        Fraction of capacity.
    nodes, router
        A cluster of ``nodes`` copies behind ``router`` (nodes > 1).

    Examples
    --------
    >>> grid_config("lognormal", 8, 0.5, 2, 0.7).name
    'logn B=8 D=0.5xS1 c=2 load=0.70'
    """
    svc = GRID_SERVICE
    entry = {"service": {"base": svc.base, "per_item": svc.per_item,
                         "jitter": "deterministic" if jitter == "deterministic"
                         else f"lognormal:{svc.cv:g}"},
             "max_batch_size": B, "max_queue_delay": d * svc.s1, "instances": c, "load": load}
    if nodes > 1:
        entry["cluster"] = {"nodes": nodes, "router": router or "random"}
    tag = "det" if jitter == "deterministic" else "logn"
    name = f"{tag} B={B} D={d:g}xS1 c={c} load={load:.2f}"
    if nodes > 1:
        name = f"{router} N={nodes} {name}"
    return parse_config({"name": name, **entry}, name)


@dataclass(frozen=True)
class Plan:
    """What a built-in campaign runs: configurations plus the report's extra sections."""

    level: str
    configs: list
    router_loads: tuple = ()
    router_nodes: int = 8
    curve_loads: tuple = ()
    curve_slices: tuple = ()          # (jitter, B, d, c) theory lines for throughput vs p99
    lab_sizes: tuple = ()


# The router comparison's node: (jitter, B, D/S(1), c). B = 8, no delay (the dynamic-router
# model covers that node), lognormal cv 0.3 jitter; Plan.router_nodes of them.
ROUTER_NODE = ("lognormal", 8, 0.0, 1)


def plan(level: str = "quick") -> Plan:
    """The built-in campaigns of ``qmodel validate``.

    ``quick`` (a few minutes on 2 cores): B in {1, 4, 8, 32}, D in {0, 2} x S(1), c in {1, 2},
    load in {0.3, 0.5, 0.7, 0.9}, deterministic and lognormal (cv 0.3) service; routers at
    loads 0.5, 0.7, 0.9; the lab. ``full``: the issue-3 grid (:func:`issue3_grid`), routers at
    five loads, the lab.

    Examples
    --------
    >>> len(plan("quick").configs), len(plan("full").configs)
    (112, 420)
    """
    if level == "quick":
        ds = (0.0, 2.0)
        cases = batch_grid((0.3, 0.5, 0.7, 0.9), delays=ds, instances=(1, 2))
        router_loads = (0.5, 0.7, 0.9)
    elif level == "full":
        ds = (0.0, 0.5, 2.0)
        cases = issue3_grid()
        router_loads = (0.3, 0.5, 0.7, 0.8, 0.9)
    else:
        raise ValueError(f"level={level!r}: use 'quick' or 'full'")
    slices = tuple((j, B, d, 1) for j in JITTERS for d in ds
                   for B in (1, 4, 8, 32) if not (B == 1 and d > 0))
    return Plan(level, [grid_config(*case) for case in cases], router_loads=router_loads,
                curve_loads=tuple(np.round(np.linspace(0.05, 0.95, 19), 3).tolist()) + (0.97,),
                curve_slices=slices, lab_sizes=(1, 2, 4, 8, 16, 32, 64))
