"""The published runs compiled by MaxText's ``train_compile`` and shipped as artifacts
(configs/measurements/compiled/), replayed with no JAX; and the forms of XLA's TPU
modules their replay needed, hand-written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tpusim.cli import main
from tpusim.program.hlo import hlo_to_program, parse_hlo
from tpusim.program.hlo.artifact import read_artifact
from tpusim.program.hlo.callgraph import Policy, walk
from tpusim.program.hlo.cost import instruction_flops
from tpusim.program.hlo.replica_groups import parse_replica_groups
from tpusim.program.hlo.xla_estimate import estimated_cycles
from tpusim.validation.compiled import (
    COMPILED_DIR,
    CompiledResult,
    by_chip,
    compiled_records,
    validate_compiled,
)
from tpusim.validation.workloads import load_workload_cases

WORKLOADS = COMPILED_DIR.parent / "workloads"
#: The smallest shipped artifact (v5p 32B on 128 chips, 27,620 replayed ops).
SMALL = "v5p-maxtext-1x128-32b"


def _published_step_s() -> dict[str, float]:
    """Case id -> measured step (s), read straight from the workload YAML files."""
    out = {}
    for path in sorted(WORKLOADS.glob("*.yaml")):
        for case in yaml.safe_load(path.read_text())["cases"]:
            value, unit = str(case["measured_step_time"]).split()
            out[case["id"]] = float(value) * {"s": 1.0, "ms": 1e-3}[unit]
    return out


def test_every_record_names_a_published_run_and_how_it_was_made():
    """Each shipped artifact has a record with its command, versions and date, for a
    case of the workload files, compiled for that case's slice."""
    published = _published_step_s()
    records = compiled_records()
    assert records, "no compiled run is shipped"
    for case, record in records.items():
        assert case in published
        assert record.fields["command"].startswith("tpusim compile --maxtext ")
        assert set(record.fields["versions"]) >= {"jax", "libtpu", "maxtext"}
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", record.fields["compiled"])
        assert (
            read_artifact(record.artifact).fields["request"]["maxtext"] == record.fields["maxtext"]
        )


@pytest.mark.slow
def test_replayed_flops_match_xla_cost_analysis():
    """The replayed module's FLOPs per device with loop bodies once, its Pallas kernels
    (splash attention) left out as XLA's cost analysis leaves them, equal XLA's own cost
    analysis stored in the artifact (an independent count) within 1%."""
    [result] = validate_compiled(
        [c for c in load_workload_cases() if c.id == SMALL], {SMALL: compiled_records()[SMALL]}
    )
    artifact = read_artifact(compiled_records()[SMALL].artifact)
    module = parse_hlo(artifact.hlo)
    xla = artifact.cost_analysis["flops"]
    roles = frozenset({"loop_body", "loop_condition", "call", "fused", "async", "custom"})
    kernels = sum(
        site.num_executions * instruction_flops(site.frame.computation, site.instruction)
        for site in walk(module.computations, module.entry, Policy(roles, loop_trip_counts=False))
        if site.instruction.opcode == "custom-call"
    )
    assert kernels > 0
    assert module.flops(loop_trip_counts=False) - kernels == pytest.approx(xla, rel=0.01)
    assert result.simulated_s is not None and result.simulated_s > 0


@pytest.mark.slow
def test_validate_rows_carry_the_published_step_times():
    """A compiled row's measured step is the workload file's figure, and its error is
    (replayed - measured) / measured."""
    published = _published_step_s()
    case = next(c for c in load_workload_cases() if c.id == SMALL)
    [result] = validate_compiled([case], {SMALL: compiled_records()[SMALL]})
    row = result.row()
    assert row["measured_s"] == pytest.approx(published[SMALL])
    assert row["error"] == pytest.approx((row["simulated_s"] - published[SMALL]) / published[SMALL])
    assert row["xla_estimate_error"] == pytest.approx(
        (row["xla_estimate_s"] - published[SMALL]) / published[SMALL]
    )
    assert sum(row["busy_by_kind_s"].values()) <= row["simulated_s"] * (1 + 1e-9)


