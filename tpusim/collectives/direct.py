"""Direct: every transfer at once, each on its own route; the network shares links.

All-to-all: every chip sends V/n to every other chip in one step (pairwise,
formulas.md 1.6 / MPICH alltoall). All-gather and reduce-scatter: every chip
sends its V/n shard (or the partner's V/n block) to every other chip; all-reduce
is the two in turn. Collective-permute: each chip sends V to its partner
(default: the next position in the group), split over the ports its minimal
routes allow. Broadcast: the root sends V to every other chip.
"""

from __future__ import annotations

import numpy as np

from tpusim.collectives.base import Group, Op, Step
from tpusim.collectives.phases import all_pairs_step


def permute_pairs(
    group: Group, pairs: list[tuple[int, int]] | None
) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) chips: explicit chip pairs, or every position to the next one."""
    if pairs:
        src, dst = (np.array(x, dtype=np.int64) for x in zip(*pairs, strict=True))
        return src, dst
    flat = group.flat
    return flat.ravel(), np.roll(flat, -1, axis=1).ravel()


def build(
    op: Op, size: float, group: Group, pairs: list[tuple[int, int]] | None = None
) -> list[list[Step]]:
    flat, n = group.flat, group.size
    if op == "collective-permute":
        src, dst = permute_pairs(group, pairs)
        return [[Step.of(src, dst, size)]]
    if op == "broadcast":
        root = np.repeat(flat[:, 0], n - 1)
        return [[Step.of(root, flat[:, 1:], size)]]
    if n == 1:
        return [[]]
    chunk = size / n
    if op == "all-to-all" or op == "all-gather":
        return [[all_pairs_step(flat, 1, chunk)]]
    if op == "reduce-scatter":
        return [[all_pairs_step(flat, 1, chunk, (n - 1) * chunk)]]
    return [[all_pairs_step(flat, 1, chunk, (n - 1) * chunk), all_pairs_step(flat, 1, chunk)]]
