"""The package's shape (issue 11): small modules and functions, no import cycle between
subpackages, no isinstance on topology classes outside tpusim/topology/."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "tpusim"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60
TOPOLOGY_CLASSES = {"Torus", "Boardfly", "ClosFabric"}


def _modules():
    return sorted(PACKAGE.rglob("*.py"))


def _unit(path: Path) -> str:
    """The layer a module belongs to: its subpackage, or the top-level module name."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return parts[0]


def test_no_module_over_500_lines():
    big = [(str(p), n) for p in _modules() if (n := len(p.read_text().splitlines())) > 500]
    assert big == []


def test_no_function_over_60_lines():
    long = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.name}:{node.name} ({lines})")
    assert long == []


def test_no_isinstance_on_topology_classes_outside_topology():
    found = []
    for path in _modules():
        if _unit(path) == "topology":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "isinstance":
                names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
                if names & TOPOLOGY_CLASSES:
                    found.append(f"{path}:{node.lineno}")
    assert found == []


def _import_graph() -> dict[str, set[str]]:
    """unit -> units it imports (module-level and function-level imports alike)."""
    graph: dict[str, set[str]] = {}
    for path in _modules():
        unit = _unit(path)
        edges = graph.setdefault(unit, set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                parts = name.split(".")
                if parts[0] == "tpusim" and len(parts) > 1 and parts[1] != unit:
                    edges.add(parts[1])
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_cycle_finder_finds_a_planted_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_between_subpackages():
    assert _cycle(_import_graph()) is None
