"""Named remat policies (MaxText's) against bytes and FLOPs counted by hand.

Oracle: for a small gated GQA layer, the elements per token of every named tensor
(written out below from the shape, not with the builder's helpers), which tensors
MaxText's ``get_remat_policy`` keeps for each policy, and which forward matmuls the
backward must rerun when their outputs are not kept (the rules of
:mod:`tpusim.program.builders.remat`).
"""

from __future__ import annotations

import pytest

from tpusim.errors import InputError
from tpusim.program.builders import prepare_training, training_step
from tpusim.program.builders.memory import saved_bytes, stage_memory
from tpusim.program.builders.remat import REMAT_POLICY_NAMES, recomputed_flops

D, FF, H, KV, HD, SEQ, SEQS = 64, 128, 4, 2, 16, 32, 2
T = SEQ * SEQS  # tokens of the one microbatch
# The unfused attention kernel, whose score and context matmuls the policies name
# apart; the fused kernel's rule is checked in test_flash_kernel_reruns_unless_context_kept.
SHAPE = dict(
    d_model=D,
    d_ff=FF,
    heads=H,
    kv_heads=KV,
    head_dim=HD,
    seq=SEQ,
    mlp="gated",
    attention_kernel="naive",
)
BF16 = 2
RECIPE = dict(
    decoder_layer_input="offload",
    out_proj="offload",
    query_proj="offload",
    key_proj="offload",
    value_proj="offload",
)

# elements per token of each named tensor of the layer
INPUT, Q, K, V, CONTEXT, OUT, WI0, WI1 = D, H * HD, KV * HD, KV * HD, H * HD, D, FF, FF
QKV = Q + K + V
# forward matmul FLOPs of the layer
F_QKV = 2 * T * D * QKV
F_SCORES = 2 * SEQS * H * SEQ * HD * SEQ
F_CONTEXT = F_SCORES
F_OUT = 2 * T * H * HD * D
F_GATE = F_UP = 2 * T * D * FF
F_DOWN = 2 * T * FF * D

# policy -> (elements per token on device, offloaded, recomputed matmul FLOPs)
CASES = {
    "full": (INPUT, 0, F_QKV + F_SCORES + F_CONTEXT + F_OUT + F_GATE + F_UP),
    "minimal": (INPUT + QKV + OUT + WI0 + WI1, 0, F_SCORES + F_CONTEXT),
    "minimal_with_context": (INPUT + QKV + OUT + WI0 + WI1 + CONTEXT, 0, F_SCORES),
    "save_dot_with_context_except_mlp": (INPUT + QKV + CONTEXT + OUT, 0, F_SCORES + F_GATE + F_UP),
    "save_dot_except_mlpwi": (INPUT + QKV + OUT, 0, F_SCORES + F_CONTEXT + F_GATE + F_UP),
    "save_dot_except_mlp": (INPUT + QKV + OUT, 0, F_SCORES + F_CONTEXT + F_GATE + F_UP),
    "save_qkv_proj": (INPUT + QKV, 0, F_SCORES + F_CONTEXT + F_OUT + F_GATE + F_UP),
    "save_out_proj": (INPUT + OUT, 0, F_QKV + F_SCORES + F_CONTEXT + F_GATE + F_UP),
    "qkv_proj_offloaded": (INPUT, QKV, F_SCORES + F_CONTEXT + F_OUT + F_GATE + F_UP),
    "minimal_offloaded": (INPUT, QKV + OUT + WI0 + WI1, F_SCORES + F_CONTEXT),
}


