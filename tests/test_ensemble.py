"""qmodel.Ensemble: the description of a pipeline of batching nodes (issue 23, item 1)."""

import networkx as nx
import pytest

import qmodel as qm

S = qm.ServiceTime.affine(1e-3, 1e-4)
A, B = qm.Node(S), qm.Node(S, max_batch_size=8, max_queue_delay=1e-3)
CASE = {"pre": A, "user": B, "item": B, "score": A}
EDGES = [("pre", "user"), ("pre", "item"), ("user", "score"), ("item", "score")]


def test_entries_exits_order_and_capacity():
    ens = qm.Ensemble(CASE, EDGES)
    assert ens.entries == ("pre",) and ens.exits == ("score",)
    assert ens.order.index("pre") < ens.order.index("user") < ens.order.index("score")
    assert ens.capacity == min(A.capacity, B.capacity)
    # two entries (fan-out from the input) and two exits
    split = qm.Ensemble({"a": A, "b": B, "c": A, "d": B}, [("a", "c"), ("b", "c"), ("c", "d"),
                                                           ("a", "d")])
    assert split.entries == ("a", "b") and split.exits == ("d",)
    assert qm.Ensemble({"only": A}).entries == qm.Ensemble({"only": A}).exits == ("only",)


def test_the_graph_round_trip():
    ens = qm.Ensemble(CASE, EDGES)
    g = ens.graph
    assert isinstance(g, nx.DiGraph) and g.nodes["user"]["node"] == B
    assert qm.Ensemble.from_graph(g) == ens and hash(qm.Ensemble.from_graph(g)) == hash(ens)
    g.add_edge("score", "post")                    # a copy: the ensemble is unchanged
    assert "post" not in ens.stages
    with pytest.raises(ValueError, match=r"vertices \['post'\] carry no 'node' attribute"):
        qm.Ensemble.from_graph(g)
    with pytest.raises(ValueError, match="takes a networkx DiGraph"):
        qm.Ensemble.from_graph(nx.Graph())


@pytest.mark.parametrize("stages, edges, message", [
    ({}, [], "stages must be a dict from stage name to qmodel.Node"),
    ({"a": S}, [], "stage 'a' must be a qmodel.Node, got AffineService"),
    ({"": A}, [], "stage names must be non-empty strings"),
    ({"a": A, "b": A}, [("a", "c")], r"edge \('a', 'c'\) names no stage 'c'; the stages are "
                                     r"'a', 'b'"),
    ({"a": A, "b": A}, [("a",)], r"edge \('a',\) must be a pair of stage names"),
    ({"a": A, "b": A}, "ab", "must be a list of"),
    ({"a": A}, [("a", "a")], "feeds a stage to itself"),
    ({"a": A, "b": A, "c": A}, [("a", "b"), ("b", "c"), ("c", "a")],
     r"make a cycle \(a -> b -> c -> a\)"),
])
def test_malformed_graphs_are_named(stages, edges, message):
    with pytest.raises(ValueError, match=message):
        qm.Ensemble(stages, edges)


def test_stages_without_edges_run_side_by_side():
    ens = qm.Ensemble({"a": A, "b": B})
    assert ens.entries == ens.exits == ("a", "b") and ens.edges == ()
