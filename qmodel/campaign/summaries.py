"""The campaigns' groups and figures: which rows form which group, and what is said of one.

The validation scripts print text summaries of their rows, :mod:`qmodel.campaign.doc_tables`
writes the docs' Markdown tables from the same stored rows, and validation/measured_errors.py
computes the measured families' table from them. All three format what this module returns,
so each group and each figure is computed in one place:

- :class:`Figures` of a list of relative errors (predicted / simulated - 1): how many, median
  and worst |error|, the signed worst, lowest and highest;
- :class:`Group`: a group's name, its rows and its figures, for each campaign's grouping
  (:func:`grid_groups`, :func:`single_instance_groups`, :func:`several_instance_groups`,
  :func:`renewal_groups`, :func:`batch_size_groups`, :func:`router_groups`);
- the error of a row where a campaign stores the two values rather than the error
  (:func:`router_error`, :func:`several_instance_error`, :func:`mean_errors`), and the errors
  a campaign log prints on its rows (:func:`printed_errors`);
- the router grid's classes (:func:`router_class`): which model answers a row, and the
  measured family it belongs to, read from the router registry's domains.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..routers import router_policy
from ..system import Cluster, Node, ServiceTime
from ..theory.batch import PASSES
from ..theory.batch.bunched import behind_router
from .grids import GRID_SERVICE

__all__ = ["Figures", "Group", "figures", "median_worst", "signed_worst", "worst_rows",
           "pooled_figures", "grid_groups", "baseline_group",
           "exact_and_numerical_group", "single_instance_groups", "HOLDOUT_MISS",
           "several_instance_error", "several_instance_groups", "renewal_groups",
           "mean_errors", "batch_size_groups", "RouterClass", "router_error", "router_class",
           "router_groups", "several_instance_cluster", "declined_behind_router",
           "printed_errors"]

# the several-instance holdout counts the nodes whose p99 misses by more than this
HOLDOUT_MISS = 0.08


# ---- figures of a list of errors ----------------------------------------------------------
def median_worst(errors) -> tuple[float, float]:
    """Median and worst |error| (or magnitude of any values, e.g. seconds).

    Examples
    --------
    >>> median_worst([0.01, -0.03, 0.02])
    (0.02, 0.03)
    """
    errors = np.abs(np.asarray(errors, float))
    return float(np.median(errors)), float(errors.max())


def signed_worst(errors) -> float:
    """The error of largest magnitude, with its sign.

    Examples
    --------
    >>> signed_worst([0.01, -0.03, 0.02])
    -0.03
    """
    errors = np.asarray(errors, float)
    return float(errors[np.argmax(np.abs(errors))])


@dataclass(frozen=True)
class Figures:
    """What a summary says of a list of relative errors.

    Attributes
    ----------
    count : int
        How many errors.
    median, worst : float
        Median and largest |error|.
    signed_worst : float
        The error of largest magnitude, with its sign.
    low, high : float
        The lowest and the highest error.
    """

    count: int
    median: float
    worst: float
    signed_worst: float
    low: float
    high: float


def figures(errors) -> Figures:
    """The :class:`Figures` of relative errors.

    Examples
    --------
    >>> f = figures([0.01, -0.03, 0.02])
    >>> f.count, f.median, f.worst, f.signed_worst, f.low, f.high
    (3, 0.02, 0.03, -0.03, -0.03, 0.02)
    """
    e = np.asarray(errors, float)
    median, worst = median_worst(e)
    return Figures(int(e.size), median, worst, signed_worst(e), float(e.min()), float(e.max()))


@dataclass(frozen=True)
class Group:
    """A group of a campaign's rows and what its summary line says of them.

    Attributes
    ----------
    name : str
        The group's name, as the summaries and the docs' tables print it.
    rows : list
        The rows that form it.
    figures : dict
        What its line shows, by name: :class:`Figures` of a quantity's errors ("p95",
        "p99", "batch", ...), shares ("in_ci": p95 and p99 inside the simulator's 99% CI
        widened by the lattice step), counts ("capped", "beyond") and the parameter the
        figures were computed with ("passes").
    """

    name: str
    rows: list
    figures: dict = field(default_factory=dict)


def worst_rows(rows, error, count: int) -> list:
    """The ``count`` rows of largest |error(row)|, largest first (ties in row order)."""
    return sorted(rows, key=lambda r: -abs(error(r)))[:count]


def pooled_figures(rows, quantiles=("p95", "p99")) -> Figures:
    """The figures of every row's errors of ``quantiles`` together (rows with ``[q]["error"]``:
    the preferred-sizes campaign's p95/p99 |error|)."""
    return figures([r[q]["error"] for r in rows for q in quantiles])


