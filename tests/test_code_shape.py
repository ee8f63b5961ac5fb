"""The package's shape (issues 11, 25 and 35): small modules and functions met without
``# fmt: skip``, layers that import only the layers below them (every import form:
``import tpusim.x``, ``from tpusim import x``, relative imports, ``import_module``
strings), no import cycle between the modules of one package, no isinstance on
topology classes outside tpusim/topology/, and no ``Any`` in the run path, the engine
or the study layer."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "tpusim"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 50
TOPOLOGY_CLASSES = {"Torus", "Boardfly", "ClosFabric"}

#: The layers, lowest first: a unit (a subpackage or a top-level module) imports only
#: units of lower layers (and itself). The README's architecture picture is drawn from
#: this list (tools/layers_figure.py).
LAYERS: list[tuple[str, ...]] = [
    ("__init__", "errors", "later", "units", "vocabulary"),
    ("registry",),
    ("config",),
    ("hardware", "topology"),
    ("network",),
    ("collectives",),
    ("program",),
    ("compile",),
    ("results",),
    ("engine",),
    ("session",),
    ("serving",),
    ("workloads",),
    ("planner", "validation"),
    ("report",),
    ("study",),
    ("api",),
    ("cli",),
    ("__main__",),
]
RANK = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}

#: The run path: scenario -> point set -> executor -> records; no ``Any`` in it.
RUN_PATH = (
    "study/scenario.py",
    "study/pointset.py",
    "study/runner.py",
    "study/points.py",
    "study/executors.py",
    "study/workers.py",
)


def _modules():
    return sorted(PACKAGE.rglob("*.py"))


def _unit(path: Path) -> str:
    """The layer a module belongs to: its subpackage, or the top-level module name."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return parts[0]


def _rel(path: Path) -> str:
    return str(path.relative_to(PACKAGE))


def test_no_module_over_400_lines():
    big = {_rel(p) for p in _modules() if len(p.read_text().splitlines()) > MAX_MODULE_LINES}
    assert big == set()


def test_no_function_over_50_lines():
    long = set()
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
            ):
                long.add(f"{_rel(path)}:{node.name}")
    assert long == set()


def test_no_fmt_skip():
    found = {_rel(p) for p in _modules() if "fmt: skip" in p.read_text()}
    assert found == set()


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


