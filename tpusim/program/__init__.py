"""Programs: ops with dependencies (:mod:`.ir`), read from YAML or built for common
workloads (training and decode steps)."""

from tpusim.program.ir import (
    OP_KINDS,
    ChipOverride,
    Op,
    Program,
    ProgramError,
    topological_order,
)

__all__ = ["OP_KINDS", "ChipOverride", "Op", "Program", "ProgramError", "topological_order"]
