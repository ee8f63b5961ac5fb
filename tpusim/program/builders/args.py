"""The arguments of :func:`~tpusim.program.builders.training_step`, as one record.

The step's fields are :class:`~tpusim.program.builders.fields.TrainingFields` (the
model shape, what a model preset expands to; the role axes, one ``<role>_axis`` per
registered role; the batch, the parallel schedule, the memory layout of
:mod:`.remat` and :mod:`.training`, the overlap: ``async_collectives``, XLA's
latency-hiding scheduler, on by default, and ``collective_matmul``, TP collectives
windowed into the projections, off by default; the MoE costs), which the
``training_step`` workload shares. The builder adds the resolved ``mesh`` and the
host link's ``host_bandwidth_Bps``. Defaults keep a dense, plain-MLP, multi-head
transformer without embeddings.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import ConfigDict, Field, ValidationError

from tpusim.program.builders.fields import FSDP_PREFETCH_LAYERS, TrainingFields
from tpusim.program.ir import DEFAULT_HOST_BANDWIDTH_BPS, ProgramError

__all__ = ["FSDP_PREFETCH_LAYERS", "TrainingArgs"]


class TrainingArgs(TrainingFields):
    """Every keyword :func:`~tpusim.program.builders.training_step` takes: the step's
    fields (:class:`~tpusim.program.builders.fields.TrainingFields`, declared there
    once, the model's shape and the role axes with them), the resolved ``mesh`` and
    the host link's ``host_bandwidth_Bps``. Validated strictly (no coercion:
    ``heads=True`` or ``2.0`` is refused, not read as a count); the rules between
    fields are :func:`~.checks.check_training`'s."""

    model_config = ConfigDict(strict=True)

    mesh: dict[str, int] = Field(default_factory=dict)
    host_bandwidth_Bps: float = DEFAULT_HOST_BANDWIDTH_BPS

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
