"""``python -m tpusim`` and the ``tpusim`` command: the command line, with a Ctrl-C that
arrives while the (heavy) modules are still importing also ending in one line.

The command line runs OpenBLAS on one thread unless ``OPENBLAS_NUM_THREADS`` says
otherwise: loading numpy starts OpenBLAS's thread pool, which costs about as much as the
rest of numpy's import (0.06 s of 0.12 s here) and which tpusim does not use (its
arrays are vectors and sparse sums; its parallelism is whole processes, ``--jobs`` and
Dask, which a BLAS pool per process would oversubscribe)."""

import contextlib
import os
import sys

INTERRUPTED = 130
"""128 + SIGINT, as tpusim.cli.console.INTERRUPTED_EXIT_CODE."""

#: Environment defaults of the command line's process (and of its workers, which
#: inherit them), each set only where the user has not set it.
ENVIRONMENT = {"OPENBLAS_NUM_THREADS": "1"}


def run() -> int:
    """Import the command line and run it; returns the exit code."""
    for name, value in ENVIRONMENT.items():
        os.environ.setdefault(name, value)
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
