"""Model presets: the shape of a published transformer (``configs/models/*.yaml``).

A preset names a model's published shape (layers, widths, attention, MLP, experts,
vocabulary) with a source for every number, and the parameter counts its authors
publish. :meth:`ModelSpec.parameters` counts parameters from the shape alone (an
oracle independent of the program builders, which count what each chip holds), and
:meth:`ModelSpec.builder_fields` gives the keyword arguments a workload's program
builder takes for it.

Counting conventions (no biases; what the published counts include):

* Embedding and output head are separate matrices of ``vocab x d_model`` unless
  ``tied_embeddings``; both count towards active parameters (Mixtral's 12.9B active
  includes them).
* Each layer has two RMSNorm scales of ``d_model``; the model one final norm.
* GQA attention: Q and O of ``d_model x heads*head_dim``, K and V of ``d_model x
  kv_heads*head_dim``.
* MLA (DeepSeek-V2/V3): ``W_DQ`` (``d_model x q_lora_rank``), ``W_UQ``
  (``q_lora_rank x heads*(head_dim + rope_head_dim)``), ``W_DKV`` (``d_model x
  (kv_lora_rank + rope_head_dim)``), ``W_UK`` and ``W_UV`` (``kv_lora_rank x
  heads*head_dim`` each), O (``heads*head_dim x d_model``) and the two latent norms.
* A gated (SwiGLU) MLP has three ``d_model x d_ff`` matrices, a plain one two.
* MoE layers: ``experts`` routed experts and ``shared_experts`` always-on ones of
  width ``expert_d_ff`` (gated like the dense MLP), a ``d_model x experts`` router;
  the first ``dense_layers`` layers have a dense MLP of width ``d_ff`` instead.
  Active parameters count ``top_k`` routed experts plus the shared ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from tpusim.config.limits import MAX_EXPERTS, MAX_LAYERS
from tpusim.config.types import Frozen, Source
from tpusim.vocabulary import Dtype

#: Largest value of any model dimension (layers, widths, heads, vocab, context,
#: experts). Grade: assumption. The largest published dimension of a shipped preset
#: is Llama 3.1's 131,072-token context; a dimension of 2^31 is 16,000 times that and
#: keeps every parameter and FLOP count a finite float (a ``d_ff`` of 10^400 made the
#: memory plan's division overflow).
MAX_MODEL_DIM = 2**31

PositiveInt = Annotated[int, Field(ge=1, le=MAX_MODEL_DIM)]
"""A model dimension: a whole number from 1 to :data:`MAX_MODEL_DIM`."""
Rank = Annotated[int, Field(ge=0, le=MAX_MODEL_DIM)]
"""A dimension that may be 0 (absent): 0 to :data:`MAX_MODEL_DIM`."""

Layers = Annotated[int, Field(ge=1, le=MAX_LAYERS)]
"""A count of layers: 1 to :data:`~tpusim.config.limits.MAX_LAYERS`."""
Experts = Annotated[int, Field(ge=0, le=MAX_EXPERTS)]
"""A count of routed or shared experts: 0 (a dense MLP) to :data:`~tpusim.config.
limits.MAX_EXPERTS`."""

AttentionKind = Literal["gqa", "mla"]
MlpKind = Literal["plain", "gated"]


class ModelShape(Frozen):
    """A transformer's shape as the program builders and the workloads take it, every
    field declared here once: the five sizes every model has, and the features whose
    defaults are the builders' neutral values (a dense, plain-MLP, multi-head
    transformer without embeddings). A preset's :meth:`ModelSpec.builder_fields` is
    one of these; the training and decode workloads take its fields, and the training
    step's arguments (:class:`~tpusim.program.builders.args.TrainingArgs`) are one."""

    layers: Layers
    d_model: PositiveInt
    d_ff: PositiveInt
    heads: PositiveInt
    head_dim: PositiveInt
    kv_heads: PositiveInt | None = None
    vocab: Rank = 0
    mlp: MlpKind = "plain"
    attention: AttentionKind = "gqa"
    q_lora_rank: Rank = 0
    kv_lora_rank: Rank = 0
    rope_head_dim: Rank = 0
    experts: Experts = 0
    top_k: PositiveInt = 2
    expert_d_ff: PositiveInt | None = None
    shared_experts: Experts = 0
    dense_layers: Rank = 0

    @classmethod
    def neutral(cls) -> dict[str, object]:
        """The features (the fields with a default) and their neutral values: a preset
        whose value differs needs a workload kind that has the field."""
        return {name: f.default for name, f in cls.model_fields.items() if not f.is_required()}

    @classmethod
    def shape_of(cls, fields: Mapping[str, object]) -> dict[str, object]:
        """The shape fields among ``fields`` (the rest left out)."""
        return {name: fields[name] for name in cls.model_fields if name in fields}


