"""Workload kinds a scenario can run, by name (``kind:`` in a scenario's workloads).

One module per kind (its spec class, its ``run`` and its :class:`WorkloadKind`,
``KIND``); the shipped kinds are registered in :data:`WORKLOADS` here, in one list (in
alphabetical order: the order of the choices in error messages). A new kind is one
``WORKLOADS.register(name, WorkloadKind(spec, run, ...))`` call
(:mod:`tpusim.workloads.registry`).
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
    WORKLOADS,
    Outcome,
    Workload,
    WorkloadContext,
    WorkloadKind,
    record_from_row,
    validate_workload,
)
from tpusim.workloads.simulate import program_outcome, run_program, simulate
from tpusim.workloads.spec import ModelWorkload, SweepRange, WorkloadSpec

__all__ = [
    "WORKLOADS",
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
    "run_program",
    "serving",
    "simulate",
    "topology",
    "training_step",
    "validate_workload",
]

#: The shipped workload kinds, registered in this order.
SHIPPED = (
    ("collective", collective.KIND),
    ("decode_step", decode_step.KIND),
    ("goodput", goodput.KIND),
    ("hlo", hlo.KIND),
    ("jobs", jobs.KIND),
    ("program", program.KIND),
    ("serving", serving.KIND),
    ("topology", topology.KIND),
    ("training_step", training_step.KIND),
)

for _name, _kind in SHIPPED:
    WORKLOADS.register(_name, _kind)
