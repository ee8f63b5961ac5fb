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


def _all_pairs(flat: np.ndarray, size: float, reduce_bytes: float = 0.0) -> Step:
    n = flat.shape[1]
    i, j = np.nonzero(~np.eye(n, dtype=bool))
    src, dst = flat[:, i].ravel(), flat[:, j].ravel()
    return Step(src.astype(np.int64), dst.astype(np.int64), np.full(src.size, size), reduce_bytes)


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
        return [[_all_pairs(flat, chunk)]]
    if op == "reduce-scatter":
        return [[_all_pairs(flat, chunk, (n - 1) * chunk)]]
    return [[_all_pairs(flat, chunk, (n - 1) * chunk), _all_pairs(flat, chunk)]]