# useful FLOPs of the fused causal kernel's forward: the SEQ (SEQ + 1) / 2 unmasked
# query-key pairs of each head, Q K^T and P V
F_FLASH = 2 * SEQS * H * (SEQ * (SEQ + 1) // 2) * (HD + HD)


@pytest.mark.parametrize(
    ("policy", "flops"),
    [
        ("full", F_QKV + F_FLASH + F_OUT + F_GATE + F_UP),
        ("minimal", F_FLASH),
        ("minimal_with_context", 0),
    ],
)
def test_flash_kernel_reruns_unless_context_kept(policy, flops):
    shape = SHAPE | {"attention_kernel": "flash"}
    plan = prepare_training(**shape, layers=2, batch=SEQS, mesh={"data": 1}, remat_policy=policy)
    assert recomputed_flops(plan.remat, plan.dense, plan.steps(0)) == flops


def full_set_bytes() -> int:
    """Everything one layer saves without remat (the model's no-remat closed form)."""
    return (T * (6 * D + 2 * H * HD + 2 * KV * HD) + SEQS * H * SEQ * SEQ + 3 * T * FF) * BF16


@pytest.mark.parametrize("policy", sorted(CASES))
def test_policy_keeps_offloads_and_recomputes_what_maxtext_names(policy):
    device, offload, flops = CASES[policy]
    plan = prepare_training(**SHAPE, layers=2, batch=SEQS, mesh={"data": 1}, remat_policy=policy)
    s = plan.dense
    assert plan.remat.bytes_at(s, "device") == T * device * BF16
    assert plan.offloaded_bytes(0) == T * offload * BF16
    assert recomputed_flops(plan.remat, s, plan.steps(0)) == flops
    memory = stage_memory(plan, 0)
    assert memory.activations_bytes == 2 * T * device * BF16
    # one layer's whole set is live in its backward, the kept tensors counted once,
    # plus the next layer's offloaded ones being prefetched
    kept_but_input = (device - INPUT) * T * BF16
    assert memory.buffers_bytes == full_set_bytes() - kept_but_input + T * offload * BF16


def test_custom_takes_per_tensor_placements_like_the_8b_recipe():
    plan = prepare_training(**SHAPE, layers=2, batch=SEQS, mesh={"data": 1},
                         remat_policy="custom", remat_tensors=RECIPE)  # fmt: skip
    s = plan.dense
    assert plan.remat.bytes_at(s, "device") == 0
    assert plan.offloaded_bytes(0) == T * (INPUT + QKV + OUT) * BF16
    assert recomputed_flops(plan.remat, s, plan.steps(0)) == F_SCORES + F_CONTEXT + F_GATE + F_UP
    # custom's defaults (MaxText base.yml): the layer input on device, the rest remat
    bare = prepare_training(**SHAPE, layers=2, batch=SEQS, mesh={"data": 1}, remat_policy="custom")
    assert bare.remat.bytes_at(bare.dense, "device") == T * INPUT * BF16
    fused = prepare_training(**SHAPE, layers=2, batch=SEQS, mesh={"data": 1},
                          remat_policy="custom", remat_tensors={"qkv_proj": "device"})  # fmt: skip
    assert fused.remat.bytes_at(fused.dense, "device") == T * (INPUT + QKV) * BF16


def test_recompute_flag_is_full_and_none_recomputes_nothing():
    kwargs = dict(**SHAPE, layers=2, batch=SEQS, mesh={"data": 1})
    assert (
        prepare_training(**kwargs, recompute=True).remat
        == prepare_training(**kwargs, remat_policy="full").remat
    )
    none = prepare_training(**kwargs)
    assert none.remat.policy == "none" and none.recompute_steps(0) == []
    assert stage_memory(none, 0).activations_bytes == 2 * saved_bytes(none.dense)
    assert saved_bytes(none.dense) == full_set_bytes()


def test_program_reruns_the_recomputed_matmuls_per_layer():
    layers = 3
    for policy, (_, _, flops) in CASES.items():
        program = training_step(**SHAPE, layers=layers, batch=SEQS, mesh={"data": 1},
                                remat_policy=policy)  # fmt: skip
        rerun = sum(op.flops for op in program.ops if ".re." in op.name)
        assert rerun == layers * flops, policy
    host = training_step(**SHAPE, layers=layers, batch=SEQS, mesh={"data": 1},
                         remat_policy="minimal_offloaded")  # fmt: skip
    transfers = [op for op in host.ops if op.kind == "host_transfer"]
    assert len(transfers) == 2 * layers and all(op.overlap for op in transfers)
    assert {op.bytes for op in transfers} == {T * (QKV + OUT + WI0 + WI1) * BF16}


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"remat_policy": "sometimes"}, ["remat_policy 'sometimes'", "minimal_offloaded"]),
        ({"remat_policy": "minimal", "recompute": True}, ["recompute", "minimal"]),
        ({"remat_policy": "full", "remat_tensors": {"context": "device"}}, ["custom"]),
        ({"remat_policy": "custom", "remat_tensors": {"ctx": "device"}}, ["'ctx'", "context"]),
        ({"remat_policy": "custom", "remat_tensors": {"context": "disk"}}, ["'disk'", "offload"]),
    ],
)
def test_bad_remat_input_is_one_line(fields, words):
    with pytest.raises(InputError) as err:
        prepare_training(**SHAPE, layers=2, batch=SEQS, mesh={"data": 1}, **fields)
    message = str(err.value)
    assert "\n" not in message and all(w in message for w in words), message


def test_every_policy_name_is_accepted():
    for policy in REMAT_POLICY_NAMES:
        prepare_training(**SHAPE, layers=2, batch=SEQS, mesh={"data": 1}, remat_policy=policy)


def test_moe_keeps_expert_outputs_and_reruns_router_and_dispatch():
    # a MoE layer's mlpwo output is a residual (the router weights multiply it)
    experts, top_k, width = 4, 2, 64
    rows = T * top_k
    kwargs = dict(**SHAPE, layers=1, batch=SEQS, mesh={"data": 1}, experts=experts,
                  top_k=top_k, expert_d_ff=width)  # fmt: skip
    router = 2 * T * D * experts
    experts_f = 2 * rows * D * width  # gate or up or down of the grouped experts
    minimal = prepare_training(**kwargs, remat_policy="minimal")
    s = minimal.shape(0)
    assert minimal.remat.bytes_at(s, "device") == (T * (INPUT + QKV + OUT) + 2 * rows * width
                                                   + rows * D) * BF16  # fmt: skip
    assert recomputed_flops(minimal.remat, s, minimal.steps(0)) == F_SCORES + F_CONTEXT + router
    full = prepare_training(**kwargs, remat_policy="full")
    want = F_QKV + F_SCORES + F_CONTEXT + F_OUT + router + 3 * experts_f
    assert recomputed_flops(full.remat, s, full.steps(0)) == want


def test_sequence_parallel_shards_the_kept_layer_input_and_out_proj():
    tp = 4
    plan = prepare_training(**SHAPE, layers=1, batch=SEQS, mesh={"tensor": tp},
                         sequence_parallel=True, remat_policy="save_out_proj")  # fmt: skip
    # input and out_proj split over the sequence; nothing else kept
    assert plan.remat.bytes_at(plan.dense, "device") == T * (INPUT + OUT) // tp * BF16
    names = [st.name for st in plan.recompute_steps(0)]
    assert "attn.sp_in" in names and "attn.sp_out" not in names and "attn.out" not in names
