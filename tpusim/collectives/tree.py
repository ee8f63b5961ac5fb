"""Binomial trees rooted at position 0 of the group (MPICH bcast_intra_binomial.c,
reduce_intra_binomial.c).

Broadcast: ceil(lg n) steps; at mask m = 2^(ceil(lg n) - 1), ..., 2, 1 every chip
at a position i that is a multiple of 2m (and so already has the data) sends all V
bytes to position i + m (if it exists). Reduce to the root is the mirror (mask 1,
2, 4, ...; position i + m sends its partial V to i, which adds it); all-reduce is
that reduce followed by the broadcast: 2 ceil(lg n) steps of V. The farthest
send goes first, so on a line or ring in position order the transfers of one step
never share a link; with hop latency a and one-direction bandwidth W on a line of
n = 2^m chips, a broadcast takes (n-1) a + lg n V / W, on a fully connected
board ceil(lg n)(a + V/W); all-reduce twice that. Raises AlgorithmError for other ops.
"""

from __future__ import annotations

import numpy as np

from tpusim.collectives.base import AlgorithmError, Group, Op, Step


def masks(n: int) -> list[int]:
    """Broadcast masks, farthest first: 2^(ceil(lg n) - 1), ..., 1."""
    return [1 << k for k in reversed(range((n - 1).bit_length()))]


def tree_step(flat: np.ndarray, mask: int, size: float, reduce: bool) -> Step:
    """Parents (positions that are multiples of 2 x mask, with a child) and children
    (parent + mask): a broadcast step sends parent -> child, a reduce step child ->
    parent (which adds the ``size`` bytes)."""
    n = flat.shape[1]
    parent = np.arange(0, n - mask, 2 * mask)
    child = parent + mask
    if reduce:
        return Step.of(flat[:, child], flat[:, parent], size, reduce=True)
    return Step.of(flat[:, parent], flat[:, child], size)


def build(op: Op, size: float, group: Group) -> list[list[Step]]:
    flat, n = group.flat, group.size
    if op not in ("broadcast", "all-reduce"):
        raise AlgorithmError(f"tree does not implement {op} (broadcast and all-reduce only)")
    down = [tree_step(flat, m, size, False) for m in masks(n)]
    if op == "broadcast":
        return [down]
    up = [tree_step(flat, m, size, True) for m in reversed(masks(n))]
    return [up + down]
