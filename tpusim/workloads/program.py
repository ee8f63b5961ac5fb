"""``kind: program``: a program written inline in the scenario (the YAML program
format of :mod:`tpusim.program.yaml_program`)."""

from __future__ import annotations

from typing import Literal

from tpusim.config.faults import FAULT_FIELDS, FaultKeys
from tpusim.program.ir import Program
from tpusim.program.yaml_program import ProgramSpec, program_from_data
from tpusim.workloads.registry import Outcome, WorkloadContext, WorkloadKind
from tpusim.workloads.simulate import check_program, run_program
from tpusim.workloads.spec import VARIANT_KEYS, WorkloadSpec


class ProgramWorkload(ProgramSpec, WorkloadSpec, FaultKeys):
    """The ops (with dependencies), mesh, memory and per-chip overrides of a program."""

    kind: Literal["program"]


def build(spec: ProgramWorkload, context: WorkloadContext) -> Program:
    """The program as written (sweep point and per-system override applied); its
    errors name the workload's ops in the scenario file."""
    data = spec.model_dump(by_alias=True, exclude={"kind", *VARIANT_KEYS, *FAULT_FIELDS})
    return program_from_data(data, context.file, context.lines, context.path)


def run(spec: ProgramWorkload, context: WorkloadContext) -> Outcome:
    """The program, simulated."""
    return run_program(build(spec, context), context, spec.kind)


def check(spec: ProgramWorkload, context: WorkloadContext) -> None:
    """Build the program and check it fits the system (mesh, groups, memory)."""
    check_program(build(spec, context), context)


KIND = WorkloadKind(ProgramWorkload, run, check=check)
