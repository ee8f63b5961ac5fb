"""An idle worker takes the later half of a running system's unstarted points (issue
34): the pool ends evenly, and every point's record is the one it gives anywhere.

A toy workload kind registered here (forked workers inherit it) sleeps and records
the process it ran in.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Literal

import pandas as pd
import pytest
from helpers import run

from tpusim.results.records import Record
from tpusim.workloads import WORKLOADS, Outcome, WorkloadContext, WorkloadKind, WorkloadSpec


class Doze(WorkloadSpec):
    """A point that sleeps ``sleep_s`` and gives ``value`` squared."""

    kind: Literal["doze_for_split"]
    name: str
    value: int
    sleep_s: float = 0.0


@dataclass(frozen=True, kw_only=True)
class DozeRecord(Record):
    value: int
    square: int
    pid: int


def run_doze(spec: Doze, context: WorkloadContext) -> Outcome:
    time.sleep(spec.sleep_s)
    record = DozeRecord(
        system=context.system.name,
        workload=context.label,
        kind=spec.kind,
        value=spec.value,
        square=spec.value**2,
        pid=os.getpid(),
    )
    return Outcome(record)


@pytest.fixture
def doze_kind():
    WORKLOADS.register("doze_for_split", WorkloadKind(Doze, run_doze, record=DozeRecord))
    yield
    WORKLOADS.unregister("doze_for_split")


def test_an_idle_worker_takes_the_later_half_of_a_busy_system(doze_kind, tmp_path, capsys):
    """v5e-pod (256 chips) starts first with twelve 0.3 s points; v6e-pod's one quick
    point leaves its worker idle, so it takes v5e-pod's later unstarted points."""
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: split\nsystems: [v5e-pod, v6e-pod]\nplots: false\nworkloads:\n"
        "  - {name: slow, kind: doze_for_split, value: 1, sleep_s: 0.3, systems: [v5e-pod],"
        " sweep: {value: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]}}\n"
        "  - {name: quick, kind: doze_for_split, value: 20, systems: [v6e-pod]}\n"
    )
    out = tmp_path / "out"
    code, _, stderr = run(capsys, "run", str(path), "--jobs", "2", "--quiet", "--out", str(out))
    assert code == 0, stderr
    summary = pd.read_csv(out / "summary.csv")
    slow = summary[summary["system"] == "v5e-pod"]
    assert list(slow["value"]) == list(range(1, 13))  # in the point set's order
    assert list(slow["square"]) == [v * v for v in range(1, 13)]
    pids = list(slow["pid"])
    assert os.getpid() not in pids
    runs = [pid for i, pid in enumerate(pids) if i == 0 or pid != pids[i - 1]]
    assert len(runs) >= 2  # the later points ran in another worker
    assert len(runs) == len(set(runs))  # each worker ran one stretch of points, in order
