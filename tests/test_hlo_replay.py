"""Replaying HLO fixtures on systems: ``tpusim hlo`` and the engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import assert_one_error_line, run

from tpusim.engine import RunSettings, Simulation
from tpusim.network import NetworkSettings
from tpusim.program.hlo import hlo_to_program, load_hlo, parse_hlo, replay_program
from tpusim.workloads.hlo import hlo_summary

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "hlo"
MODULES = sorted(FIXTURES.glob("*.hlo.txt"))
HLO_FIELDS = (
    "system",
    "chips",
    "num_ops",
    "flops_per_chip",
    "collectives",
    "collective_bytes_per_chip",
    "step_time_s",
    "compute_time_s",
    "communication_time_s",
    "exposed_communication_time_s",
)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name.split(".")[0])
def test_replay_lies_between_compute_and_compute_plus_communication(path):
    record = hlo_summary(str(path), "v5e-pod", "flow")
    assert record["compute_time_s"] <= record["step_time_s"] * (1 + 1e-12)
    assert record["step_time_s"] <= (record["compute_time_s"] + record["communication_time_s"]) * (
        1 + 1e-9
    )
    assert record["step_time_s"] > 0


def test_every_collective_runs_on_its_replica_groups():
    module, program = load_hlo(FIXTURES / "tensor_parallel_8.hlo.txt")
    replay = replay_program(module, program, 256)
    collectives = [op for op in replay.ops if op.kind == "collective"]
    assert collectives and all(op.groups for op in collectives)
    for op in collectives:
        members = sorted(c for g in op.groups for c in g)
        assert members == sorted(set(members)) and max(members) < module.num_devices
    result = Simulation("v5e-pod", replay, RunSettings(NetworkSettings.of("analytic"))).run()
    assert result.communication_time_s > 0


def test_replay_needs_nothing_but_its_arguments():
    """The groups travel on the program's ops: replaying with a module that was parsed
    separately and never lowered gives the same chips as the usual load_hlo path."""
    path = FIXTURES / "tpu_async_8.hlo.txt"
    program = hlo_to_program(parse_hlo(path.read_text(), str(path)), "p")
    fresh = parse_hlo(path.read_text(), str(path))  # never given to hlo_to_program
    order = [7, 6, 5, 4, 3, 2, 1, 0]
    got = replay_program(fresh, program, 16, order)
    want = replay_program(*load_hlo(path), 16, order)
    assert [op.groups for op in got.ops] == [op.groups for op in want.ops]
    by_name = {op.name: op for op in got.ops}
    # [2,4]<=[4,2]T(1,0): devices (0,2,4,6), (1,3,5,7) on chips 7-d: not one group of all
    assert by_name["all-reduce-start"].groups == ((7, 5, 3, 1), (6, 4, 2, 0))
    assert by_name["all-reduce.3"].groups == ((7, 3), (6, 2), (5, 1), (4, 0))


def test_hlo_json_contract(capsys):
    code, out, err = run(
        capsys,
        "hlo",
        str(FIXTURES / "data_parallel_8.hlo.txt"),
        "--system",
        "ironwood-256",
        "--json",
    )
    assert code == 0, err
    record = json.loads(out)
    assert all(field in record for field in HLO_FIELDS)
    assert record["chips"] == 8 and record["collectives"] == {"all-reduce": 1}


def test_module_for_more_devices_than_the_system_has(capsys, tmp_path):
    small = tmp_path / "pair.yaml"
    small.write_text("name: pair\nchip: v5e\ntopology: {kind: torus, dims: [4]}\n")
    line = assert_one_error_line(
        *run(capsys, "hlo", str(FIXTURES / "fsdp_8.hlo.txt"), "--system", str(small))
    )
    assert "fsdp_8.hlo.txt:1:" in line and "8 devices" in line and "4 chips" in line


def test_garbled_module_exits_2_naming_file_and_line(capsys, tmp_path):
    bad = tmp_path / "bad.hlo.txt"
    text = (FIXTURES / "data_parallel_4.hlo.txt").read_text().splitlines()
    bad.write_text("\n".join(text[: len(text) // 2]) + "\n  %x = f32[4")
    line = assert_one_error_line(*run(capsys, "hlo", str(bad), "--system", "v5e-pod"))
    assert "bad.hlo.txt:" in line


def test_device_order_is_overridable(capsys):
    """data_parallel_4 on a v5e row (chips 0..3) vs a 2x2 square (0, 1, 16, 17): both are
    4-chip all-reduces; the order changes where they run, and a bad order is an error."""
    row = hlo_summary(str(FIXTURES / "data_parallel_4.hlo.txt"), "v5e-pod", "flow")
    square = hlo_summary(
        str(FIXTURES / "data_parallel_4.hlo.txt"), "v5e-pod", "flow", [0, 1, 16, 17]
    )
    assert row["collective_bytes_per_chip"] == square["collective_bytes_per_chip"]
    assert row["step_time_s"] != square["step_time_s"]
    line = assert_one_error_line(
        *run(
            capsys,
            "hlo",
            str(FIXTURES / "data_parallel_4.hlo.txt"),
            "--system",
            "v5e-pod",
            "--device-chips",
            "0,0,1,2",
        )
    )
    assert "4 chips" in line and "each as often as the others" in line