#: Builder keyword arguments a preset sets, in the order ``tpusim models`` shows them.
SHAPE_FIELDS = tuple(ModelShape.model_fields)

#: The builders' defaults for the shape fields (what a workload kind that lacks a
#: field assumes): a preset whose value differs needs the field.
NEUTRAL_SHAPE: dict[str, object] = ModelShape.neutral()


class AttentionSpec(Frozen):
    """Attention: ``kind`` gqa (``kv_heads`` K/V heads shared by groups of query heads)
    or mla (multi-head latent attention, with its low ranks and decoupled RoPE dim)."""

    kind: AttentionKind = "gqa"
    heads: PositiveInt
    kv_heads: PositiveInt | None = None
    head_dim: PositiveInt
    q_lora_rank: Rank = 0
    kv_lora_rank: Rank = 0
    rope_head_dim: Rank = 0

    @model_validator(mode="after")
    def _consistent(self) -> AttentionSpec:
        if self.kind == "gqa":
            kv = self.kv_heads or self.heads
            if self.heads % kv:
                raise ValueError(f"kv_heads ({kv}) must divide heads ({self.heads})")
            if self.q_lora_rank or self.kv_lora_rank or self.rope_head_dim:
                raise ValueError("q_lora_rank, kv_lora_rank and rope_head_dim are for mla")
        elif not (self.q_lora_rank and self.kv_lora_rank and self.rope_head_dim):
            raise ValueError("mla needs q_lora_rank, kv_lora_rank and rope_head_dim")
        return self


class MoeSpec(Frozen):
    """Mixture of experts: routed ``experts`` (``top_k`` per token), ``shared``
    always-on experts, each of width ``d_ff``; the first ``dense_layers`` layers keep
    a dense MLP. ``experts`` and ``shared`` are bounded as the shape the builders take
    bounds them (:data:`Experts`), so a file over it is refused where it is read."""

    experts: Annotated[int, Field(ge=1, le=MAX_EXPERTS)]
    top_k: PositiveInt
    d_ff: PositiveInt
    shared: Experts = 0
    dense_layers: Rank = 0

    @model_validator(mode="after")
    def _top_k(self) -> MoeSpec:
        if self.top_k > self.experts:
            raise ValueError(f"top_k ({self.top_k}) exceeds experts ({self.experts})")
        return self


class PublishedCounts(Frozen):
    """Parameter counts as their authors publish them (``active`` for MoE models)."""

    parameters: float = Field(gt=0, allow_inf_nan=False)
    active_parameters: float | None = Field(None, gt=0, allow_inf_nan=False)


