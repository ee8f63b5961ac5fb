"""``kind: decode_step``: one LLM decode step with a KV cache, built by
:func:`tpusim.program.builders.decode_step`."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import PositiveInt

from tpusim.results.records import DecodeRecord
from tpusim.vocabulary import MemoryTier
from tpusim.workloads.registry import Outcome, WorkloadContext, register_workload
from tpusim.workloads.simulate import check_program, program_outcome, simulate
from tpusim.workloads.spec import ModelWorkload


class DecodeWorkload(ModelWorkload):
    """``batch`` sequences per model replica (tensor-parallel group)."""

    kind: Literal["decode_step"]
    batch: PositiveInt
    context: PositiveInt
    kv_heads: PositiveInt | None = None
    kv_cache: MemoryTier = "hbm"

    def tokens_per_step(self) -> float:
        """One token per sequence of every replica (the mesh resolved for a system)."""
        tp = int(self.mesh.get(self.tensor_axis, 1)) if self.tensor_axis else 1
        replicas = math.prod(int(v) for v in self.mesh.values()) // tp
        return float(self.batch * replicas)


def build(spec: DecodeWorkload, context: WorkloadContext) -> Any:
    """The step's program; a shape the builder rejects is a ConfigError at the
    workload."""
    from tpusim.program.builders import decode_step
    from tpusim.program.ir import ProgramError

    try:
        return decode_step(**spec.builder_fields())
    except ProgramError as exc:
        raise context.error(str(exc)) from None


def run(spec: DecodeWorkload, context: WorkloadContext) -> Outcome:
    """Build and simulate the step; a :class:`DecodeRecord` (latency per token = step
    time)."""
    results = simulate(build(spec, context), context)
    return program_outcome(results, context, spec.kind, spec.tokens_per_step(), decode=True)


def check(spec: DecodeWorkload, context: WorkloadContext) -> None:
    """Build the step and check it fits the system (mesh, groups, memory)."""
    check_program(build(spec, context), context)


register_workload("decode_step", DecodeWorkload, run, record=DecodeRecord, check=check)
