"""The arguments of :func:`~tpusim.program.builders.training_step`, as one record.

The model shape (``layers`` ... ``rope_head_dim``, what a model preset expands to),
the batch (``batch`` or its alias ``global_batch``: sequences of ``seq`` tokens per
step), the mesh and the role of its axes, and the parallel schedule (``pipeline``,
``virtual_stages``, ``microbatches``, ``recompute``, ``gradient_dtype``), the
memory layout (``remat_policy`` and ``remat_tensors``: :mod:`.remat`;
``sequence_parallel``, ``context_axis``, ``shard_optimizer_over_data``,
``optimizer_memory_host_offload``, ``param_memory_host_offload`` and the host link's
``host_bandwidth_Bps``: :mod:`.training`), the overlap (``async_collectives``:
XLA's latency-hiding scheduler, on by default;
``collective_matmul``: TP collectives windowed into the projections, off by
default) and the MoE costs (``capacity_factor``, -1 dropless as MaxText's default;
``routing_skew``; ``sparse_matmul``: megablox; ``expert_weight_dtype``: the dtype
expert weights are gathered in, default ``dtype``). Defaults keep a dense,
plain-MLP, multi-head transformer without embeddings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tpusim.program.builders.layer_shape import DROPLESS, AttentionKind, MlpKind
from tpusim.program.builders.pipeline import PipelineKind
from tpusim.program.builders.roles import role_fields
from tpusim.program.ir import DEFAULT_HOST_BANDWIDTH_BPS, ProgramError

FSDP_PREFETCH_LAYERS = 2
"""Layers of gathered weights live at once under FSDP by default: the one running and
the next, prefetched (XLA's latency-hiding scheduler starts a scanned layer's
all-gather one iteration ahead; an assumption). 1: no prefetch, the gather of a layer
waits for the previous layer to finish, as the scheduler does when the prefetch does
not fit its memory limit (:func:`tpusim.workloads.training_step` retries with 1)."""


@dataclass(frozen=True)
class TrainingArgs:
    """Every keyword :func:`~tpusim.program.builders.training_step` takes."""

    layers: int
    d_model: int
    d_ff: int
    heads: int
    head_dim: int
    seq: int
    mesh: dict[str, int] = field(default_factory=dict)
    batch: int | None = None
    global_batch: int | None = None
    dtype: str = "bf16"
    gradient_dtype: str = "bf16"
    data_axis: str | None = "data"
    fsdp_axis: str | None = None
    tensor_axis: str | None = None
    expert_axis: str | None = None
    pipeline_axis: str | None = None
    context_axis: str | None = None
    experts: int = 0
    top_k: int = 2
    expert_d_ff: int | None = None
    shared_experts: int = 0
    dense_layers: int = 0
    kv_heads: int | None = None
    mlp: MlpKind = "plain"
    vocab: int = 0
    attention: AttentionKind = "gqa"
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    rope_head_dim: int = 0
    pipeline: PipelineKind = "1f1b"
    virtual_stages: int = 1
    microbatches: int = 1
    recompute: bool = False
    attention_kernel: str = "flash"
    remat_policy: str | None = None
    remat_tensors: dict[str, str] | None = None
    sequence_parallel: bool = False
    shard_optimizer_over_data: bool = False
    optimizer_memory_host_offload: bool = False
    param_memory_host_offload: bool = False
    host_bandwidth_Bps: float = DEFAULT_HOST_BANDWIDTH_BPS
    num_vocab_tiling: int = 1
    weight_dtype: str = "fp32"
    fsdp_prefetch_layers: int = FSDP_PREFETCH_LAYERS
    async_collectives: bool = True
    collective_matmul: bool = False
    capacity_factor: float = DROPLESS
    routing_skew: float = 0.0
    sparse_matmul: bool = True
    expert_weight_dtype: str | None = None

    @classmethod
    def of(cls, fields: dict[str, Any]) -> TrainingArgs:
        """The record of keyword ``fields``; ProgramError for an unknown or missing one."""
        try:
            return cls(**fields)
        except TypeError as exc:
            message = str(exc).replace("TrainingArgs.__init__() ", "")
            raise ProgramError(f"training_step: {message}") from None

    @property
    def sequences(self) -> int:
        """The global batch in sequences (``batch`` or ``global_batch``)."""
        return int(self.batch if self.batch is not None else self.global_batch or 0)

    @property
    def axes(self) -> dict[str, str | None]:
        """``<role>_axis`` -> axis name (or None) as given, for every registered role
        (a role registered without a field here is played by the mesh axis of its
        name: None)."""
        return {field: getattr(self, field, None) for field in role_fields()}
