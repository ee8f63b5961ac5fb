"""Layouts users run: ZeRO-1, host offload, sequence and context parallelism, one logits
buffer, against bytes counted by hand; Llama 3.1 8B on v6e-8 as its recipe runs it
fits; bad layouts exit 2 with one line.

Oracles: parameter counts written out from the shape, collective sizes in the
nccl-tests convention (all-gather: gathered output; reduce-scatter: full input), a
host link's time as bytes / bandwidth.
"""

from __future__ import annotations

import pytest

from tests.helpers import assert_one_error_line, run
from tpusim.config.loader import load_chip, load_system
from tpusim.engine import Simulation
from tpusim.errors import InputError
from tpusim.program.builders import parameters_per_layer, prepare_training, training_step
from tpusim.program.builders.emit import emit_program
from tpusim.program.builders.memory import peak_stage, saved_bytes, stage_memory

D, FF, H, HD, SEQ = 64, 128, 4, 16, 32
SHAPE = dict(d_model=D, d_ff=FF, heads=H, head_dim=HD, seq=SEQ)
P_LAYER = 4 * D * H * HD + 2 * D * FF + 2 * D  # plain MLP, MHA, two norm scales
BF16, ADAM = 2, 12


def ops_named(program, word):
    return [op for op in program.ops if word in op.name]


def test_zero1_shards_optimizer_over_data_and_reduce_scatters_gradients():
    n, layers = 4, 2
    kwargs = dict(**SHAPE, layers=layers, batch=8, mesh={"data": n})
    plan = prepare_training(**kwargs, shard_optimizer_over_data=True)
    memory = stage_memory(plan, 0)
    assert memory.optimizer_bytes == layers * P_LAYER * ADAM / n
    assert memory.weights_bytes == layers * P_LAYER * BF16
    assert memory.gradients_bytes == layers * P_LAYER * 4  # those of the fp32 master
    program = emit_program(plan)
    grads = [op for op in program.ops if ".grad." in op.name]
    assert [op.collective for op in grads] == ["reduce-scatter"] * layers
    assert {op.size_bytes for op in grads} == {P_LAYER * BF16}
    optimizer = next(op for op in program.ops if op.name == "optimizer")
    assert optimizer.bytes == layers * P_LAYER / n * (2 * ADAM + 2 * BF16)
    gather = next(op for op in program.ops if op.name == "optimizer.weights.allgather")
    assert gather.collective == "all-gather" and gather.axes == ("data",)
    assert gather.size_bytes == layers * P_LAYER * BF16 and gather.after == ("optimizer",)
    plain = emit_program(prepare_training(**kwargs))
    assert {op.collective for op in plain.ops if ".grad." in op.name} == {"all-reduce"}


def test_optimizer_and_parameter_host_offload_leave_hbm_and_cross_the_host_link():
    layers, bw = 2, 8e9
    kwargs = dict(**SHAPE, layers=layers, batch=2, mesh={"data": 2}, host_bandwidth_Bps=bw)
    base = stage_memory(prepare_training(**kwargs), 0)
    plan = prepare_training(
        **kwargs, optimizer_memory_host_offload=True, param_memory_host_offload=True
    )
    memory = stage_memory(plan, 0)
    assert memory.optimizer_bytes == 0 and memory.weights_bytes == 0
    # one layer's optimiser state streamed, two layers' weights prefetched
    assert memory.buffers_bytes == base.buffers_bytes + P_LAYER * ADAM + 2 * P_LAYER * BF16
    program = emit_program(plan)
    host = {op.name: op for op in program.ops if op.kind == "host_transfer"}
    assert host["optimizer.state.from_host"].bytes == layers * P_LAYER * ADAM
    assert host["optimizer.state.to_host"].bytes == layers * P_LAYER * ADAM
    assert host["optimizer.weights.to_host"].bytes == layers * P_LAYER * BF16
    fetches = [op for name, op in host.items() if ".weights.from_host." in name]
    assert len(fetches) == 2 * layers and {op.bytes for op in fetches} == {P_LAYER * BF16}
    assert all(op.overlap and op.bandwidth_Bps == bw for op in host.values())


