"""Training-step parallelism: FSDP and tensor-parallel traffic per layer against the
scaling book's formulas (bytes by hand), mesh roles, a mesh axis splitting a physical
one, and the per-chip parameters of every model variant against the whole-layer count."""

from __future__ import annotations

import numpy as np
import pytest

from tpusim.config.loader import load_system
from tpusim.engine.placement import group_of, split_mesh
from tpusim.program.builders import parameters_per_layer, prepare_training, training_step
from tpusim.program.builders.counts import local_parameters
from tpusim.topology import build_topology

D, FF, H, HD, SEQ = 512, 2048, 8, 64, 256
SHAPE = dict(layers=2, d_model=D, d_ff=FF, heads=H, head_dim=HD, seq=SEQ)
BF16 = 2


def collectives(program, op):
    return [o for o in program.ops if o.kind == "collective" and o.collective == op]


def test_fsdp_gathers_weights_fwd_and_bwd_and_reduce_scatters_gradients():
    # Scaling book (Training, FSDP): per layer an AllGather of its weights before the
    # forward and again before the backward, and a ReduceScatter of its gradients.
    n, batch = 8, 16
    program = training_step(**SHAPE, batch=batch, mesh={"fsdp": n}, gradient_dtype="fp32")
    weights = 4 * D * H * HD + 2 * D * FF + 2 * D  # parameters of one layer
    gathers = collectives(program, "all-gather")
    assert len(gathers) == 2 * 2
    assert {g.size_bytes for g in gathers} == {weights * BF16}
    assert {g.name.rsplit(".", 1)[1] for g in gathers} == {"fwd", "bwd"}
    scatters = collectives(program, "reduce-scatter")
    assert len(scatters) == 2 and {s.size_bytes for s in scatters} == {weights * 4}
    assert collectives(program, "all-reduce") == []
    assert all(o.overlap and o.axes == ("fsdp",) for o in gathers + scatters)


def test_tensor_parallel_all_reduces_activations_twice_each_way():
    # Megatron: 2 all-reduces of B*T*d_model activations per layer forward, 2 backward.
    batch, tp = 4, 4
    program = training_step(**SHAPE, batch=batch, mesh={"tensor": tp})
    per_layer = batch * SEQ * D * BF16
    reduces = [o for o in collectives(program, "all-reduce") if "tp_allreduce" in o.name]
    assert len(reduces) == 2 * 4
    assert {o.size_bytes for o in reduces} == {per_layer}
    assert sum(o.name.endswith(".fwd") for o in reduces) == 2 * 2
    assert all(o.overlap and o.axes == ("tensor",) for o in reduces)  # async by default


def test_data_parallel_gradients_in_gradient_dtype():
    fp8 = training_step(**SHAPE, batch=8, mesh={"data": 8}, dtype="fp8")
    weights = 4 * D * H * HD + 2 * D * FF + 2 * D
    assert {o.size_bytes for o in collectives(fp8, "all-reduce")} == {weights * BF16}


def test_mesh_roles_by_name_and_fields_override():
    by_name = prepare_training(**SHAPE, batch=8, mesh={"data": 2, "fsdp": 2, "tensor": 2})
    by_field = prepare_training(
        **SHAPE, batch=8, mesh={"d": 2, "f": 2, "t": 2}, data_axis="d", fsdp_axis="f",
        tensor_axis="t",
    )  # fmt: skip
    assert by_name.fsdp_group == ("fsdp",) and by_name.dense.tensor == ("tensor",)
    assert by_field.fsdp_group == ("f",) and by_field.dense.tensor == ("t",)
    assert by_name.dense.seqs == by_field.dense.seqs == 2


def test_mesh_axis_splits_a_physical_axis_contiguously():
    topo = build_topology(load_system("ironwood-pod"))  # 16 x 24 x 24
    arr, axes, mapping = split_mesh(topo, {"pipeline": 16, "data": 72, "tensor": 8})
    assert mapping == {"pipeline": ["x"], "data": ["y", "z.0"], "tensor": ["z.1"]}
    tensor = group_of(arr, axes, mapping["tensor"])
    assert tensor.chips.shape == (1152, 8)
    hops = [
        topo.hops(int(a), int(b))
        for a, b in zip(tensor.chips[5][:-1], tensor.chips[5][1:], strict=True)
    ]
    assert hops == [1] * 7  # a contiguous segment of z
    data = group_of(arr, axes, mapping["data"])
    assert data.chips.shape == (128, 24, 3) and data.size == 72
    assert len(np.unique(data.chips)) == 9216
    # the outer piece of z: chips 8 apart along z, a ring over the wraparound
    assert [a.kind for a in data.axes] == ["ring", "ring"]
    assert topo.hops(int(data.chips[0, 0, 0]), int(data.chips[0, 0, 1])) == 8


VARIANTS = {
    "plain": {},
    "gated-gqa": dict(mlp="gated", kv_heads=2),
    "mla": dict(attention="mla", q_lora_rank=96, kv_lora_rank=64, rope_head_dim=32),
    "mla-no-q-lora": dict(attention="mla", kv_lora_rank=64, rope_head_dim=32),
    "moe-shared": dict(experts=8, top_k=2, expert_d_ff=256, shared_experts=1, mlp="gated"),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("tp", [1, 2])
def test_per_chip_parameters_times_shards_are_the_layer(variant, tp):
    extra = VARIANTS[variant]
    mesh = {"data": 2, "tensor": tp} | ({"expert": 4} if "experts" in extra else {})
    plan = prepare_training(**SHAPE, batch=16, mesh=mesh, dense_layers=0, **extra)
    layer = plan.layers - 1
    local = local_parameters(plan.shape(layer), plan.local_experts if "experts" in extra else 0)
    ep = mesh.get("expert", 1)
    whole = local.sharded * tp + local.replicated + local.expert * ep * tp
    keys = ("experts", "kv_heads", "mlp", "expert_d_ff", "shared_experts", "attention")
    keys += ("q_lora_rank", "kv_lora_rank", "rope_head_dim")
    assert whole == parameters_per_layer(D, FF, H, HD, **{k: extra[k] for k in keys if k in extra})


def test_mla_parameters_by_the_published_formula():
    d, h, hd, q, kv, r = 7168, 128, 128, 1536, 512, 64  # DeepSeek-V3's attention
    want = d * q + q * h * (hd + r) + d * (kv + r) + kv * h * 2 * hd + h * hd * d + q + kv
    got = parameters_per_layer(d, 18432, h, hd, attention="mla", q_lora_rank=q,
                               kv_lora_rank=kv, rope_head_dim=r)  # fmt: skip
    assert got - 2 * d * 18432 - 2 * d == want


def test_dense_layers_and_vocab_add_their_ops():
    program = training_step(**SHAPE, batch=8, mesh={"data": 8}, experts=4, dense_layers=1,
                            vocab=1000, mlp="gated")  # fmt: skip
    names = {o.name for o in program.ops}
    assert "L0.mlp.gate.fwd" in names and "L1.moe.router.fwd" in names
    assert "L0.moe.router.fwd" not in names
    head = next(o for o in program.ops if o.name == "head.proj.fwd")
    assert (head.m, head.k, head.n) == (SEQ, D, 1000)
    assert {"embed.lookup.fwd", "embed.grad.allreduce", "head.grad.allreduce"} <= names
