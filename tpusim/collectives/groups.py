"""Which chips a collective runs on: all chips, some physical axes, or the first N.

The group array keeps the physical structure the topology describes
(:meth:`~tpusim.topology.base.Topology.axis_structure`): on a torus
``chips[g, x, y, z]``; on Boardfly ``chips[g, group, board, chip]``; pods on a
fabric put ``pod`` first and then the pod's own axes. Selecting axes (``x,z``)
makes one group per position of the other axes, all running the collective at once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tpusim.collectives.base import Axis, Group
from tpusim.topology import Topology


def make_group(
    topology: Topology, axes: Sequence[str] | None = None, chips: int | None = None
) -> Group:
    """The group of a collective. Raises ValueError naming the bad axis or count."""
    arr, named = topology.axis_structure()
    if chips is not None:
        if not 1 <= chips <= topology.num_chips:
            raise ValueError(f"chips {chips}: the system has {topology.num_chips} chips")
        if chips < topology.num_chips:
            return Group(np.arange(chips, dtype=np.int64)[None, :], (Axis("chips", chips, "any"),))
    if not axes:
        return Group(arr[None, ...], named)
    names = [a.name for a in named]
    unknown = [a for a in axes if a not in names]
    if unknown or len(set(axes)) != len(axes):
        raise ValueError(
            f"axes {','.join(axes)}: axes must be distinct names among {', '.join(names)}"
        )
    picked = [names.index(a) for a in axes]
    others = [i for i in range(len(named)) if i not in picked]
    moved = np.transpose(arr, others + picked)
    shape = [named[i].size for i in picked]
    return Group(moved.reshape(-1, *shape), tuple(named[i] for i in picked))
