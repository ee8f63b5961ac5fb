"""System specification: a chip plus a topology, or pods of a system joined by a fabric.

Two forms. A pod::

    name: my-ring
    chip: v5e                      # shipped chip name or path to a chip YAML
    topology: {kind: torus, dims: [16], wraparound: true, twisted: false}
    ici: {link_bandwidth: 45 GB/s, hop_latency: 1 us}   # optional overrides

and a multi-pod system::

    name: tpu8t-virgo
    pod: tpu8t-superpod            # shipped system name or path
    pods: 14
    fabric: {kind: clos, bandwidth_per_chip: 400 Gb/s, hop_latency: 1 us}
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, PositiveInt, model_validator

from tpusim.config.chip import ChipSpec, WraparoundRule
from tpusim.config.types import Bandwidth, Frozen, Source, Time


class TorusTopologySpec(Frozen):
    """An n-dimensional torus or mesh; ``wraparound`` is one bool or one per axis.

    Left out, wraparound follows the chip's TPU rule (see :func:`wraparound_for`).
    ``twisted`` asks for the TPU v4/v5p twisted torus (k x k x 2k or 2k x k shapes).
    """

    kind: Literal["torus"]
    dims: list[PositiveInt] = Field(min_length=1)
    wraparound: bool | list[bool] | None = None
    twisted: bool = False

    @model_validator(mode="after")
    def _wrap_per_axis(self) -> TorusTopologySpec:
        if isinstance(self.wraparound, list) and len(self.wraparound) != len(self.dims):
            raise ValueError(
                f"wraparound has {len(self.wraparound)} entries but dims has {len(self.dims)} axes"
            )
        return self


class BoardflyTopologySpec(Frozen):
    """TPU 8i Boardfly: chips on a board, boards in a group and groups all fully connected.

    ``arrangement`` chooses which chip ends each board-to-board and group-to-group
    link (see :mod:`tpusim.topology.boardfly`). Link classes default to the chip's
    ICI link bandwidth and hop latency.
    """

    kind: Literal["boardfly"]
    chips_per_board: PositiveInt
    boards_per_group: PositiveInt
    groups: PositiveInt
    links_per_board_pair: PositiveInt = 1
    links_per_group_pair: PositiveInt = 1
    arrangement: Literal["absolute", "relative"] = "absolute"
    board_link_bandwidth_Bps: Bandwidth | None = Field(None, alias="board_link_bandwidth")
    global_link_bandwidth_Bps: Bandwidth | None = Field(None, alias="global_link_bandwidth")
    global_hop_latency_s: Time | None = Field(None, alias="global_hop_latency")


TopologySpec = Annotated[TorusTopologySpec | BoardflyTopologySpec, Field(discriminator="kind")]


class IciOverride(Frozen):
    """Per-system override of the chip's ICI link bandwidth (one direction) and hop latency."""

    link_bandwidth_Bps: Bandwidth | None = Field(None, alias="link_bandwidth")
    hop_latency_s: Time | None = Field(None, alias="hop_latency")


class FabricSpec(Frozen):
    """A two-tier non-blocking Clos (DCN, Virgo) joining pods; bandwidth is per chip, one way.

    ``bandwidth_per_chip`` defaults to the chip's DCN bandwidth; ``hop_latency``
    is paid on each of the chip-leaf, leaf-spine, spine-leaf and leaf-chip links.
    """

    kind: Literal["clos"] = "clos"
    name: str = "dcn"
    bandwidth_per_chip_Bps: Bandwidth | None = Field(None, alias="bandwidth_per_chip")
    hop_latency_s: Time = Field(alias="hop_latency")
    chips_per_leaf: PositiveInt = 64


class SystemSpec(Frozen):
    """A system file as written: ``chip`` + ``topology``, or ``pod`` + ``pods`` + ``fabric``."""

    name: str
    description: str = ""
    chip: str | None = None
    topology: TopologySpec | None = None
    ici: IciOverride | None = None
    chips: PositiveInt | None = None
    pod: str | None = None
    pods: PositiveInt | None = None
    fabric: FabricSpec | None = None
    sources: dict[str, Source] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_form(self) -> SystemSpec:
        multipod = [k for k in ("pod", "pods", "fabric") if getattr(self, k) is not None]
        if multipod:
            missing = [k for k in ("pod", "pods", "fabric") if getattr(self, k) is None]
            if missing:
                raise ValueError(
                    f"a multi-pod system needs pod, pods and fabric (missing {missing[0]})"
                )
            if self.topology is not None:
                raise ValueError("give either topology (one pod) or pod/pods/fabric, not both")
        else:
            for key in ("chip", "topology"):
                if getattr(self, key) is None:
                    raise ValueError(f"a system needs '{key}' (or pod, pods and fabric)")
        return self


def wraparound_for(dims: list[int], rule: WraparoundRule) -> tuple[bool, ...]:
    """Wraparound per axis under a chip's TPU rule.

    ``cubes-4x4x4`` (v4, v5p, Ironwood, 8t): every axis wraps when the slice is made
    of whole 4x4x4 cubes (every dim a multiple of 4), none otherwise.
    ``full-axis-16`` (v5e, v6e): an axis wraps only when it is a full axis of 16.
    """
    if rule == "cubes-4x4x4":
        whole_cubes = len(dims) == 3 and all(d % 4 == 0 for d in dims)
        return tuple(whole_cubes for _ in dims)
    if rule == "full-axis-16":
        return tuple(d == 16 for d in dims)
    return tuple(rule == "always" for _ in dims)


def chip_count(spec: SystemSpec) -> int:
    """Chips in one pod described by ``spec.topology`` (not multiplied by pods)."""
    topo = spec.topology
    if isinstance(topo, TorusTopologySpec):
        count = 1
        for d in topo.dims:
            count *= d
        return count
    assert topo is not None
    return topo.chips_per_board * topo.boards_per_group * topo.groups


__all__ = [
    "BoardflyTopologySpec",
    "ChipSpec",
    "FabricSpec",
    "IciOverride",
    "SystemSpec",
    "TorusTopologySpec",
    "chip_count",
    "wraparound_for",
]
