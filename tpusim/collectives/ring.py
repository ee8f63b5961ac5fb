"""Unidirectional ring: chips pass chunks to their successor, n - 1 steps per phase.

Ring order: a single torus axis in its natural order (wrapped) or folded
(0, 2, 4, ..., 5, 3, 1) on a line so each hop uses each link direction once;
a multi-axis group in boustrophedon (snake) order, closing back to the start;
anything else in position order. Cost on a wrapped ring of n chips with link
bandwidth W and hop latency a: reduce-scatter / all-gather (n-1)(a + V/(nW)),
all-reduce twice that (Thakur et al. 2005; formulas.md 2.2).
"""

from __future__ import annotations

import numpy as np

from tpusim.collectives.base import AlgorithmError, Group, Op, Step, ring_order, ring_steps, snake


def ring_chips(group: Group) -> np.ndarray:
    """(groups, n) chips in ring order."""
    if len(group.axes) == 1:
        return group.chips[:, ring_order(group.axes[0].size, group.axes[0].kind)]
    return snake(group.chips)


def ring_pipeline(
    op: Op, size: float, chips: np.ndarray, directions: tuple[bool, ...]
) -> list[Step]:
    """Steps of ``op`` on rings ``chips`` (groups, n); two directions split each chunk."""
    n = chips.shape[1]
    if n == 1:
        return []
    chunk = size / n
    if op == "reduce-scatter":
        return ring_steps(chips, 1, "ring", chunk, n - 1, True, directions)
    if op == "all-gather":
        return ring_steps(chips, 1, "ring", chunk, n - 1, False, directions)
    if op == "all-reduce":
        return ring_steps(chips, 1, "ring", chunk, n - 1, True, directions) + ring_steps(
            chips, 1, "ring", chunk, n - 1, False, directions
        )
    if op == "all-to-all":
        # relay: in step k every chip forwards the n - k chunks still travelling
        return [
            ring_steps(chips, 1, "ring", (n - k) * chunk, 1, False, directions)[0]
            for k in range(1, n)
        ]
    raise AlgorithmError(f"ring does not implement {op}")


def build(op: Op, size: float, group: Group) -> list[list[Step]]:
    return [ring_pipeline(op, size, ring_chips(group), (False,))]
