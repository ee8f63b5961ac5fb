"""Whole-model decode steps (issue 14): ``model: NAME`` on ``decode_step`` builds the
serving iteration of a decode batch; checked against the plain builder's layer, the
serving cost path and the memory arithmetic."""

from __future__ import annotations

import pytest

from tests.helpers import assert_one_error_line, run
from tpusim.config.loader import load_model, load_system
from tpusim.engine import Simulation
from tpusim.program.builders import decode_step
from tpusim.program.builders.decode import model_decode_step
from tpusim.program.builders.replica import replica_shape
from tpusim.program.ir import ProgramError
from tpusim.serving.costs import IterationCosts, ReplicaBatch
from tpusim.workloads.decode_step import DecodeWorkload

PLAIN = dict(layers=2, d_model=1024, d_ff=4096, heads=16, head_dim=64, kv_heads=4)


def _signature(op):
    return (op.kind, op.m, op.n, op.k, op.batch, op.bytes, op.memory, op.collective, op.size_bytes)


def test_a_plain_model_builds_the_same_layers_as_the_plain_builder():
    """Through the whole-model path (an LM head forces it) a plain model's layers are
    op for op the plain builder's; only the embedding and output ops are added."""
    args = dict(batch=8, context=512, mesh={"model": 4}, tensor_axis="model")
    plain = decode_step(**PLAIN, **args)
    whole = model_decode_step(**PLAIN, vocab=32000, **args)
    layers = [op for op in whole.ops if op.name.startswith("L")]
    assert [_signature(o) for o in layers] == [_signature(o) for o in plain.ops]
    extra = {op.name for op in whole.ops} - {op.name for op in layers}
    assert extra == {"embed", "final.norm", "lm_head", "sample", "sample.gather"}


def test_whole_model_decode_equals_the_serving_iteration_cost():
    """The engine on the whole program equals the serving path's decomposed, cached
    cost of the same batch (64 sequences is its own bucket)."""
    fields = load_model("llama-3.1-70b").builder_fields()
    program = model_decode_step(
        **fields, batch=64, context=2048, mesh={"model": 8}, tensor_axis="model"
    )
    system = load_system("tpu8i-pod")
    shape = replica_shape(fields, tp=8, ep=1, replicas=1, dtype="bf16", kv_cache="hbm")
    costs = IterationCosts(system, shape)
    expected = costs.time_s(ReplicaBatch(decode=64, kv_tokens=64 * 2048))
    # the serving path's system: its HBM term is the (here absent) serving overheads'
    sim = Simulation(costs.system, program, topology=costs.topology, routes=costs.routes)
    assert sim.run().step_time_s == pytest.approx(expected, rel=1e-9)
    kv = 80 * 64 * 2048 * 2 * 1 * 128 * 2  # layers x tokens x K,V x local KV head x dim x bf16
    assert program.memory_bytes["hbm"] == pytest.approx(
        (load_model("llama-3.1-70b").parameters() + 7 * (80 * 2 * 8192 + 8192)) * 2 / 8 + kv
    )


def test_preset_fields_reach_the_workload():
    spec = DecodeWorkload.model_validate(
        {"kind": "decode_step", "name": "d", "model": "deepseek-v3", "batch": 8,
         "context": 128, "mesh": {"expert": 8}, "expert_axis": "expert"}
    )  # fmt: skip
    assert spec.whole_model() and spec.attention == "mla" and spec.experts == 256
    assert spec.tokens_per_step() == 8.0
    plain = DecodeWorkload.model_validate({"kind": "decode_step", "name": "d", **PLAIN,
                                           "batch": 1, "context": 8, "mesh": {"r": 2}})  # fmt: skip
    assert not plain.whole_model() and "vocab" not in plain.program_fields()


def test_expert_axis_must_be_a_mesh_axis():
    fields = load_model("deepseek-v3").builder_fields()
    with pytest.raises(ProgramError, match="expert_axis 'e' is not an axis"):
        model_decode_step(**fields, batch=8, context=64, mesh={"x": 8}, expert_axis="e")


def test_model_decode_scenario_bad_tp_is_one_line(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: s\nsystems: [tpu8i-pod]\nworkloads:\n"
        "  - {name: d, kind: decode_step, model: llama-3.1-70b, batch: 1, context: 128,"
        " mesh: {replica: 72, model: 16}, tensor_axis: model}\n"
    )
    out = str(tmp_path / "o")
    line = assert_one_error_line(*run(capsys, "run", str(path), "--out", out, "--quiet"))
    assert "kv_heads (8) is not divisible" in line
