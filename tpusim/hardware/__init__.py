"""One chip's hardware: roofline op costs and memory capacity.

``ChipCostModel(chip)`` prices matmuls (with the MXU tile padding visible),
elementwise ops, embedding lookups and reductions; ``MemoryTracker(chip)`` holds
named allocations against the HBM and SRAM capacities and raises
:class:`OutOfMemoryError` for a program that does not fit.
"""

from __future__ import annotations

from tpusim.hardware.costs import DEFAULT_OP_OVERHEAD_S, ChipCostModel, Memory, OpCost
from tpusim.hardware.memory import MemoryTracker, OutOfMemoryError

__all__ = [
    "DEFAULT_OP_OVERHEAD_S",
    "ChipCostModel",
    "Memory",
    "MemoryTracker",
    "OpCost",
    "OutOfMemoryError",
]
