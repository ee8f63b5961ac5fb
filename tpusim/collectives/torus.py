"""Multi-axis torus algorithm, as XLA runs collectives on TPU tori.

All-reduce = reduce-scatter axis by axis, then all-gather axis by axis in reverse,
each axis a bidirectional ring in ceil((k-1)/2) steps (wrapped) or a folded ring
in k - 1 steps (no wraparound); all-to-all exchanges directly along each axis in
turn. The data is split into one part per axis; part j walks the axes in an order
rotated by j, so all axes are busy at once and the bandwidth term divides by the
number of axes (scaling book: bytes / (W_ICI x num_axes); formulas.md 1.4, 2.4).
``split=False`` gives the plain sequential variant.

Closed form, all-gather on a wrapped k x k torus (one-direction W, hop latency a):
2 ceil((k-1)/2) a + (k^2-1)/k^2 V / (4W); all-reduce twice that. Per-axis phases:
:mod:`tpusim.collectives.phases`. Raises AlgorithmError unless every axis of the
group is a torus axis, and for ops other than the four above.
"""

from __future__ import annotations

from tpusim.collectives.base import AlgorithmError, Group, Op, Step
from tpusim.collectives.phases import axis_phases


def build(op: Op, size: float, group: Group, split: bool = True) -> list[list[Step]]:
    if not group.on_torus_axes:
        raise AlgorithmError(
            "torus needs a group made of torus axes (name its axes, or take every chip of a torus)"
        )
    busy = [i + 1 for i, a in enumerate(group.axes) if a.size > 1]
    if not busy:
        return []
    parts = len(busy) if split else 1
    return [
        axis_phases(op, group.chips, busy[j:] + busy[:j], group.axes, size / parts)
        for j in range(parts)
    ]
