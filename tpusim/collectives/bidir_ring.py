"""Bidirectional ring: the ring algorithm with each chunk split in two halves that
travel opposite ways at once, so both directions of every ring link carry data.

On a wrapped ring: reduce-scatter / all-gather (n-1)(a + V/(2nW)), all-reduce
twice that; all-to-all (n-1) steps of shrinking chunks, V(n-1)/(4W) in all
(formulas.md 1.6, 2.4).
"""

from __future__ import annotations

from tpusim.collectives.base import Group, Op, Step
from tpusim.collectives.ring import ring_chips, ring_pipeline


def build(op: Op, size: float, group: Group) -> list[list[Step]]:
    return [ring_pipeline(op, size, ring_chips(group), (False, True))]
