"""``kind: decode_step``: one LLM decode step with a KV cache, built by
:func:`tpusim.program.builders.decode_step` (a stack of plain layers), or, when any
whole-model field is set (``vocab``, ``mlp: gated``, ``attention: mla``, ``experts``,
``expert_axis``... as a ``model:`` preset sets them), by
:func:`~tpusim.program.builders.decode.model_decode_step`."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import ClassVar, Literal

from pydantic import ConfigDict

from tpusim.config.faults import FaultKeys
from tpusim.config.model import PositiveInt
from tpusim.program.builders import decode_step
from tpusim.program.builders.decode import MODEL_FIELDS, model_decode_step
from tpusim.program.builders.roles import EXPERT, TENSOR
from tpusim.program.ir import Program, ProgramError
from tpusim.results.records import DecodeRecord
from tpusim.vocabulary import MemoryTier
from tpusim.workloads.registry import Outcome, WorkloadContext, WorkloadKind
from tpusim.workloads.simulate import check_program, program_outcome, simulate
from tpusim.workloads.spec import ModelWorkload


class DecodeWorkload(ModelWorkload, FaultKeys):
    """``batch`` sequences per model replica (tensor x expert group): the role axes
    it takes are the tensor and expert roles' (``tensor_axis``, ``expert_axis``; the
    other mesh axes are independent replicas)."""

    model_config = ConfigDict(extra="allow")
    axis_roles: ClassVar[tuple[str, ...] | None] = (TENSOR.name, EXPERT.name)

    kind: Literal["decode_step"]
    batch: PositiveInt
    context: PositiveInt
    kv_cache: MemoryTier = "hbm"

    def whole_model(self) -> bool:
        """Whether any whole-model field is away from its neutral value."""
        fields = self.model_dump()
        return any(fields.get(k) != v for k, v in MODEL_FIELDS.items())

    def tokens_per_step(self) -> float:
        """One token per sequence of every replica (the mesh resolved for a system)."""
        group = 1
        for axis in (self.axis(TENSOR.name), self.axis(EXPERT.name)):
            group *= int(self.mesh.get(axis, 1)) if axis else 1
        replicas = math.prod(int(v) for v in self.mesh.values()) // group
        return float(self.batch * replicas)

    def program_fields(self) -> dict[str, object]:
        """The builder's keyword arguments (the plain builder takes no whole-model field)."""
        fields = self.builder_fields()
        if self.whole_model():
            return fields
        return {k: v for k, v in fields.items() if k not in MODEL_FIELDS}


def build(spec: DecodeWorkload, context: WorkloadContext) -> Program:
    """The step's program; a shape the builder rejects is a ConfigError at the
    workload."""
    builder: Callable[..., Program] = model_decode_step if spec.whole_model() else decode_step
    try:
        return builder(**spec.program_fields())
    except ProgramError as exc:
        raise context.error(str(exc)) from None


def run(spec: DecodeWorkload, context: WorkloadContext) -> Outcome:
    """Build and simulate the step; a :class:`DecodeRecord` (latency per token = step
    time)."""
    results = simulate(build(spec, context), context)
    return program_outcome(
        results, context, spec.kind, spec.tokens_per_step(), decode=True, fragment=spec.fragment()
    )


def check(spec: DecodeWorkload, context: WorkloadContext) -> None:
    """Build the step and check it fits the system (mesh, groups, memory)."""
    check_program(build(spec, context), context)


KIND = WorkloadKind(DecodeWorkload, run, record=DecodeRecord, check=check)
