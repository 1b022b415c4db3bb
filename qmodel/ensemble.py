"""Ensembles: a pipeline of batching nodes, as Triton's ensemble scheduler runs them.

An :class:`Ensemble` is a directed acyclic graph of stages, each a :class:`qmodel.Node` with
its own service law, batcher and instances. A request enters every stage without upstream;
a stage with several downstreams sends the request to all of them at once (fan-out); a stage
with several upstreams starts the request when the last of them has finished (fan-in); the
request is done when every stage without downstream has finished. This is what Triton's
``ensemble_scheduling`` steps do: a step runs as soon as all the tensors it consumes exist.

The graph is held as a networkx ``DiGraph`` (:attr:`Ensemble.graph`, each vertex carrying its
Node as the ``"node"`` attribute), which is also how one is built from a graph
(:meth:`Ensemble.from_graph`).

Examples
--------
>>> import qmodel as qm
>>> s = qm.ServiceTime.affine(1e-3, 1e-4)
>>> ens = qm.Ensemble({"pre": qm.Node(s), "user": qm.Node(s, max_batch_size=8),
...                    "item": qm.Node(s, max_batch_size=8), "score": qm.Node(s)},
...                   [("pre", "user"), ("pre", "item"), ("user", "score"),
...                    ("item", "score")])
>>> ens.entries, ens.exits, ens.order
(('pre',), ('score',), ('pre', 'item', 'user', 'score'))
>>> round(ens.capacity)
909
"""

from __future__ import annotations

from collections.abc import Mapping

import networkx as nx

from .checks import check_below_capacity, positive_rate
from .system import Node

__all__ = ["Ensemble"]