def test_logits_take_one_buffer():
    vocab, batch = 1000, 2
    plan = prepare_training(**SHAPE, layers=2, batch=batch, mesh={"data": 1}, vocab=vocab)
    assert stage_memory(plan, 0).buffers_bytes == batch * SEQ * vocab * BF16


def test_sequence_parallel_splits_all_reduces_and_shards_norm_activations():
    tp, batch = 4, 2
    act = batch * SEQ * D * BF16
    # the unfused kernel: its seq^2 scores are the closed form's attention term
    plan = prepare_training(**SHAPE, layers=1, batch=batch, mesh={"tensor": tp},
                         sequence_parallel=True, attention_kernel="naive")  # fmt: skip
    program = emit_program(plan)
    tensor = [op for op in program.ops if op.kind == "collective" and op.axes == ("tensor",)]
    assert not [op for op in tensor if op.collective == "all-reduce"]
    kinds = sorted((op.name.split(".", 2)[2], op.collective) for op in tensor)
    assert kinds == sorted(
        [(f"{where}.{phase}", op) for where in ("sp_in", "sp_out") for phase, op in
         (("fwd", "all-gather" if where == "sp_in" else "reduce-scatter"),
          ("bwd", "reduce-scatter" if where == "sp_in" else "all-gather"))] * 2
    )  # fmt: skip
    assert {op.size_bytes for op in tensor} == {act}
    plain = emit_program(prepare_training(**SHAPE, layers=1, batch=batch, mesh={"tensor": tp}))
    reduced = sum(op.size_bytes for op in plain.ops if op.collective == "all-reduce")
    assert sum(op.size_bytes for op in tensor) == 2 * reduced  # RS + AG = one AR's bytes each
    norm = next(op for op in program.ops if op.name == "L0.attn.norm.fwd")
    assert norm.bytes == 2 * act / tp
    per_token = 6 * D / tp + 4 * (H // tp) * HD
    want = batch * SEQ * per_token + batch * (H // tp) * SEQ * SEQ + 2 * batch * SEQ * FF // tp
    assert saved_bytes(plan.dense) == want * BF16
    # a pipeline stage sends its sequence shard of the activations
    piped = prepare_training(**SHAPE, layers=2, batch=2, mesh={"tensor": 2, "pipeline": 2},
                          sequence_parallel=True, microbatches=2)  # fmt: skip
    permutes = [op for op in emit_program(piped).ops if ".permute." in op.name]
    assert {op.size_bytes for op in permutes} == {SEQ * D * BF16 / 2}


def test_context_parallel_gathers_kv_and_shards_weights_over_the_context_axis():
    c, seq, batch = 4, 128, 1  # one sequence over four chips: batch need not divide
    plan = prepare_training(**SHAPE | {"seq": seq}, layers=2, batch=batch, mesh={"context": c},
                         attention_kernel="naive")  # fmt: skip
    assert plan.dense.seq == seq // c and plan.dense.keys == seq
    program = emit_program(plan)
    kv = ops_named(program, "attn.cp_kv")
    assert sorted(op.collective for op in kv) == ["all-gather"] * 2 + ["reduce-scatter"] * 2
    assert {op.size_bytes for op in kv} == {batch * seq * 2 * H * HD * BF16}
    assert all(op.axes == ("context",) for op in kv)
    scores = next(op for op in program.ops if op.name == "L0.attn.scores.fwd")
    assert (scores.batch, scores.m, scores.k, scores.n) == (batch * H, seq // c, HD, seq)
    gathers = [op for op in program.ops if "weights.allgather" in op.name]
    assert gathers and all(op.axes == ("context",) for op in gathers)
    memory = stage_memory(plan, 0)
    assert memory.weights_bytes == 2 * P_LAYER * BF16 / c
    # each layer keeps the K and V gathered from the other chips for its backward
    others = batch * (seq - seq // c) * 2 * H * HD * BF16
    assert memory.activations_bytes == 2 * (saved_bytes(plan.dense) + others)


def test_a_131k_sequence_on_256_chips_with_context_16_is_expressible():
    shape = dict(d_model=8192, d_ff=28672, heads=64, kv_heads=8, head_dim=128, mlp="gated")
    plan = prepare_training(**shape, layers=80, seq=131072, batch=16,
                         mesh={"fsdp": 16, "context": 16}, remat_policy="full")  # fmt: skip
    assert plan.dense.seqs == 1 and plan.dense.tokens == 131072 // 16
    assert plan.shard == 256


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"seq": 130, "mesh": {"context": 4}}, ["seq (130)", "context", "(4)"]),
        ({"seq": 36, "mesh": {"tensor": 8}, "sequence_parallel": True, "heads": 8},
         ["seq (36)", "sequence_parallel", "(8)"]),
        ({"mesh": {"data": 2, "pipeline": 2}, "context_axis": "data"},
         ["context_axis 'data' is also data_axis"]),
    ],
)  # fmt: skip
def test_bad_layout_is_one_line_naming_the_field(fields, words):
    kwargs = dict(SHAPE, layers=2, batch=4) | fields
    with pytest.raises(InputError) as err:
        prepare_training(**kwargs)
    assert all(w in str(err.value) for w in words), str(err.value)


