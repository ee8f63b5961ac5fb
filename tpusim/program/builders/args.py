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

from collections.abc import Mapping

from pydantic import ConfigDict, Field, ValidationError

from tpusim.config.model import ModelShape
from tpusim.program.builders.layer_shape import DROPLESS
from tpusim.program.builders.pipeline import PipelineKind
from tpusim.program.builders.roles import role_fields
from tpusim.program.ir import DEFAULT_HOST_BANDWIDTH_BPS, ProgramError

FSDP_PREFETCH_LAYERS = 2
"""Layers of gathered weights live at once under FSDP by default: the one running and
the next, prefetched (XLA's latency-hiding scheduler starts a scanned layer's
all-gather one iteration ahead; an assumption). 1: no prefetch, the gather of a layer
waits for the previous layer to finish, as the scheduler does when the prefetch does
not fit its memory limit (:func:`tpusim.workloads.training_step` retries with 1)."""


class TrainingArgs(ModelShape):
    """Every keyword :func:`~tpusim.program.builders.training_step` takes: the model's
    shape (:class:`~tpusim.config.model.ModelShape`, declared there once) and the
    step's own fields. Validated strictly (no coercion: ``heads=True`` or ``2.0`` is
    refused, not read as a count); the closed choices and the rules between fields
    are :func:`~.checks.check_training`'s."""

    model_config = ConfigDict(strict=True)

    seq: int
    mesh: dict[str, int] = Field(default_factory=dict)
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
    def of(cls, fields: Mapping[str, object]) -> TrainingArgs:
        """The record of keyword ``fields``; ProgramError (one line, naming the field)
        for an unknown, missing or mistyped one."""
        try:
            return cls.model_validate(fields)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"]) or "arguments"
            raise ProgramError(f"training_step: {where}: {error['msg']}") from None

    def fields(self) -> dict[str, object]:
        """The keywords this record was made of (defaults filled in)."""
        return self.model_dump()

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
