"""Multi-axis torus algorithm, as XLA runs collectives on TPU tori.

All-reduce = reduce-scatter axis by axis, then all-gather axis by axis in reverse,
each axis a bidirectional ring (wrapped) or a folded ring (no wraparound). The
data is split into one part per axis; part j walks the axes in an order rotated
by j, so all axes are busy at once and the bandwidth term divides by the number
of axes (scaling book: bytes / (W_ICI x num_axes); formulas.md 1.4, 2.4).
``split=False`` gives the plain sequential variant.
"""

from __future__ import annotations

from tpusim.collectives.base import AlgorithmError, Group, Op, Step
from tpusim.collectives.phases import axis_phases


def build(op: Op, size: float, group: Group, split: bool = True) -> list[list[Step]]:
    if any(a.kind not in ("ring", "line") for a in group.axes):
        raise AlgorithmError(
            "torus needs a group made of torus axes (use --axes or all chips of a torus system)"
        )
    busy = [i + 1 for i, a in enumerate(group.axes) if a.size > 1]
    if not busy:
        return []
    parts = len(busy) if split else 1
    return [
        axis_phases(op, group.chips, busy[j:] + busy[:j], group.axes, size / parts)
        for j in range(parts)
    ]
