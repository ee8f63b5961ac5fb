"""Topologies by kind: one :class:`TopologyKind` per spec ``kind``, turning a loaded
system into its :class:`~tpusim.topology.base.Topology`.

The shipped kinds (``torus``, ``boardfly``, ``clos``) are registered in one list in
:mod:`tpusim.topology`. A new kind is a new module with a Topology subclass, a builder
and (for system files to accept it) a spec class, joined by one call::

    TOPOLOGIES.register("ring", TopologyKind(build_ring, spec=RingTopologySpec))

which also registers the spec with the config layer
(:data:`~tpusim.config.system.TOPOLOGY_SPECS`), so system files accept the kind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tpusim.config.system import TOPOLOGY_SPECS, BaseTopologySpec
from tpusim.registry import Registry
from tpusim.topology.base import Topology

if TYPE_CHECKING:
    from tpusim.config.loader import System

#: Turns a loaded system (one pod, or pods on a fabric) into its topology.
TopologyBuilder = Callable[["System"], Topology]


@dataclass(frozen=True)
class TopologyKind:
    """A topology kind: ``build`` turns a system of this kind into its topology;
    ``spec``, the class of its ``topology:`` block in system files (None for a kind
    whose spec the config layer already has, e.g. the ``clos`` fabric of pods)."""

    build: TopologyBuilder
    spec: type[BaseTopologySpec] | None = None


def _register_spec(kind: str, entry: TopologyKind) -> None:
    if entry.spec is not None:
        TOPOLOGY_SPECS.register(kind, entry.spec)


#: Topology kinds by name; raises UnknownEntryError / DuplicateEntryError
#: (:mod:`tpusim.registry`).
TOPOLOGIES: Registry[TopologyKind] = Registry("topology kind", _register_spec)


def system_kind(system: System) -> str:
    """The kind that builds ``system``: its fabric's for pods, else its topology's."""
    if system.pod is not None:
        assert system.spec.fabric is not None
        return system.spec.fabric.kind
    assert system.spec.topology is not None
    return system.spec.topology.kind


def build_topology(system: System) -> Topology:
    """The topology of a loaded system, with its link bandwidths and hop latencies.

    Raises UnknownEntryError (a ValueError) for a kind nothing has registered.
    """
    return TOPOLOGIES.get(system_kind(system)).build(system)
