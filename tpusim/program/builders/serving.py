"""One serving iteration of a whole transformer on one model replica: a batch of decode
sequences (one new token each, attending to their context) plus chunks of prompts
being prefilled, as a continuous-batching server (vLLM) runs them.

The replica has ``tp * ep`` chips. Attention and the dense MLPs are tensor-parallel
over ``tp`` chips (heads, KV heads and ``d_ff`` divided by ``tp``); the ``ep``
tensor-parallel groups are data-parallel for attention (each holds ``1/ep`` of the
sequences and their KV cache) and share the routed experts (``experts / ep`` each),
which tokens reach by an all-to-all over the expert groups, as DeepSeek-V3 is served.
Every op is what *one chip* runs; collectives name explicit chip ``groups`` (chips
``0 .. replicas * tp * ep - 1`` of the system, replica ``r`` on chips ``r*tp*ep ..``),
so concurrent replicas share the real topology's links.

Per layer (``T`` = tokens of the chip's share of the batch): norm, attention
projections (GQA: one QKV matmul; MLA: the low-rank down/up projections and the
absorbed per-head products), the write of the new K/V, the attention, the output
projection, a tensor all-reduce of ``T * d_model``; then the MLP: dense (gate and up
fused in one matmul of width ``2 d_ff`` for a gated MLP, activation, down) or MoE
(router, dispatch all-to-all of ``T * top_k * d_model``, the active local experts as
one batched matmul, the shared experts, combine all-to-all), and a second tensor
all-reduce. Around the layers: the embedding lookup, the final norm, the LM head over
``vocab / tp`` for the sequences of the batch and a gather of each shard's best
candidate (a sharded greedy sampler: ``8`` bytes per sequence per shard).

Dtypes. The layers' matmuls read weights stored in the shape's ``dtype`` (a quantized
checkpoint is read at its size and never quantized per step; the chip's kernel path is
:mod:`tpusim.hardware.quantized`'s); the activations, collectives, embedding, router
and LM head are in its ``activation_dtype`` (bf16 for quantized weights), the KV cache
in its ``kv_dtype``.

Attention. Decode: one elementwise op ``attn.kv_read`` reads the cached tokens
(``kv_tokens``: every decode context plus the prior context of each prefill chunk)
from the KV tier, as :mod:`.decode` does (memory-bound). ``tiered`` splits it in two
ops, the first ``sram_tokens`` from SRAM, the rest from HBM. Prefill: one causal
flash-attention kernel (:mod:`.attention`) over the local heads, ``C`` queries (the
chunk tokens) against the keys that give them ``N`` causal keys each on average
(``N = sum c (p + (c + 1) / 2) / C``), so its FLOPs are quadratic in the chunk; its
traffic re-reads K/V once per query block (the ``kv_read`` above is the cache read
of the decode rows and the prior context).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tpusim.program.builders import attention as flash
from tpusim.program.builders.checks import positive_ints
from tpusim.program.builders.gmm_ep import busiest_device, padded_tokens
from tpusim.program.builders.oplist import Chain, OpList
from tpusim.program.builders.replica import ReplicaShape
from tpusim.program.ir import Program

#: Bytes each tensor-parallel shard sends per sequence to sample greedily: its best
#: logit (fp32) and that token's index (int32). An assumption: a sharded argmax, as
#: JAX servers sample; vLLM gathers whole logits instead.
SAMPLER_BYTES_PER_SEQUENCE = 8.0
#: Bytes of one logit (fp32, as vLLM and JetStream keep logits). Published default.
LOGIT_BYTES = 4.0


@dataclass(frozen=True)
class IterationBatch:
    """What one iteration computes on one chip: ``tokens`` (decode sequences plus
    prefill chunk tokens), ``sequences`` (that produce logits), ``kv_tokens`` cached
    tokens read (of which ``sram_tokens`` from SRAM when tiered), ``prefill_tokens``
    and ``prefill_keys`` (the causal keys per prefill query, ``N`` above)."""

    tokens: int
    sequences: int
    kv_tokens: int = 0
    sram_tokens: int = 0
    prefill_tokens: int = 0
    prefill_keys: float = 0.0


def weights(s: ReplicaShape) -> dict[str, object]:
    """The fields of a matmul by a layer's weights: stored in the weights' dtype (a
    quantized checkpoint is read at its size and never quantized per step;
    :mod:`tpusim.hardware.quantized` says what the chip does with it)."""
    return {"dtype": s.dtype, "weights_stored": True}


def attention_ops(chain: Chain, s: ReplicaShape, batch: IterationBatch, prefix: str) -> None:
    """The attention proper: the KV read (split by tier) and the prefill matmuls."""
    per_token = s.kv_bytes_per_token_layer()
    sram = batch.sram_tokens if s.kv_cache == "tiered" else 0
    hbm = batch.kv_tokens - sram
    if s.kv_cache == "sram":
        sram, hbm = batch.kv_tokens, 0
    if sram:
        chain.add(
            f"{prefix}.attn.kv_read_sram",
            "elementwise",
            bytes=sram * per_token,
            memory="sram",
            vector=False,  # a cache read: no vector work per element
        )
    if hbm:
        read = dict(bytes=hbm * per_token, memory="hbm", vector=False)
        chain.add(f"{prefix}.attn.kv_read", "elementwise", **read)
    if batch.prefill_tokens:
        work = flash.forward(prefill_call(s, batch))
        fields = work.op_fields()
        chain.add(f"{prefix}.attn.prefill_flash", "kernel", dtype=s.activation_dtype, **fields)


def prefill_call(s: ReplicaShape, batch: IterationBatch) -> flash.AttentionShape:
    """The iteration's prefill chunks as one causal flash-attention call over the local
    heads: ``C`` queries against the ``N + (C - 1) / 2`` keys that give each query
    ``N`` causal keys on average (exact for one chunk after a prior context)."""
    chunk = batch.prefill_tokens
    keys = max(1, math.ceil(batch.prefill_keys))
    return flash.AttentionShape(
        seqs=1,
        heads=s.heads_local,
        q_len=chunk,
        kv_len=max(chunk, round(keys + (chunk - 1) / 2)),
        qk_dim=s.head_dim + (s.rope_head_dim if s.attention == "mla" else 0),
        v_dim=s.head_dim,
        bytes_per_element=s.activation_bytes,
    )


def projection_in(chain: Chain, s: ReplicaShape, t: int, prefix: str) -> None:
    """Norm, Q/K/V projections and the cache write, before the attention."""
    b, d, mm = s.activation_bytes, s.d_model, {**weights(s), "m": t}
    kv_tier = "hbm" if s.kv_cache == "hbm" else "sram"
    chain.add(f"{prefix}.attn.norm", "elementwise", bytes=2 * t * d * b)
    if s.attention == "gqa":
        n = (s.heads_local + 2 * s.kv_heads_local) * s.head_dim
        chain.add(f"{prefix}.attn.qkv", "matmul", k=d, n=n, **mm)
    else:
        h, rope = s.heads_local, s.rope_head_dim
        chain.add(f"{prefix}.attn.q_down", "matmul", k=d, n=s.q_lora_rank, **mm)
        chain.add(f"{prefix}.attn.q_up", "matmul", k=s.q_lora_rank, n=h * (s.head_dim + rope), **mm)
        chain.add(f"{prefix}.attn.kv_down", "matmul", k=d, n=s.kv_lora_rank + rope, **mm)
        chain.add(
            f"{prefix}.attn.q_absorb", "matmul", batch=h, k=s.head_dim, n=s.kv_lora_rank, **mm
        )
    chain.add(
        f"{prefix}.attn.kv_write",
        "elementwise",
        bytes=t * s.kv_bytes_per_token_layer(),
        memory=kv_tier,
    )


def projection_out(chain: Chain, s: ReplicaShape, t: int, prefix: str) -> None:
    """(MLA: the absorbed value up-projection,) the output projection and all-reduce."""
    mm = {**weights(s), "m": t}
    if s.attention == "mla":
        h = s.heads_local
        chain.add(f"{prefix}.attn.v_up", "matmul", batch=h, k=s.kv_lora_rank, n=s.head_dim, **mm)
    chain.add(f"{prefix}.attn.out", "matmul", k=s.heads_local * s.head_dim, n=s.d_model, **mm)
    tensor_allreduce(chain, s, t, f"{prefix}.attn.tp_allreduce")


def dense_mlp(chain: Chain, s: ReplicaShape, t: int, prefix: str) -> None:
    """Norm, (gate and) up, activation, down, tensor all-reduce."""
    b, d, ff, up = s.activation_bytes, s.d_model, s.d_ff_local, s.mlp_matrices - 1
    mm = {**weights(s), "m": t}
    chain.add(f"{prefix}.mlp.norm", "elementwise", bytes=2 * t * d * b)
    chain.add(f"{prefix}.mlp.up", "matmul", k=d, n=up * ff, **mm)
    chain.add(f"{prefix}.mlp.act", "elementwise", bytes=(up + 1) * t * ff * b)
    chain.add(f"{prefix}.mlp.down", "matmul", k=ff, n=d, **mm)
    tensor_allreduce(chain, s, t, f"{prefix}.mlp.tp_allreduce")


def active_experts(s: ReplicaShape, replica_tokens: int) -> int:
    """Local experts at least one of ``replica_tokens`` tokens is routed to, in
    expectation under uniform routing: ``experts_local * (1 - (1 - top_k/experts)^T)``
    (at least 1); only their weights are read."""
    unused = (1.0 - s.top_k / s.experts) ** replica_tokens
    return max(1, math.ceil(s.experts_local * (1.0 - unused)))


def moe_mlp(chain: Chain, s: ReplicaShape, t: int, prefix: str) -> None:
    """Norm, router, dispatch, the active local experts, shared experts, combine."""
    b, d, ff, up = s.activation_bytes, s.d_model, s.expert_d_ff_local, s.mlp_matrices - 1
    mm = weights(s)
    chain.add(f"{prefix}.mlp.norm", "elementwise", bytes=2 * t * d * b)
    router = {"dtype": s.activation_dtype}  # the router stays unquantized
    chain.add(f"{prefix}.moe.router", "matmul", m=t, k=d, n=s.experts, **router)
    expert_alltoall(chain, s, t, f"{prefix}.moe.dispatch")
    if s.moe_kernel is not None:
        gmm_ep_experts(chain, s, t, prefix)
    else:
        active = active_experts(s, t * s.ep)
        rows = math.ceil(t * s.top_k / active)  # each expert group receives t * top_k rows
        # each expert its own matrix; a grouped (megablox) matmul
        experts = {"batch": active, "m": rows, "own_weights": True, "grouped": True, **mm}
        chain.add(f"{prefix}.moe.up", "matmul", k=d, n=up * ff, **experts)
        chain.add(f"{prefix}.moe.act", "elementwise", bytes=(up + 1) * active * rows * ff * b)
        chain.add(f"{prefix}.moe.down", "matmul", k=ff, n=d, **experts)
    if s.shared_experts:
        shared = s.shared_experts * ff
        chain.add(f"{prefix}.moe.shared_up", "matmul", m=t, k=d, n=up * shared, **mm)
        chain.add(f"{prefix}.moe.shared_down", "matmul", m=t, k=shared, n=d, **mm)
    expert_alltoall(chain, s, t, f"{prefix}.moe.combine")
    tensor_allreduce(chain, s, t, f"{prefix}.mlp.tp_allreduce")


def gmm_ep_experts(chain: Chain, s: ReplicaShape, tokens: int, prefix: str) -> None:
    """The routed experts of one MoE layer as ``GMM_EP`` runs them on one chip of the
    replica (``s.moe_kernel`` given): the busiest device's reached experts
    (:func:`busiest_device`, rounded to whole experts) times the chip's cores, each a
    group of its padded rows by the whole expert's gate and up (``2 d_ff`` wide, the
    activation fused, as ``gmm_v2``'s ``fuse_act``) and down matrices, stored in the
    weights' dtype; then every device's unpermute (``moe_gmm_local``: the
    ``ragged_scatter`` output, ``T' k`` rows of ``d_model`` whatever its share, weighted,
    masked and summed over the top-``k`` into ``T'`` rows)."""
    kernel = s.moe_kernel
    assert kernel is not None
    ff = s.expert_d_ff_local * s.tp  # whole experts: EP splits experts, not d_ff
    up = s.mlp_matrices - 1
    devices = s.tp * kernel.cores
    load = busiest_device(tokens, s.top_k, s.experts_local, devices, kernel)
    groups = max(1, round(load.experts))
    tiles = max(1, round(load.padded_rows / load.experts / kernel.tile_m))
    rows = tiles * kernel.tile_m
    experts = {"batch": groups * kernel.cores, "m": rows, "own_weights": True, "grouped": True}
    weights = {"dtype": s.dtype, "weights_stored": True}
    chain.add(f"{prefix}.moe.up", "matmul", k=s.d_model, n=up * ff, **experts, **weights)
    chain.add(f"{prefix}.moe.down", "matmul", k=ff, n=s.d_model, **experts, **weights)
    unpermuted = padded_tokens(tokens, kernel.min_tokens) * (s.top_k + 1) * s.d_model
    unpermute_bytes = kernel.cores * unpermuted * s.activation_bytes
    chain.add(f"{prefix}.moe.unpermute", "elementwise", bytes=unpermute_bytes)


def tensor_allreduce(chain: Chain, s: ReplicaShape, t: int, name: str) -> None:
    """All-reduce of ``t * d_model`` activations over the tensor groups (if ``tp > 1``)."""
    if s.tp > 1:
        size = t * s.d_model * s.activation_bytes
        chain.add(
            name, "collective", collective="all-reduce", size_bytes=size, groups=s.tensor_groups()
        )


def expert_alltoall(chain: Chain, s: ReplicaShape, t: int, name: str) -> None:
    """All-to-all of ``t * top_k * d_model`` (bytes per chip) over the expert groups."""
    if s.ep > 1:
        size = t * s.top_k * s.d_model * s.activation_bytes
        chain.add(
            name, "collective", collective="all-to-all", size_bytes=size, groups=s.expert_groups()
        )


def embed_op(chain: Chain, s: ReplicaShape, tokens: int) -> None:
    """The embedding lookup of the batch's tokens (SparseCores where the chip has any)."""
    chain.add("embed", "embedding", rows=tokens, row_bytes=s.d_model * s.activation_bytes)


def output_ops(chain: Chain, s: ReplicaShape, sequences: int) -> None:
    """Final norm, LM head over the local vocabulary for each sequence, the sampler's
    read of the logits and its gather over the tensor groups."""
    b, d = s.activation_bytes, s.d_model
    chain.add("final.norm", "elementwise", bytes=2 * sequences * d * b)
    if s.vocab:
        n = math.ceil(s.vocab / s.tp)  # the LM head stays unquantized
        chain.add("lm_head", "matmul", m=sequences, k=d, n=n, dtype=s.activation_dtype)
        chain.add("sample", "elementwise", bytes=sequences * n * LOGIT_BYTES)
    if s.tp > 1:
        size = sequences * s.tp * SAMPLER_BYTES_PER_SEQUENCE
        chain.add(
            "sample.gather",
            "collective",
            collective="all-gather",
            size_bytes=size,
            groups=s.tensor_groups(),
        )


def layer_ops(
    chain: Chain, s: ReplicaShape, batch: IterationBatch | None, t: int, moe: bool, prefix: str
) -> None:
    """One layer; ``batch`` None leaves the attention proper out (its cost depends on the
    contexts, not on ``t``)."""
    projection_in(chain, s, t, prefix)
    if batch is not None:
        attention_ops(chain, s, batch, prefix)
    projection_out(chain, s, t, prefix)
    (moe_mlp if moe else dense_mlp)(chain, s, t, prefix)


def serving_iteration(s: ReplicaShape, batch: IterationBatch, layers: int | None = None) -> Program:
    """The whole iteration as one program (every layer, the attention included);
    ``layers`` keeps only the first ones (dense layers come first). Raises
    :class:`ProgramError` for an empty batch."""
    positive_ints(tokens=batch.tokens, sequences=batch.sequences)
    out = OpList()
    chain = Chain(out)
    count = s.layers if layers is None else min(layers, s.layers)
    embed_op(chain, s, batch.tokens)
    for layer in range(count):
        layer_ops(chain, s, batch, batch.tokens, layer >= s.dense_layers, f"L{layer}")
    output_ops(chain, s, batch.sequences)
    return Program(
        name=f"serving_iteration[T{batch.tokens},S{batch.sequences}]", ops=tuple(out.ops)
    )


def layer_program(s: ReplicaShape, tokens: int) -> Program:
    """The embedding, one dense and (for MoE models) one MoE layer without the attention
    proper, as ops named ``embed``, ``dense.*`` and ``moe.*``: their time depends on
    ``tokens`` alone."""
    out = OpList()
    chain = Chain(out)
    embed_op(chain, s, tokens)
    if s.dense_layers:
        layer_ops(chain, s, None, tokens, False, "dense")
    if s.moe_layers:
        layer_ops(chain, s, None, tokens, True, "moe")
    return Program(name=f"serving_layers[T{tokens}]", ops=tuple(out.ops))


def output_program(s: ReplicaShape, sequences: int) -> Program:
    """The ops after the layers (:func:`output_ops`) as a program."""
    out = OpList()
    output_ops(Chain(out), s, sequences)
    return Program(name=f"serving_output[S{sequences}]", ops=tuple(out.ops))
