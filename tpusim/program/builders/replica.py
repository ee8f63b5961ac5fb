"""A model replica as one of its chips holds it: the per-chip shape of a transformer
on ``tp * ep`` chips (heads, KV heads and ``d_ff`` divided by ``tp``, routed experts
by ``ep``), its collective groups on the system's chips, and the parameters it holds.
The serving iteration (:mod:`.serving`) and the decode step (:mod:`.decode`) build
on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from tpusim.program.builders.checks import bytes_per_element, divides, positive_ints
from tpusim.program.ir import ProgramError

KvTier = Literal["hbm", "sram", "tiered"]
#: Where the KV cache lives: HBM, on-chip SRAM, or SRAM first and HBM for the rest.
KV_TIERS: tuple[KvTier, ...] = ("hbm", "sram", "tiered")


@dataclass(frozen=True)
class ReplicaShape:
    """A model's shape as one chip of a replica holds it (``*_local``: this chip's
    share), the parallelism and the collective groups on the system's chips."""

    layers: int
    moe_layers: int
    d_model: int
    vocab: int
    attention: str
    heads_local: int
    kv_heads_local: int
    head_dim: int
    q_lora_rank: int
    kv_lora_rank: int
    rope_head_dim: int
    mlp_matrices: int
    d_ff_local: int
    experts: int
    experts_local: int
    top_k: int
    expert_d_ff_local: int
    shared_experts: int
    tp: int
    ep: int
    replicas: int
    dtype: str
    bytes_per_element: float
    kv_cache: KvTier
    #: The system chip of each replica chip (empty: chip i is system chip i).
    chip_order: tuple[int, ...] = ()

    @property
    def chips(self) -> int:
        """Chips of one replica."""
        return self.tp * self.ep

    @property
    def dense_layers(self) -> int:
        """Layers with a dense MLP."""
        return self.layers - self.moe_layers

    def system_chip(self, chip: int) -> int:
        """The system chip that replica chip ``chip`` (counted over every replica) is."""
        return self.chip_order[chip] if self.chip_order else chip

    def tensor_groups(self) -> tuple[tuple[int, ...], ...]:
        """Tensor-parallel groups: ``tp`` consecutive chips, over every replica."""
        n = self.replicas * self.chips
        return tuple(
            tuple(self.system_chip(c) for c in range(s, s + self.tp)) for s in range(0, n, self.tp)
        )

    def expert_groups(self) -> tuple[tuple[int, ...], ...]:
        """Expert-parallel groups: the chips of a replica ``tp`` apart."""
        out = []
        for r in range(self.replicas):
            base = r * self.chips
            out += [
                tuple(self.system_chip(base + t + e * self.tp) for e in range(self.ep))
                for t in range(self.tp)
            ]
        return tuple(out)

    def kv_bytes_per_token_layer(self) -> float:
        """KV-cache bytes one token keeps in one layer on one chip: K and V of the local
        KV heads (GQA) or the whole latent and RoPE key (MLA: every head needs it)."""
        if self.attention == "mla":
            return (self.kv_lora_rank + self.rope_head_dim) * self.bytes_per_element
        return 2 * self.kv_heads_local * self.head_dim * self.bytes_per_element


def replica_shape(
    fields: dict[str, Any], *, tp: int, ep: int, replicas: int, dtype: str, kv_cache: str
) -> ReplicaShape:
    """The per-chip shape of a model (``fields``: a preset's
    :meth:`~tpusim.config.model.ModelSpec.builder_fields`) on ``tp * ep`` chips.

    Raises :class:`ProgramError` naming the field when ``tp`` does not divide the
    (KV) heads or widths, ``ep`` the experts, or ``ep > 1`` on a dense model.
    """
    positive_ints(tp=tp, ep=ep, replicas=replicas)
    b = bytes_per_element(dtype)
    if kv_cache not in KV_TIERS:
        raise ProgramError(f"kv_cache must be one of {', '.join(KV_TIERS)}, got {kv_cache!r}")
    f = dict(fields)
    _check_divisions(f, tp, ep)
    return ReplicaShape(
        **_attention_shape(f, tp),
        **_mlp_shape(f, tp, ep),
        d_model=int(f["d_model"]),
        vocab=int(f.get("vocab") or 0),
        tp=tp,
        ep=ep,
        replicas=replicas,
        dtype=dtype,
        bytes_per_element=b,
        kv_cache=kv_cache,  # type: ignore[arg-type]
    )