def _in_ci_share(rows, quantile: str) -> float:
    """The share of rows whose predicted ``quantile`` lies in the simulator's 99% CI widened by
    the lattice step."""
    return float(np.mean([r[quantile]["in_ci_with_lattice"] for r in rows]))


def _quantile_group(name: str, rows) -> Group:
    """A group of rows holding ``[q]["error"]`` and ``[q]["in_ci_with_lattice"]``."""
    return Group(name, rows, {"p95": figures([r["p95"]["error"] for r in rows]),
                              "p99": figures([r["p99"]["error"] for r in rows]),
                              "in_ci": tuple(_in_ci_share(rows, q) for q in ("p95", "p99"))})


def _instances(c: int) -> str:
    return f"{c} instance{'s' if c > 1 else ''}"


def _by_family(rows) -> list:
    """(family, its rows) for every answer kind of ``rows``, in alphabetical order."""
    return [(family, [r for r in rows if r["family"] == family])
            for family in sorted({r["family"] for r in rows})]


# ---- the accuracy grid and the one-instance holdout ---------------------------------------
def grid_groups(rows) -> list[Group]:
    """The accuracy grid (validation/predict_accuracy.py) by answer kind, the approximations
    also by instance count: p95/p99 figures and in-CI shares."""
    groups = []
    for family, sel in _by_family(rows):
        groups.append(_quantile_group(family, sel))
        if family == "approximation":
            for c in sorted({r["c"] for r in rows}):
                sub = [r for r in sel if r["c"] == c]
                if sub:
                    groups.append(_quantile_group(f"approximation, {_instances(c)}", sub))
    return groups


def baseline_group(rows) -> Group | None:
    """The accuracy grid's nodes on which the textbook baseline answers, with the baseline's
    p95/p99 figures (None if it answers none)."""
    sel = [r for r in rows if "p95" in r.get("baseline", {})]
    if not sel:
        return None
    return Group("baseline (Kingman/Allen-Cunneen)", sel,
                 {q: figures([r["baseline"][q] for r in sel]) for q in ("p95", "p99")})


def exact_and_numerical_group(grid_rows, holdout_rows) -> Group:
    """The accuracy grid's and the one-instance holdout's nodes answered exactly or on a
    lattice (the grid's non-approximate nodes, the holdout's numerical ones)."""
    return _quantile_group("exact and numerical",
                           [r for r in grid_rows if r["family"] != "approximation"]
                           + [r for r in holdout_rows if r["family"] == "numerical"])


def single_instance_groups(rows) -> list[Group]:
    """The one-instance holdout (validation/single_instance_holdout.py) by answer kind."""
    return [_quantile_group(family, sel) for family, sel in _by_family(rows)]


# ---- the several-instance holdout ---------------------------------------------------------
def several_instance_error(row, quantile: str, passes=PASSES) -> float:
    """The error of a several-instance holdout row's ``quantile`` ("p95" or "p99") predicted
    with ``passes`` passes (by default the shipped count)."""
    i = ("p95", "p99").index(quantile)
    return row["predicted"][str(passes)][i] / row["simulated"][i] - 1


