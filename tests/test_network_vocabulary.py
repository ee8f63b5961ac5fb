"""Fidelities are chosen by their declared properties, never by name, and options are
never read back off a built network: outside ``tpusim/network/`` no source compares a
value with a registered fidelity's name (``== "flow"``, ``in ("analytic", "flow")``,
``case "packet":``) and none calls ``getattr``/``hasattr`` on a network object (an
expression naming a network or a fidelity). The scan is over the syntax tree, so a
comment or a docstring that names a fidelity is no finding; the scanner is first shown
to find each pattern in a snippet, so the test can fail.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tpusim
from tpusim.network import NETWORKS

PACKAGE = Path(tpusim.__file__).parent
#: Where the fidelities are defined: names and getattr belong there.
NETWORK_LAYER = PACKAGE / "network"
#: Fragments of an expression that holds a network object or its settings.
NETWORK_WORDS = ("network", "fidelity")


def _strings(node: ast.AST) -> set[str]:
    """The string constants of ``node`` (itself, or the items of a literal collection)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return set().union(*(_strings(item) for item in node.elts)) if node.elts else set()
    return set()


def _dotted(node: ast.AST) -> str:
    """``self.network.options`` for that expression; '' for anything but names."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def findings(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, code) of each comparison with one of the fidelity ``names`` and of each
    ``getattr``/``hasattr`` on a network object in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            if any(_strings(side) & names for side in (node.left, *node.comparators)):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.MatchValue) and _strings(node.value) & names:
            found.append((node.lineno, f"case {ast.unparse(node.value)}"))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr")
            and node.args
            and any(word in _dotted(node.args[0]).lower() for word in NETWORK_WORDS)
        ):
            found.append((node.lineno, ast.unparse(node)))
    return found


SNIPPET = '''
"""A docstring naming the flow fidelity is fine."""
def pick(network, settings, kind):
    if network.fidelity != "flow":  # found
        return getattr(network, "rate_tolerance", None)  # found
    if settings.fidelity in ("analytic", "flow"):  # found
        return hasattr(settings.network.options, "tolerance")  # found
    match kind:
        case "packet":  # found
            return None
    return kind == "flows" or getattr(settings, "seed")  # neither
'''


def test_the_scanner_finds_each_pattern():
    found = findings(SNIPPET, set(NETWORKS.names()))
    assert sorted(line for line, _ in found) == [4, 5, 6, 7, 9]


def _sources() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py")) if NETWORK_LAYER not in p.parents]


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_fidelity_name_compared_and_no_getattr_on_a_network(path):
    found = findings(path.read_text(), set(NETWORKS.names()))
    assert not found, "\n".join(f"{path}:{line}: {code}" for line, code in found)
