"""``kind: training_step``: a transformer training step (data, FSDP, tensor and expert
parallelism) built by :func:`tpusim.program.builders.training_step`."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, PositiveInt, model_validator

from tpusim.workloads.registry import Outcome, WorkloadContext, register_workload
from tpusim.workloads.simulate import check_program, run_program
from tpusim.workloads.spec import ModelWorkload


class TrainingWorkload(ModelWorkload):
    """``batch`` is the global batch in sequences; or ``batch_per_shard`` sequences per
    shard of the batch axes (data, fsdp, expert), which keeps the work per chip the same
    on systems of different sizes."""

    kind: Literal["training_step"]
    seq: PositiveInt
    batch: PositiveInt | None = None
    batch_per_shard: PositiveInt | None = None
    data_axis: str | None = "data"
    fsdp_axis: str | None = None
    experts: int = Field(0, ge=0)
    expert_axis: str | None = None
    top_k: PositiveInt = 2

    @model_validator(mode="after")
    def _one_batch(self) -> TrainingWorkload:
        if (self.batch is None) == (self.batch_per_shard is None):
            raise ValueError("give exactly one of 'batch' and 'batch_per_shard'")
        return self

    def fields_for_mesh(self, mesh: dict[str, int]) -> dict[str, Any]:
        """``batch`` from ``batch_per_shard`` x the shards of the batch axes (data,
        fsdp, expert) in ``mesh``."""
        if not self.batch_per_shard:
            return {}
        axes = {a for a in (self.data_axis, self.fsdp_axis, self.expert_axis) if a is not None}
        shards = math.prod([mesh.get(a, 1) for a in axes])
        return {"batch": self.batch_per_shard * shards}


def build(spec: TrainingWorkload, context: WorkloadContext) -> Any:
    """The step's program; a shape the builder rejects is a ConfigError at the
    workload."""
    from tpusim.program.builders import training_step
    from tpusim.program.ir import ProgramError

    fields = spec.builder_fields()
    fields.pop("batch_per_shard", None)
    try:
        return training_step(**fields)
    except ProgramError as exc:
        raise context.error(str(exc)) from None


def run(spec: TrainingWorkload, context: WorkloadContext) -> Outcome:
    """Build and simulate the step; tokens per step = global batch x sequence length."""
    program = build(spec, context)
    assert spec.batch is not None  # resolved from batch_per_shard for the system
    return run_program(program, context, spec.kind, float(spec.batch * spec.seq))


def check(spec: TrainingWorkload, context: WorkloadContext) -> None:
    """Build the step and check it fits the system (mesh, groups, memory)."""
    check_program(build(spec, context), context)


register_workload("training_step", TrainingWorkload, run, check=check)