class Ensemble:
    """A pipeline of batching nodes: ``stages`` (name -> Node) joined by ``edges``
    (upstream, downstream).

    Parameters
    ----------
    stages : mapping of str to Node
        Each stage's node (its own service law, batching knobs and instances).
    edges : sequence of (str, str)
        Which stage feeds which. Stages without upstream take the request as it arrives;
        the request is done when all stages without downstream are. Stages joined by no
        edge run side by side on every request (two models reading the ensemble's input).

    Raises
    ------
    ValueError
        Naming the stage or edge: no stages, a stage that is not a Node or has a finite
        queue, an edge naming an unknown stage (an input nobody produces), a stage fed by
        itself, or a cycle.
    """

    def __init__(self, stages: Mapping, edges=()):
        if not isinstance(stages, Mapping) or not stages:
            raise ValueError("Ensemble(stages, edges): stages must be a dict from stage name to "
                             "qmodel.Node, e.g. {'pre': node_a, 'model': node_b}")
        graph = nx.DiGraph()
        for name, node in stages.items():
            if not isinstance(name, str) or not name:
                raise ValueError(f"Ensemble stage names must be non-empty strings, got "
                                 f"{name!r}")
            if not isinstance(node, Node):
                raise ValueError(f"Ensemble stage {name!r} must be a qmodel.Node, got "
                                 f"{type(node).__name__}")
            if node.max_queue_size:
                raise ValueError(f"Ensemble stage {name!r} has max_queue_size="
                                 f"{node.max_queue_size}: a request rejected midway through a "
                                 "pipeline is not modelled; set max_queue_size=0 on its "
                                 "stages")
            graph.add_node(name, node=node)
        if isinstance(edges, (str, bytes, Mapping)):
            raise ValueError(f"Ensemble edges must be a list of (upstream, downstream) stage "
                             f"names, got {edges!r}")
        for edge in edges:
            if (not isinstance(edge, (tuple, list)) or len(edge) != 2
                    or not all(isinstance(x, str) for x in edge)):
                raise ValueError(f"Ensemble edge {edge!r} must be a pair of stage names "
                                 f"(upstream, downstream)")
            up, down = edge
            for name in edge:
                if name not in stages:
                    raise ValueError(f"Ensemble edge ({up!r}, {down!r}) names no stage "
                                     f"{name!r}; the stages are {', '.join(map(repr, stages))}")
            if up == down:
                raise ValueError(f"Ensemble edge ({up!r}, {down!r}) feeds a stage to itself")
            graph.add_edge(up, down)
        try:
            cycle = nx.find_cycle(graph)
        except nx.NetworkXNoCycle:
            cycle = None
        if cycle:
            path = " -> ".join([u for u, _ in cycle] + [cycle[0][0]])
            raise ValueError(f"Ensemble edges make a cycle ({path}): a request would never "
                             f"finish; an ensemble is a directed acyclic graph")
        self._graph = graph
        self.stages = dict(stages)
        self.edges = tuple((str(u), str(v)) for u, v in graph.edges)

    @classmethod
    def from_graph(cls, graph) -> "Ensemble":
        """An ensemble from a networkx DiGraph whose vertices carry their Node as "node".

        Examples
        --------
        >>> import networkx as nx, qmodel as qm
        >>> g = nx.DiGraph()
        >>> g.add_node("a", node=qm.Node(qm.ServiceTime.affine(1e-3)))
        >>> g.add_node("b", node=qm.Node(qm.ServiceTime.affine(2e-3)))
        >>> g.add_edge("a", "b")
        >>> qm.Ensemble.from_graph(g).order
        ('a', 'b')
        """
        if not isinstance(graph, nx.DiGraph):
            raise ValueError(f"Ensemble.from_graph takes a networkx DiGraph, got "
                             f"{type(graph).__name__}")
        missing = [v for v, data in graph.nodes(data=True) if "node" not in data]
        if missing:
            raise ValueError(f"Ensemble.from_graph: vertices {missing} carry no 'node' "
                             f"attribute (their qmodel.Node): G.add_node(name, node=...)")
        return cls({v: data["node"] for v, data in graph.nodes(data=True)},
                   list(graph.edges))

    @property
    def graph(self) -> nx.DiGraph:
        """A copy of the stage graph, each vertex carrying its Node as "node"."""
        return self._graph.copy()

    @property
    def entries(self) -> tuple:
        """Stages without upstream, in :attr:`order`."""
        return tuple(v for v in self.order if self._graph.in_degree(v) == 0)

    @property
    def exits(self) -> tuple:
        """Stages without downstream, in :attr:`order`."""
        return tuple(v for v in self.order if self._graph.out_degree(v) == 0)

    @property
    def order(self) -> tuple:
        """The stages in a topological order (every stage after its upstreams; ties by
        name)."""
        return tuple(nx.lexicographical_topological_sort(self._graph))

    @property
    def capacity(self) -> float:
        """Requests per second the slowest stage sustains (each request visits every stage
        once)."""
        return min(node.capacity for node in self.stages.values())

    @property
    def instances(self) -> int:
        """Instances over all stages (what a pod runs)."""
        return sum(node.instances for node in self.stages.values())

    @property
    def bottleneck(self) -> str:
        """The stage with the least capacity (the first in :attr:`order` on a tie)."""
        return min(self.order, key=lambda name: self.stages[name].capacity)

    def check_stable(self, rate: float) -> None:
        """Raise UnstableError naming the bottleneck stage if ``rate`` reaches its capacity.

        Examples
        --------
        >>> import qmodel as qm
        >>> s = qm.ServiceTime.affine(1e-3)
        >>> ens = qm.Ensemble({"a": qm.Node(s), "b": qm.Node(s, instances=2)}, [("a", "b")])
        >>> ens.check_stable(1200.0)
        Traceback (most recent call last):
        ...
        qmodel.checks.UnstableError: arrival rate 1200 req/s is 1.2 times the capacity 1000 req/s of ensemble stage 'a' (Node(B=1, delay=0ms, instances=1, S(k)=1 ms + 0 ms x k)) (load 1.2 >= 1): queues grow without bound. Lower rate below 1000 req/s, or give stage 'a' more instances or a larger max_batch_size.
        """
        rate = positive_rate(rate)
        name = self.bottleneck
        node = self.stages[name]
        check_below_capacity(rate, node.capacity, f"ensemble stage {name!r} "
                             f"({node.describe()})", f"give stage {name!r} more instances or a "
                             "larger max_batch_size")

    def describe(self) -> str:
        body = ", ".join(f"{name}: {self.stages[name].describe()}" for name in self.order)
        links = ", ".join(f"{u}->{v}" for u, v in sorted(self.edges))
        return f"Ensemble({body}; {links or 'no edges'})"

    def __repr__(self) -> str:
        return self.describe()

    def __eq__(self, other) -> bool:
        return (isinstance(other, Ensemble) and self.stages == other.stages
                and sorted(self.edges) == sorted(other.edges))

    def __hash__(self) -> int:
        return hash((tuple(sorted(self.stages.items(), key=lambda kv: kv[0])),
                     tuple(sorted(self.edges))))