def several_instance_groups(rows, passes) -> list[Group]:
    """The several-instance holdout (validation/multi_instance_holdout.py), all nodes and by
    instance count, each with every pass count of ``passes``: p95/p99 figures and how many
    p99 miss by more than :data:`HOLDOUT_MISS` ("beyond")."""
    nodes = [("all", rows)] + [(f"c = {c}", [r for r in rows if r["c"] == c])
                               for c in sorted({r["c"] for r in rows})]
    groups = []
    for name, sel in nodes:
        for n in passes:
            e = {q: [several_instance_error(r, q, n) for r in sel] for q in ("p95", "p99")}
            groups.append(Group(name, sel, {
                "passes": n, "p95": figures(e["p95"]), "p99": figures(e["p99"]),
                "beyond": int((np.abs(e["p99"]) > HOLDOUT_MISS).sum())}))
    return groups


# ---- renewal arrivals and the means -------------------------------------------------------
def renewal_groups(rows) -> list[Group]:
    """The renewal campaign (validation/renewal_batch.py), all nodes and by instance count and
    arrival scv: p95/p99 figures."""
    nodes = [("all", rows)] + [
        (f"{_instances(c)}, scv {scv:g}", [r for r in rows if r["c"] == c and r["scv"] == scv])
        for c in sorted({r["c"] for r in rows}) for scv in sorted({r["scv"] for r in rows})]
    return [Group(name, sel, {q: figures([r[q]["error"] for r in sel]) for q in ("p95", "p99")})
            for name, sel in nodes if sel]


def mean_errors(row) -> tuple[float, float]:
    """(mean batch size error, utilization error) of a row holding both as [predicted,
    simulated] (validation/batch_size_accuracy.py, validation/renewal_batch.py)."""
    (qb, sb), (qu, su) = row["batch"], row["utilization"]
    return qb / sb - 1, qu / su - 1


def batch_size_groups(rows) -> list[Group]:
    """The grid's batching nodes (validation/batch_size_accuracy.py) by instance count, jitter
    and delay: figures of the mean batch size and utilization errors, and how many had the
    utilization capped at 1."""
    groups = []
    for c in sorted({r["c"] for r in rows}):
        for jitter in sorted({r["jitter"] for r in rows}):
            for delay in (False, True):
                sel = [r for r in rows if r["c"] == c and r["jitter"] == jitter
                       and (r["D_over_S1"] > 0) == delay]
                if not sel:
                    continue
                batch, util = zip(*(mean_errors(r) for r in sel))
                groups.append(Group(
                    f"{_instances(c)}, {jitter}, {'with' if delay else 'no'} delay", sel,
                    {"batch": figures(batch), "utilization": figures(util),
                     "capped": sum(r["capped"] for r in sel)}))
    return groups


# ---- the router grid ----------------------------------------------------------------------
def router_error(row, quantile: str) -> float:
    """The model's error of a router-grid row's ``quantile`` ("p50", "p95" or "p99")."""
    return row[quantile]["model"] / row[quantile]["sim"] - 1


class RouterClass(NamedTuple):
    """Which model answers a router-grid row, and the measured family it falls in.

    ``in_predict``: ``qmodel.predict`` answers it (the router registry's current domain, not
    the one at run time). ``model``: for a dynamic router answered by least outstanding's
    models, "balanced" (one-request nodes) or "as round robin" (batching nodes), else None.
    ``family``: its family in qmodel.theory.measured (None: outside predict, or the random
    router's exact decomposition).
    """

    router: str
    in_predict: bool
    model: str | None
    family: str | None


def router_class(row) -> RouterClass:
    """The :class:`RouterClass` of an answered row of the router grid
    (validation/router_accuracy.py: one-instance deterministic grid nodes, Poisson arrivals).

    Examples
    --------
    >>> c = router_class({"router": "least_outstanding", "N": 8, "B": 8, "D": 0, "load": 0.7})
    >>> c.in_predict, c.model, c.family
    (True, 'as round robin', 'least_outstanding_as_round_robin')
    >>> router_class({"router": "power_of_two", "N": 4, "B": 1, "D": 0, "load": 0.9})
    RouterClass(router='power_of_two', in_predict=False, model=None, family=None)
    """
    router, N, B = row["router"], row["N"], row["B"]
    policy = router_policy(router)
    cluster = Cluster(GRID_SERVICE.node(B, row["D"]), count=N, router=router)
    in_predict = policy.unmodelled(cluster, row["load"], 1.0) is None
    if policy.static:
        return RouterClass(router, in_predict, None,
                           None if router == "random" else router)   # random: exact
    # power of d over d nodes samples them all: least outstanding's models
    as_least = policy.name == "least_outstanding" or cluster.router.choices >= N
    if not in_predict:
        return RouterClass(router, False, None, None)
    if as_least:
        model = "balanced" if B == 1 else "as round robin"
        return RouterClass(router, True, model, "least_outstanding_" + model.replace(" ", "_"))
    return RouterClass(router, True, None, "power_of_two_mean_field")


