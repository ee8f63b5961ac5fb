"""The fields of a step, declared once: what the program builders take and what the
``training_step`` and ``decode_step`` workloads read from YAML.

* :class:`RoleAxes`: one ``<role>_axis`` field per registered parallelism role
  (:data:`~.roles.ROLES`), from its registration: a role registered later (from a
  test file) brings its field to every model below without a line here. Each takes a
  mesh axis name or None; the default is the role's ``default_axis`` (None for
  most: the mesh axis named after the role plays it, :func:`~.mesh.role_axes`). They
  are validated as declared fields are (a string or null; an unknown key is refused
  by name) and read with :meth:`RoleAxes.axis`.
* :class:`StepFields`: the model's shape (:class:`~tpusim.config.model.ModelShape`),
  the role axes and the compute ``dtype``: what every step builds on.
* :class:`TrainingFields`: a training step's own fields (the batch, the parallel
  schedule, the memory layout, the overlap and the MoE costs). The builder's
  arguments (:class:`~.args.TrainingArgs`) and the workload spec
  (:class:`~tpusim.workloads.training_step.TrainingWorkload`) are both one, so a
  field has one type and one default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field, StrictBool, ValidationError, model_validator
from pydantic_core import InitErrorDetails

from tpusim.config.model import ModelShape, PositiveInt
from tpusim.config.types import Frozen
from tpusim.program.builders.attention import AttentionKernel
from tpusim.program.builders.layer_shape import DROPLESS
from tpusim.program.builders.pipeline import PipelineKind
from tpusim.program.builders.roles import ROLES
from tpusim.vocabulary import Dtype

__all__ = ["FSDP_PREFETCH_LAYERS", "RoleAxes", "StepFields", "TrainingFields", "WeightDtype"]

WeightDtype = Literal["fp32", "bf16"]
"""How a training step keeps its weights: an fp32 master (and fp32 moments), or bf16
weights and moments (MaxText's ``weight_dtype: bfloat16``)."""

FSDP_PREFETCH_LAYERS = 2
"""Layers of gathered weights live at once under FSDP by default: the one running and
the next, prefetched (XLA's latency-hiding scheduler starts a scanned layer's
all-gather one iteration ahead; an assumption). 1: no prefetch, the gather of a layer
waits for the previous layer to finish, as the scheduler does when the prefetch does
not fit its memory limit (:func:`tpusim.workloads.training_step` retries with 1)."""


class RoleAxes(Frozen):
    """``<role>_axis``: the mesh axis that plays each registered role (see the module
    docstring); :attr:`axis_roles` limits a model to some roles (None: every one)."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, str | None] = Field(init=False)

    #: The roles whose axis fields the model takes (None: every registered role).
    axis_roles: ClassVar[tuple[str, ...] | None] = None

    @model_validator(mode="wrap")
    @classmethod
    def _only_role_axes(cls, data: Any, handler: Callable[[Any], RoleAxes]) -> RoleAxes:
        """Refuse a key that is neither a declared field nor a role's axis field, as an
        unknown key is refused (``extra_forbidden`` at the key)."""
        if isinstance(data, Mapping):
            known = set(cls.field_names())
            known |= {f.alias for f in cls.model_fields.values() if f.alias}
            unknown = [key for key in data if key not in known]
            if unknown:
                errors = [
                    InitErrorDetails(type="extra_forbidden", loc=(str(key),), input=data[key])
                    for key in unknown
                ]
                raise ValidationError.from_exception_data(cls.__name__, errors)
        return handler(data)

    @classmethod
    def axis_fields(cls) -> tuple[str, ...]:
        """The ``<role>_axis`` fields this model takes, in registration order."""
        wanted = cls.axis_roles
        return tuple(r.field for name, r in ROLES.items() if wanted is None or name in wanted)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """Every field this model takes: the declared ones and the role axes."""
        return (*cls.model_fields, *cls.axis_fields())

    def axis(self, role: str) -> str | None:
        """The axis given for role ``role`` (a role name), else the role's
        ``default_axis`` (None for most: the mesh axis of the role's name)."""
        entry = ROLES.get(role)
        return (self.model_extra or {}).get(entry.field, entry.default_axis)

    @property
    def axes(self) -> dict[str, str | None]:
        """``<role>_axis`` -> :meth:`axis`, for every field of :meth:`axis_fields`."""
        given = self.model_extra or {}
        return {
            r.field: given.get(r.field, r.default_axis)
            for _, r in ROLES.items()
            if r.field in self.axis_fields()
        }


class StepFields(ModelShape, RoleAxes):
    """A step's model shape, its role axes and the ``dtype`` it computes in."""

    model_config = ConfigDict(extra="allow")

    dtype: Dtype = "bf16"


class TrainingFields(StepFields):
    """The fields of a training step (see
    :func:`~tpusim.program.builders.training_step` for what each does): the global
    batch (``batch`` or its alias ``global_batch``, in sequences of ``seq`` tokens);
    the parallel schedule (``pipeline``, ``virtual_stages``, ``microbatches``,
    ``recompute``, ``gradient_dtype``); the memory layout (``remat_policy`` and
    ``remat_tensors``, ``sequence_parallel``, ``shard_optimizer_over_data``, the host
    offloads, ``num_vocab_tiling``, ``weight_dtype``, ``fsdp_prefetch_layers``: None
    for :data:`FSDP_PREFETCH_LAYERS`, which a workload drops to 1 when it does not
    fit); the overlap (``async_collectives``, ``collective_matmul``); the MoE costs
    (``capacity_factor``: -1 dropless, MaxText's default; ``routing_skew``;
    ``sparse_matmul``; ``expert_weight_dtype``: None for ``dtype``)."""

    seq: PositiveInt
    batch: PositiveInt | None = None
    global_batch: PositiveInt | None = None
    gradient_dtype: Dtype = "bf16"
    pipeline: PipelineKind = "1f1b"
    virtual_stages: PositiveInt = 1
    microbatches: PositiveInt = 1
    recompute: StrictBool = False
    attention_kernel: AttentionKernel = "flash"
    remat_policy: str | None = None
    remat_tensors: dict[str, str] | None = None
    sequence_parallel: StrictBool = False
    shard_optimizer_over_data: StrictBool = False
    optimizer_memory_host_offload: StrictBool = False
    param_memory_host_offload: StrictBool = False
    num_vocab_tiling: PositiveInt = 1
    weight_dtype: WeightDtype = "fp32"
    fsdp_prefetch_layers: int | None = Field(None, ge=1, le=FSDP_PREFETCH_LAYERS)
    async_collectives: StrictBool = True
    collective_matmul: StrictBool = False
    capacity_factor: float = DROPLESS
    routing_skew: float = Field(0.0, ge=0)
    sparse_matmul: StrictBool = True
    expert_weight_dtype: Dtype | None = None

    @property
    def prefetch_layers(self) -> int:
        """Layers of gathered weights live under FSDP (``fsdp_prefetch_layers``, else
        :data:`FSDP_PREFETCH_LAYERS`)."""
        return self.fsdp_prefetch_layers or FSDP_PREFETCH_LAYERS
