"""How to extend: a new workload kind, from this file alone.

``kind: matmul_sweep`` is one matmul run as a one-op program through
:class:`tpusim.engine.Simulation`, with its own record type (its columns and its
comparison-table figure). Registered here, it is accepted by a scenario file, run on
every system and sweep point, written to summary.csv and comparison.csv, and its step
time equals the roofline: max(2 m n k / achievable FLOP/s, bytes / achievable HBM
bandwidth) + the fixed op overhead (:mod:`tpusim.hardware.costs`, with the chip's
efficiency terms; sizes are multiples of the MXU tile, so no padding)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

import pandas as pd
import pytest
from helpers import achievable_flops, achievable_hbm_Bps, assert_one_error_line, run
from pydantic import PositiveInt

from tpusim.config import load_chip
from tpusim.engine import Simulation
from tpusim.hardware.costs import DEFAULT_OP_OVERHEAD_S, DTYPE_BYTES
from tpusim.program.ir import Op, Program
from tpusim.report import comparison_table
from tpusim.results.records import Record
from tpusim.vocabulary import Dtype
from tpusim.workloads import (
    WORKLOADS,
    Outcome,
    WorkloadContext,
    WorkloadKind,
    WorkloadSpec,
    record_from_row,
)


class MatmulSweep(WorkloadSpec):
    """One (m x k) by (k x n) matmul."""

    kind: Literal["matmul_sweep"]
    name: str
    m: PositiveInt
    n: PositiveInt
    k: PositiveInt
    dtype: Dtype = "bf16"


@dataclass(frozen=True, kw_only=True)
class MatmulRecord(Record):
    m: int
    n: int
    k: int
    step_time_s: float
    flops_per_s: float

    def figures(self):
        return [(f"{self.workload}: matmul (us)", self.step_time_s * 1e6)]


def run_matmul(spec: MatmulSweep, context: WorkloadContext) -> Outcome:
    op = Op("mm", "matmul", m=spec.m, n=spec.n, k=spec.k, dtype=spec.dtype)
    results = Simulation(context.system, Program(spec.name, (op,)), context.settings).run()
    record = MatmulRecord(
        system=context.system.name,
        workload=context.label,
        kind=spec.kind,
        m=spec.m,
        n=spec.n,
        k=spec.k,
        step_time_s=results.step_time_s,
        flops_per_s=op.flops / results.step_time_s,
    )
    return Outcome(record, results=results)


SCENARIO = """\
name: matmuls
systems: [v5e-pod, v6e-pod]
workloads:
  - {name: mm, kind: matmul_sweep, m: 8192, n: 8192, k: 8192, sweep: {m: [8, 8192]}}
"""


@pytest.fixture
def matmul_sweep():
    WORKLOADS.register("matmul_sweep", WorkloadKind(MatmulSweep, run_matmul, record=MatmulRecord))
    yield
    WORKLOADS.unregister("matmul_sweep")


def roofline_s(chip_name: str, m: int, n: int, k: int) -> float:
    chip = load_chip(chip_name)
    compute = 2 * m * n * k / achievable_flops(chip, m)
    memory = DTYPE_BYTES["bf16"] * (m * k + k * n + m * n) / achievable_hbm_Bps(chip)
    return max(compute, memory) + DEFAULT_OP_OVERHEAD_S


def test_registered_kind_runs_in_a_scenario_and_meets_the_roofline(matmul_sweep, tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    out = tmp_path / "out"
    code, stdout, _ = run(
        capsys, "run", str(path), "--json", "--quiet", "--jobs", "1", "--out", str(out)
    )
    assert code == 0
    rows = json.loads(stdout)["results"]
    assert [(r["system"], r["workload"]) for r in rows] == [
        ("v5e-pod", "mm[m=8]"),
        ("v5e-pod", "mm[m=8192]"),
        ("v6e-pod", "mm[m=8]"),
        ("v6e-pod", "mm[m=8192]"),
    ]
    bounds = set()
    for row in rows:
        assert list(row) == [
            "system",
            "workload",
            "kind",
            "m",
            "n",
            "k",
            "step_time_s",
            "flops_per_s",
        ]
        chip = row["system"].split("-")[0]
        expected = roofline_s(chip, row["m"], 8192, 8192)
        assert row["step_time_s"] == pytest.approx(expected, rel=1e-9)
        compute = 2 * row["m"] * 8192**2 / achievable_flops(load_chip(chip), row["m"])
        bounds.add(
            "compute" if compute + DEFAULT_OP_OVERHEAD_S == pytest.approx(expected) else "memory"
        )
    assert bounds == {"compute", "memory"}  # the sweep exercises both roofline terms
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary["step_time_s"]) == pytest.approx(
        [r["step_time_s"] for r in rows], rel=1e-12
    )
    comparison = pd.read_csv(out / "comparison.csv", index_col="figure")
    expected_us = roofline_s("v6e", 8192, 8192, 8192) * 1e6
    assert comparison.loc["mm[m=8192]: matmul (us)", "v6e-pod"] == pytest.approx(
        expected_us, rel=1e-9
    )
    assert len(list(out.glob("trace-*.json"))) == 4  # its Results reach the trace writer


def test_rows_of_a_registered_kind_read_back_as_its_records(matmul_sweep, tmp_path):
    from tpusim.study.options import ScenarioRunOptions
    from tpusim.study.runner import run_scenario
    from tpusim.study.scenario import Scenario

    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    result = run_scenario(Scenario(path), ScenarioRunOptions(quiet=True, jobs=1))
    assert all(isinstance(r, MatmulRecord) for r in result.records)
    # rows (dicts) go back through MatmulRecord
    table = comparison_table(record_from_row(row) for row in result.rows)
    assert table.loc["mm[m=8]: matmul (us)", "v5e-pod"] == pytest.approx(
        roofline_s("v5e", 8, 8192, 8192) * 1e6, rel=1e-9
    )


def test_registered_kind_fields_are_validated_with_their_line(matmul_sweep, tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.replace("k: 8192,", "k: -1,"))
    line = assert_one_error_line(
        *run(capsys, "run", str(path), "--quiet", "--out", str(tmp_path / "o"))
    )
    assert "s.yaml:4 workloads[0].k: Input should be greater than 0" in line


def test_without_registration_the_kind_is_unknown_and_the_choices_are_named(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    line = assert_one_error_line(
        *run(capsys, "run", str(path), "--quiet", "--out", str(tmp_path / "o"))
    )
    assert "workloads[0].kind: unknown kind 'matmul_sweep' (choose from collective," in line


def test_a_taken_kind_cannot_be_registered_again(matmul_sweep):
    with pytest.raises(ValueError, match="workload kind 'matmul_sweep' is already registered"):
        WORKLOADS.register("matmul_sweep", WorkloadKind(MatmulSweep, lambda spec, context: None))
    same = WorkloadKind(MatmulSweep, run_matmul, record=MatmulRecord)
    WORKLOADS.register("matmul_sweep", same)  # the same entry again: a no-op
