"""The per-chip sizes of one transformer layer (:class:`LayerShape`), the input of
every layer template (:mod:`.layers`, :mod:`.mlp`)."""

from __future__ import annotations

from dataclasses import dataclass

from tpusim.config.model import AttentionKind, MlpKind
from tpusim.program.builders import attention as flash
from tpusim.program.builders.attention import AttentionKernel

__all__ = ["DROPLESS", "AttentionKind", "LayerShape", "MlpKind"]

DROPLESS = -1.0
"""``capacity_factor`` of a dropless MoE (MaxText's default ``capacity_factor: -1``)."""


@dataclass(frozen=True)
class LayerShape:
    """Per-chip sizes of one transformer layer (tensor- and expert-local).

    ``seqs`` sequences of ``seq`` tokens (``tokens`` in all), ``heads`` and
    ``kv_heads`` local heads of ``head_dim``, ``d_ff`` local MLP width (of a dense
    layer; of one expert when ``experts > 0``), ``rows`` MLP rows (``tokens * top_k``
    for MoE), ``bytes_per_element`` of the dtype; ``tensor`` and ``expert`` are the
    axes of the tensor-parallel all-reduces and the MoE all-to-alls (empty: left
    out). ``shared_d_ff`` is the local width of the shared experts together;
    ``q_lora_rank``, ``kv_lora_rank`` and ``rope_head_dim`` shape MLA.
    ``kv_seq`` is the keys each query attends over (the whole sequence under context
    parallelism, where ``seq`` is the chip's slice of it; 0: ``seq``);
    ``sequence_shards`` the tensor axis size under sequence parallelism (norms,
    residuals and the layer input are split over it; 1 without).
    ``attention_kernel`` is ``flash`` (fused, :mod:`.attention`) or ``naive`` (scores
    and softmax through HBM).
    """

    seqs: int
    seq: int
    d_model: int
    heads: int
    head_dim: int
    d_ff: int
    experts: int
    top_k: int
    bytes_per_element: float
    tensor: tuple[str, ...]
    expert: tuple[str, ...]
    kv_heads: int = 0
    mlp: MlpKind = "plain"
    attention: AttentionKind = "gqa"
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    rope_head_dim: int = 0
    shared_d_ff: int = 0
    attention_kernel: AttentionKernel = "flash"
    kv_seq: int = 0
    sequence_shards: int = 1

    @property
    def keys(self) -> int:
        """Keys per query row: ``kv_seq``, or ``seq`` when it is 0."""
        return self.kv_seq or self.seq

    local_experts: int = 0
    capacity_factor: float = DROPLESS
    routing_skew: float = 0.0
    sparse_matmul: bool = True

    @property
    def tokens(self) -> int:
        return self.seqs * self.seq

    @property
    def rows(self) -> int:
        return self.tokens * self.top_k if self.experts else self.tokens

    @property
    def kv(self) -> int:
        """Local K/V heads (``heads`` when not set: multi-head attention)."""
        return self.kv_heads or self.heads

    @property
    def mlp_matrices(self) -> int:
        """Weight matrices of one MLP: 3 when gated (SwiGLU), else 2."""
        return 3 if self.mlp == "gated" else 2

    @property
    def act_bytes(self) -> float:
        """Bytes of one activation, ``tokens * d_model`` elements."""
        return self.tokens * self.d_model * self.bytes_per_element

    @property
    def qk_dim(self) -> int:
        """Head dimension of Q and K (MLA adds the rope part)."""
        return self.head_dim + (self.rope_head_dim if self.attention == "mla" else 0)

    @property
    def balanced_keys(self) -> int:
        """The keys a chip's queries see on average: ``seq`` without context
        parallelism; with it (``keys`` > ``seq``), load-balanced causal attention
        (MaxText's ``context_parallel_load_balance``) gives every chip the work of a
        query slice in the middle of the sequence, ``(keys + seq) / 2`` positions."""
        return (self.keys + self.seq) // 2

    @property
    def attention_call(self) -> flash.AttentionShape:
        """The layer's causal self-attention as one fused kernel call."""
        return flash.AttentionShape(
            seqs=self.seqs,
            heads=self.heads,
            q_len=self.seq,
            kv_len=self.balanced_keys,
            qk_dim=self.qk_dim,
            v_dim=self.head_dim,
            bytes_per_element=self.bytes_per_element,
        )
