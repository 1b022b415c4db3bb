"""Which router wins? The same nodes and load under each routing policy, side by side.

:func:`compare_routers` predicts (and, on request, simulates) p50/p95/p99 of one cluster under
every router, with the mean batch size and utilization that explain the difference: a router
that spreads requests evenly (round robin) smooths each node's arrivals, one that follows the
queues (least outstanding, power of two) keeps them short, and either can starve batches.
Routers the theory does not model yet are simulated when ``requests`` is given, and reported as
not predicted otherwise, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from .latency import Latency
from .predict import predict
from .routers import COMPARED_ROUTERS, router_policy
from .sim import simulate as run_simulation
from .system import Cluster, Node

__all__ = ["RouterResult", "compare_routers", "router_table"]


@dataclass(frozen=True)
class RouterResult:
    """One router's line of a comparison.

    Attributes
    ----------
    router : str
    predicted : Latency or None
        None where the theory does not model this router (see ``note``).
    simulated : Latency or None
        Only when the comparison ran the simulator.
    note : str
        What shapes this router's latency, or why it was not predicted.
    """

    router: str
    predicted: Latency | None
    simulated: Latency | None
    note: str

    @property
    def best(self) -> Latency | None:
        """The prediction if there is one, else the simulation."""
        return self.predicted if self.predicted is not None else self.simulated


def compare_routers(node: Node, count: int, rate: float, routers=COMPARED_ROUTERS, *,
                    requests: int | None = None, seed: int = 1) -> list[RouterResult]:
    """Latency of ``count`` copies of ``node`` at total ``rate`` under each router.

    Parameters
    ----------
    node : Node
        The node every router spreads requests over.
    count : int
        N, the number of nodes (at least 1).
    rate : float
        Total Poisson arrival rate, requests per second.
    routers : sequence of str
        Router names as :class:`~qmodel.system.Cluster` takes them; by default one per policy
        (:data:`qmodel.routers.COMPARED_ROUTERS`).
    requests : int, optional
        Also simulate each router with this many requests (and use the simulation where the
        theory has no model yet).
    seed : int
        Simulator seed.

    Returns
    -------
    list of RouterResult
        In the order of ``routers``.

    Examples
    --------
    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(2e-3, 0.2e-3), max_batch_size=8)
    >>> rows = compare_routers(node, 4, rate=0.8 * 4 * node.capacity,
    ...                        routers=("random", "round_robin"))
    >>> [(r.router, round(r.predicted.p99 * 1e3, 1)) for r in rows]
    [('random', 9.5), ('round_robin', 7.0)]
    """
    if not isinstance(node, Node):
        raise ValueError(f"compare_routers takes one qmodel.Node to copy, got "
                         f"{type(node).__name__}")
    out = []
    for router in routers:
        cluster = Cluster(node, count=count, router=router)
        note = router_policy(router).summary
        try:
            predicted = predict(cluster, rate=rate, fallback="raise")
        except NotImplementedError as err:
            predicted, note = None, f"not predicted: {err}"
        simulated = None
        if requests:
            simulated = run_simulation(cluster, rate=rate, requests=requests, seed=seed)
        out.append(RouterResult(router, predicted, simulated, note))
    return out


def router_table(rows: list[RouterResult]) -> str:
    """The comparison as a text table (ms), with the winner and the reason per router."""
    if not rows:
        raise ValueError("router_table needs at least one router's result")
    simulated = any(r.simulated is not None for r in rows)
    head = f"{'router':<19}{'p50':>9}{'p95':>9}{'p99':>9}  {'batch':>6}{'util':>6}  source"
    lines = [head + ("      sim p99" if simulated else ""), "-" * (len(head) + 8)]
    ranked = []
    for r in rows:
        res = r.best
        if res is None:
            lines.append(f"{r.router:<19}{'-':>9}{'-':>9}{'-':>9}  {'':>6}{'':>6}  {r.note}")
            continue
        source = "predicted" if r.predicted is not None else "simulated"
        line = (f"{r.router:<19}{res.p50 * 1e3:>9.3f}{res.p95 * 1e3:>9.3f}{res.p99 * 1e3:>9.3f}"
                f"  {res.mean_batch_size:>6.2f}{res.utilization:>6.2f}  {source:<9}")
        if simulated:
            line += (f"  {r.simulated.p99 * 1e3:>9.3f}" if r.simulated is not None else
                     f"  {'-':>9}")
        lines.append(line)
        ranked.append((res.p99, r.router, r.simulated))
    lines.append("")
    if ranked:
        # rank by one kind of number: the simulation when every router has one (a model's
        # error can exceed the gap between routers), else the best available
        by_sim = all(sim is not None for _, _, sim in ranked)
        shown = {name: round((sim.p99 if by_sim else p99) * 1e3, 3) for p99, name, sim in ranked}
        best_p99 = min(shown.values())
        best = " and ".join(name for name, value in shown.items() if value == best_p99)
        lines.append(f"lowest p99: {best} ({best_p99:.3f} ms, "
                     f"{'simulated' if by_sim else 'as shown'})")
    lines.append("why:")
    lines += [f"  {r.router}: {r.note}" for r in rows if r.best is not None and r.note]
    return "\n".join(lines)
