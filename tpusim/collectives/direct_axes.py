"""Direct per axis: the collective axis by axis, each axis exchanging directly (every
chip with every other chip on its line along that axis, all in one step).

The small-message algorithm on a torus: one step per axis for all-gather,
reduce-scatter and all-to-all, two per axis for all-reduce (reduce-scatter axis by
axis, then all-gather back), so the latency term is a sum over axes of one step's
longest route. With hop latency a, one-direction link bandwidth W, axes of k_j
chips (V: nccl-tests size, N = prod k_j), an all-gather gathers axis j from data
D_j = V prod_{i<j} k_i / N per chip; on a ring of k <= 3 (or a fully connected
level) every pair is one hop apart on its own link, so each axis step takes
a + D_j / W and an all-gather on one such axis a + V/(kW). On longer axes the
far pairs share links: the flow and packet fidelities give the busiest link's
load / W. Raises AlgorithmError for broadcast and collective-permute.
"""

from __future__ import annotations

from tpusim.collectives.base import Axis, Group, Op, Step
from tpusim.collectives.phases import axis_phases


def build(op: Op, size: float, group: Group) -> list[list[Step]]:
    direct = tuple(Axis(a.name, a.size, "full") for a in group.axes)
    order = [i + 1 for i, a in enumerate(group.axes) if a.size > 1]
    return [axis_phases(op, group.chips, order, direct, size)]
