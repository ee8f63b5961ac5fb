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

import math
from collections.abc import Sequence
from typing import Annotated, Literal, get_args

from pydantic import (
    Field,
    GetCoreSchemaHandler,
    GetPydanticSchema,
    PositiveInt,
    model_validator,
)
from pydantic_core import core_schema

from tpusim.config.chip import ChipSpec, WraparoundRule
from tpusim.config.limits import MAX_AXIS_CHIPS, MAX_BOARDFLY_CHIPS, MAX_CHIPS, MAX_LINKS
from tpusim.config.types import Bandwidth, Frozen, HopLatency, Source
from tpusim.registry import Registry


class BaseTopologySpec(Frozen):
    """What every topology spec has: its ``kind`` (a ``Literal`` of one name in each
    subclass, the tag that picks the spec) and the chip count of the shape it describes.

    A new kind subclasses this and is added to :data:`TOPOLOGY_SPECS`.
    """

    kind: str

    @property
    def num_chips(self) -> int:
        """Chips in one pod of this shape."""
        raise NotImplementedError(f"{type(self).__name__} does not say how many chips it has")


def size_problem(num_chips: int, num_links: int) -> str | None:
    """Why a topology of ``num_chips`` chips and ``num_links`` bidirectional links is
    too large to build (MAX_CHIPS, MAX_LINKS), or None."""
    if num_chips > MAX_CHIPS:
        return f"{num_chips:,} chips is over the limit of {MAX_CHIPS:,} chips per topology"
    if num_links > MAX_LINKS:
        return f"{num_links:,} links is over the limit of {MAX_LINKS:,} links per topology"
    return None


def twist_axes(dims: Sequence[int]) -> tuple[int, list[int]] | None:
    """(long axis, short axes) if ``dims`` is a twistable k x k x 2k or 2k x k shape."""
    if len(dims) not in (2, 3):
        return None
    long_axes = [a for a, d in enumerate(dims) if d == 2 * min(dims)]
    short = [a for a, d in enumerate(dims) if d == min(dims)]
    if len(long_axes) != 1 or len(short) != len(dims) - 1 or min(dims) < 3:
        return None
    return long_axes[0], short


def twisted_torus_problem(dims: Sequence[int], wraparound: Sequence[bool] | None) -> str | None:
    """Why a torus of ``dims`` with ``wraparound`` per axis (None: not known yet)
    cannot be twisted, or None if it can: the one statement of the rule."""
    shape = "x".join(map(str, dims))
    if twist_axes(dims) is None:
        return f"twisted tori need a k x k x 2k or 2k x k shape with k >= 3 (got {shape})"
    if wraparound is not None and not all(wraparound):
        return f"twisted tori need wraparound on every axis (got {shape} without it on some)"
    return None


class TorusTopologySpec(BaseTopologySpec):
    """An n-dimensional torus or mesh; ``wraparound`` is one bool or one per axis.

    Left out, wraparound follows the chip's TPU rule (see :func:`wraparound_for`).
    ``twisted`` asks for the TPU v4/v5p twisted torus (k x k x 2k or 2k x k shapes
    with k >= 3, wraparound on every axis; see :func:`twisted_torus_problem`).
    """

    kind: Literal["torus"]
    dims: list[PositiveInt] = Field(min_length=1)
    wraparound: bool | list[bool] | None = None
    twisted: bool = False

    @model_validator(mode="after")
    def _size(self) -> TorusTopologySpec:
        """Checked before anything is built: no axis over MAX_AXIS_CHIPS, at most
        MAX_CHIPS chips and MAX_LINKS links (one per chip per axis longer than 1)."""
        for axis, size in enumerate(self.dims):
            if size > MAX_AXIS_CHIPS:
                raise ValueError(
                    f"axis {axis} has {size:,} chips, over the limit of {MAX_AXIS_CHIPS:,} "
                    "chips per torus axis"
                )
        links = self.num_chips * sum(d > 1 for d in self.dims)
        problem = size_problem(self.num_chips, links)
        if problem is not None:
            raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _wrap_per_axis(self) -> TorusTopologySpec:
        if isinstance(self.wraparound, list) and len(self.wraparound) != len(self.dims):
            raise ValueError(
                f"wraparound has {len(self.wraparound)} entries but dims has {len(self.dims)} axes"
            )
        return self

    @model_validator(mode="after")
    def _twistable(self) -> TorusTopologySpec:
        if self.twisted:
            wrap = self.wraparound
            written = None if wrap is None else wrap if isinstance(wrap, list) else [wrap]
            problem = twisted_torus_problem(self.dims, written)
            if problem is not None:
                raise ValueError(problem)
        return self

    @property
    def num_chips(self) -> int:
        return math.prod(self.dims)