LOOP_WITH_ESTIMATES = """HloModule est

%body (p: (s32[], f32[8,8])) -> (s32[], f32[8,8]) {
  %p = (s32[], f32[8,8]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %x = f32[8,8]{1,0} get-tuple-element(%p), index=1
  %n = f32[8,8]{1,0} negate(%x), backend_config={"window_config":{"estimated_cycles":"700"}}
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  ROOT %t = (s32[], f32[8,8]{1,0}) tuple(%next, %n)
}

%cond (p: (s32[], f32[8,8])) -> pred[] {
  %p = (s32[], f32[8,8]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %limit = s32[] constant(12)
  ROOT %lt = pred[] compare(%i, %limit), direction=LT
}

ENTRY %main (x: f32[8,8]) -> (s32[], f32[8,8]) {
  %x = f32[8,8]{1,0} parameter(0)
  %a = f32[8,8]{1,0} abs(%x),\
 backend_config={"flag_configs":[],"window_config":{"estimated_cycles":"50"}}
  %zero = s32[] constant(0)
  %in = (s32[], f32[8,8]{1,0}) tuple(%zero, %a)
  ROOT %loop = (s32[], f32[8,8]{1,0}) while(%in), condition=%cond, body=%body,\
 backend_config={"known_trip_count":{"n":"12"}}
}
"""


def test_xla_estimated_cycles_count_loop_bodies_by_their_trip_count():
    """50 cycles once, 700 cycles x 12 iterations: 8,450 cycles over 13 op runs."""
    found = estimated_cycles(parse_hlo(LOOP_WITH_ESTIMATES))
    assert found.cycles == 50 + 700 * 12
    assert found.estimated_runs == 13


def test_shardy_sub_axis_replica_groups():
    """``{'f':(4)4}`` on a mesh f=16, t=4 (device = 4 f + t, f = 4 major + minor):
    devices varying the minor part of f, t and f's major part fixed; ``(1)4`` the
    major part."""
    minor = parse_replica_groups("mesh['f'=16,'t'=4] {'f':(4)4}")
    assert minor[0] == [0, 4, 8, 12] and minor[1] == [1, 5, 9, 13] and len(minor) == 16
    major = parse_replica_groups("mesh['f'=16] {'f':(1)4}")
    assert major == [[0, 4, 8, 12], [1, 5, 9, 13], [2, 6, 10, 14], [3, 7, 11, 15]]
    with pytest.raises(ValueError, match="sub-axis"):
        parse_replica_groups("mesh['f'=16] {'f':(3)4}")


RELAYOUT_SLICE = """HloModule relayout

%copy_fusion (p0: bf16[80,1024,1024]) -> bf16[80,1024,1024] {
  %p0 = bf16[80,1024,1024]{2,1,0} parameter(0)
  ROOT %c = bf16[80,1024,1024]{1,2,0} copy(%p0)
}

%fused (param_0: bf16[80,1024,1024], param_1: s32[]) -> bf16[1024,1024] {
  %param_0 = bf16[80,1024,1024]{2,1,0} parameter(0)
  %f = bf16[80,1024,1024]{1,2,0} fusion(%param_0), kind=kLoop,\
 output_to_operand_aliasing={{}: (0, {})}, calls=%copy_fusion
  %param_1 = s32[] parameter(1)
  %z = s32[] constant(0)
  %ds = bf16[1,1024,1024]{2,1,0} dynamic-slice(%f, %param_1, %z, %z),\
 dynamic_slice_sizes={1,1024,1024}
  %b = bf16[1024,1024]{1,0} bitcast(%ds)
  ROOT %n = bf16[1024,1024]{1,0} negate(%b)
}

ENTRY %main (stack: bf16[80,1024,1024], i: s32[]) -> bf16[1024,1024] {
  %stack = bf16[80,1024,1024]{2,1,0} parameter(0)
  %i = s32[] parameter(1)
  ROOT %out = bf16[1024,1024]{1,0} fusion(%stack, %i), kind=kLoop, calls=%fused
}
"""


def test_a_slice_read_through_a_relayout_reads_the_slice():
    """A fusion slicing one layer (2 MiB) of an 80-layer stack through an in-place copy
    fusion reads the slice, not the stack: 2 MiB read + 4 bytes + 2 MiB written."""
    [op] = hlo_to_program(parse_hlo(RELAYOUT_SLICE)).ops
    assert op.bytes == 2 * 1024 * 1024 * 2 + 4


def test_records_are_valid_json_beside_their_artifacts():
    """Each record file parses and its artifact sits beside it."""
    for path in sorted(Path(COMPILED_DIR).glob("*.json")):
        data = json.loads(path.read_text())
        assert (path.parent / data["artifact"]).is_file()


