"""What one chip of a replica holds: weights, activations and the KV cache that fits
in the rest, in blocks of ``block_size`` tokens (vLLM's paged KV cache).

Definition (per chip, bytes): ``usable = hbm_utilization * hbm_capacity`` (vLLM's
``--gpu-memory-utilization``, default :data:`HBM_UTILIZATION`);
``kv_hbm = usable - weights - activations``; ``kv_sram = SRAM_KV_FRACTION *
sram_capacity``. The cache of one tensor-parallel group holds ``floor(kv_tier /
(layers * kv_bytes_per_token_layer) / block_size)`` blocks per tier (``hbm``: HBM
only, ``sram``: SRAM only, ``tiered``: both); a replica has ``ep`` such groups (each
holds its own sequences).

Worked example: Llama 3.1 70B in bf16 on 8 TPU 8i chips (TP 8): weights
``(70.55e9 + 7 * 1.31e6 norms) * 2 / 8 = 17.6 GB`` per chip; a token's KV is
``80 layers * 2 * 1 KV head * 128 * 2 B = 40,960 B`` per chip; ``0.9 * 288 GB`` less
weights and activations leaves about 241 GB, about 5.9 million tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tpusim.config.chip import ChipSpec
from tpusim.errors import InputError
from tpusim.program.builders.replica import ReplicaShape, weight_bytes
from tpusim.program.builders.serving import LOGIT_BYTES
from tpusim.units import format_bytes

#: Fraction of HBM the server may use (weights, activations, KV cache): vLLM's
#: default ``gpu_memory_utilization`` (published default; the rest is left to the
#: runtime, fragmentation and the compiler's scratch).
HBM_UTILIZATION = 0.9
#: Fraction of on-chip SRAM (VMEM) the KV cache may take when it lives there; the
#: rest holds the kernels' tiles. An assumption: nothing published says how much of
#: 8i's 384 MiB a serving stack gives the cache.
SRAM_KV_FRACTION = 0.75
#: Tokens per KV-cache block: vLLM's default ``block_size`` (published default).
DEFAULT_BLOCK_SIZE = 16


def weights_bytes(s: ReplicaShape, tied_embeddings: bool = False) -> float:
    """Weight bytes one chip holds: the layers' matrices in the weights' dtype, the
    norms, routers, embeddings and LM head in the activations'
    (:func:`~tpusim.program.builders.replica.weight_bytes`)."""
    return weight_bytes(s, tied_embeddings)


def activation_bytes(s: ReplicaShape, max_tokens: int, max_sequences: int) -> float:
    """Activation bytes one chip keeps live at the largest iteration (``max_tokens`` and
    ``max_sequences`` over the replica): the residual stream in and out, the widest
    intermediate and the logits (fp32), as vLLM measures with a dummy run at its token
    budget. An assumption on what stays live, not a measured figure."""
    t = math.ceil(max_tokens / s.ep)
    routed = s.expert_d_ff_local * s.top_k if s.experts else 0
    widest = max(
        (s.heads_local + 2 * s.kv_heads_local) * s.head_dim,
        (s.mlp_matrices - 1) * max(s.d_ff_local, routed),
    )
    logits = math.ceil(max_sequences / s.ep) * math.ceil(s.vocab / s.tp) * LOGIT_BYTES
    return t * (2 * s.d_model + widest) * s.activation_bytes + logits


@dataclass(frozen=True)
class KvCapacity:
    """A replica's KV cache: blocks per tier (over its ``ep`` groups), bytes per token
    on one chip, and the per-chip budget it came from."""

    block_size: int
    hbm_blocks: int
    sram_blocks: int
    bytes_per_token_per_chip: float
    weights_bytes: float
    activation_bytes: float
    usable_bytes: float

    @property
    def blocks(self) -> int:
        """Blocks of every tier."""
        return self.hbm_blocks + self.sram_blocks

    @property
    def tokens(self) -> int:
        """Tokens the cache holds (every tier)."""
        return self.blocks * self.block_size

    @property
    def sram_tokens(self) -> int:
        """Tokens the SRAM tier holds."""
        return self.sram_blocks * self.block_size


def kv_capacity(
    s: ReplicaShape,
    chip: ChipSpec,
    *,
    block_size: int = DEFAULT_BLOCK_SIZE,
    max_tokens: int,
    max_sequences: int,
    tied_embeddings: bool = False,
    hbm_utilization: float = HBM_UTILIZATION,
) -> KvCapacity:
    """The replica's KV cache on ``chip``, the server using ``hbm_utilization`` of its
    HBM. Raises :class:`InputError` when the weights and activations do not fit the
    usable HBM (saying by how much) or no block fits."""
    weights = weights_bytes(s, tied_embeddings)
    acts = activation_bytes(s, max_tokens, max_sequences)
    usable = hbm_utilization * chip.hbm.capacity_bytes
    if weights + acts > usable:
        short = weights + acts - usable
        raise InputError(
            f"the model does not fit {s.chips} chip(s) of {chip.name}: each needs "
            f"{format_bytes(weights + acts)} (weights {format_bytes(weights)} + activations "
            f"{format_bytes(acts)}) but {hbm_utilization:g} x "
            f"{format_bytes(chip.hbm.capacity_bytes)} = {format_bytes(usable)} is usable: "
            f"short by {format_bytes(short)} per chip "
            "(give the replica more chips, or a smaller dtype)"
        )
    per_token = s.layers * s.kv_bytes_per_token_layer()
    hbm_free = usable - weights - acts if s.kv_cache != "sram" else 0.0
    sram_free = SRAM_KV_FRACTION * chip.sram.capacity_bytes if s.kv_cache != "hbm" else 0.0
    blocks = [s.ep * math.floor(free / per_token / block_size) for free in (hbm_free, sram_free)]
    if sum(blocks) == 0:
        raise InputError(
            f"no KV-cache block of {block_size} tokens ({format_bytes(per_token * block_size)} "
            f"per chip) fits the {s.kv_cache} tier of {chip.name}"
        )
    return KvCapacity(block_size, blocks[0], blocks[1], per_token, weights, acts, usable)
