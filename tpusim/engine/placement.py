"""Placement: which chips each collective of a program runs on.

A logical device mesh is laid on the physical axes as JAX's ``create_device_mesh``
lays a mesh on a torus: in order, each logical axis taking whole physical axes. A
collective op then runs over the physical axes of its mesh axes (one group per
position of the others), over explicit chip groups (an HLO module's replica groups,
put in the ring order with the shorter longest hop), over the first ``num_chips``
chips, or over every chip.
"""

from __future__ import annotations

import numpy as np

from tpusim.collectives import make_group
from tpusim.collectives.base import Axis, Group, ring_order
from tpusim.errors import InputError
from tpusim.program.ir import Op
from tpusim.topology import Topology


def map_mesh(topology: Topology, mesh: dict[str, int]) -> dict[str, list[str]]:
    """Logical mesh axis -> the physical axes it occupies, first axes first.

    Raises InputError when the mesh does not fit: sizes that do not multiply out to
    the chip count or a logical axis that would split a physical one.
    """
    _, physical = topology.axis_structure()
    total = int(np.prod(list(mesh.values()))) if mesh else 1
    if total != topology.num_chips:
        raise InputError(
            f"mesh {mesh} has {total} devices but the system has {topology.num_chips} chips"
        )
    mapping: dict[str, list[str]] = {}
    queue = list(physical)
    for name, size in mesh.items():
        taken, product = [], 1
        while product < size and queue:
            axis = queue.pop(0)
            taken.append(axis.name)
            product *= axis.size
        if product != size:
            raise InputError(
                f"mesh axis '{name}' ({size}) does not fit the physical axes "
                f"{', '.join(f'{a.name}={a.size}' for a in physical)}"
            )
        mapping[name] = taken
    return mapping


class Placement:
    """The groups of a program's collectives on ``topology`` under ``mesh``."""

    def __init__(self, topology: Topology, mesh: dict[str, int] | None):
        self.topology = topology
        self.mesh_axes = map_mesh(topology, mesh) if mesh else {}

    def physical_axes(self, op: Op) -> list[str] | None:
        """The physical axes of ``op``'s mesh axes (None: every chip). Raises InputError
        for an axis the mesh does not have."""
        if not op.axes:
            return None
        if not self.mesh_axes:
            return list(op.axes)
        unknown = [a for a in op.axes if a not in self.mesh_axes]
        if unknown:
            raise InputError(
                f"op '{op.name}': mesh has no axis '{unknown[0]}' (has {', '.join(self.mesh_axes)})"
            )
        return [p for a in op.axes for p in self.mesh_axes[a]]

    def group(self, op: Op, axes: list[str] | None) -> Group:
        """Explicit chip groups (all the same size), else the first ``num_chips`` chips or
        the mesh/physical axes. Raises ValueError for a bad group, axis or count."""
        if not op.groups:
            return make_group(self.topology, axes, op.num_chips)
        sizes = {len(g) for g in op.groups}
        chips = np.array(op.groups, dtype=np.int64) if len(sizes) == 1 else None
        if chips is None or chips.min() < 0 or chips.max() >= self.topology.num_chips:
            raise ValueError(
                f"groups must be equal-sized lists of chips 0..{self.topology.num_chips - 1}"
            )
        order = self.ring_order(chips[0])
        return Group(chips[:, order], (Axis("group", chips.shape[1], "any"),))

    def ring_order(self, chips: np.ndarray) -> np.ndarray:
        """Positions of a group in the ring order with the shorter longest hop: as given,
        or folded (0, 2, 4, ..., 3, 1), which keeps a line of chips from paying its
        length on the closing hop. Judged on the first group; the others follow it."""
        natural, folded = np.arange(chips.size), ring_order(chips.size, "line")
        if self._longest_hop(chips[folded]) < self._longest_hop(chips[natural]):
            return folded
        return natural

    def _longest_hop(self, ring: np.ndarray) -> tuple[int, int]:
        """(longest, total) hops around ``ring`` of chips, closing hop included."""
        hops = [
            self.topology.hops(int(a), int(b)) for a, b in zip(ring, np.roll(ring, -1), strict=True)
        ]
        return max(hops), sum(hops)
