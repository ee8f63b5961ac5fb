"""Tests for tpusim.program.builders: FLOPs, collective sizes and DAG shape against
oracles computed by hand here (not with the builders' own helpers)."""

from __future__ import annotations

import pytest

from tpusim.program.builders import (
    decode_step,
    parameters_per_layer,
    step_flops,
    training_step,
)
from tpusim.program.ir import Program, ProgramError, topological_order

SHAPE = dict(layers=3, d_model=512, d_ff=2048, heads=8, head_dim=64, seq=256)
BF16 = 2


def hand_forward_flops(*, layers, d_model, d_ff, heads, head_dim, seq, seqs, kernel="flash"):
    """Forward useful FLOPs of the whole model on one chip, unsharded weights: causal
    flash attention counts the seq (seq + 1) / 2 unmasked (query, key) pairs, naive
    attention every one of the seq^2."""
    tokens = seqs * seq
    hd = heads * head_dim
    dense = 2 * tokens * (d_model * 3 * hd + hd * d_model + 2 * d_model * d_ff)
    pairs = seq * (seq + 1) / 2 if kernel == "flash" else seq**2
    attention = 2 * 2 * seqs * heads * pairs * head_dim
    return layers * (dense + attention)


def hand_params(d_model, d_ff, heads, head_dim):
    return 4 * d_model * heads * head_dim + 2 * d_model * d_ff + 2 * d_model


def collectives(program: Program, kind: str) -> list:
    return [op for op in program.ops if op.kind == "collective" and op.collective == kind]


def assert_valid_dag(program: Program, sink: str | None = None) -> None:
    names = [op.name for op in program.ops]
    assert len(names) == len(set(names))
    order = topological_order(program.ops)
    assert len(order) == len(program.ops)
    roots = [op for op in program.ops if not op.after]
    assert len(roots) == 1, [op.name for op in roots]
    # every op reachable from the one root
    users: dict[str, list[str]] = {n: [] for n in names}
    for op in program.ops:
        for dep in op.after:
            users[dep].append(op.name)
    seen, todo = set(), [roots[0].name]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += users[name]
    assert seen == set(names)
    # every op feeds the final op (nothing dangling)
    sink = sink or order[-1].name
    by_name = {op.name: op for op in program.ops}
    seen, todo = set(), [sink]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += by_name[name].after
    assert seen == set(names)


# --------------------------------------------------------------------------- FLOPs


def test_parameters_per_layer_by_hand():
    assert parameters_per_layer(512, 2048, 8, 64) == hand_params(512, 2048, 8, 64)
    moe = parameters_per_layer(512, 2048, 8, 64, experts=4)
    assert moe == 4 * 512 * 512 + 4 * 2 * 512 * 2048 + 512 * 4 + 2 * 512
    gqa = parameters_per_layer(512, 2048, 8, 64, kv_heads=2)
    assert gqa == 512 * (8 + 4) * 64 + 8 * 64 * 512 + 2 * 512 * 2048 + 2 * 512


