"""The console around a command: Ctrl-C and a stdout that cannot be written.

:func:`interrupts_handled` turns the first Ctrl-C into one KeyboardInterrupt (the
command line prints ``tpusim: interrupted`` and exits 130); :func:`raised_by_print`
tells a failed write to stdout (a full disk) from other OSErrors; :func:`drop_stdout`
points stdout at /dev/null so that the interpreter's last flush cannot fail again.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from tpusim.later import Later

__all__ = [
    "INTERRUPTED_EXIT_CODE",
    "PRINTING_MODULES",
    "drop_stdout",
    "interrupts_handled",
    "one_line_warnings",
    "raised_by_print",
]

#: Exit code of a run stopped by Ctrl-C (published: 128 + SIGINT, the shell convention).
INTERRUPTED_EXIT_CODE = 130


#: The package whose modules' only unnamed writes are ``print`` to stdout (a file
#: write goes through :mod:`tpusim.results.files` and names its path).
PRINTING_MODULES = "tpusim.cli."


def raised_by_print(exc: OSError) -> bool:
    """True when ``exc`` came from printing to (or flushing) stdout: the innermost
    Python frame it passed is a module of :mod:`tpusim.cli`, which write nothing else."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and str(tb.tb_frame.f_globals.get("__name__")).startswith(
        PRINTING_MODULES
    )


@contextmanager
def interrupts_handled() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt once, with warnings silenced from then on (code
    unwinding in the middle of an update must not print); a second Ctrl-C exits at
    once. The previous handler is restored on the way out (``main`` may run in-process)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _first_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def one_line_warnings() -> Iterator[None]:
    """Warnings shown while a command runs (a deprecated scenario key) as one
    ``tpusim: warning: ...`` line each on stderr, each at most once per command."""
    with warnings.catch_warnings():
        warnings.simplefilter("default", FutureWarning)
        warnings.showwarning = _show_warning
        yield


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: object = None,
    line: str | None = None,
) -> None:
    print(f"tpusim: warning: {message}", file=sys.stderr)


def _first_interrupt(signum: int, frame: FrameType | None) -> None:
    warnings.simplefilter("ignore")
    signal.signal(signal.SIGINT, _second_interrupt)
    raise KeyboardInterrupt


def _second_interrupt(signum: int, frame: FrameType | None) -> None:
    print("tpusim: interrupted", file=sys.stderr, flush=True)
    os._exit(INTERRUPTED_EXIT_CODE)


def drop_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush of what is
    still buffered cannot fail again (the Python docs' recipe for SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a file (captured in tests)
        pass


#: The reporting layer's, imported only when a command prints JSON (this module is
#: loaded for ``tpusim --version``).
_INTEGER_BYTES = Later("tpusim.report", "integer_bytes")
_JSON_TEXT = Later("tpusim.results.files", "json_text")


def print_json(record: object) -> None:
    """Print ``record`` as strict JSON: no ``NaN``/``Infinity`` (:func:`json_text`), byte
    counts as integers (:func:`~tpusim.report.integer_bytes`)."""
    print(_JSON_TEXT(_INTEGER_BYTES(record)))