HEAD_WINDOW = """HloModule heads

ENTRY %main (x: bf16[2,64,32,1], w: bf16[4,16,32,1]) -> bf16[2,64,4,16] {
  %x = bf16[2,64,32,1]{3,2,1,0} parameter(0)
  %w = bf16[4,16,32,1]{3,2,1,0} parameter(1)
  ROOT %c = bf16[2,64,4,16]{3,2,1,0} convolution(%x, %w),\
 window={size=1x4 pad=0_0x3_3 rhs_reversal=0x1}, dim_labels=0bf1_1oi0->0b1f
}
"""


def test_a_projection_over_a_padded_head_window_is_one_matmul():
    """XLA's form of ``[2 x 64 tokens, 32] @ [32, 4 heads x 16]``: the kernel slides
    over the 4 heads, each output head meeting one input position. One matmul of m =
    128 token rows, k = 32, n = 64 (not m = 512 rows reading the input once per head
    with n = 16)."""
    [op] = hlo_to_program(parse_hlo(HEAD_WINDOW)).ops
    assert (op.batch, op.m, op.n, op.k) == (1, 128, 64, 32)


HOST_SLICES = """HloModule offload

ENTRY %main (stack: bf16[80,256,1024], i: s32[], x: bf16[1,256,1024]) -> bf16[1,256,1024] {
  %stack = bf16[80,256,1024]{2,1,0:S(5)} parameter(0)
  %i = s32[] parameter(1)
  %x = bf16[1,256,1024]{2,1,0} parameter(2)
  %z = s32[] constant(0)
  %ds = ((bf16[80,256,1024]{2,1,0:S(5)}, s32[], s32[], s32[]), bf16[1,256,1024]{2,1,0}, \
u32[]{:S(2)}) dynamic-slice-start(%stack, %i, %z, %z), dynamic_slice_sizes={1,256,1024}
  %dd = bf16[1,256,1024]{2,1,0} dynamic-slice-done(%ds)
  %us = ((bf16[80,256,1024]{2,1,0:S(5)}, bf16[1,256,1024]{2,1,0}, s32[], s32[], s32[]), \
bf16[80,256,1024]{2,1,0:S(5)}, u32[]{:S(2)}) dynamic-update-slice-start(%stack, %x, %i, %z, %z)
  %ud = bf16[80,256,1024]{2,1,0:S(5)} dynamic-update-slice-done(%us)
  ROOT %n = bf16[1,256,1024]{2,1,0} negate(%dd)
}
"""


def test_async_dynamic_slices_of_host_memory_are_host_transfers():
    """Reading one layer (256 x 1024 bf16, 512 KiB) of a stack kept in host memory
    (``S(5)``) and writing one back: two asynchronous host transfers of 512 KiB, no
    unknown op."""
    module = parse_hlo(HOST_SLICES)
    hosts = [op for op in hlo_to_program(module).ops if op.kind == "host_transfer"]
    assert [(op.name, op.bytes, op.overlap) for op in hosts] == [
        ("ds", 256 * 1024 * 2, True),
        ("us", 256 * 1024 * 2, True),
    ]
    assert not module.unknown_ops


def test_per_chip_medians_by_hand():
    """Medians of |error| per chip over hand-made results: v5p runs 10% and 30% slow
    (median 20%), one Ironwood run 5% fast; XLA's estimate of the v5p runs 2% and 4%
    slow (median 3%)."""
    cases = {c.id: c for c in load_workload_cases()}
    v5p, iw = cases["v5p-maxtext-1x128-32b"], cases["iw-llama3.1-70b-64-bf16"]
    w = cases["v5p-maxtext-1x256-128b"]
    results = [
        CompiledResult(v5p, "ok", v5p.measured_s * 1.1, xla_estimate_s=v5p.measured_s * 1.02),
        CompiledResult(w, "ok", w.measured_s * 1.3, xla_estimate_s=w.measured_s * 1.04),
        CompiledResult(iw, "ok", iw.measured_s * 0.95),
    ]
    chips = by_chip(results)
    assert chips["v5p"]["runs"] == 2
    assert chips["v5p"]["median_abs_error"] == pytest.approx(0.20)
    assert chips["v5p"]["xla_estimate_median_abs_error"] == pytest.approx(0.03)
    assert chips["ironwood"]["median_abs_error"] == pytest.approx(0.05)
    assert chips["ironwood"]["xla_estimate_median_abs_error"] is None


def test_compiled_needs_workloads(capsys):
    """``--compiled`` alone is one error line, exit 2."""
    assert main(["validate", "--compiled"]) == 2
    assert "--compiled" in capsys.readouterr().err
