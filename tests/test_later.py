"""The command line's deferred imports (issue 44): a command's parser loads only its
flags module; the run code is named by :class:`tpusim.later.Later` and imported when
the command runs. Every name so given must exist (a typo would otherwise surface only
when that command, or that branch, runs)."""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import tpusim.cli
from tpusim.cli.app import build_parser
from tpusim.later import Later, LaterModule

ROOT = Path(__file__).resolve().parent.parent

#: The modules that run commands (their imports at module level): none is loaded to
#: build a parser.
RUN_MODULES = (
    "tpusim.cli.collective_run",
    "tpusim.cli.collective_sweep",
    "tpusim.cli.faults_run",
    "tpusim.cli.plan_run",
    "tpusim.cli.scenarios_run",
    "tpusim.cli.validate_run",
    "tpusim.cli.validate_serving",
    "tpusim.cli.validate_workloads",
)


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(actions[0].choices)


def test_every_command_runs_a_named_function_that_exists():
    for name, sub in _subparsers(build_parser()).items():
        func = sub.get_default("func")
        assert callable(func), name
        if isinstance(func, Later):
            assert func.module.startswith("tpusim.cli."), name
            assert callable(func.function()), f"{name}: {func!r}"


def test_every_later_name_in_the_command_line_exists():
    """Each ``Later`` bound at module level in ``tpusim.cli`` (a kind's run, a heavy
    layer's function) names a function of an importable module."""
    seen = 0
    for info in pkgutil.iter_modules(tpusim.cli.__path__, "tpusim.cli."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, Later):
                assert callable(value.function()), f"{info.name}: {value!r}"
                seen += 1
            elif isinstance(value, LaterModule):
                assert importlib.import_module(value.name).__name__ == value.name
    assert seen >= 10  # the commands' run functions alone are more


def test_building_the_parsers_loads_no_run_module():
    """``tpusim --help`` builds every command's parser; none of the run modules loads."""
    code = (
        "import json, sys\n"
        "from tpusim.cli.app import build_parser\n"
        "build_parser()\n"
        f"print(json.dumps([m for m in {list(RUN_MODULES)!r} if m in sys.modules]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert json.loads(done.stdout) == []


def test_later_imports_on_the_first_call_only():
    """A Later of a module nothing has imported: absent until called, then the stdlib's
    own function (the oracle: ``colorsys.rgb_to_hsv`` of pure red is (0, 1, 1))."""
    code = (
        "import sys\n"
        "from tpusim.later import Later, LaterModule\n"
        "f = Later('colorsys', 'rgb_to_hsv')\n"
        "m = LaterModule('wave')\n"
        "before = 'colorsys' in sys.modules or 'wave' in sys.modules\n"
        "print(before, f(1.0, 0.0, 0.0), m.WAVE_FORMAT_PCM, 'wave' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.split(" ", 1) == ["False", "(0.0, 1.0, 1.0) 1 True\n"]
