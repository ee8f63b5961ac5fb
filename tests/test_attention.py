"""Fused (flash / splash) attention against closed forms computed by hand here: causal
FLOPs (half of full plus the diagonal blocks), HBM bytes per block, O(seq) memory, GQA
and MLA shapes, the kernel's roofline, and the bad-kernel-name error."""

from __future__ import annotations

import pytest
from helpers import assert_one_error_line, run

from tpusim.config import load_chip
from tpusim.hardware import ChipCostModel
from tpusim.program.builders import training_step
from tpusim.program.builders.attention import AttentionShape, backward, computed_tiles, forward
from tpusim.program.builders.layer_shape import LayerShape
from tpusim.program.builders.memory import saved_bytes
from tpusim.program.builders.replica import replica_shape
from tpusim.program.builders.serving import IterationBatch, prefill_call
from tpusim.program.ir import ProgramError

BF16 = 2
BLOCK = 512  # MaxText's sa_block_q / sa_block_kv default


def llama_layer(seq: int = 8192, seqs: int = 1, **kw) -> AttentionShape:
    """One Llama-3.1-8B layer's attention: 32 query heads of 128."""
    fields = dict(seqs=seqs, heads=32, q_len=seq, kv_len=seq, qk_dim=128, v_dim=128,
                  bytes_per_element=BF16) | kw  # fmt: skip
    return AttentionShape(**fields)


def full_flops(seqs, heads, seq, qk, v):
    """Every (query, key) pair through Q K^T and P V."""
    return 2 * seqs * heads * seq * seq * (qk + v)


def test_causal_flops_are_half_of_full_plus_the_diagonal_blocks():
    a = llama_layer()
    n = 8192 // BLOCK  # 16 blocks per side
    full = full_flops(1, 32, 8192, 128, 128)
    assert computed_tiles(a) == n * (n + 1) // 2 == 136
    diagonal_waste = n * BLOCK * BLOCK / 2 * 2 * 32 * 256  # half of each diagonal tile
    work = forward(a)
    assert work.padded_flops == full / 2 + diagonal_waste == full / 2 + full / (2 * n)
    assert work.flops == 2 * 32 * (8192 * 8193 / 2) * 256  # the unmasked pairs
    assert work.pad_dims == (128, 128)


def test_without_the_mask_every_tile_is_computed():
    a = llama_layer(causal=False)
    assert computed_tiles(a) == 16 * 16
    assert forward(a).padded_flops == forward(a).flops == full_flops(1, 32, 8192, 128, 128)


def test_blocks_clip_to_a_short_sequence():
    a = llama_layer(seq=256)
    assert (a.bq, a.bkv, computed_tiles(a)) == (256, 256, 1)
    assert forward(a).padded_flops == full_flops(1, 32, 256, 128, 128)


def test_queries_after_a_prior_context_see_it_whole():
    """A prefill chunk of 1024 after 3072 cached tokens: q-block i computes the 6 + i
    kv-blocks up to its last query."""
    a = llama_layer(seq=1024, kv_len=4096)
    assert computed_tiles(a) == sum(6 + i + 1 for i in range(2))


def test_forward_bytes_read_q_once_kv_once_per_q_block_and_write_the_output():
    a = llama_layer(seqs=2)
    heads = 2 * 32
    q = o = 8192 * 128 * BF16
    kv = 136 * BLOCK * (128 + 128) * BF16  # the computed tiles' K and V blocks
    lse = 8192 * 4
    assert forward(a).bytes == heads * (q + kv + o + lse)


def test_backward_is_five_matmuls_and_flash_attention_2s_traffic():
    a = llama_layer()
    fwd, bwd = forward(a), backward(a)
    assert bwd.padded_flops == 2.5 * fwd.padded_flops  # qk_dim == v_dim
    assert bwd.flops == 2 * fwd.flops  # the recomputed scores are not useful work
    kv = 8192 * 256 * BF16
    per_tile = BLOCK * (128 * BF16 + 128 * BF16 + 2 * 4 + 2 * 128 * 4)
    rowsum = 2 * 8192 * 128 * BF16 + 8192 * 4
    assert bwd.bytes == 32 * (2 * kv + 136 * per_tile + rowsum)


def test_mla_head_dims_give_the_matmuls_their_own_widths():
    """DeepSeek MLA: Q/K heads of 128 + 64 rope, V heads of 128."""
    a = llama_layer(seq=1024, heads=16, qk_dim=192, v_dim=128)
    scores = 16 * 3 * BLOCK * BLOCK  # 2 blocks: 3 tiles per head
    assert forward(a).padded_flops == scores * 2 * (192 + 128)
    assert backward(a).padded_flops == scores * 2 * (3 * 192 + 2 * 128)
    assert backward(a).pad_dims == (192, 128, 128, 192, 192)


