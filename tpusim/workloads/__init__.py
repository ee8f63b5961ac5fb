"""Workload kinds a scenario can run, by name (``kind:`` in a scenario's workloads).

One module per kind (its spec class and its ``run``), registered in
:mod:`tpusim.workloads.registry`; importing this package registers the built-in kinds
(in alphabetical order: the order of the choices in error messages).
"""

from tpusim.workloads import (
    collective,
    decode_step,
    goodput,
    hlo,
    jobs,
    program,
    serving,
    topology,
    training_step,
)
from tpusim.workloads.registry import (
    Outcome,
    Workload,
    WorkloadContext,
    WorkloadKind,
    record_from_row,
    register_workload,
    unregister_workload,
    validate_workload,
    workload_kind,
    workload_kinds,
)
from tpusim.workloads.simulate import program_outcome, run_program, simulate
from tpusim.workloads.spec import ModelWorkload, SweepRange, WorkloadSpec

__all__ = [
    "ModelWorkload",
    "Outcome",
    "SweepRange",
    "Workload",
    "WorkloadContext",
    "WorkloadKind",
    "WorkloadSpec",
    "collective",
    "decode_step",
    "goodput",
    "hlo",
    "jobs",
    "program",
    "program_outcome",
    "record_from_row",
    "register_workload",
    "run_program",
    "serving",
    "simulate",
    "topology",
    "training_step",
    "unregister_workload",
    "validate_workload",
    "workload_kind",
    "workload_kinds",
]
