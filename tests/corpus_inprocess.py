"""Running a corpus case inside the test process (round 4 on): ``tpusim.cli.main``
with the case's folder as the working directory, bounded in time by a timer signal
instead of a subprocess, so a hundred cases take seconds rather than a minute of
interpreter start-ups. The outcome is checked by :func:`corpus_support.check_outcome`
like a subprocess's; an uncaught exception fails the test as a traceback would."""

from __future__ import annotations

import contextlib
import io
import os
import resource
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from corpus_support import TIMEOUT_S


class Hung(BaseException):
    """A case ran past the bound (a BaseException: no ``except Exception`` in the CLI
    may swallow it)."""


@dataclass
class Outcome:
    """What ``check_outcome`` reads of a finished case."""

    returncode: int
    stdout: str
    stderr: str


@contextlib.contextmanager
def bounded(seconds: float) -> Iterator[None]:
    """Raise :class:`Hung` in the block after ``seconds`` of wall time."""

    def expire(signum, frame):
        raise Hung(f"over {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def address_space_capped(extra_bytes: int) -> Iterator[None]:
    """In the block, this process may map at most ``extra_bytes`` more than it has
    mapped now (the soft RLIMIT_AS, raised back afterwards: the hard limit stays)."""
    mapped_bytes = _mapped_bytes()
    previous = resource.getrlimit(resource.RLIMIT_AS)
    cap = mapped_bytes + extra_bytes
    if previous[1] != resource.RLIM_INFINITY:
        cap = min(cap, previous[1])
    resource.setrlimit(resource.RLIMIT_AS, (cap, previous[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, previous)


def _mapped_bytes() -> int:
    """This process's address space now (VmSize of /proc/self/status), in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


def run_in_process(
    argv: list[str], cwd: Path, timeout_s: float = TIMEOUT_S, extra_bytes: int | None = None
) -> Outcome:
    """``tpusim ARGV`` in this process from ``cwd``: its exit code, stdout and stderr;
    with ``extra_bytes``, bounded in address space like a subprocess under
    :func:`corpus_support.cap_memory` (:func:`address_space_capped`)."""
    from tpusim.cli import main

    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(cwd)
    capped = address_space_capped(extra_bytes) if extra_bytes else contextlib.nullcontext()
    try:
        with (
            bounded(timeout_s),
            capped,
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            code = main(list(argv))
    finally:
        os.chdir(here)
    return Outcome(code, out.getvalue(), err.getvalue())
