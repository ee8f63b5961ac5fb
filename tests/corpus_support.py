"""What the hostile-input corpus tests share (issue 16): running ``python -m tpusim`` in a
subprocess under the corpus bounds, and checking a case's outcome against its table row.

A row (``tests/corpus/*/cases.yaml``) has ``argv`` (``{dir}``: the corpus folder,
``{tmp}``: a fresh temporary folder), the expected ``exit`` code and, when stderr must
say something, ``stderr``: a regex its single line must match.
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 30
"""Bound on one case (s): the issue's 30 s."""
ADDRESS_SPACE_BYTES = 8 * 2**30
"""Bound on one case's address space (bytes): the issue's 8 GiB."""


def cap_memory() -> None:
    """``preexec_fn``: the child may not map more than ADDRESS_SPACE_BYTES."""
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))


def expand(argv: list[str], corpus: Path, tmp: Path) -> list[str]:
    """A row's argv with ``{dir}`` and ``{tmp}`` filled in."""
    return [a.replace("{dir}", str(corpus)).replace("{tmp}", str(tmp)) for a in argv]


def run_tpusim(argv: list[str], cwd: Path, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    """``python -m tpusim ARGV`` under the corpus bounds (this checkout first on the path)."""
    return subprocess.run(
        [sys.executable, "-m", "tpusim", *argv],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=TIMEOUT_S,
        preexec_fn=cap_memory,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def check_outcome(case: dict, argv: list[str], done: subprocess.CompletedProcess) -> object:
    """Assert the row's exit code, at most the one stderr line its pattern allows, no
    traceback, and strict JSON on stdout after a successful ``--json``; returns the
    parsed JSON (or None)."""
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == case["exit"], done.stderr
    lines = done.stderr.splitlines()
    if "stderr" in case:
        assert len(lines) == 1, done.stderr
        assert re.search(case["stderr"], lines[0]), lines[0]
    else:
        assert lines == [], done.stderr
    if done.returncode == 0 and "--json" in argv and done.stdout is not None:
        return json.loads(done.stdout, parse_constant=_not_json)
    return None


def _not_json(name: str) -> None:
    raise AssertionError(f"{name} is not JSON")
