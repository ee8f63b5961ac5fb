"""Programs: ops with dependencies (:mod:`.ir`), read from YAML or built for common
workloads (training and decode steps).

The builders are loaded when first asked for (PEP 562): running one collective needs
the IR only, and the builders import the whole model and memory stack."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from tpusim.program.ir import (
    OP_KINDS,
    ChipOverride,
    Op,
    Program,
    ProgramError,
    topological_order,
)

if TYPE_CHECKING:
    from tpusim.program.builders import (
        decode_step,
        parameters_per_layer,
        step_flops,
        training_step,
    )

_BUILDERS = ("decode_step", "parameters_per_layer", "step_flops", "training_step")

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


def __getattr__(name: str) -> object:
    if name in _BUILDERS:
        return getattr(importlib.import_module("tpusim.program.builders"), name)
    raise AttributeError(f"module 'tpusim.program' has no attribute {name!r}")