def test_training_flops_are_three_times_forward_pure_data_parallel():
    program = training_step(**SHAPE, batch=32, mesh={"data": 8})
    fwd = hand_forward_flops(**SHAPE, seqs=32 // 8)
    assert step_flops(program) == pytest.approx(3 * fwd, rel=1e-12)
    assert program.flops_per_chip == step_flops(program)
    assert_valid_dag(program, "optimizer")


def test_tensor_parallel_divides_matmul_flops():
    dp = training_step(**SHAPE, batch=32, mesh={"data": 4})
    tp = training_step(**SHAPE, batch=32, mesh={"data": 4, "model": 4}, tensor_axis="model")
    fwd = hand_forward_flops(**SHAPE, seqs=32 // 4)
    assert step_flops(tp) == pytest.approx(3 * fwd / 4, rel=1e-12)
    assert step_flops(tp) == pytest.approx(step_flops(dp) / 4, rel=1e-12)
    # two all-reduces of tokens*d_model activations per layer, forward and backward
    ars = [op for op in collectives(tp, "all-reduce") if op.axes == ("model",)]
    assert len(ars) == 4 * SHAPE["layers"]
    assert {op.size_bytes for op in ars} == {8 * SHAPE["seq"] * SHAPE["d_model"] * BF16}
    assert all(op.overlap for op in ars)  # async: XLA's latency-hiding scheduler
    assert_valid_dag(tp, "optimizer")


def test_naive_attention_flops_are_three_times_forward():
    program = training_step(**SHAPE, batch=32, mesh={"data": 8}, attention_kernel="naive")
    fwd = hand_forward_flops(**SHAPE, seqs=32 // 8, kernel="naive")
    assert step_flops(program) == pytest.approx(3 * fwd, rel=1e-12)


@pytest.mark.parametrize(("kernel", "matmuls"), [("flash", 4), ("naive", 6)])
def test_backward_has_two_matmuls_per_forward_matmul(kernel, matmuls):
    """qkv, out, up, down (+ scores and context when naive) per layer; flash attention
    is one kernel forward and one backward."""
    program = training_step(**SHAPE, batch=8, mesh={"data": 8}, attention_kernel=kernel)
    fwd = [op for op in program.ops if op.kind == "matmul" and op.name.endswith(".fwd")]
    bwd_in = [op for op in program.ops if op.name.endswith(".bwd_input")]
    bwd_w = [op for op in program.ops if op.name.endswith(".bwd_weight")]
    assert len(fwd) == len(bwd_in) == len(bwd_w) == matmuls * SHAPE["layers"]
    kernels = [op.name.rsplit(".", 1)[1] for op in program.ops if op.kind == "kernel"]
    assert kernels == (["fwd"] * 3 + ["bwd"] * 3 if kernel == "flash" else [])
    by_name = {op.name: op for op in program.ops}
    for op in fwd:
        base = op.name.removesuffix(".fwd")
        assert by_name[base + ".bwd_input"].flops == op.flops
        assert by_name[base + ".bwd_weight"].flops == op.flops


def test_head_dim_is_the_contraction_of_the_attention_scores():
    for hd in (64, 128):
        shape = {**SHAPE, "head_dim": hd}
        program = training_step(**shape, batch=8, mesh={"data": 2}, attention_kernel="naive")
        scores = [op for op in program.ops if op.name.endswith("attn.scores.fwd")]
        assert len(scores) == SHAPE["layers"]
        for op in scores:
            assert op.k == hd
            assert (op.batch, op.m, op.n) == (4 * SHAPE["heads"], SHAPE["seq"], SHAPE["seq"])
        context = [op for op in program.ops if op.name.endswith("attn.context.fwd")]
        assert all(op.n == hd and op.k == SHAPE["seq"] for op in context)


# ------------------------------------------------------------------ data parallelism


def test_gradient_allreduces_sum_to_the_parameters():
    program = training_step(**SHAPE, batch=16, mesh={"data": 8})
    ars = collectives(program, "all-reduce")
    assert len(ars) == SHAPE["layers"]
    assert all(op.axes == ("data",) and op.overlap for op in ars)
    per_layer = hand_params(SHAPE["d_model"], SHAPE["d_ff"], SHAPE["heads"], SHAPE["head_dim"])
    assert sum(op.size_bytes for op in ars) == per_layer * SHAPE["layers"] * BF16
    optimizer = next(op for op in program.ops if op.name == "optimizer")
    assert {op.name for op in ars} <= set(optimizer.after)


def test_gradient_allreduce_overlaps_the_backward_of_earlier_layers():
    program = training_step(**SHAPE, batch=16, mesh={"data": 8})
    by_name = {op.name: op for op in program.ops}
    ar = by_name["L2.grad.allreduce"]
    assert ar.overlap
    # the earlier layers' backward does not wait for it
    assert all(ar.name not in op.after for op in program.ops if op.name != "optimizer")


def test_memory_counts_adam_state_and_activations():
    program = training_step(**SHAPE, batch=16, mesh={"data": 8})
    params = hand_params(512, 2048, 8, 64) * SHAPE["layers"]
    assert program.memory_bytes["hbm"] > params * (2 + 4 + 8 + 2)
    bigger = training_step(**SHAPE, batch=32, mesh={"data": 8})
    assert bigger.memory_bytes["hbm"] > program.memory_bytes["hbm"]  # more activations


# ------------------------------------------------------------------------------ FSDP


def test_fsdp_gathers_weights_and_reduce_scatters_gradients():
    mesh = {"data": 2, "fsdp": 4}
    program = training_step(**SHAPE, batch=16, mesh=mesh, fsdp_axis="fsdp")
    layers = SHAPE["layers"]
    per_layer_bytes = hand_params(512, 2048, 8, 64) * BF16
    gathers = collectives(program, "all-gather")
    scatters = collectives(program, "reduce-scatter")
    assert len(gathers) == 2 * layers  # before forward and before backward
    assert len(scatters) == layers
    assert all(op.axes == ("fsdp",) for op in gathers + scatters)
    assert {op.size_bytes for op in gathers + scatters} == {per_layer_bytes}
    ars = collectives(program, "all-reduce")
    assert len(ars) == layers and all(op.axes == ("data",) for op in ars)
    assert sum(op.size_bytes for op in ars) == pytest.approx(layers * per_layer_bytes / 4)
    # tokens per chip = batch * seq / (data * fsdp)
    fwd = hand_forward_flops(**SHAPE, seqs=16 // 8)
    assert step_flops(program) == pytest.approx(3 * fwd, rel=1e-12)
    # each layer's first forward op waits for its weights
    by_name = {op.name: op for op in program.ops}
    assert "L1.weights.allgather.fwd" in by_name["L1.attn.norm.fwd"].after
    assert "L1.weights.allgather.bwd" in by_name["L1.mlp.residual.bwd"].after
    assert_valid_dag(program, "optimizer")


def test_fsdp_alone_has_no_data_allreduce():
    program = training_step(**SHAPE, batch=16, mesh={"fsdp": 8}, data_axis=None, fsdp_axis="fsdp")
    assert collectives(program, "all-reduce") == []
    assert len(collectives(program, "reduce-scatter")) == SHAPE["layers"]


# ------------------------------------------------------------------------------- MoE


def test_moe_all_to_alls_over_the_expert_axis():
    mesh = {"data": 2, "expert": 4}
    program = training_step(**SHAPE, batch=16, mesh=mesh, experts=8, expert_axis="expert", top_k=2)
    tokens = 16 // 8 * SHAPE["seq"]
    a2a = collectives(program, "all-to-all")
    assert len(a2a) == 4 * SHAPE["layers"]  # dispatch and combine, forward and backward
    assert all(op.axes == ("expert",) for op in a2a)
    assert {op.size_bytes for op in a2a} == {tokens * 2 * SHAPE["d_model"] * BF16}
    ups = [op for op in program.ops if op.name.endswith("moe.up.fwd")]
    assert all(op.m == tokens * 2 and op.n == SHAPE["d_ff"] for op in ups)
    # expert gradients are all-reduced over data only, dense ones over data and expert
    by_name = {op.name: op for op in program.ops}
    assert by_name["L0.grad.experts.allreduce"].axes == ("data",)
    assert by_name["L0.grad.experts.allreduce"].size_bytes == 2 * 2 * 512 * 2048 * BF16
    # dense ones over data and expert, hierarchically: reduce-scatter over expert,
    # all-reduce of the shard over data, all-gather over expert
    assert by_name["L0.grad.inner_reduce_scatter"].axes == ("expert",)
    assert by_name["L0.grad.allreduce"].axes == ("data",)
    dense = by_name["L0.grad.inner_all_gather"].size_bytes
    assert by_name["L0.grad.allreduce"].size_bytes == dense / 4
    assert_valid_dag(program, "optimizer")


def test_moe_with_experts_on_the_data_axis():
    program = training_step(
        **SHAPE, batch=16, mesh={"data": 8}, experts=16, expert_axis="data", top_k=1
    )
    a2a = collectives(program, "all-to-all")
    assert len(a2a) == 4 * SHAPE["layers"] and all(op.axes == ("data",) for op in a2a)
    assert not any("experts.allreduce" in op.name for op in program.ops)
    assert_valid_dag(program, "optimizer")


# ---------------------------------------------------------------------------- decode


@pytest.mark.parametrize("tier", ["hbm", "sram"])
def test_decode_reads_the_kv_cache_from_its_tier(tier):
    layers, batch, context, kv_heads, hd = 4, 8, 4096, 2, 128
    program = decode_step(
        layers=layers,
        d_model=1024,
        d_ff=4096,
        heads=8,
        head_dim=hd,
        kv_heads=kv_heads,
        batch=batch,
        context=context,
        kv_cache=tier,
        mesh={"replica": 4},
    )
    reads = [op for op in program.ops if op.name.endswith("attn.kv_read")]
    assert len(reads) == layers
    assert all(op.kind == "elementwise" and op.memory == tier for op in reads)
    cache = layers * batch * context * kv_heads * hd * 2 * BF16
    assert sum(op.bytes for op in reads) == cache
    assert program.memory_bytes[tier] >= cache
    weights = layers * (1024 * 12 * 128 + 8 * 128 * 1024 + 2 * 1024 * 4096 + 2 * 1024) * BF16
    if tier == "sram":
        assert program.memory_bytes == {"hbm": weights, "sram": cache}
    else:
        assert program.memory_bytes == {"hbm": weights + cache}
    # weight matmuls stream one row per sequence and read weights from HBM
    mms = [op for op in program.ops if op.kind == "matmul"]
    assert all(op.m == batch and op.memory == "hbm" for op in mms)
    assert_valid_dag(program)


def test_decode_tensor_parallel():
    program = decode_step(
        layers=2,
        d_model=1024,
        d_ff=4096,
        heads=8,
        head_dim=128,
        kv_heads=4,
        batch=8,
        context=1024,
        mesh={"t": 4},
        tensor_axis="t",
    )
    reads = [op for op in program.ops if op.name.endswith("attn.kv_read")]
    assert sum(op.bytes for op in reads) == 2 * 8 * 1024 * (4 // 4) * 128 * 2 * BF16
    ars = collectives(program, "all-reduce")
    assert len(ars) == 4 and {op.size_bytes for op in ars} == {8 * 1024 * BF16}
    single = decode_step(
        layers=2,
        d_model=1024,
        d_ff=4096,
        heads=8,
        head_dim=128,
        kv_heads=4,
        batch=8,
        context=1024,
        mesh={"t": 4},
    )
    assert step_flops(program) == pytest.approx(step_flops(single) / 4)
    assert_valid_dag(program)


# ------------------------------------------------------------------------ bad inputs


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        (dict(batch=12, mesh={"data": 8}), "batch"),
        (dict(batch=16, mesh={"data": 8}, layers=0), "layers"),
        (dict(batch=16, mesh={"data": 8}, d_model=-1), "d_model"),
        (dict(batch=16, mesh={"dp": 8}), "data_axis"),
        (dict(batch=16, mesh={"data": 8}, tensor_axis="model"), "tensor_axis"),
        (dict(batch=16, mesh={"data": 2, "model": 3}, tensor_axis="model"), "heads"),
        (dict(batch=16, mesh={"data": 2, "x": 2}), "mesh axis 'x'"),
        (dict(batch=16, mesh={"data": 8}, dtype="fp16"), "dtype"),
        (dict(batch=16, mesh={"data": 2, "e": 3}, experts=8, expert_axis="e"), "batch"),
        (dict(batch=24, mesh={"data": 2, "e": 3}, experts=8, expert_axis="e"), "experts"),
        (dict(batch=16, mesh={"data": 8}, experts=4, top_k=5), "top_k"),
        (dict(batch=16, mesh={"data": 8}, fsdp_axis="data"), "fsdp_axis"),
        (dict(batch=16, mesh={"data": 0}), "mesh axis 'data'"),
        (dict(batch=16, mesh={"data": 8}, expert_axis="data"), "expert_axis"),
        (dict(batch=16, mesh={"data": 8}, tensor_axis="data"), "tensor_axis"),
        (dict(batch=16, mesh={"data": 8}, experts=-1), "experts"),
    ],
)
def test_training_step_bad_inputs(kwargs, field):
    args = {**SHAPE, **kwargs}
    with pytest.raises(ProgramError) as err:
        training_step(**args)
    message = str(err.value)
    assert field in message and "\n" not in message


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        (dict(layers=0), "layers"),
        (dict(context=0), "context"),
        (dict(kv_heads=3), "kv_heads"),
        (dict(tensor_axis="model"), "tensor_axis"),
        (dict(kv_cache="vmem"), "kv_cache"),
        (dict(mesh={"t": 3}, tensor_axis="t"), "heads"),
    ],
)
def test_decode_step_bad_inputs(kwargs, field):
    args = dict(
        layers=2, d_model=256, d_ff=1024, heads=8, head_dim=64, batch=4, context=128, mesh={"t": 2}
    )
    with pytest.raises(ProgramError) as err:
        decode_step(**{**args, **kwargs})
    assert field in str(err.value) and "\n" not in str(err.value)
