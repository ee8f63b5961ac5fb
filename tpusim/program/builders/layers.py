"""A transformer layer's op templates: the attention block, then the MLP block
(:mod:`.mlp`), with their norms, residuals and tensor-parallel all-reduces.

Attention is grouped-query (``kv_heads`` K/V heads, MHA when equal to ``heads``) or
DeepSeek's multi-head latent attention (``mla``: Q and KV through low-rank latents,
K/V materialised from the KV latent as DeepSeek trains), computed by one fused causal
kernel (``attention_kernel: flash``, :mod:`.attention`) or with its scores and
softmax through HBM (``naive``). Templates become ops in :mod:`.template`.
"""

from __future__ import annotations

from tpusim.program.builders import attention as flash
from tpusim.program.builders.layer_shape import LayerShape
from tpusim.program.builders.mlp import mlp_steps, moe_steps
from tpusim.program.builders.roles import Shard
from tpusim.program.builders.template import LayerStep, collective_step

TP: Shard = "matrices"
"""What the tensor all-reduces' axes shard (the tensor role's weight matrices)."""


def layer_steps(s: LayerShape) -> list[LayerStep]:
    """The forward templates of one layer: attention then the dense MLP or MoE."""
    mlp = moe_steps(s) if s.experts else mlp_steps(s, "mlp", s.tokens, s.d_ff)
    return [
        *attention_steps(s),
        LayerStep("mlp.norm", "elementwise", bytes=2 * s.act_bytes),
        *collective_step("mlp.tp_allreduce", "all-reduce", s.act_bytes, s.tensor, "bwd", TP),
        *mlp,
        *collective_step("mlp.tp_allreduce", "all-reduce", s.act_bytes, s.tensor, "fwd", TP),
        LayerStep("mlp.residual", "elementwise", bytes=3 * s.act_bytes),
    ]


def attention_steps(s: LayerShape) -> list[LayerStep]:
    """Norm, projections, the attention proper, output projection, residual; the
    tensor-parallel all-reduce after the block (forward) and at its input (backward)."""
    act = s.act_bytes
    return [
        LayerStep("attn.norm", "elementwise", bytes=2 * act),
        *collective_step("attn.tp_allreduce", "all-reduce", act, s.tensor, "bwd", TP),
        *(mla_projections(s) if s.attention == "mla" else gqa_projections(s)),
        *(flash_steps(s) if s.attention_kernel == "flash" else naive_steps(s)),
        LayerStep("attn.out", "matmul", m=s.tokens, k=s.heads * s.head_dim, n=s.d_model),
        *collective_step("attn.tp_allreduce", "all-reduce", act, s.tensor, "fwd", TP),
        LayerStep("attn.residual", "elementwise", bytes=3 * act),
    ]


def flash_steps(s: LayerShape) -> list[LayerStep]:
    """One fused causal attention kernel (:mod:`.attention`), forward and backward."""
    call = s.attention_call
    return [
        LayerStep("attn.flash", "kernel", work=flash.forward(call), work_bwd=flash.backward(call))
    ]


def naive_steps(s: LayerShape) -> list[LayerStep]:
    """Scores, softmax and context through HBM: the ``seq^2`` scores are written by the
    score matmul, read and written by the softmax and read by the context matmul (no
    causal mask: every score is computed)."""
    b, h = s.bytes_per_element, s.heads
    return [
        LayerStep("attn.scores", "matmul", batch=s.seqs * h, m=s.seq, k=s.qk_dim, n=s.keys),
        LayerStep("attn.softmax", "elementwise", bytes=2 * s.seqs * h * s.seq * s.keys * b),
        LayerStep("attn.context", "matmul", batch=s.seqs * h, m=s.seq, k=s.keys, n=s.head_dim),
    ]


def gqa_projections(s: LayerShape) -> list[LayerStep]:
    """One fused Q, K, V projection: ``heads + 2 kv_heads`` heads of ``head_dim``."""
    n = (s.heads + 2 * s.kv) * s.head_dim
    return [LayerStep("attn.qkv", "matmul", m=s.tokens, k=s.d_model, n=n)]


def mla_projections(s: LayerShape) -> list[LayerStep]:
    """MLA: Q through its latent (``q_lora_rank``; straight from ``d_model`` when 0)
    and K/V up from the KV latent (``kv_lora_rank``) plus one shared rope key; the
    latent projections and their norms are replicated over the tensor axis."""
    t, b, h = s.tokens, s.bytes_per_element, s.heads
    q_dim = h * (s.head_dim + s.rope_head_dim)
    steps: list[LayerStep] = []
    if s.q_lora_rank:
        steps += [
            LayerStep("attn.q_down", "matmul", m=t, k=s.d_model, n=s.q_lora_rank),
            LayerStep("attn.q_norm", "elementwise", bytes=2 * t * s.q_lora_rank * b),
            LayerStep("attn.q_up", "matmul", m=t, k=s.q_lora_rank, n=q_dim),
        ]
    else:
        steps.append(LayerStep("attn.q", "matmul", m=t, k=s.d_model, n=q_dim))
    kv_down = s.kv_lora_rank + s.rope_head_dim
    return [
        *steps,
        LayerStep("attn.kv_down", "matmul", m=t, k=s.d_model, n=kv_down),
        LayerStep("attn.kv_norm", "elementwise", bytes=2 * t * s.kv_lora_rank * b),
        LayerStep("attn.kv_up", "matmul", m=t, k=s.kv_lora_rank, n=h * 2 * s.head_dim),
    ]