def _imported(path: Path, node: ast.AST) -> list[str]:
    """Dotted names of the tpusim modules (or module attributes) ``node`` imports."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            here = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)[:-1]
            base = here[: len(here) - (node.level - 1)]
            module = ".".join([*base, *([node.module] if node.module else [])])
        else:
            module = node.module or ""
        return [f"{module}.{a.name}" for a in node.names]
    if (
        isinstance(node, ast.Call)
        and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
        and node.args
        and isinstance(node.args[0], ast.Constant | ast.JoinedStr)
    ):
        first = node.args[0]
        text = first.value if isinstance(first, ast.Constant) else first.values[0].value
        return [str(text).rstrip(".")]
    return []


def _target_unit(name: str) -> str | None:
    """The unit a dotted import lands in: ``tpusim.x.y`` -> x; ``tpusim.name`` -> name if
    it is a module or subpackage, else the package root (``__init__``)."""
    parts = name.split(".")
    if parts[0] != "tpusim":
        return None
    if len(parts) == 1:
        return "__init__"
    head = parts[1]
    if (PACKAGE / head).is_dir() or (PACKAGE / f"{head}.py").is_file():
        return head
    return "__init__"


def _edges() -> dict[tuple[str, str], list[str]]:
    """(unit, imported unit) -> where, for every import between different units."""
    edges: dict[tuple[str, str], list[str]] = {}
    for path in _modules():
        unit = _unit(path)
        for node in ast.walk(ast.parse(path.read_text())):
            for name in _imported(path, node):
                target = _target_unit(name)
                if target is not None and target != unit:
                    edges.setdefault((unit, target), []).append(f"{_rel(path)}:{node.lineno}")
    return edges


def test_the_import_finder_sees_every_form(tmp_path):
    tree = ast.parse(
        "import tpusim.config\nfrom tpusim import report\nfrom .. import serving\n"
        "from ..engine import Simulation\nimportlib.import_module('tpusim.study')\n"
        "import_module(f'tpusim.cli.{name}')\n"
    )
    path = PACKAGE / "workloads" / "example.py"
    found = [n for node in ast.walk(tree) for n in _imported(path, node)]
    units = {_target_unit(n) for n in found}
    assert units == {"config", "report", "serving", "engine", "study", "cli"}


def test_every_unit_has_a_layer():
    assert {_unit(p) for p in _modules()} - set(RANK) == set()


#: Upward imports made on purpose: the front door's names (``tpusim.run``,
#: ``tpusim.Session``, ``tpusim.load_system``...) on the root package, imported on first
#: use only (PEP 562 ``__getattr__``; the imports the root names are for type checkers).
LAZY_UPWARD = {"__init__->api", "__init__->config", "__init__->errors", "__init__->session"}


def test_no_upward_import():
    upward = {f"{a}->{b}" for (a, b) in _edges() if RANK[b] >= RANK[a]} - LAZY_UPWARD
    assert upward == set(), {e: w for (a, b), w in _edges().items() if (e := f"{a}->{b}") in upward}


def _annotations(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            args += [a for a in (node.args.vararg, node.args.kwarg) if a is not None]
            yield from (a.annotation for a in args if a.annotation is not None)
            if node.returns is not None:
                yield node.returns
        elif isinstance(node, ast.AnnAssign):
            yield node.annotation


def test_no_any_in_the_run_path():
    found = set()
    for rel in RUN_PATH:
        tree = ast.parse((PACKAGE / rel).read_text())
        for ann in _annotations(tree):
            text = ast.unparse(ann)
            if "Any" in {n.id for n in ast.walk(ann) if isinstance(n, ast.Name)} or "Any" in text:
                found.add(rel)
    assert found == set()


def _any_count(path: Path) -> int:
    """``Any`` as a name or an attribute (``typing.Any``) anywhere in a module."""
    tree = ast.parse(path.read_text())
    names = (n for n in ast.walk(tree) if isinstance(n, ast.Name | ast.Attribute))
    return sum(1 for n in names if getattr(n, "id", getattr(n, "attr", None)) == "Any")


#: Units typed throughout (issue 35): real types, protocols, TypedDicts, ``object``.
NO_ANY_UNITS = ("engine", "study", "serving", "workloads")


def test_no_any_in_the_typed_units():
    for unit in NO_ANY_UNITS:
        found = {_rel(p): _any_count(p) for p in (PACKAGE / unit).rglob("*.py")}
        assert {rel: n for rel, n in found.items() if n} == {}, unit


# -- cycles between the modules of one package ------------------------------------------


def _module_name(path: Path) -> str:
    """``tpusim/engine/faults.py`` -> ``engine.faults``; a package's ``__init__.py`` is
    the package (``engine``); the root's is ``__init__``."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _target_module(name: str, known: set[str]) -> str | None:
    """The module a dotted import lands in: the longest prefix of ``name`` (without
    ``tpusim.``) that is a module of the package (``tpusim.report.plots.save`` ->
    ``report.plots``; ``tpusim.report.text_table`` -> ``report``)."""
    parts = name.split(".")
    if parts[0] != "tpusim":
        return None
    for end in range(len(parts), 1, -1):
        candidate = ".".join(parts[1:end])
        if candidate in known:
            return candidate
    return "__init__"


