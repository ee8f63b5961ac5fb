"""Sequence and context parallelism as rewrites of a layer's forward templates.

* Sequence parallelism (Megatron-SP, ``sequence_parallel: true``, over the tensor
  axis of ``t`` chips): the norms and residual adds run on activations split over the
  sequence (their bytes / ``t``); each tensor-parallel all-reduce of ``a = tokens x
  d_model`` activations becomes, at a block's input, an all-gather of the sharded
  activations (forward; ``a`` gathered) whose backward is a reduce-scatter of their
  gradient (``a`` in), and at its output a reduce-scatter (forward) whose backward is
  an all-gather: the same bytes as the all-reduce (an all-reduce is a reduce-scatter
  then an all-gather), split into two collectives at different points.
* Context parallelism (``context`` axis of ``c`` chips): each chip holds ``seq / c``
  positions of every sequence and its attention needs the keys and values of the
  whole sequence: after the projections, an all-gather over the context axis of the
  chip's K and V (``seqs x seq x 2 kv_heads x head_dim`` gathered; MLA: K and V of
  every head) in the forward, and a reduce-scatter of their gradients (same size) in
  the backward, as MaxText's ``context_parallel_strategy: all_gather`` does (with
  ``context_parallel_load_balance`` the causal work is balanced over the chips, which
  the attention cost takes as evenly split).
"""

from __future__ import annotations

from dataclasses import replace

from tpusim.program.builders.layer_shape import LayerShape
from tpusim.program.builders.template import LayerStep, collective_step

SEQUENCE_SHARDED = ("attn.norm", "attn.residual", "mlp.norm", "mlp.residual")
"""Elementwise templates that run on sequence-sharded activations under SP."""

_PROJECTIONS = ("attn.qkv", "attn.kv_up")


def layout_steps(
    steps: list[LayerStep], s: LayerShape, context: tuple[str, ...]
) -> list[LayerStep]:
    """``steps`` (a layer's forward templates for local shape ``s``) with sequence
    parallelism when ``s.sequence_shards > 1`` and the K/V all-gather over ``context``
    (the context axes; empty: none)."""
    out: list[LayerStep] = []
    for step in steps:
        out += _sequence_parallel(step, s) if s.sequence_shards > 1 else [step]
        if context and step.name in _PROJECTIONS:
            out += kv_gather(s, context)
    return out


def _sequence_parallel(step: LayerStep, s: LayerShape) -> list[LayerStep]:
    """One template under SP: a sharded elementwise op, or a tensor all-reduce split
    into the all-gather and reduce-scatter of the module docstring."""
    if step.name in SEQUENCE_SHARDED:
        return [replace(step, bytes=step.bytes / s.sequence_shards)]
    if step.shard != "matrices" or step.collective != "all-reduce":
        return [step]
    block = step.name.split(".", 1)[0]
    size, axes, shard = step.bytes, step.axes, step.shard
    if step.phase == "bwd":  # at the block's input
        return [
            *collective_step(f"{block}.sp_in", "all-gather", size, axes, "fwd", shard),
            *collective_step(f"{block}.sp_in", "reduce-scatter", size, axes, "bwd", shard),
        ]
    return [
        *collective_step(f"{block}.sp_out", "reduce-scatter", size, axes, "fwd", shard),
        *collective_step(f"{block}.sp_out", "all-gather", size, axes, "bwd", shard),
    ]


def kv_bytes(s: LayerShape) -> float:
    """Bytes of the whole sequence's K and V one chip attends over (gathered)."""
    if s.attention == "mla":
        width = s.heads * (2 * s.head_dim + s.rope_head_dim)
    else:
        width = 2 * s.kv * s.head_dim
    return s.seqs * s.keys * width * s.bytes_per_element


def kv_gather(s: LayerShape, context: tuple[str, ...]) -> list[LayerStep]:
    """The forward K/V all-gather and the backward reduce-scatter of their gradients."""
    size = kv_bytes(s)
    return [
        *collective_step("attn.cp_kv", "all-gather", size, context, "fwd", "sequence"),
        *collective_step("attn.cp_kv", "reduce-scatter", size, context, "bwd", "sequence"),
    ]
