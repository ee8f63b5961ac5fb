"""Ctrl-C at any moment of a command's life once tpusim's own code runs, even while its
modules still import, ends in at most one line on stderr and no traceback (issue 16
item 4). The child runs with ``-X importtime`` so the test knows when the interpreter's
own start-up (runpy, site) is over: a signal before that is CPython's to report.
Delays of 0.01-0.03 s land inside pydantic-core's (PyO3) initialisation on this machine,
which panicked before the command's imports held Ctrl-C back (``tpusim.later.import_held``)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest


@pytest.mark.parametrize("delay_s", [0.0, 0.01, 0.015, 0.02, 0.03, 0.08, 0.2, 0.5])
def test_ctrl_c_during_start_up_is_one_line(delay_s):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "tpusim",
            "collective",
            "ironwood-pod",
            "--op",
            "all-to-all",
            "--bytes",
            "1KiB",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = []
    for line in proc.stderr:  # the package itself is imported just before our code runs
        seen.append(line)
        if line.rstrip().endswith("| tpusim"):
            break
    time.sleep(delay_s)
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=30)
    err = [x for x in rest.splitlines() if not x.startswith("import time:")]
    assert not any("Traceback" in x for x in err), err
    assert proc.returncode in (0, 130), err
    assert len(err) <= 1
    if proc.returncode == 130:
        assert err == ["tpusim: interrupted"]


def test_out_of_memory_is_one_line_exit_1():
    """A legal run larger than the address space allowed: one line, exit 1."""
    import resource

    def cap():  # the run peaks at ~540 MB resident (2026-12-06), more address space
        resource.setrlimit(resource.RLIMIT_AS, (450 * 2**20, 450 * 2**20))

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tpusim",
            "collective",
            "ironwood-pod",
            "--op",
            "all-to-all",
            "--bytes",
            "1GiB",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=cap,
    )
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().startswith("tpusim: error: out of memory")
