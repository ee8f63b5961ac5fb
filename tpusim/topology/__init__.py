"""Topologies: pure graphs of chips and links with routes and metrics.

:func:`build_topology` turns a loaded :class:`~tpusim.config.loader.System` into the
topology its spec's ``kind`` names: a :class:`Torus`, a :class:`Boardfly` or (pods
joined by a fabric) a :class:`ClosFabric`. The shipped kinds register here; a new
kind registers with :func:`register_topology` (see :mod:`tpusim.topology.registry`).
"""

from __future__ import annotations

from tpusim.topology.base import Axis, AxisKind, LinkTable, PlotLayout, Topology
from tpusim.topology.boardfly import Boardfly, build_boardfly
from tpusim.topology.clos import ClosFabric, build_clos
from tpusim.topology.registry import build_topology, register_topology, topology_kinds
from tpusim.topology.torus import Torus, axis_name, build_torus, twist_axes

__all__ = [
    "Axis",
    "AxisKind",
    "Boardfly",
    "ClosFabric",
    "LinkTable",
    "PlotLayout",
    "Topology",
    "Torus",
    "axis_name",
    "build_topology",
    "register_topology",
    "topology_kinds",
    "twist_axes",
]

register_topology("torus", build_torus)
register_topology("boardfly", build_boardfly)
register_topology("clos", build_clos)
