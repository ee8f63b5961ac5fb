"""Unidirectional ring: chips pass chunks to their successor, n - 1 steps per phase.

Ring order: a single torus axis in its natural order (wrapped) or folded
(0, 2, 4, ..., 5, 3, 1) on a line so each hop uses each link direction once;
a multi-axis group in boustrophedon (snake) order, closing back to the start;
anything else in position order. Cost on a wrapped ring of n chips with link
bandwidth W and hop latency a: reduce-scatter / all-gather (n-1)(a + V/(nW)),
all-reduce twice that (Thakur et al. 2005; formulas.md 2.2); all-to-all relayed
one way, step k forwarding the n - k chunks still travelling:
(n-1) a + (n-1) V / (2W).
"""

from __future__ import annotations

import numpy as np

from tpusim.collectives.base import (
    AlgorithmError,
    Group,
    Op,
    Step,
    bidir_relay_steps,
    bidir_ring_steps,
    ring_order,
    ring_steps,
    snake,
)


def ring_chips(group: Group) -> np.ndarray:
    """(groups, n) chips in ring order."""
    if len(group.axes) == 1:
        return group.chips[:, ring_order(group.axes[0].size, group.axes[0].kind)]
    return snake(group.chips)


def ring_pipeline(op: Op, size: float, chips: np.ndarray, bidirectional: bool) -> list[Step]:
    """Steps of ``op`` on rings ``chips`` (groups, n) in ring order, one way or both
    (:func:`~tpusim.collectives.base.bidir_ring_steps`). Raises AlgorithmError for an
    op a ring does not implement."""
    if op not in ("reduce-scatter", "all-gather", "all-reduce", "all-to-all"):
        raise AlgorithmError(f"{'bidir-ring' if bidirectional else 'ring'} does not implement {op}")
    n = chips.shape[1]
    if n == 1:
        return []
    chunk = size / n
    if op == "all-to-all":
        return _relay(chips, chunk, bidirectional)
    phases = {"reduce-scatter": (True,), "all-gather": (False,), "all-reduce": (True, False)}[op]
    steps: list[Step] = []
    for reduce in phases:
        if bidirectional:
            steps += bidir_ring_steps(chips, 1, "ring", chunk, reduce)
        else:
            steps += ring_steps(chips, 1, "ring", chunk, n - 1, reduce)
    return steps


def _relay(chips: np.ndarray, chunk: float, bidirectional: bool) -> list[Step]:
    """All-to-all relayed around the ring: one way, every chip forwards in step k the
    n - k chunks still travelling; both ways, each chunk goes the shorter way."""
    if bidirectional:
        return bidir_relay_steps(chips, 1, "ring", chunk)
    n = chips.shape[1]
    return [ring_steps(chips, 1, "ring", (n - k) * chunk, 1, False)[0] for k in range(1, n)]


def build(op: Op, size: float, group: Group) -> list[list[Step]]:
    return [ring_pipeline(op, size, ring_chips(group), bidirectional=False)]
