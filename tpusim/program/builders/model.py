"""Model arithmetic shared by the builders and their users: parameters and FLOPs."""

from __future__ import annotations

from tpusim.program.ir import Program


def parameters_per_layer(
    d_model: int,
    d_ff: int,
    heads: int,
    head_dim: int,
    experts: int = 0,
    *,
    kv_heads: int | None = None,
) -> int:
    """Parameters of one transformer layer (the whole layer, before any sharding).

    Attention: ``d_model * (heads + 2 kv_heads) * head_dim`` (Q, K, V) plus
    ``heads * head_dim * d_model`` (output); MLP: ``2 * d_model * d_ff`` (up, down), or
    ``experts`` times that plus a ``d_model * experts`` router; two norm scales of
    ``d_model``. No biases. ``kv_heads`` defaults to ``heads`` (multi-head attention).
    """
    kv = heads if kv_heads is None else kv_heads
    attention = d_model * (heads + 2 * kv) * head_dim + heads * head_dim * d_model
    mlp = 2 * d_model * d_ff
    if experts:
        mlp = experts * mlp + d_model * experts
    return attention + mlp + 2 * d_model


def step_flops(program: Program) -> float:
    """Total useful FLOPs of ``program`` per chip (the sum of ``op.flops``)."""
    return sum(op.flops for op in program.ops)
