"""Programs: ops with dependencies (:mod:`.ir`), read from YAML
(:mod:`.yaml_program`), built for common workloads (:mod:`.builders`: training and
decode steps, imported from there) or imported from XLA's HLO (:mod:`.hlo`).

Importing the package loads the IR only: running one collective needs nothing more,
and the builders import the whole model and memory stack."""

from __future__ import annotations

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
    "topological_order",
]