class BoardflyTopologySpec(BaseTopologySpec):
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
    board_hop_latency_s: HopLatency | None = Field(None, alias="board_hop_latency")
    global_hop_latency_s: HopLatency | None = Field(None, alias="global_hop_latency")

    @property
    def num_chips(self) -> int:
        return self.chips_per_board * self.boards_per_group * self.groups

    @model_validator(mode="after")
    def _size(self) -> BoardflyTopologySpec:
        """At most MAX_BOARDFLY_CHIPS chips and MAX_LINKS links (on boards, between
        the boards of a group, between groups), checked before anything is built."""
        p, a, g = self.chips_per_board, self.boards_per_group, self.groups
        if self.num_chips > MAX_BOARDFLY_CHIPS:
            raise ValueError(
                f"{self.num_chips:,} chips is over the limit of {MAX_BOARDFLY_CHIPS:,} "
                "chips per Boardfly"
            )
        links = (
            g * a * p * (p - 1) // 2
            + g * a * (a - 1) // 2 * self.links_per_board_pair
            + g * (g - 1) // 2 * self.links_per_group_pair
        )
        problem = size_problem(self.num_chips, links)
        if problem is not None:
            raise ValueError(problem)
        return self


#: Topology specs by kind, the shapes a system file's ``topology`` may take: the
#: shipped ones, then any a new topology kind registers
#: (``TOPOLOGY_SPECS.register("ring", RingSpec)``; :mod:`tpusim.topology.registry`
#: does it for a kind registered with a spec). A spec's ``kind`` must be
#: ``Literal[name]``; registering regenerates :class:`SystemSpec`'s schema.
TOPOLOGY_SPECS: Registry[type[BaseTopologySpec]] = Registry("topology spec")
TOPOLOGY_SPECS.register_all((("torus", TorusTopologySpec), ("boardfly", BoardflyTopologySpec)))


def _topology_union(_source: object, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
    """The registered specs as one union tagged by ``kind`` (rebuilt on registration)."""
    choices = {kind: handler.generate_schema(spec) for kind, spec in TOPOLOGY_SPECS.items()}
    return core_schema.tagged_union_schema(choices, discriminator="kind")


#: A topology spec of any registered kind, picked by its ``kind`` key.
TopologySpec = Annotated[BaseTopologySpec, GetPydanticSchema(_topology_union)]


class IciOverride(Frozen):
    """Per-system override of the chip's ICI link bandwidth (one direction) and hop latency."""

    link_bandwidth_Bps: Bandwidth | None = Field(None, alias="link_bandwidth")
    hop_latency_s: HopLatency | None = Field(None, alias="hop_latency")


class FabricSpec(Frozen):
    """A two-tier non-blocking Clos (DCN, Virgo) joining pods; bandwidth is per chip, one way.

    ``bandwidth_per_chip`` defaults to the chip's DCN bandwidth; ``hop_latency``
    is paid on each of the chip-leaf, leaf-spine, spine-leaf and leaf-chip links.
    """

    kind: Literal["clos"] = "clos"
    name: str = "dcn"
    bandwidth_per_chip_Bps: Bandwidth | None = Field(None, alias="bandwidth_per_chip")
    hop_latency_s: HopLatency = Field(alias="hop_latency")
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


def _spec_registered(kind: str, spec: type[BaseTopologySpec]) -> None:
    """Check that ``spec.kind`` is ``Literal[kind]`` (ValueError otherwise), then
    regenerate the union of topology specs in :class:`SystemSpec`."""
    if get_args(spec.model_fields["kind"].annotation) != (kind,):
        raise ValueError(f"{spec.__name__}.kind must be Literal['{kind}']")
    SystemSpec.model_rebuild(force=True)


TOPOLOGY_SPECS.on_register = _spec_registered  # now that SystemSpec exists


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
    assert spec.topology is not None
    return spec.topology.num_chips


__all__ = [
    "TOPOLOGY_SPECS",
    "BaseTopologySpec",
    "BoardflyTopologySpec",
    "ChipSpec",
    "FabricSpec",
    "IciOverride",
    "SystemSpec",
    "TopologySpec",
    "TorusTopologySpec",
    "chip_count",
    "size_problem",
    "twist_axes",
    "twisted_torus_problem",
    "wraparound_for",
]