def router_groups(rows) -> list[Group]:
    """The router grid's answered rows by router and model, in the order the groups first
    appear: static routers by name; dynamic ones in or outside ``predict``'s domain, those
    answered by least outstanding's models split by their model. Figures of p99/p95/p50."""
    keyed = {}
    for r in rows:
        if "declined" not in r:
            c = router_class(r)
            keyed.setdefault((c.router, c.in_predict, c.model), []).append(r)
    groups = []
    for (router, in_predict, model), sel in keyed.items():
        name = router
        if not router_policy(router).static:
            name += " (in predict)" if in_predict else " (outside predict)"
        if model == "balanced":
            name += ", B = 1 balanced"
        elif model is not None:
            name += f", B >= {min(r['B'] for r in sel)} as round robin"
        if model is not None and router != "least_outstanding":
            name += " (N = 2: least outstanding)"
        groups.append(Group(name, sel, {q: figures([router_error(r, q) for r in sel])
                                        for q in ("p99", "p95", "p50")}))
    return groups


def several_instance_cluster(row) -> Cluster:
    """The cluster of a row of validation/several_instance_routers.py: N nodes of c
    instances, S(k) = S(1) (1 - g) + S(1) g k (lognormal with the row's cv, deterministic at
    cv 0), max_batch_size B, a delay of d S(1)."""
    s1, b = row["s1"], row["growth"] * row["s1"]
    jitter = "deterministic" if row["cv"] == 0 else ("lognormal", row["cv"])
    node = Node(ServiceTime.affine(s1 - b, b, jitter=jitter), max_batch_size=row["B"],
                max_queue_delay=row["d"] * s1, instances=row["c"])
    return Cluster(node, count=row["N"], router=row["router"])


def declined_behind_router(row) -> bool:
    """Whether ``predict`` declines a row of validation/several_instance_routers.py because
    its nodes' instances free together behind the router
    (:func:`qmodel.theory.batch.bunched.behind_router`): such rows are no family's answers.

    Examples
    --------
    >>> row = {"router": "round_robin", "N": 4, "c": 4, "B": 16, "d": 0.0, "load": 0.7,
    ...        "cv": 0.0, "growth": 0.0005, "s1": 2e-3}
    >>> declined_behind_router(row), declined_behind_router(dict(row, cv=0.2))
    (True, False)
    """
    cluster = several_instance_cluster(row)
    share = row["load"] * cluster.capacity / row["N"]
    return behind_router(cluster.nodes[0], share) is not None


# ---- campaign logs ------------------------------------------------------------------------
_ROW_ERRORS = re.compile(r"p50 ([-+][\d.]+)%\s+p95 ([-+][\d.]+)%\s+p99 ([-+][\d.]+)%")


def printed_errors(lines, keep=lambda line: True) -> np.ndarray:
    """The p50/p95/p99 errors printed on the kept rows of a campaign log (rounded to 0.1%),
    an (n, 3) array: the least-outstanding campaigns, which store no rows.

    Examples
    --------
    >>> printed_errors(["B=4 N=2  error: p50 +1.0%  p95 -2.5%  p99 +12.8%", "B=4: worst"])
    array([[ 0.01 , -0.025,  0.128]])
    """
    return np.array([[float(x) / 100 for x in m.groups()] for line in lines
                     if keep(line) and (m := _ROW_ERRORS.search(line))])