def test_offloaded_activations_overlap_compute_and_are_bound_by_the_host_link(tmp_path):
    path = tmp_path / "pair.yaml"
    path.write_text("name: pair\ndescription: two chips\nchip: ironwood\n"
                    "topology: {kind: torus, dims: [2]}\nchips: 2\n")  # fmt: skip
    system = load_system(str(path))
    kwargs = dict(**SHAPE, layers=4, batch=4, mesh={"data": 2})

    def step(policy, bandwidth):
        program = training_step(**kwargs, remat_policy=policy, host_bandwidth_Bps=bandwidth)
        return program, Simulation(system, program).run()

    _, kept = step("minimal", 1e30)
    _, fast = step("minimal_offloaded", 1e30)
    assert fast.step_time_s == pytest.approx(kept.step_time_s, rel=1e-9)
    assert fast.compute_time_s == pytest.approx(kept.compute_time_s, rel=1e-12)
    program, slow = step("minimal_offloaded", 1e6)
    host_s = sum(op.bytes for op in program.ops if op.kind == "host_transfer") / 1e6
    assert slow.step_time_s >= host_s > 10 * kept.step_time_s
    # the same compute, but the data-parallel all-reduces now overlap other
    # memory-bound ops, whose HBM they share (tpusim/engine: HBM contention)
    assert slow.compute_time_s == pytest.approx(kept.compute_time_s, rel=1e-3)


def llama_8b_recipe():
    """tpu-recipes training/trillium/Llama3.1-8B-MaxText/v6e-8 runs MaxText's
    ``llama3_1_8b_8192_no_collective_matmul``: per-device batch 3, seq 8192,
    ici_fsdp_parallelism -1 (8), remat custom with decoder_layer_input, query_proj,
    key_proj, value_proj and out_proj offloaded, flash attention, bf16."""
    return prepare_training(
        layers=32, d_model=4096, d_ff=14336, heads=32, kv_heads=8, head_dim=128,
        mlp="gated", vocab=128256, seq=8192, batch=3 * 8, mesh={"fsdp": 8},
        remat_policy="custom",
        remat_tensors=dict.fromkeys(
            ("decoder_layer_input", "query_proj", "key_proj", "value_proj", "out_proj"),
            "offload",
        ),
    )  # fmt: skip


