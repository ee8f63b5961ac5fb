"""Start-up (issue 44): a command builds only its own parser (``modules_for``) and loads
only the layers it runs, without changing what the command line accepts or shows. The
oracle of each lazily built parser is the parser of every command built at once (how
the command line was built before issue 44); of the help and of an unknown command, the
table where commands are registered (``REGISTERED``). What a collective loads:
``tests/test_front_door.py``."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tpusim.cli.app import COMMANDS, REGISTERED, build_parser, main, modules_for

ROOT = Path(__file__).resolve().parent.parent


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(actions[0].choices)


def _flags(parser: argparse.ArgumentParser) -> dict[str, tuple[object, ...]]:
    """Every argument of ``parser``: its flags (or name) -> what it takes."""
    return {
        ",".join(a.option_strings) or a.dest: (a.dest, a.nargs, a.default, a.choices, a.help)
        for a in parser._actions
    }


def _listed(help_text: str) -> dict[str, str]:
    """The commands ``tpusim --help`` lists, each with its (unwrapped) line."""
    listed: dict[str, str] = {}
    name = None
    for line in help_text.splitlines():
        words = line.split()
        if line.startswith("    ") and not line.startswith("     ") and words:
            name = words[0]
            listed[name] = " ".join(words[1:])
        elif name is not None and line.startswith(" " * 10) and words:
            listed[name] += " " + " ".join(words)  # argparse wrapped the line
        else:
            name = None
    return listed


@pytest.mark.parametrize("command", sorted(REGISTERED))
def test_a_command_built_alone_takes_every_flag_it_takes_among_all(command):
    """Generated flags (the network options, a role's axis, a fault key) come from
    registries: built alone, a command must still see every one of them, and every
    other command is still listed."""
    alone = _subparsers(build_parser(modules_for([command, "--help"])))
    assert list(alone) == list(REGISTERED)
    everything = _subparsers(build_parser())[command]
    assert _flags(alone[command]) == _flags(everything)


def test_the_help_lists_every_command_with_its_line(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert _listed(out) == {name: line for name, (_, line) in REGISTERED.items()}
    assert main([]) == 0  # bare ``tpusim``: the same help
    assert capsys.readouterr().out == out


def test_the_help_and_an_unknown_command_import_no_command():
    """Both are answered from the table: no command module, no pydantic, no numpy."""
    code = (
        "import contextlib, io, json, sys\n"
        "from tpusim.cli.app import main\n"
        "quiet = contextlib.redirect_stdout(io.StringIO())\n"
        "with quiet, contextlib.redirect_stderr(io.StringIO()):\n"
        "    codes = [main([]), main(['no-such-command'])]\n"
        f"heavy = [f'tpusim.cli.{{m}}' for m in {COMMANDS!r}] + ['pydantic', 'numpy']\n"
        "print(json.dumps([codes, [m for m in heavy if m in sys.modules]]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert json.loads(done.stdout) == [[0, 2], []]


def test_an_unknown_command_is_argparses_one_line_exit_2():
    done = subprocess.run(
        [sys.executable, "-m", "tpusim", "no-such-command", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert lines[0].startswith("tpusim: error: argument command: invalid choice: 'no-such-command'")
    assert all(f"'{name}'" in lines[0] for name in REGISTERED)
