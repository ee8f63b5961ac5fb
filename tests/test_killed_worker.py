"""A worker killed mid-sweep loses only its own point (issue 24).

A toy workload kind registered here (forked workers inherit it) kills its own worker
process with SIGKILL at one sweep point, as the kernel's out-of-memory killer would.
The run must keep every other point (in summary.csv and in points.jsonl, written as
each point finished), run the killed system's later points in a fresh worker, and end
with exit 1 naming the lost point and what was kept.
"""

from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass
from typing import Literal

import pandas as pd
import pytest
from helpers import run

from tpusim.results.records import Record
from tpusim.study.point_log import POINTS_FILE, WORKER_MEMORY_BYTES, default_jobs
from tpusim.workloads import WORKLOADS, Outcome, WorkloadContext, WorkloadKind, WorkloadSpec

PARENT_PID = os.getpid()


class Nap(WorkloadSpec):
    """A point that does nothing, except kill its worker at ``value == die_at`` on
    ``die_on`` (never in the test process itself)."""

    kind: Literal["nap_for_kill"]
    name: str
    value: int
    die_at: int = 0
    die_on: str = ""
    out: str = ""


@dataclass(frozen=True, kw_only=True)
class NapRecord(Record):
    value: int
    points_written_before: int


def run_nap(spec: Nap, context: WorkloadContext) -> Outcome:
    if spec.value == spec.die_at and context.system.name == spec.die_on:
        assert os.getpid() != PARENT_PID, "the kill must happen in a worker"
        os.kill(os.getpid(), signal.SIGKILL)
    written = 0
    if spec.out and context_out(spec.out).exists():
        written = len(context_out(spec.out).read_text().splitlines())
    record = NapRecord(
        system=context.system.name,
        workload=context.label,
        kind=spec.kind,
        value=spec.value,
        points_written_before=written,
    )
    return Outcome(record)


def context_out(out: str):
    from pathlib import Path

    return Path(out) / POINTS_FILE


@pytest.fixture
def nap_kind():
    WORKLOADS.register("nap_for_kill", WorkloadKind(Nap, run_nap, record=NapRecord))
    yield
    WORKLOADS.unregister("nap_for_kill")


def _scenario(tmp_path, extra: str) -> str:
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: kill\nsystems: [v5e-pod, v6e-pod]\nworkloads:\n"
        f"  - {{name: nap, kind: nap_for_kill, value: 1, {extra} "
        "sweep: {value: [1, 2, 3, 4]}}\n"
    )
    return str(path)


def test_a_killed_worker_loses_only_its_point(nap_kind, tmp_path, capsys):
    path = _scenario(tmp_path, "die_at: 3, die_on: v5e-pod,")
    out = tmp_path / "out"
    code, stdout, stderr = run(capsys, "run", path, "--jobs", "2", "--quiet", "--out", str(out))
    assert code == 1
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert "v5e-pod nap[value=3] failed: its worker process died" in lines[0]
    assert "signal 9" in lines[0]
    assert f"7 finished points kept in {out / POINTS_FILE}" in lines[0]
    summary = pd.read_csv(out / "summary.csv")
    kept = sorted(zip(summary["system"], summary["value"], strict=True))
    assert kept == [("v5e-pod", 1), ("v5e-pod", 2), ("v5e-pod", 4)] + [
        ("v6e-pod", v) for v in (1, 2, 3, 4)
    ]
    logged = [json.loads(line) for line in (out / POINTS_FILE).read_text().splitlines()]
    assert len(logged) == 8
    assert sum("row" in entry for entry in logged) == 7
    (lost,) = [entry for entry in logged if "error" in entry]
    assert (lost["system"], lost["workload"]) == ("v5e-pod", "nap[value=3]")
    assert "points.jsonl" in stdout


def test_points_are_written_as_they_finish_in_process(nap_kind, tmp_path, capsys):
    out = tmp_path / "out"
    path = _scenario(tmp_path, f"out: '{out}',")
    code, _, stderr = run(capsys, "run", path, "--jobs", "1", "--quiet", "--out", str(out))
    assert code == 0, stderr
    summary = pd.read_csv(out / "summary.csv")
    # each point saw every earlier point already on disk: 0, 1, ..., 7
    assert list(summary["points_written_before"]) == list(range(8))
    logged = [json.loads(line) for line in (out / POINTS_FILE).read_text().splitlines()]
    assert all(entry["peak_memory_bytes"] > 0 for entry in logged)


def test_default_jobs_is_bounded_by_free_memory():
    cores = os.cpu_count() or 1
    assert default_jobs(64, free_bytes=100 * WORKER_MEMORY_BYTES) == min(cores, 64)
    assert default_jobs(64, free_bytes=WORKER_MEMORY_BYTES + 1) == 1
    assert default_jobs(64, free_bytes=0) == 1
    assert default_jobs(1, free_bytes=100 * WORKER_MEMORY_BYTES) == 1


def test_empty_out_and_zero_jobs_are_refused(tmp_path, capsys):
    from helpers import assert_one_error_line

    line = assert_one_error_line(*run(capsys, "run", "demo", "--out", ""))
    assert "--out" in line and "empty" in line
    line = assert_one_error_line(*run(capsys, "run", "demo", "--jobs", "0"))
    assert "--jobs" in line and "1 or more" in line
