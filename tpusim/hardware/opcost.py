"""The cost of one op as a record (:class:`OpCost`) and the size arithmetic every cost
model shares (tile padding, argument checks): what :mod:`tpusim.hardware.costs`
computes, apart from how it computes it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Bound = Literal["compute", "memory"]


@dataclass(frozen=True)
class OpCost:
    """The cost of one op: times in seconds, work in FLOPs, traffic in bytes.

    ``flops`` is the useful work, ``padded_flops`` what the MXUs actually do (0 for
    ops that do not use them); ``bytes`` is the traffic to the memory tier; ``bound``
    says which roofline term dominates; ``unit`` is where the op runs
    (``"tensorcore"``, ``"sparsecore"`` or ``"cae"``).
    """

    time_s: float
    compute_s: float
    memory_s: float
    overhead_s: float
    flops: float
    padded_flops: float
    bytes: float
    bound: Bound
    unit: str

    @property
    def mxu_utilization(self) -> float:
        """Useful over padded FLOPs, in [0, 1]; 0.0 for an op that does not use the MXUs."""
        return self.flops / self.padded_flops if self.padded_flops else 0.0


def pad_to(x: int, multiple: int) -> int:
    """``x`` rounded up to a multiple of ``multiple``."""
    return -(-x // multiple) * multiple


def check_positive(**values: float) -> None:
    for name, value in values.items():
        if value <= 0:
            raise ValueError(f"{name} must be positive, got {value}")


def check_non_negative(**values: float) -> None:
    for name, value in values.items():
        if value < 0:
            raise ValueError(f"{name} must be non-negative, got {value}")
