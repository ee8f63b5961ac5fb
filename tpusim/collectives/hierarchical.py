"""Hierarchical: the collective level by level, innermost level first.

For a Boardfly group the levels are board, group and global, each fully
connected, so each level exchanges directly (every chip with its peers at that
level, spreading the data over all the level's links); for pods on a fabric,
the pod's torus axes (rings over ICI) and then the pods (ring over the fabric).
All-reduce = reduce-scatter up the levels, all-reduce at the top on
1/(inner chips) of the data, all-gather back down (formulas.md 2.4: T =
T_RS(intra) + T_AR(inter, V/p1) + T_AG(intra)). A wrapped torus axis runs as a
bidirectional ring in ceil((k-1)/2) steps, a line as the folded ring in k - 1 steps,
a fully connected level in one step (see :mod:`tpusim.collectives.phases`).
Raises AlgorithmError for broadcast and collective-permute.
"""

from __future__ import annotations

from tpusim.collectives.base import Group, Op, Step
from tpusim.collectives.phases import axis_phases


def build(op: Op, size: float, group: Group) -> list[list[Step]]:
    inner_first = [i + 1 for i in reversed(range(len(group.axes))) if group.axes[i].size > 1]
    return [axis_phases(op, group.chips, inner_first, group.axes, size)]
