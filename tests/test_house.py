"""The layout's rules, checked on the source: no import circle in qmodel/, and no module that
decides anything from the prose of a result's ``method`` or ``statement`` (issue 38)."""

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1] / "qmodel"
# the fields that hold words for people; what a result is lives in structured fields
# (``accuracy.exactness``, ``accuracy.is_fallback``, ``accuracy.approximation_keys``, ...)
PROSE_FIELDS = {"method", "statement", "basis", "fallback_reason", "note", "text"}
STRING_TESTS = {"startswith", "endswith", "find", "rfind", "index", "rindex", "count",
                "partition", "rpartition", "split", "lower", "upper", "casefold", "strip"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict:
    return {_module_name(p): p for p in ROOT.rglob("*.py")}


def import_graph() -> nx.DiGraph:
    """Module -> module it imports, every import counted (inside functions too: a late
    import hides a circle, it does not remove it). ``from pkg import name`` points at
    ``pkg.name`` where that is a module, else at ``pkg``. A module's own ancestors, which
    Python imports first anyway, count only where named."""
    modules = _modules()
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                found = [f"{target}.{a.name}" if f"{target}.{a.name}" in modules else target
                         for a in node.names]
            elif isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            else:
                continue
            graph.add_edges_from((name, t) for t in found if t in modules and t != name)
    return graph


def test_the_import_graph_is_read():
    """The walk sees the imports it must (a walk that saw none would find no circle)."""
    graph = import_graph()
    assert graph.number_of_nodes() > 100 and graph.number_of_edges() > 300
    assert graph.has_edge("qmodel.cli.command", "qmodel.cli.size")
    assert graph.has_edge("qmodel.cli.size", "qmodel.cli.args")
    assert graph.has_edge("qmodel.predict", "qmodel.timevarying")
    assert graph.has_edge("qmodel.timevarying", "qmodel.stationary")
    assert graph.has_edge("qmodel.sim.run", "qmodel.sim.ensemble")


def test_no_import_circle():
    graph = import_graph()
    circles = sorted(nx.simple_cycles(graph, length_bound=12), key=len)
    assert not circles, "import circles: " + "; ".join(" -> ".join(c + c[:1])
                                                       for c in circles[:10])


def test_a_circle_is_found_where_there_is_one():
    """The check itself: a graph with a late import that closes a circle fails it."""
    graph = import_graph()
    graph.add_edge("qmodel.cli.args", "qmodel.cli.command")
    assert list(nx.simple_cycles(graph, length_bound=4))


def _prose_tests(tree) -> list:
    """(line, source) of each place that tests the words of a prose field: a string method
    on it, ``in``/``==``/``!=`` with it, or ``re`` run over it."""
    found = []

    def prose(node):
        return ((isinstance(node, ast.Attribute) and node.attr in PROSE_FIELDS)
                or (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
                    and node.slice.value in PROSE_FIELDS))

    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in STRING_TESTS and prose(node.func.value)):
            found.append(node)
        elif isinstance(node, ast.Compare) and any(
                isinstance(op, (ast.In, ast.NotIn, ast.Eq, ast.NotEq)) for op in node.ops):
            sides = [node.left, *node.comparators]
            if any(prose(s) for s in sides):
                found.append(node)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and isinstance(node.func.value, ast.Name) and node.func.value.id == "re"
              and any(prose(a) for a in node.args)):
            found.append(node)
    return [(n.lineno, ast.unparse(n)) for n in found]


def test_no_module_decides_from_prose():
    bad = []
    for name, path in _modules().items():
        for line, source in _prose_tests(ast.parse(path.read_text(encoding="utf-8"))):
            bad.append(f"{path.relative_to(ROOT.parent)}:{line}: {source}")
    assert not bad, "branches on prose (use a structured field):\n" + "\n".join(bad)


def test_prose_tests_are_found():
    """The check itself, on the shapes it must catch and one it must not."""
    caught = ["c.method.startswith('simulation')", "'fallback' in r.method",
              "r.accuracy.statement == 'x'", "re.search('lattice', r.method)",
              "rep['method'].endswith('x')"]
    for source in caught:
        assert _prose_tests(ast.parse(source)), source
    assert not _prose_tests(ast.parse("r.accuracy.exactness == 'simulation'"))
    assert not _prose_tests(ast.parse("print(f'{r.method}')"))


def test_docs_architecture_lists_every_module_once():
    """docs/architecture.md holds one line per module of qmodel/, none gone."""
    text = (ROOT.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    import re

    listed = re.findall(r"^- `([\w/]+\.py)`: \S", text, flags=re.M)
    present = sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py"))
    assert sorted(listed) == present, (sorted(set(present) - set(listed)),
                                       sorted(set(listed) - set(present)))


def test_the_public_names_stay_where_they_were():
    """Moved pieces stay importable where users found them before the house was tidied."""
    import subprocess
    import sys

    import numpy as np

    import qmodel as qm
    from qmodel.derive import main as derive_main          # noqa: F401
    from qmodel.latency import Latency
    from qmodel.predict import MixtureLatency, arrival_scv  # noqa: F401
    from qmodel.sizing.autoscale import markdown, plot_plan  # noqa: F401

    class MyLatency(Latency):        # a user's own solver, written before Latency.model
        def _cdf(self, t):
            return np.clip(t, 0.0, 1.0)

    mine = MyLatency(method="mine", accuracy=qm.Accuracy("approximation"), throughput=1.0,
                     utilization=0.5, batch_size_distribution={1: 1.0})
    assert mine.model == "my_latency"
    done = subprocess.run([sys.executable, "-m", "qmodel.derive", "--help"],
                          capture_output=True, text=True, cwd=ROOT.parent)
    assert done.returncode == 0 and "--format" in done.stdout
    import qmodel.cli.command as command

    assert type(command).__name__ == "module" and command.main is qm.cli.main
