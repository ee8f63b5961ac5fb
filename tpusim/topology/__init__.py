"""Topologies: pure graphs of chips and links with routes and metrics.

:func:`build_topology` turns a loaded :class:`~tpusim.config.loader.System` into
a :class:`Torus`, :class:`Boardfly` or (pods joined by a fabric) :class:`ClosFabric`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tpusim.topology.base import LinkTable, Topology
from tpusim.topology.boardfly import Boardfly
from tpusim.topology.clos import ClosFabric
from tpusim.topology.torus import Torus, axis_name, twist_axes

if TYPE_CHECKING:
    from tpusim.config.loader import System

__all__ = [
    "Boardfly",
    "ClosFabric",
    "LinkTable",
    "Topology",
    "Torus",
    "axis_name",
    "build_topology",
    "check_system",
]


def check_system(system: System) -> None:
    """Raise ValueError for a shape the topology cannot build (checked at load time)."""
    from tpusim.config.system import TorusTopologySpec

    topo = system.spec.topology
    if isinstance(topo, TorusTopologySpec) and topo.twisted:
        if twist_axes(topo.dims) is None:
            raise ValueError(
                f"twisted tori need a k x k x 2k or 2k x k shape with k >= 3 "
                f"(got {'x'.join(map(str, topo.dims))})"
            )
        if not all(system.wraparound):
            raise ValueError("a twisted torus needs wraparound on every axis")


def build_topology(system: System) -> Topology:
    """The topology of a loaded system, with its link bandwidths and hop latencies."""
    from tpusim.config.system import BoardflyTopologySpec, TorusTopologySpec

    if system.pod is not None:
        fabric = system.spec.fabric
        assert fabric is not None and system.spec.pods is not None
        return ClosFabric(
            build_topology(system.pod),
            system.spec.pods,
            bandwidth_per_chip_Bps=system.fabric_bandwidth_per_chip_Bps,
            hop_latency_s=fabric.hop_latency_s,
            chips_per_leaf=fabric.chips_per_leaf,
            name=fabric.name,
        )
    topo = system.spec.topology
    common = {
        "link_bandwidth_Bps": system.link_bandwidth_Bps,
        "hop_latency_s": system.hop_latency_s,
    }
    if isinstance(topo, TorusTopologySpec):
        return Torus(topo.dims, system.wraparound, twisted=topo.twisted, **common)
    assert isinstance(topo, BoardflyTopologySpec)
    return Boardfly(
        topo.chips_per_board,
        topo.boards_per_group,
        topo.groups,
        board_link_bandwidth_Bps=topo.board_link_bandwidth_Bps,
        global_link_bandwidth_Bps=topo.global_link_bandwidth_Bps,
        global_hop_latency_s=topo.global_hop_latency_s,
        links_per_board_pair=topo.links_per_board_pair,
        links_per_group_pair=topo.links_per_group_pair,
        arrangement=topo.arrangement,
        **common,
    )
