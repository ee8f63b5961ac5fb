"""Programs: ops with dependencies (:mod:`.ir`), read from YAML or built for common
workloads (training and decode steps)."""

from tpusim.program.builders import decode_step, parameters_per_layer, step_flops, training_step
from tpusim.program.ir import (
    OP_KINDS,
    ChipOverride,
    Op,
    Program,
    ProgramError,
    topological_order,
)

__all__ = [
    "OP_KINDS",
    "ChipOverride",
    "Op",
    "Program",
    "ProgramError",
    "decode_step",
    "parameters_per_layer",
    "step_flops",
    "topological_order",
    "training_step",
]
