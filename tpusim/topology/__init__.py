"""Topologies: pure graphs of chips and links with routes and metrics.

:func:`build_topology` turns a loaded :class:`~tpusim.config.loader.System` into the
topology its spec's ``kind`` names: a :class:`Torus`, a :class:`Boardfly` or (pods
joined by a fabric) a :class:`ClosFabric`. The shipped kinds are registered here, in
one list; a new kind is one :data:`TOPOLOGIES` ``.register(name, TopologyKind(...))``
call (see :mod:`tpusim.topology.registry`).
"""

from __future__ import annotations

from tpusim.config.system import BoardflyTopologySpec, TorusTopologySpec
from tpusim.topology.base import Axis, AxisKind, LinkTable, PlotLayout, Topology
from tpusim.topology.boardfly import Boardfly, build_boardfly
from tpusim.topology.clos import ClosFabric, build_clos
from tpusim.topology.registry import TOPOLOGIES, TopologyKind, build_topology
from tpusim.topology.torus import Torus, axis_name, build_torus, twist_axes

__all__ = [
    "TOPOLOGIES",
    "Axis",
    "AxisKind",
    "Boardfly",
    "ClosFabric",
    "LinkTable",
    "PlotLayout",
    "Topology",
    "TopologyKind",
    "Torus",
    "axis_name",
    "build_topology",
    "twist_axes",
]

TOPOLOGIES.register_all(
    (
        ("torus", TopologyKind(build_torus, spec=TorusTopologySpec)),
        ("boardfly", TopologyKind(build_boardfly, spec=BoardflyTopologySpec)),
        ("clos", TopologyKind(build_clos)),
    )
)
