"""Placement: which chips each collective of a program runs on.

A logical device mesh is laid on the physical axes as JAX's ``create_device_mesh``
lays a mesh on a torus: in order, each logical axis taking whole physical axes, and
splitting one when the sizes require it (a pod's ``z`` of 24 as 3 x 8 for ``data: 72,
tensor: 8`` after ``y``). A split is contiguous: the later mesh axis takes the inner,
contiguous piece (a segment of 8 neighbouring chips, kind ``line``), the earlier one
the outer, strided piece (chips 8 apart, a ``ring`` when the physical axis wraps,
since its last chip reaches its first over the wraparound). Pieces are named
``z.0`` (outer), ``z.1``, ... A collective op then runs over the physical axes (or
pieces) of its mesh axes (one group per position of the others), over explicit chip
groups (an HLO module's replica groups, put in the ring order with the shorter
longest hop; with ``whole_axes``, as a compiled module's replay asks, a group of
whole physical axes runs over those axes, as XLA's TPU emitters run it on every
dimension of the torus at once), over the first
``num_chips`` chips, or over every chip.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np

from tpusim.collectives import make_group
from tpusim.collectives.base import Axis, Group, ring_order
from tpusim.errors import InputError
from tpusim.program.ir import Op
from tpusim.topology import Topology


@dataclass
class _Piece:
    """What is left of one physical axis while mesh axes take it: ``left`` positions
    (the inner part), the sizes already taken from its outer end."""

    axis: Axis
    left: int
    taken: list[int]


def map_mesh(topology: Topology, mesh: dict[str, int]) -> dict[str, list[str]]:
    """Logical mesh axis -> the physical axes (or pieces, ``z.0``) it occupies.

    Raises InputError when the mesh does not fit: sizes that do not multiply out to
    the chip count, or a logical axis whose size neither divides nor is a multiple of
    what is left of the next physical axis.
    """
    return split_mesh(topology, mesh)[2]


def split_mesh(
    topology: Topology, mesh: dict[str, int]
) -> tuple[np.ndarray, tuple[Axis, ...], dict[str, list[str]]]:
    """The chips as an array whose axes are the physical axes with the splits the mesh
    needs, those axes, and the mesh mapping (see :func:`map_mesh`)."""
    _, physical = topology.axis_structure()
    total = int(np.prod(list(mesh.values()))) if mesh else 1
    if total != topology.num_chips:
        raise InputError(
            f"mesh {mesh} has {total} devices but the system has {topology.num_chips} chips"
        )
    pieces = [_Piece(axis, axis.size, []) for axis in physical]
    taken_by: dict[str, list[tuple[int, int]]] = {}
    queue = 0
    for name, size in mesh.items():
        need, taken_by[name] = size, []
        while need > 1 and queue < len(pieces):
            piece = pieces[queue]
            part = piece.left if need % piece.left == 0 else need
            if piece.left % part:
                _no_fit(name, size, physical)
            taken_by[name].append((queue, len(piece.taken)))
            piece.taken.append(part)
            piece.left //= part
            need //= part
            queue += piece.left == 1
        if need != 1:
            _no_fit(name, size, physical)
    return _structure(topology, pieces, taken_by)


def _no_fit(name: str, size: int, physical: tuple[Axis, ...]) -> None:
    raise InputError(
        f"mesh axis '{name}' ({size}) does not fit the physical axes "
        f"{', '.join(f'{a.name}={a.size}' for a in physical)}"
    )


def _structure(
    topology: Topology, pieces: list[_Piece], taken_by: dict[str, list[tuple[int, int]]]
) -> tuple[np.ndarray, tuple[Axis, ...], dict[str, list[str]]]:
    """Reshape the chip array so each taken piece is an axis of its own."""
    arr, _ = topology.axis_structure()
    shape: list[int] = []
    axes: list[Axis] = []
    names: dict[tuple[int, int], str] = {}
    for p, piece in enumerate(pieces):
        parts = piece.taken or [piece.axis.size]
        for j, part in enumerate(parts):
            whole = len(parts) == 1
            name = piece.axis.name if whole else f"{piece.axis.name}.{j}"
            kind = piece.axis.kind if whole or (j == 0 and piece.axis.kind == "ring") else "line"
            names[(p, j)] = name
            shape.append(part)
            axes.append(Axis(name, part, kind))
    mapping = {mesh_axis: [names[t] for t in taken] for mesh_axis, taken in taken_by.items()}
    return arr.reshape(shape), tuple(axes), mapping


def group_of(arr: np.ndarray, named: tuple[Axis, ...], axes: list[str]) -> Group:
    """The group over ``axes`` (names among ``named``) of the chip array ``arr``: one
    group per position of the other axes."""
    names = [a.name for a in named]
    picked = [names.index(a) for a in axes]
    others = [i for i in range(len(named)) if i not in picked]
    moved = np.transpose(arr, others + picked)
    shape = [named[i].size for i in picked]
    return Group(moved.reshape(-1, *shape), tuple(named[i] for i in picked))


class Placement:
    """The groups of a program's collectives on ``topology`` under ``mesh``;
    ``whole_axes``: explicit groups made of whole physical axes run over those axes
    (:meth:`axes_group`; the replay of a compiled module asks for it)."""

    def __init__(self, topology: Topology, mesh: dict[str, int] | None, whole_axes: bool = False):
        self.topology = topology
        self.whole_axes = whole_axes
        self.mesh_axes: dict[str, list[str]] = {}
        self._split: tuple[np.ndarray, tuple[Axis, ...]] | None = None
        if mesh:
            arr, named, self.mesh_axes = split_mesh(topology, mesh)
            if len(named) != len(topology.axis_structure()[1]):
                self._split = (arr, named)

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
            if self._split is not None and axes and op.num_chips is None:
                return group_of(*self._split, axes)
            return make_group(self.topology, axes, op.num_chips)
        sizes = {len(g) for g in op.groups}
        chips = np.array(op.groups, dtype=np.int64) if len(sizes) == 1 else None
        if chips is None or chips.min() < 0 or chips.max() >= self.topology.num_chips:
            raise ValueError(
                f"groups must be equal-sized lists of chips 0..{self.topology.num_chips - 1}"
            )
        whole = self.axes_group(chips) if self.whole_axes else None
        if whole is not None:
            return whole
        order = self.ring_order(chips[0])
        return Group(chips[:, order], (Axis("group", chips.shape[1], "any"),))

    def axes_group(self, chips: np.ndarray) -> Group | None:
        """The explicit groups ``chips`` (groups x size) as whole physical axes: when
        each group is every chip along some axes of the topology, the others fixed
        (as :func:`make_group` gives them for those axes), those groups with those
        axes, so that the multi-axis torus algorithms apply; else None."""
        named = self.topology.axis_structure()[1]
        wanted = {frozenset(g) for g in chips.tolist()}
        if len(wanted) != len(chips):
            return None
        for count in range(1, len(named) + 1):
            for picked in combinations(range(len(named)), count):
                if int(np.prod([named[i].size for i in picked])) != chips.shape[1]:
                    continue
                group = make_group(self.topology, [named[i].name for i in picked])
                keep = [frozenset(g) in wanted for g in group.flat.tolist()]
                if sum(keep) == len(wanted):
                    return Group(group.chips[np.array(keep)], group.axes)
        return None

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