def _module_graph() -> dict[str, set[str]]:
    """Module -> the modules of its own unit it imports (every import form, at any
    depth: module level, in functions, under TYPE_CHECKING)."""
    paths = {_module_name(p): p for p in _modules()}
    known = set(paths)
    graph: dict[str, set[str]] = {m: set() for m in known}
    for module, path in paths.items():
        for node in ast.walk(ast.parse(path.read_text())):
            for name in _imported(path, node):
                target = _target_module(name, known)
                same_unit = target and target.split(".")[0] == module.split(".")[0]
                if same_unit and target != module:
                    graph[module].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> set[tuple[str, ...]]:
    """The strongly connected components of more than one module (Tarjan), each as a
    sorted tuple: every set of modules that import one another round a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: set[tuple[str, ...]] = set()

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.add(tuple(sorted(component)))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_cycles_and_only_cycles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"f"}, "f": set()}
    assert _cycles(graph) == {("a", "b", "c")}
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"c"}}) == {("a", "b")}


def test_no_import_cycle_inside_a_package():
    """Issue 35: no two modules of one package import each other, round any cycle."""
    assert _cycles(_module_graph()) == set()


def _getattr_calls_and_kind_tests(tree: ast.AST) -> list[int]:
    """Lines calling ``getattr`` or comparing a ``.kind`` attribute (``r.kind == ...``)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "getattr":
            lines.append(node.lineno)
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(s, ast.Attribute) and s.attr == "kind" for s in sides):
                lines.append(node.lineno)
    return lines


def test_the_finder_sees_getattr_and_kind_tests():
    tree = ast.parse("getattr(r, 'curve', ())\nif r.kind == 'serving': pass\nx = r.kind\n")
    assert _getattr_calls_and_kind_tests(tree) == [1, 2]


def test_the_report_picks_records_by_type():
    """Issue 35: report/ reads each kind's typed records, never by a kind string or an
    attribute it hopes for (a kind's figures are registered in report/kind_figures.py)."""
    found = {}
    for path in (PACKAGE / "report").rglob("*.py"):
        if lines := _getattr_calls_and_kind_tests(ast.parse(path.read_text())):
            found[_rel(path)] = lines
    assert found == {}


def test_no_argparse_below_cli():
    """Issue 35: options are pydantic models; only ``cli/`` turns them into flags."""
    found = set()
    for path in _modules():
        if _unit(path) in ("cli", "__main__"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                if "argparse" in [*names, getattr(node, "module", None)]:
                    found.add(_rel(path))
    assert found == set()


# -- imports inside functions (issue 44) ------------------------------------------------

#: Issue 44's bound on imports inside functions (262 at its filing, 166 before the command
#: line named its run modules through ``tpusim.later``, 49 after).
MAX_FUNCTION_IMPORTS = 120


def _function_imports(tree: ast.AST) -> list[int]:
    """Lines of the ``import`` and ``from ... import`` statements inside a function (a
    ``def`` or a lambda, at any depth), leaving out those under ``if TYPE_CHECKING:``."""
    found: list[int] = []

    def walk(node: ast.AST, in_function: bool, typing_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
            )
            typing = typing_only or (
                isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test)
            )
            if isinstance(child, ast.Import | ast.ImportFrom) and in_function and not typing_only:
                found.append(child.lineno)
            walk(child, inside, typing)

    walk(tree, False, False)
    return found


def test_the_import_counter_counts_only_imports_inside_functions():
    source = (
        "import os\n"  # module level: not counted
        "if TYPE_CHECKING:\n    import pandas\n"
        "def f():\n"
        "    import json\n"  # 5: counted
        "    if TYPE_CHECKING:\n        from x import y\n"  # typing only: not counted
        "    def g():\n        from a import b\n"  # 9: counted
        "class C:\n    import re\n"  # a class body is not a function
        "    def m(self):\n        import sys, math\n"  # 13: one statement
    )
    assert _function_imports(ast.parse(source)) == [5, 9, 13]


def test_function_level_imports_below_the_bound():
    """Issue 44: lazy start-up by naming what to import later (``tpusim.later``, the
    package's PEP 562 ``__getattr__``), not by imports inside functions."""
    counts = {_rel(p): len(_function_imports(ast.parse(p.read_text()))) for p in _modules()}
    total = sum(counts.values())
    assert total < MAX_FUNCTION_IMPORTS, sorted(counts.items(), key=lambda kv: -kv[1])[:10]
