"""The ``tpusim`` command line: parse, load, run, print. Thin by design.

Every command prints a readable table, or exactly one JSON object with
``--json``. Bad input exits 2 and a failed simulation 1, each with one line on
stderr and no traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from tpusim import package_version
from tpusim.cli.console import (
    INTERRUPTED_EXIT_CODE,
    drop_stdout,
    interrupts_handled,
    one_line_warnings,
    raised_by_print,
)
from tpusim.errors import InputError, TpusimError
from tpusim.later import import_held

__all__ = ["COMMANDS", "REGISTERED", "SUBCOMMANDS", "build_parser", "main", "modules_for"]

#: The one place a command is registered: each subcommand, in the order ``tpusim --help``
#: lists them, with the module of :mod:`tpusim.cli` whose ``add_parsers(sub)`` adds it
#: (a module may add several) and its line in the help. The help, a bare ``tpusim`` and
#: an unknown command are answered from this table alone, without importing a command.
REGISTERED = {
    "systems": ("systems", "list the shipped systems"),
    "claims": ("claims", "Google's TPU 8 claims against tpusim's figures (shipped systems)"),
    "topo": ("topo", "topology metrics of one or more systems"),
    "collective": ("collective", "simulate one collective (or a sweep of sizes)"),
    "scenarios": ("scenarios", "list the shipped scenarios (run them by name)"),
    "check": ("scenarios", "check a scenario without simulating: every problem"),
    "run": ("scenarios", "run a scenario: systems x workloads, written to a folder"),
    "validate": ("validate", "simulate the shipped public measurements and report the errors"),
    "calibrate": (
        "validate",
        "fit the cost terms per chip to the 'fit' measurements (least squares)",
    ),
    "models": ("models", "list the model presets (configs/models) and their sizes"),
    "faults": ("faults", "Monte Carlo: a collective's time vs random failed links"),
    "serve": ("serve", "an LLM inference service: latency at a rate, or capacity"),
    "plan": ("plan", "search training layouts (mesh roles, remat) by step time"),
    "step": ("step", "one MaxText training step, pasted as its command line, on a system"),
    "hlo": ("hlo", "replay an XLA-compiled HLO module on a system"),
    "compile": (
        "compile",
        "compile a model step for a TPU topology on the CPU (needs the xla extra)",
    ),
}

#: The module that adds each subcommand.
SUBCOMMANDS = {name: module for name, (module, _) in REGISTERED.items()}

#: The command modules, in the order of :data:`REGISTERED`.
COMMANDS = tuple(dict.fromkeys(SUBCOMMANDS.values()))


class _Commands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """The subcommands: each one's line in the help comes from :data:`REGISTERED`."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        if "help" not in kwargs:  # a command not in REGISTERED has no line: KeyError
            kwargs["help"] = REGISTERED[name][1]
        parser: argparse.ArgumentParser = super().add_parser(name, **kwargs)
        return parser


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag as one line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("tpusim").strip()  # main prints "tpusim: error:"
        where = f"{command}: " if command else ""
        raise InputError(f"{where}{message} (see {self.prog} --help)")


class _Version(argparse.Action):
    """``--version``: the package's version, read (package metadata) only when asked."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        print(f"tpusim {package_version()}")
        parser.exit()


def build_parser(modules: Sequence[str] = COMMANDS) -> argparse.ArgumentParser:
    """The parser of every registered subcommand: those of ``modules`` (of ``COMMANDS``;
    default all) with their flags, the others by name and help line only (their modules
    are not imported)."""
    parser = _Parser(
        prog="tpusim", description="Discrete-event simulator of TPU pods and their interconnect."
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    parser.set_defaults(func=None)
    sub = parser.add_subparsers(dest="command", parser_class=_Parser, action=_Commands)
    for name, (module, _) in REGISTERED.items():
        if module not in modules:
            sub.add_parser(name)
        elif name not in sub.choices:  # the module adds its subcommands together
            import_held(f"tpusim.cli.{module}").add_parsers(sub)
    return parser


def modules_for(argv: Sequence[str]) -> Sequence[str]:
    """The command modules a command line needs: only its command's (each loads the
    layers it runs when it runs); none for the help, ``--version`` or a command line
    without a known command (the help and argparse's error list every command from
    :data:`REGISTERED`)."""
    command = next((a for a in argv if not a.startswith("-")), None)
    return (SUBCOMMANDS[command],) if command in SUBCOMMANDS else ()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``tpusim`` and ``python -m tpusim``; returns the exit code.

    Without a command, prints the help and returns 0. A tpusim error prints one line
    per problem (``tpusim: error: ...``) and returns its exit code (2 for bad input, 1
    for a failed simulation); Ctrl-C prints ``tpusim: interrupted`` and returns 130; a
    closed stdout (``| head``) returns 0; a stdout that cannot be written (a full
    disk) is an error on one line, exit 2; running out of memory is one line, exit 1.
    """
    try:
        with interrupts_handled(), one_line_warnings():
            words = sys.argv[1:] if argv is None else list(argv)
            parser = build_parser(modules_for(words))
            args = parser.parse_args(words)
            if args.func is None:  # bare ``tpusim``
                parser.print_help()
                return 0
            args.func(args)
            sys.stdout.flush()
    except TpusimError as exc:
        if not getattr(exc, "reported", False):
            for line in str(exc).splitlines() or [""]:
                print(f"tpusim: error: {line}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tpusim: interrupted", file=sys.stderr)
        return INTERRUPTED_EXIT_CODE
    except BrokenPipeError:
        drop_stdout()
        return 0
    except MemoryError:  # a legal but huge run past the machine's (or ulimit's) memory
        print(
            "tpusim: error: out of memory (the run is too large for this machine: try a "
            "smaller system, fewer sweep points or a lower fidelity)",
            file=sys.stderr,
        )
        return 1
    except OSError as exc:  # not one of tpusim's own files: each names its flag
        if exc.filename is None and raised_by_print(exc):
            drop_stdout()
            print(f"tpusim: error: stdout: cannot write ({exc.strerror})", file=sys.stderr)
        else:
            where = exc.filename if exc.filename is not None else "input/output"
            print(f"tpusim: error: {where}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
