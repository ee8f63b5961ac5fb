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

from tpusim.hardware.costs import DTYPE_BYTES
from tpusim.hardware.quantized import ACTIVATION_DTYPE, QUANTIZED, default_kv_dtype
from tpusim.program.builders.checks import bytes_per_element, divides, positive_ints
from tpusim.program.builders.gmm_ep import GmmEp
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
    #: The weights' dtype as stored in HBM (a quantized checkpoint: fp8, int8, int4,
    #: fp4) and its bytes per element; the activations are :attr:`activation_dtype`.
    dtype: str
    weight_bytes_per_element: float
    kv_cache: KvTier
    #: The KV cache's dtype and bytes per element.
    kv_dtype: str
    kv_bytes_per_element: float
    #: The system chip of each replica chip (empty: chip i is system chip i).
    chip_order: tuple[int, ...] = ()
    #: How the server runs the routed experts (None: tensor-parallel experts as one
    #: batched matmul; :class:`~tpusim.program.builders.gmm_ep.GmmEp`: tpu-inference's
    #: ``GMM_EP``, whole experts per TensorCore).
    moe_kernel: GmmEp | None = None

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

    @property
    def activation_dtype(self) -> str:
        """The activations' dtype: bf16 for quantized weights (the kernels quantize
        them per step where they do, :mod:`tpusim.hardware.quantized`), else the
        weights'."""
        return ACTIVATION_DTYPE if self.dtype in QUANTIZED else self.dtype

    @property
    def activation_bytes(self) -> float:
        """Bytes of one activation element (:attr:`activation_dtype`)."""
        return DTYPE_BYTES[self.activation_dtype]  # type: ignore[index]

    def kv_bytes_per_token_layer(self) -> float:
        """KV-cache bytes one token keeps in one layer on one chip, in ``kv_dtype``: K
        and V of the local KV heads (GQA) or the whole latent and RoPE key (MLA: every
        head needs it)."""
        if self.attention == "mla":
            return (self.kv_lora_rank + self.rope_head_dim) * self.kv_bytes_per_element
        return 2 * self.kv_heads_local * self.head_dim * self.kv_bytes_per_element


def replica_shape(
    fields: dict[str, Any],
    *,
    tp: int,
    ep: int,
    replicas: int,
    dtype: str,
    kv_cache: str,
    kv_dtype: str | None = None,
) -> ReplicaShape:
    """The per-chip shape of a model (``fields``: a preset's
    :meth:`~tpusim.config.model.ModelSpec.builder_fields`) on ``tp * ep`` chips, its
    weights stored in ``dtype``, its KV cache in ``kv_dtype`` (None: the activations'
    dtype, :func:`~tpusim.hardware.quantized.default_kv_dtype`).

    Raises :class:`ProgramError` naming the field when ``tp`` does not divide the
    (KV) heads or widths, ``ep`` the experts, or ``ep > 1`` on a dense model, or for
    an unknown dtype.
    """
    positive_ints(tp=tp, ep=ep, replicas=replicas)
    b = bytes_per_element(dtype)
    kv_dtype = default_kv_dtype(dtype) if kv_dtype is None else kv_dtype
    kv_b = bytes_per_element(kv_dtype, "kv_dtype")
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
        weight_bytes_per_element=b,
        kv_cache=kv_cache,  # type: ignore[arg-type]
        kv_dtype=kv_dtype,
        kv_bytes_per_element=kv_b,
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


def matrix_parameters(s: ReplicaShape) -> int:
    """Parameters of the layers' projection matrices one chip holds (attention, MLA's
    low-rank projections, dense MLPs, routed and shared experts): what a quantized
    checkpoint stores in its dtype."""
    d = s.d_model
    if s.attention == "gqa":
        attn = d * (s.heads_local + 2 * s.kv_heads_local) * s.head_dim
    else:
        h, r = s.heads_local, s.rope_head_dim
        attn = d * s.q_lora_rank + d * (s.kv_lora_rank + r)
        attn += s.q_lora_rank * h * (s.head_dim + r) + 2 * s.kv_lora_rank * h * s.head_dim
    attn += s.heads_local * s.head_dim * d
    dense_mlp = s.mlp_matrices * d * s.d_ff_local
    expert = s.mlp_matrices * d * s.expert_d_ff_local
    moe_mlp = (s.experts_local + s.shared_experts) * expert
    return s.layers * attn + s.dense_layers * dense_mlp + s.moe_layers * moe_mlp


def other_parameters(s: ReplicaShape, tied_embeddings: bool = False) -> int:
    """The rest one chip holds, kept in the activations' dtype by a quantized
    checkpoint: the norms (MLA's low-rank norms too), the routers, the embeddings and
    LM head (its shard). vLLM's ``Fp8Config`` quantizes linear and MoE layers only
    (tpu-inference ``layers/jax/quantization/fp8.py``, ``get_quant_method``:
    published, code); that a checkpoint's router and LM head stay bf16 is an
    assumption (fp8 checkpoints list them unconverted)."""
    d = s.d_model
    norms = 2 * d + (s.q_lora_rank + s.kv_lora_rank if s.attention == "mla" else 0)
    embeddings = (1 if tied_embeddings else 2) * math.ceil(s.vocab / s.tp) * d
    return s.layers * norms + s.moe_layers * d * s.experts + embeddings + d


def weight_parameters(s: ReplicaShape, tied_embeddings: bool = False) -> int:
    """Parameters one chip holds: its shards of the attention, MLPs, experts, embeddings
    and LM head, and whole copies of the norms, MLA's down-projections and the router."""
    return matrix_parameters(s) + other_parameters(s, tied_embeddings)


def weight_bytes(s: ReplicaShape, tied_embeddings: bool = False) -> float:
    """Weight bytes one chip holds: the matrices in the weights' dtype, the rest in
    the activations' (:func:`matrix_parameters`, :func:`other_parameters`)."""
    matrices = matrix_parameters(s) * s.weight_bytes_per_element
    return matrices + other_parameters(s, tied_embeddings) * s.activation_bytes