def test_the_kernel_roofline_pads_the_head_dim_to_the_mxu():
    """v6e's 256-wide MXU does a 128-deep Q K^T at half rate: twice the padded FLOPs."""
    work = forward(llama_layer())
    cost = ChipCostModel(load_chip("v6e"), op_overhead_s=0.0, ideal=True).kernel(
        work.flops, work.padded_flops, work.vector_ops, work.bytes, "bf16", "hbm", work.pad_dims
    )
    assert cost.time_s == pytest.approx(2 * work.padded_flops / 918e12, rel=1e-12)
    assert cost.bound == "compute"


def _layer(seq: int, kernel: str) -> LayerShape:
    return LayerShape(seqs=2, seq=seq, d_model=4096, heads=32, head_dim=128, d_ff=14336,
                      experts=0, top_k=1, bytes_per_element=BF16, tensor=(), expert=(),
                      kv_heads=8, mlp="gated", attention_kernel=kernel)  # fmt: skip


def test_flash_keeps_o_of_seq_and_naive_the_scores():
    seq = 4096
    tokens = 2 * seq
    by_hand = tokens * (6 * 4096 + (2 * 32 + 2 * 8) * 128 + 3 * 14336) * BF16
    assert saved_bytes(_layer(seq, "flash")) == by_hand + 2 * 32 * seq * 4  # + logsumexp
    assert saved_bytes(_layer(seq, "naive")) == by_hand + 2 * 32 * seq * seq * BF16
    assert saved_bytes(_layer(2 * seq, "flash")) == 2 * saved_bytes(_layer(seq, "flash"))
    assert saved_bytes(_layer(2 * seq, "naive")) > 2 * saved_bytes(_layer(seq, "naive"))


@pytest.mark.parametrize("kv_heads", [8, 2])
def test_gqa_training_step_has_one_kernel_per_pass_whatever_the_kv_heads(kv_heads):
    """Every query head fetches its K/V head's blocks: the kernel's work does not
    depend on the K/V heads; the QKV projection does."""
    program = training_step(layers=1, d_model=1024, d_ff=4096, heads=8, head_dim=128,
                            seq=2048, batch=2, mesh={"data": 2}, kv_heads=kv_heads)  # fmt: skip
    ops = {op.name: op for op in program.ops}
    fwd, bwd = ops["L0.attn.flash.fwd"], ops["L0.attn.flash.bwd"]
    a = llama_layer(seq=2048, heads=8)
    assert (fwd.kind, fwd.mxu_flops, fwd.bytes) == ("kernel", forward(a).flops, forward(a).bytes)
    assert bwd.padded_flops == backward(a).padded_flops
    assert ops["L0.attn.qkv.fwd"].n == (8 + 2 * kv_heads) * 128


def test_mla_training_step_runs_flash_with_the_rope_dims():
    program = training_step(layers=1, d_model=1024, d_ff=4096, heads=8, head_dim=128,
                            seq=1024, batch=1, mesh={"data": 1}, attention="mla",
                            kv_lora_rank=256, rope_head_dim=64)  # fmt: skip
    fwd = next(op for op in program.ops if op.name == "L0.attn.flash.fwd")
    assert fwd.pad_dims == (192, 128)
    assert fwd.padded_flops == 8 * 3 * BLOCK * BLOCK * 2 * (192 + 128)


def test_serving_prefill_is_one_causal_kernel_after_its_prior_context():
    shape = replica_shape(
        {"layers": 2, "d_model": 1024, "d_ff": 4096, "heads": 8, "head_dim": 128,
         "kv_heads": 8}, tp=1, ep=1, replicas=1, dtype="bf16", kv_cache="hbm",
    )  # fmt: skip
    chunk, prior = 512, 1536
    batch = IterationBatch(tokens=chunk, sequences=1, kv_tokens=prior, prefill_tokens=chunk,
                           prefill_keys=prior + (chunk + 1) / 2)  # fmt: skip
    call = prefill_call(shape, batch)
    assert (call.q_len, call.kv_len, call.heads) == (chunk, prior + chunk, 8)
    assert computed_tiles(call) == 4  # one q-block, kv-blocks 0..3


def test_an_unknown_kernel_name_is_a_program_error():
    with pytest.raises(ProgramError, match="attention_kernel: Input should be 'flash' or 'naive'"):
        training_step(layers=1, d_model=512, d_ff=2048, heads=8, head_dim=64, seq=256,
                      batch=1, mesh={"data": 1}, attention_kernel="fused")  # fmt: skip


def test_an_unknown_kernel_in_a_scenario_is_one_line_exit_2(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: t\ndescription: t\nsystems: [v5e-pod]\nworkloads:\n  - name: step\n"
        "    kind: training_step\n    layers: 1\n    d_model: 512\n    d_ff: 2048\n"
        "    heads: 8\n    head_dim: 64\n    seq: 256\n    batch: 256\n"
        "    mesh: {data: 256}\n    attention_kernel: splashy\n"
    )
    line = assert_one_error_line(*run(capsys, "run", str(path)))
    assert ":15 " in line and "attention_kernel" in line
