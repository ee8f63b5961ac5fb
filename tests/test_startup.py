"""Start-up (issue 44): a command builds only its own parser (``modules_for``) and loads
only the layers it runs, without changing what the command line accepts or shows. The
oracle of each lazily built parser is the parser of every command built at once (how
the command line was built before issue 44); of the help and of an unknown command, the
static table of commands (``SUBCOMMANDS``). What a collective loads:
``tests/test_front_door.py``."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from tpusim.cli.app import SUBCOMMANDS, build_parser, modules_for

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


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_a_command_built_alone_takes_every_flag_it_takes_among_all(command):
    """Generated flags (the network options, a role's axis, a fault key) come from
    registries: built alone, a command must still see every one of them."""
    alone = build_parser(modules_for([command, "--help"]))
    assert set(_subparsers(alone)) == {
        c for c, m in SUBCOMMANDS.items() if m == SUBCOMMANDS[command]
    }
    everything = _subparsers(build_parser())[command]
    assert _flags(_subparsers(alone)[command]) == _flags(everything)


def test_the_help_lists_every_command_with_its_line(capsys):
    from tpusim.cli.app import main

    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    listed = {}
    for line in out.splitlines():
        words = line.split()
        if line.startswith("    ") and words and words[0] in SUBCOMMANDS:
            listed[words[0]] = " ".join(words[1:])
    assert set(listed) == set(SUBCOMMANDS)
    assert all(listed.values()), listed  # each with its one-line help
    assert main([]) == 0  # bare ``tpusim``: the same help
    assert capsys.readouterr().out == out


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
    assert all(f"'{name}'" in lines[0] for name in SUBCOMMANDS)
