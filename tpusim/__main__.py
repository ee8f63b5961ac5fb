"""``python -m tpusim`` and the ``tpusim`` command: the command line, with a Ctrl-C that
arrives while the (heavy) modules are still importing also ending in one line."""

import contextlib
import os
import sys

INTERRUPTED = 130
"""128 + SIGINT, as tpusim.cli.console.INTERRUPTED_EXIT_CODE."""


def run() -> int:
    """Import the command line and run it; returns the exit code."""
    try:
        from tpusim.cli.app import main
    except KeyboardInterrupt:
        print("tpusim: interrupted", file=sys.stderr)
        return INTERRUPTED
    return main()


def exit_with(code: int) -> None:
    """Exit the process with ``code``. An interrupted run leaves by ``os._exit`` once
    its streams are flushed: CPython remembers a Ctrl-C that arrived while a module was
    importing, even one tpusim caught, and would otherwise end the process by SIGINT
    (exit -2) instead of the 130 already reported."""
    if code == INTERRUPTED:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):  # closed or full: nothing to add
                stream.flush()
        os._exit(code)
    sys.exit(code)


def cli() -> None:
    """The ``tpusim`` console script: run, then exit with the code."""
    exit_with(run())


if __name__ == "__main__":
    cli()
