"""The training_step workload: reuse of identical loop iterations against the full
simulation, the results' new columns, and bad input (exit 2) and a step that does not
fit (exit 1), each one line naming the field and the numbers."""

from __future__ import annotations

import json

import pytest

from tests.helpers import assert_one_error_line, run

BASE = """name: t
description: t
plots: false  # figures are tests/test_plots.py's; these tests read rows and CSVs
network: {fidelity: flow}
systems: [ironwood-256]
workloads:
  - name: step
    kind: training_step
    layers: 8
    d_model: 512
    d_ff: 2048
    heads: 8
    head_dim: 64
    seq: 256
    mlp: gated
    vocab: 4000
"""


def scenario(tmp_path, extra: str) -> str:
    path = tmp_path / "s.yaml"
    path.write_text(BASE + "".join(f"    {line}\n" for line in extra.strip().splitlines()))
    return str(path)


def run_json(capsys, tmp_path, extra: str, out_dir: str = "out") -> dict:
    code, out, err = run(capsys, "run", scenario(tmp_path, extra), "--json", "--out",
                         str(tmp_path / out_dir), "--quiet")  # fmt: skip
    assert code == 0, err
    return json.loads(out)["results"][0]


def op_rows(tmp_path, out_dir: str) -> int:
    return len((tmp_path / out_dir / "ops.csv").read_text().splitlines())


PIPELINED = """
global_batch: 64
mesh: {pipeline: 4, fsdp: 8, tensor: 8}
microbatches: 8
"""


COMPARED = ("step_time_s", "compute_time_s", "communication_time_s", "mfu")
COMPARED += ("communication_busy_time_s", "max_link_utilization", "busiest_link_bytes")
SCHEDULES = ["pipeline: 1f1b", "pipeline: interleaved\nvirtual_stages: 2"]


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_reuse_gives_the_full_simulation(capsys, tmp_path, schedule):
    reused = run_json(capsys, tmp_path, PIPELINED + schedule, "reused")
    full = run_json(capsys, tmp_path, PIPELINED + schedule + "\nreuse: false", "full")
    assert op_rows(tmp_path, "reused") < op_rows(tmp_path, "full") / 2  # 5 iterations, not 11+
    for key in COMPARED:
        assert reused[key] == pytest.approx(full[key], rel=1e-6), key
    v = 2 if "virtual" in schedule else 1
    assert reused["pipeline_bubble_fraction"] == pytest.approx(3 / (8 * v + 3))
    assert reused["peak_hbm_bytes_per_chip"] == full["peak_hbm_bytes_per_chip"] > 0


def test_unpipelined_step_has_no_bubble_column(capsys, tmp_path):
    row = run_json(capsys, tmp_path, "global_batch: 32\nmesh: {data: 32, tensor: 8}")
    assert "pipeline_bubble_fraction" not in row and row["peak_hbm_bytes_per_chip"] > 0


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ("global_batch: 64\nmesh: {data: 16, tensor: 16}", ["heads (8)", "(16)"]),
        ("global_batch: 256\nmesh: {data: 32, expert: 8}\nexperts: 12", ["experts (12)", "(8)"]),
        ("global_batch: 64\nmesh: {data: 16, pipeline: 16}", ["pipeline stages (16", "(8)"]),
        ("global_batch: 60\nmesh: {data: 32, tensor: 8}", ["global_batch (60)", "(32)"]),
        ("global_batch: 64\nmesh: {data: 32, tensor: 8}\nmicrobatches: 3", ["microbatches", "(3)"]),
    ],
)
def test_bad_input_exits_2_naming_field_and_numbers(capsys, tmp_path, extra, words):
    path = scenario(tmp_path, extra)
    code, out, err = run(capsys, "run", path, "--out", str(tmp_path / "o"), "--quiet")
    line = assert_one_error_line(code, out, err)
    assert all(word in line for word in words), line


def test_step_that_does_not_fit_exits_1_saying_by_how_much_and_what(capsys, tmp_path):
    extra = "layers: 64\nd_model: 16384\nd_ff: 65536\nheads: 128\nhead_dim: 128\n"
    extra += "global_batch: 256\nmesh: {data: 256}"
    text = BASE.replace("    layers: 8\n    d_model: 512\n    d_ff: 2048\n    heads: 8\n"
                        "    head_dim: 64\n", "")  # fmt: skip
    path = tmp_path / "big.yaml"
    path.write_text(text + "".join(f"    {line}\n" for line in extra.splitlines()))
    code, _, err = run(capsys, "run", str(path), "--out", str(tmp_path / "o"), "--quiet")
    assert code == 1 and "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert "out of memory" in line and "short by" in line
    for part in ("weights", "optimizer", "gradients", "activations"):
        assert part in line


def test_batch_per_shard_counts_the_batch_roles_only(capsys, tmp_path):
    # data 8 x fsdp 4 shard the batch; tensor 8 does not
    row = run_json(capsys, tmp_path, "batch_per_shard: 2\nmesh: {data: 8, fsdp: 4, tensor: 8}")
    assert row["tokens_per_s"] == pytest.approx(2 * 8 * 4 * 256 / row["step_time_s"])


@pytest.mark.parametrize("mesh", ["{data: 32, tensor: 8}", "{fsdp: 32, tensor: 8}"])
def test_layer_reuse_gives_the_full_simulation(capsys, tmp_path, mesh):
    extra = f"layers: 12\nglobal_batch: 32\nmesh: {mesh}"
    text = BASE.replace("    layers: 8\n", "")
    path = tmp_path / "s.yaml"
    for name, more in (("reused", ""), ("full", "\nreuse: false")):
        path.write_text(text + "".join(f"    {line}\n" for line in (extra + more).splitlines()))
        code, out, err = run(capsys, "run", str(path), "--json", "--out", str(tmp_path / name),
                             "--quiet")  # fmt: skip
        assert code == 0, err
        rows = json.loads(out)["results"]
        if name == "reused":
            reused = rows[0]
        else:
            full = rows[0]
    assert op_rows(tmp_path, "reused") < op_rows(tmp_path, "full") * 0.6  # 5 layers of 12
    for key in COMPARED:
        assert reused[key] == pytest.approx(full[key], rel=1e-6), key