def test_llama_8b_on_v6e_8_fits_where_it_ran():
    """The tpu-recipes run, counted by hand with flash attention (the default): it
    keeps the fp32 logsumexp, not the seq^2 scores; a layer's backward phase (its
    live set, the next layer's offloaded tensors, two layers of gathered weights and
    the largest weight's gradient) and the loss's logits are not live at once."""
    plan = llama_8b_recipe()
    d, ff, h, kv, hd, vocab, t = 4096, 14336, 32, 8, 128, 128256, 3 * 8192
    layer = parameters_per_layer(d, ff, h, hd, kv_heads=kv, mlp="gated")
    local = (32 * layer + 2 * vocab * d) / 8
    held = local * (BF16 + ADAM + 4)  # weights, optimiser, gradients (of the fp32 master)
    full_set = (t * (6 * d + (2 * h + 2 * kv) * hd) + 3 * t * ff) * BF16
    logsumexp = t * h * 4  # fp32 per query row and head
    assert saved_bytes(plan.dense) == full_set + logsumexp
    offloaded = t * (d + h * hd + 2 * kv * hd + d) * BF16  # the next layer's, prefetched
    gathered = 2 * layer * BF16 + d * ff * BF16  # two layers; the MLP matrix's gradient
    layer_phase = full_set + logsumexp + offloaded + gathered
    logits = t * vocab * BF16
    peak = peak_stage(plan)
    assert peak.activations_bytes == 0  # everything kept is offloaded
    assert peak.total_bytes == pytest.approx(held + max(layer_phase, logits), rel=1e-12)
    assert peak.total_bytes <= load_chip("v6e").hbm.capacity_bytes


BASE = """name: t
description: t
plots: false  # figures are tests/test_plots.py's; these tests read rows and CSVs
network: {fidelity: flow}
systems: [ironwood-256]
workloads:
  - name: step
    kind: training_step
    layers: 2
    d_model: 512
    d_ff: 2048
    heads: 8
    head_dim: 64
    global_batch: 64
"""


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ("seq: 1020\nmesh: {data: 32, context: 8}", ["seq (1020)", "context", "(8)"]),
        ("seq: 256\nmesh: {data: 32, tensor: 8}\nremat_policy: most", ["'most'", "full"]),
    ],
)
def test_bad_layout_in_a_scenario_exits_2_with_one_line(capsys, tmp_path, extra, words):
    path = tmp_path / "s.yaml"
    path.write_text(BASE + "".join(f"    {line}\n" for line in extra.splitlines()))
    code, out, err = run(capsys, "run", str(path), "--out", str(tmp_path / "o"), "--quiet")
    line = assert_one_error_line(code, out, err)
    assert all(word in line for word in words), line


def test_reuse_gives_the_full_simulation_with_offloaded_activations(capsys, tmp_path):
    import json

    rows = {}
    for reuse in ("true", "false"):
        path = tmp_path / f"s-{reuse}.yaml"
        extra = ["seq: 256", "mesh: {data: 32, tensor: 8}", "remat_policy: minimal_offloaded",
                 "sequence_parallel: true", f"reuse: {reuse}"]  # fmt: skip
        path.write_text(BASE.replace("layers: 2", "layers: 6")
                        + "".join(f"    {line}\n" for line in extra))  # fmt: skip
        code, out, err = run(capsys, "run", str(path), "--json", "--out",
                             str(tmp_path / reuse), "--quiet")  # fmt: skip
        assert code == 0, err
        rows[reuse] = json.loads(out)["results"][0]
    lines = {r: len((tmp_path / r / "ops.csv").read_text().splitlines()) for r in rows}
    assert lines["true"] < lines["false"]  # 5 layers simulated, the sixth reused
    for key in ("step_time_s", "compute_time_s", "communication_time_s", "mfu"):
        assert rows["true"][key] == pytest.approx(rows["false"][key], rel=1e-6), key