class ModelSpec(Frozen):
    """One model preset (see the module docstring for what each part counts)."""

    name: str
    full_name: str
    description: str = ""
    layers: Layers
    d_model: PositiveInt
    vocab: PositiveInt
    tied_embeddings: bool = False
    context_length: PositiveInt
    attention: AttentionSpec
    mlp: MlpKind = "gated"
    d_ff: PositiveInt
    moe: MoeSpec | None = None
    #: The weights' dtype as a quantized checkpoint stores them (a Hugging Face
    #: ``config.json``'s fp8 ``quantization_config``); None: a float checkpoint, whose
    #: served dtype is the run's ``dtype``.
    checkpoint_dtype: Dtype | None = None
    #: None: no count is published with the shape (a Hugging Face ``config.json``).
    published: PublishedCounts | None = None
    sources: dict[str, Source] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _dense_layers(self) -> ModelSpec:
        if self.moe and self.moe.dense_layers >= self.layers:
            raise ValueError(
                f"moe.dense_layers ({self.moe.dense_layers}) must be fewer than layers "
                f"({self.layers})"
            )
        return self

    @property
    def kv_heads(self) -> int:
        """K/V heads (GQA); MLA caches one latent per token, shared by every head."""
        return self.attention.kv_heads or self.attention.heads

    def attention_parameters(self) -> int:
        """Parameters of one layer's attention (projections and, for MLA, latent norms)."""
        a, d = self.attention, self.d_model
        out = a.heads * a.head_dim * d
        if a.kind == "gqa":
            return d * (a.heads + 2 * self.kv_heads) * a.head_dim + out
        return (
            d * a.q_lora_rank
            + a.q_lora_rank * a.heads * (a.head_dim + a.rope_head_dim)
            + d * (a.kv_lora_rank + a.rope_head_dim)
            + 2 * a.kv_lora_rank * a.heads * a.head_dim
            + out
            + a.q_lora_rank
            + a.kv_lora_rank
        )

    def mlp_parameters(self, d_ff: int) -> int:
        """Parameters of one MLP (or one expert) of width ``d_ff``."""
        return (3 if self.mlp == "gated" else 2) * self.d_model * d_ff

    def layer_parameters(self, moe_layer: bool, active: bool = False) -> int:
        """One layer's parameters: all of them, or those one token uses (``active``)."""
        norms = 2 * self.d_model
        if not moe_layer or self.moe is None:
            return self.attention_parameters() + self.mlp_parameters(self.d_ff) + norms
        routed = self.moe.top_k if active else self.moe.experts
        experts = (routed + self.moe.shared) * self.mlp_parameters(self.moe.d_ff)
        router = self.d_model * self.moe.experts
        return self.attention_parameters() + experts + router + norms

    @property
    def moe_layers(self) -> int:
        """Layers with a mixture-of-experts MLP."""
        return self.layers - self.moe.dense_layers if self.moe else 0

    def parameters(self, active: bool = False) -> int:
        """The model's parameters (``active``: those one token uses)."""
        embeddings = (1 if self.tied_embeddings else 2) * self.vocab * self.d_model
        dense = (self.layers - self.moe_layers) * self.layer_parameters(False)
        moe = self.moe_layers * self.layer_parameters(True, active)
        return embeddings + dense + moe + self.d_model

    def kv_cache_bytes_per_token(self, bytes_per_element: float) -> float:
        """KV-cache bytes one token keeps over all layers: K and V of every KV head
        (GQA) or the compressed latent and the RoPE key (MLA, as DeepSeek caches)."""
        a = self.attention
        if a.kind == "mla":
            per_layer = a.kv_lora_rank + a.rope_head_dim
        else:
            per_layer = 2 * self.kv_heads * a.head_dim
        return self.layers * per_layer * bytes_per_element

    def shape(self) -> ModelShape:
        """This model's shape as the builders take it."""
        a, moe = self.attention, self.moe
        features = (
            {"experts": moe.experts, "top_k": moe.top_k, "expert_d_ff": moe.d_ff}
            | {"shared_experts": moe.shared, "dense_layers": moe.dense_layers}
            if moe
            else {}
        )
        return ModelShape(
            layers=self.layers,
            d_model=self.d_model,
            d_ff=self.d_ff,
            heads=a.heads,
            kv_heads=self.kv_heads,
            head_dim=a.head_dim,
            vocab=self.vocab,
            mlp=self.mlp,
            attention=a.kind,
            q_lora_rank=a.q_lora_rank,
            kv_lora_rank=a.kv_lora_rank,
            rope_head_dim=a.rope_head_dim,
            **features,
        )

    def builder_fields(self) -> dict[str, Any]:
        """The program builders' keyword arguments for this model's shape (every
        :class:`ModelShape` field, in its order)."""
        return self.shape().model_dump()

    def row(self) -> dict[str, Any]:
        """What ``tpusim models --json`` shows for this model."""
        return {
            "name": self.name,
            "full_name": self.full_name,
            "parameters": self.parameters(),
            "active_parameters": self.parameters(active=True),
            "published_parameters": self.published and self.published.parameters,
            "published_active_parameters": self.published and self.published.active_parameters,
            "context_length": self.context_length,
            "tied_embeddings": self.tied_embeddings,
            "kv_cache_bytes_per_token_bf16": self.kv_cache_bytes_per_token(2),
            **self.builder_fields(),
        }
