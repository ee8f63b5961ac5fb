"""Which chips a collective runs on: all chips, some physical axes, or the first N.

The group array keeps the physical structure: on a torus ``chips[g, x, y, z]``;
on Boardfly ``chips[g, group, board, chip]``; pods on a fabric put ``pod`` first
and then the pod's own axes. Selecting axes (``x,z``) makes one group per
position of the other axes, all running the collective at once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tpusim.collectives.base import Axis, Group
from tpusim.topology import Boardfly, ClosFabric, Topology, Torus, axis_name


def _structure(topology: Topology) -> tuple[np.ndarray, tuple[Axis, ...]]:
    """All chips as one array with named axes."""
    ids = np.arange(topology.num_chips, dtype=np.int64)
    if isinstance(topology, Torus):
        arr = ids.reshape(tuple(reversed(topology.dims))).transpose()
        axes = tuple(
            Axis(axis_name(a), k, "ring" if topology._wrap[a] else "line")
            for a, k in enumerate(topology.dims)
        )
        return arr, axes
    if isinstance(topology, Boardfly):
        return ids.reshape(topology.g, topology.a, topology.p), (
            # every level is fully connected: exchange directly, spreading over all links
            Axis("group", topology.g, "full"),
            Axis("board", topology.a, "full"),
            Axis("chip", topology.p, "full"),
        )
    if isinstance(topology, ClosFabric):
        pod_arr, pod_axes = _structure(topology.pod)
        arr = np.stack([pod_arr + i * topology.pod_chips for i in range(topology.pods)])
        return arr, (Axis("pod", topology.pods, "any"), *pod_axes)
    return ids, (Axis("chips", topology.num_chips, "any"),)


def make_group(
    topology: Topology, axes: Sequence[str] | None = None, chips: int | None = None
) -> Group:
    """The group of a collective. Raises ValueError naming the bad axis or count."""
    arr, named = _structure(topology)
    if chips is not None:
        if not 1 <= chips <= topology.num_chips:
            raise ValueError(f"--chips {chips}: the system has {topology.num_chips} chips")
        if chips < topology.num_chips:
            return Group(np.arange(chips, dtype=np.int64)[None, :], (Axis("chips", chips, "any"),))
    if not axes:
        return Group(arr[None, ...], named)
    names = [a.name for a in named]
    unknown = [a for a in axes if a not in names]
    if unknown or len(set(axes)) != len(axes):
        raise ValueError(
            f"--axes {','.join(axes)}: axes must be distinct names among {', '.join(names)}"
        )
    picked = [names.index(a) for a in axes]
    others = [i for i in range(len(named)) if i not in picked]
    moved = np.transpose(arr, others + picked)
    shape = [named[i].size for i in picked]
    return Group(moved.reshape(-1, *shape), tuple(named[i] for i in picked))
