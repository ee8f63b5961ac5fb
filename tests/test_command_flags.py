"""Every command's flags are generated from its options model: no command module of
``tpusim/cli/`` calls ``add_argument`` itself (the generators in ``model_flags`` and
``network_flags`` do, and ``app`` adds ``--version``). A scan of the syntax tree, shown
to find a call in a snippet first; then what the generator makes of a field.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

import tpusim.cli
from tpusim.cli.model_flags import add_model_flags, fill, flag_of
from tpusim.errors import InputError

CLI = Path(tpusim.cli.__file__).parent
#: The modules allowed to call add_argument: the generators and the top-level parser.
GENERATORS = {"model_flags.py", "network_flags.py", "app.py"}


def add_argument_lines(source: str) -> list[int]:
    """Lines of ``source`` that call ``something.add_argument(...)``."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "add_argument"
    ]


def test_the_scan_finds_a_hand_written_flag():
    snippet = "def add(p):\n    p.add_argument('--x')\n    p.add_argument_group('g')\n"
    assert add_argument_lines(snippet) == [2]


@pytest.mark.parametrize(
    "path",
    [p for p in sorted(CLI.glob("*.py")) if p.name not in GENERATORS],
    ids=lambda p: p.name,
)
def test_no_command_writes_its_flags_by_hand(path):
    assert add_argument_lines(path.read_text()) == [], path


class Toy(BaseModel):
    where: list[str] = Field(description="places", json_schema_extra={"positional": True})
    no_offload: bool = Field(False, description="a switch named no-")
    checks: bool = Field(True, description="on unless --no-checks")
    count: int = Field(2, description="how many", json_schema_extra={"flag_type": "positive"})
    mode: str = Field("a", description="which")
    tag: list[str] | None = Field(None, description="again", json_schema_extra={"action": "append"})


def parsed(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="toy", exit_on_error=False)
    add_model_flags(p, Toy, choices={"mode": ("a", "b")})
    return p.parse_args(list(argv))


def test_switches_positionals_types_and_choices():
    assert flag_of("no_offload", Toy.model_fields["no_offload"]) == "--no-offload"
    args = parsed("x", "y", "--no-offload", "--no-checks", "--count", "3", "--mode", "b")
    args.tag = parsed("x", "--tag", "p", "--tag", "q").tag  # repeatable
    toy = fill(args, Toy)
    assert (toy.where, toy.no_offload, toy.checks, toy.count, toy.mode, toy.tag) == (
        ["x", "y"],
        True,
        False,
        3,
        "b",
        ["p", "q"],
    )
    assert (args.no_offload, args.checks) == (True, False)  # filled back by field name
    toy = fill(parsed("x"), Toy)
    assert (toy.no_offload, toy.checks, toy.count, toy.mode) == (False, True, 2, "a")
    with pytest.raises(argparse.ArgumentError, match="must be 1 or more, got 0"):
        parsed("x", "--count", "0")
    with pytest.raises(argparse.ArgumentError, match="invalid choice: 'c'"):
        parsed("x", "--mode", "c")


def test_a_value_the_model_refuses_is_named_by_its_flag():
    class Bounded(BaseModel):
        share: float = Field(0.5, gt=0, le=1, description="a fraction")

    p = argparse.ArgumentParser(prog="toy")
    add_model_flags(p, Bounded)
    with pytest.raises(InputError, match=r"^--share: Input should be less than or equal to 1"):
        fill(p.parse_args(["--share", "2"]), Bounded)
