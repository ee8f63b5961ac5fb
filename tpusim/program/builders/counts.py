"""Model arithmetic shared by the builders and their users: parameters and FLOPs.

:func:`parameters_per_layer` counts a whole layer from the model's shape (the
builder-side count the model presets are checked against); :func:`local_parameters`
counts what one chip of a training step holds, from its local
:class:`~tpusim.program.builders.layer_shape.LayerShape`.
"""

from __future__ import annotations

from dataclasses import dataclass

from tpusim.program.builders.layer_shape import AttentionKind, LayerShape, MlpKind
from tpusim.program.ir import Program


def parameters_per_layer(
    d_model: int,
    d_ff: int,
    heads: int,
    head_dim: int,
    experts: int = 0,
    *,
    kv_heads: int | None = None,
    mlp: MlpKind = "plain",
    expert_d_ff: int | None = None,
    shared_experts: int = 0,
    attention: AttentionKind = "gqa",
    q_lora_rank: int = 0,
    kv_lora_rank: int = 0,
    rope_head_dim: int = 0,
) -> int:
    """Parameters of one transformer layer (the whole layer, before any sharding).

    Attention (``gqa``): ``d_model * (heads + 2 kv_heads) * head_dim`` (Q, K, V) plus
    ``heads * head_dim * d_model`` (output); ``mla``: see :func:`mla_parameters`.
    MLP: ``m * d_model * d_ff`` with ``m`` = 2 (``plain``: up, down) or 3 (``gated``:
    gate, up, down); a MoE layer (``experts > 0``) has ``experts + shared_experts``
    MLPs of width ``expert_d_ff`` (default ``d_ff``) and a ``d_model * experts``
    router. Two norm scales of ``d_model``. No biases. ``kv_heads`` defaults to
    ``heads`` (multi-head attention).
    """
    kv = heads if kv_heads is None else kv_heads
    if attention == "mla":
        attn = mla_parameters(d_model, heads, head_dim, q_lora_rank, kv_lora_rank, rope_head_dim)
    else:
        attn = d_model * (heads + 2 * kv) * head_dim + heads * head_dim * d_model
    per_mlp = (3 if mlp == "gated" else 2) * d_model
    if experts:
        width = d_ff if expert_d_ff is None else expert_d_ff
        ffn = (experts + shared_experts) * per_mlp * width + d_model * experts
    else:
        ffn = per_mlp * d_ff
    return attn + ffn + 2 * d_model


def mla_parameters(
    d_model: int, heads: int, head_dim: int, q_lora_rank: int, kv_lora_rank: int, rope: int
) -> int:
    """Multi-head latent attention (DeepSeek-V2/V3): ``d_model * q_lora_rank +
    q_lora_rank * heads * (head_dim + rope)`` (Q through its latent; ``d_model * heads
    * (head_dim + rope)`` when ``q_lora_rank`` is 0) ``+ d_model * (kv_lora_rank + rope)
    + kv_lora_rank * heads * 2 head_dim + heads * head_dim * d_model`` plus the latent
    norms ``q_lora_rank + kv_lora_rank``."""
    q_dim = heads * (head_dim + rope)
    q = d_model * q_lora_rank + q_lora_rank * q_dim if q_lora_rank else d_model * q_dim
    kv = d_model * (kv_lora_rank + rope) + kv_lora_rank * heads * 2 * head_dim
    return q + kv + heads * head_dim * d_model + q_lora_rank + kv_lora_rank


def embedding_parameters(vocab: int, d_model: int) -> int:
    """The input embedding and the (untied) LM head: ``2 * vocab * d_model``."""
    return 2 * vocab * d_model


@dataclass(frozen=True)
class LocalParameters:
    """Parameters of one layer one chip computes with: ``sharded`` (split over the
    tensor axis), ``replicated`` (norms, router, MLA latents: whole on every tensor
    rank) and ``expert`` (the chip's routed experts)."""

    sharded: int
    replicated: int
    expert: int

    @property
    def dense(self) -> int:
        """Every parameter that is not a routed expert's."""
        return self.sharded + self.replicated

    @property
    def total(self) -> int:
        return self.sharded + self.replicated + self.expert


def local_parameters(s: LayerShape, local_experts: int) -> LocalParameters:
    """What one chip holds of one layer of local shape ``s`` with ``local_experts``
    routed experts (tensor- and expert-local; whole over FSDP)."""
    h, hd, d = s.heads, s.head_dim, s.d_model
    if s.attention == "mla":
        q_dim = h * (hd + s.rope_head_dim)
        q_up = s.q_lora_rank * q_dim if s.q_lora_rank else d * q_dim
        sharded = q_up + s.kv_lora_rank * h * 2 * hd + h * hd * d
        q_down = d * s.q_lora_rank + s.q_lora_rank
        replicated = q_down + d * (s.kv_lora_rank + s.rope_head_dim) + s.kv_lora_rank
    else:
        sharded, replicated = d * (h + 2 * s.kv) * hd + h * hd * d, 0
    per_mlp = s.mlp_matrices * d
    replicated += 2 * d
    if not s.experts:
        return LocalParameters(sharded + per_mlp * s.d_ff, replicated, 0)
    sharded += per_mlp * s.shared_d_ff
    replicated += d * s.experts
    return LocalParameters(sharded, replicated, local_experts * per_mlp * s.d_ff)


def step_flops(program: Program) -> float:
    """Total useful FLOPs of ``program`` per chip (the sum of ``op.flops``)."""
    return sum(op.flops for op in program.ops)
