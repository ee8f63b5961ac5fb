"""Collective groups adapted to failures, as a runtime would adapt them.

- A wrapped torus axis (``ring``) with a dead link runs as a ``line``: the axis is
  rotated so that the dead link joins its last and first positions, and the line
  algorithms (folded ring, one way) never use it. This needs every broken ring of the
  axis to break at the same position (one rotation for all, which keeps the other
  axes' lines physical); otherwise the axis stays a ring and its flows reroute
  around the dead links in the network.
- Chips that are down leave the group (``exclude``): what is left runs as one group
  of kind ``any`` in the survivors' order (boustrophedon on a torus, so ring
  neighbours stay physical neighbours where they can).

Each adaptation returns a note for the JSON record (``adapted``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from tpusim.collectives.base import Axis, AxisKind, Group, snake
from tpusim.topology import Topology


def ring_break(chips: np.ndarray, axis: int, topology: Topology, dead: np.ndarray) -> np.ndarray:
    """Positions j (of array axis ``axis``) whose ring link j -> j+1 (wrapping) is down
    in either direction in some line of ``chips``."""
    nxt = np.roll(chips, -1, axis=axis)
    forward = topology.find_links(chips.ravel(), nxt.ravel()).reshape(chips.shape)
    back = topology.find_links(nxt.ravel(), chips.ravel()).reshape(chips.shape)
    broken = (forward >= 0) & dead[np.maximum(forward, 0)] | (back >= 0) & dead[np.maximum(back, 0)]
    others = tuple(i for i in range(chips.ndim) if i != axis)
    return np.flatnonzero(broken.any(axis=others))


def rings_as_lines(group: Group, topology: Topology, dead: np.ndarray) -> tuple[Group, list[str]]:
    """``group`` with each ring axis broken at one position run as a line (see the
    module docstring); notes for the record."""
    chips, axes, notes = group.chips, list(group.axes), []
    for i, info in enumerate(group.axes):
        if info.kind != "ring":
            continue
        where = ring_break(chips, i + 1, topology, dead)
        if where.size == 1:
            j = int(where[0])
            chips = np.roll(chips, -(j + 1), axis=i + 1)
            axes[i] = Axis(info.name, info.size, "line")
            notes.append(f"axis {info.name}: ring with a dead link runs as a line")
        elif where.size > 1:
            notes.append(
                f"axis {info.name}: {where.size} dead ring links at different positions: "
                "flows reroute around them"
            )
    if not notes:
        return group, []
    return replace(group, chips=chips, axes=tuple(axes)), notes


def without_chips(group: Group, down: list[int]) -> tuple[Group, list[str]]:
    """``group`` without the chips ``down`` (every group loses the same number of chips,
    else ValueError: groups must stay equal-sized)."""
    gone = np.isin(group.chips, down)
    if not gone.any():
        return group, []
    per_group = gone.reshape(group.num_groups, -1).sum(axis=1)
    if np.unique(per_group).size != 1:
        raise ValueError(
            f"excluding chips {down} leaves groups of different sizes; "
            "exclude works on a single group or one chip per group"
        )
    kind: AxisKind = "any"
    order = snake(group.chips) if group.on_torus_axes else group.flat
    if len(group.axes) == 1 and group.axes[0].kind == "ring" and len(down) == 1:
        # one chip out of a ring: the rest is a line starting after it
        at = np.argmax(order == down[0], axis=1)
        if np.unique(at).size == 1:
            order, kind = np.roll(order, -(int(at[0]) + 1), axis=1), "line"
    keep = ~np.isin(order, down)
    left = order[keep].reshape(group.num_groups, -1)
    note = f"chips {', '.join(map(str, down))} down: group shrinks to {left.shape[1]} chips"
    return Group(left, (Axis("survivors", int(left.shape[1]), kind),)), [note]