def _check_divisions(f: dict[str, Any], tp: int, ep: int) -> None:
    """Raise ProgramError unless ``tp`` divides the heads, KV heads (GQA) and MLP widths
    and ``ep`` the experts (a dense model takes no ``ep > 1``)."""
    heads = int(f["heads"])
    divides("heads", heads, tp, "the tensor-parallel degree")
    if f.get("attention", "gqa") != "mla":
        divides("kv_heads", int(f.get("kv_heads") or heads), tp, "the tensor-parallel degree")
    divides("d_ff", int(f["d_ff"]), tp, "the tensor-parallel degree")
    experts = int(f.get("experts") or 0)
    if experts:
        divides("experts", experts, ep, "the expert-parallel degree")
        expert_ff = int(f.get("expert_d_ff") or f["d_ff"])
        divides("expert_d_ff", expert_ff, tp, "the tensor-parallel degree")
    elif ep > 1:
        raise ProgramError(f"ep ({ep}) needs a mixture-of-experts model (experts is 0)")


def _attention_shape(f: dict[str, Any], tp: int) -> dict[str, Any]:
    """The attention fields of :class:`ReplicaShape`: local heads, the KV heads one chip
    keeps (MLA: one latent) and the low-rank sizes."""
    heads, kv = int(f["heads"]), int(f.get("kv_heads") or f["heads"])
    mla = f.get("attention", "gqa") == "mla"
    return {
        "attention": "mla" if mla else "gqa",
        "heads_local": heads // tp,
        "kv_heads_local": 1 if mla else kv // tp,
        "head_dim": int(f["head_dim"]),
        "q_lora_rank": int(f.get("q_lora_rank") or 0),
        "kv_lora_rank": int(f.get("kv_lora_rank") or 0),
        "rope_head_dim": int(f.get("rope_head_dim") or 0),
    }


def _mlp_shape(f: dict[str, Any], tp: int, ep: int) -> dict[str, Any]:
    """The layer and MLP fields of :class:`ReplicaShape`: the MoE layers (the first
    ``dense_layers`` stay dense) and the local widths and experts."""
    experts = int(f.get("experts") or 0)
    expert_ff = int(f.get("expert_d_ff") or f["d_ff"])
    layers = int(f["layers"])
    dense = min(int(f.get("dense_layers") or 0), layers) if experts else layers
    return {
        "layers": layers,
        "moe_layers": layers - dense,
        "mlp_matrices": 3 if f.get("mlp", "plain") == "gated" else 2,
        "d_ff_local": int(f["d_ff"]) // tp,
        "experts": experts,
        "experts_local": experts // ep,
        "top_k": int(f.get("top_k") or 0),
        "expert_d_ff_local": expert_ff // tp,
        "shared_experts": int(f.get("shared_experts") or 0),
    }


def weight_parameters(s: ReplicaShape, tied_embeddings: bool = False) -> int:
    """Parameters one chip holds: its shards of the attention, MLPs, experts, embeddings
    and LM head, and whole copies of the norms, MLA's down-projections and the router."""
    d = s.d_model
    if s.attention == "gqa":
        attn = d * (s.heads_local + 2 * s.kv_heads_local) * s.head_dim
    else:
        h, r = s.heads_local, s.rope_head_dim
        attn = d * s.q_lora_rank + s.q_lora_rank + d * (s.kv_lora_rank + r) + s.kv_lora_rank
        attn += s.q_lora_rank * h * (s.head_dim + r) + 2 * s.kv_lora_rank * h * s.head_dim
    attn += s.heads_local * s.head_dim * d
    dense_mlp = s.mlp_matrices * d * s.d_ff_local
    expert = s.mlp_matrices * d * s.expert_d_ff_local
    moe_mlp = (s.experts_local + s.shared_experts) * expert + d * s.experts
    layers = s.layers * (attn + 2 * d) + s.dense_layers * dense_mlp + s.moe_layers * moe_mlp
    embeddings = (1 if tied_embeddings else 2) * math.ceil(s.vocab / s.tp) * d
    return layers + embeddings + d
