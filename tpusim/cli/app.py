"""The ``tpusim`` command line: parse, load, run, print. Thin by design.

Every command prints a readable table, or exactly one JSON object with
``--json``. Bad input exits 2 and a failed simulation 1, each with one line on
stderr and no traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

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

__all__ = ["COMMANDS", "build_parser", "main"]

#: The commands, each a module of :mod:`tpusim.cli` with ``add_parsers(sub)``, in the
#: order ``tpusim --help`` lists them.
COMMANDS = (
    "systems",
    "claims",
    "topo",
    "collective",
    "scenarios",
    "validate",
    "models",
    "faults",
    "serve",
    "plan",
    "hlo",
    "compile",
)

#: The module of ``COMMANDS`` that adds each subcommand (a module may add several).
SUBCOMMANDS = {name: name for name in COMMANDS} | {
    "check": "scenarios",
    "run": "scenarios",
    "calibrate": "validate",
}


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
    """The parser with the subcommands of ``modules`` (of ``COMMANDS``; default all)."""
    parser = _Parser(
        prog="tpusim", description="Discrete-event simulator of TPU pods and their interconnect."
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    parser.set_defaults(func=None)
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    for name in modules:
        import_held(f"tpusim.cli.{name}").add_parsers(sub)
    return parser


def modules_for(argv: Sequence[str]) -> Sequence[str]:
    """The command modules a command line needs: only its command's (each loads the
    layers it runs when it runs), none for ``--version``, all for the help or a
    command line without a known command (whose error lists them)."""
    command = next((a for a in argv if not a.startswith("-")), None)
    if command in SUBCOMMANDS:
        return (SUBCOMMANDS[command],)
    if command is None and "--version" in argv and not {"-h", "--help"} & set(argv):
        return ()
    return COMMANDS


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
