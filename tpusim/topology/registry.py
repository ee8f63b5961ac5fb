"""Topologies by kind: one builder per spec ``kind``, turning a loaded system into its
:class:`~tpusim.topology.base.Topology`.

The shipped kinds (``torus``, ``boardfly``, ``clos``) register in
:mod:`tpusim.topology`. A new kind is a new module with a Topology subclass, a
builder and (for system files to accept it) a spec class, joined by one call::

    register_topology("ring", build_ring, spec=RingTopologySpec)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tpusim.config.system import BaseTopologySpec, register_topology_spec
from tpusim.topology.base import Topology

if TYPE_CHECKING:
    from tpusim.config.loader import System

#: Turns a loaded system (one pod, or pods on a fabric) into its topology.
TopologyBuilder = Callable[["System"], Topology]

_BUILDERS: dict[str, TopologyBuilder] = {}


def register_topology(
    kind: str, builder: TopologyBuilder, spec: type[BaseTopologySpec] | None = None
) -> None:
    """Build systems whose topology (or, for pods, fabric) has ``kind`` with ``builder``;
    ``spec``, if given, is registered with the config layer so system files accept the
    kind (see :func:`~tpusim.config.system.register_topology_spec`).

    Registering the same builder again does nothing; ValueError if ``kind`` already
    has another builder.
    """
    known = _BUILDERS.get(kind)
    if known is not None and known is not builder:
        raise ValueError(f"topology kind '{kind}' already has a builder")
    if spec is not None:
        register_topology_spec(spec)
    _BUILDERS[kind] = builder


def topology_kinds() -> tuple[str, ...]:
    """Kinds with a builder, in registration order."""
    return tuple(_BUILDERS)


def system_kind(system: System) -> str:
    """The kind that builds ``system``: its fabric's for pods, else its topology's."""
    if system.pod is not None:
        assert system.spec.fabric is not None
        return system.spec.fabric.kind
    assert system.spec.topology is not None
    return system.spec.topology.kind


def build_topology(system: System) -> Topology:
    """The topology of a loaded system, with its link bandwidths and hop latencies.

    Raises ValueError for a kind nothing has registered.
    """
    kind = system_kind(system)
    builder = _BUILDERS.get(kind)
    if builder is None:
        raise ValueError(f"no topology builder for kind '{kind}' (known: {', '.join(_BUILDERS)})")
    return builder(system)
