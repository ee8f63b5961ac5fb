"""Recursive doubling: all-gather and all-reduce in lg n exchanges between partners
i XOR 2^k (MPICH allgather_intra_recursive_doubling.c,
allreduce_intra_recursive_doubling.c).

All-gather: in step k every chip sends its partner everything it holds so far
(2^k shards of V/n). All-reduce: in step k every chip sends its partner its FULL
vector V and adds the one it receives: latency-optimal for small messages. With n a
power of two, hop latency a and one-direction link bandwidth W, when partners are
one hop apart and no link is shared (a hypercube such as a 2x2x2 torus, a board of
a Boardfly):

- all-gather: lg n a + (n-1)/n V / W
- all-reduce: lg n (a + V / W)

Other groups fold as MPICH does: with p = 2^floor(lg n) and r = n - p, position
2i (i < r) first sends its data to position 2i + 1 (the whole vector for an
all-reduce, its shard for an all-gather), the p survivors run the power-of-two
algorithm, and the partners send the result back: 2 extra steps. Far partners
share links on a torus; the flow and packet fidelities see it. Raises
AlgorithmError for other ops.
"""

from __future__ import annotations

import numpy as np

from tpusim.collectives.base import AlgorithmError, Group, Op, Step


def survivors(n: int) -> np.ndarray:
    """Positions of the p = 2^floor(lg n) chips left after the fold, by new rank:
    new rank i < r is position 2i + 1 (it holds 2i's data too), the rest i + r."""
    p = 1 << (n.bit_length() - 1)
    r = n - p
    return np.where(np.arange(p) < r, 2 * np.arange(p) + 1, np.arange(p) + r)


def fold_weights(n: int) -> np.ndarray:
    """Original chips each survivor stands for (2 for the first r, else 1)."""
    p = 1 << (n.bit_length() - 1)
    return np.where(np.arange(p) < n - p, 2, 1)


def fold_in(flat: np.ndarray, size: float, reduce: bool) -> list[Step]:
    """Positions 2i (i < r) send ``size`` bytes to 2i + 1; none if n is a power of two."""
    r = flat.shape[1] - (1 << (flat.shape[1].bit_length() - 1))
    return [Step.of(flat[:, 0 : 2 * r : 2], flat[:, 1 : 2 * r : 2], size, reduce)] if r else []


def fold_out(flat: np.ndarray, size: float) -> list[Step]:
    """Positions 2i + 1 (i < r) send ``size`` bytes back to 2i."""
    r = flat.shape[1] - (1 << (flat.shape[1].bit_length() - 1))
    return [Step.of(flat[:, 1 : 2 * r : 2], flat[:, 0 : 2 * r : 2], size)] if r else []


def exchange(flat: np.ndarray, distance: int, sizes: np.ndarray, reduce: bool) -> Step:
    """Survivor i sends ``sizes[i]`` bytes to survivor i XOR ``distance``; a reducing
    receiver adds what it gets (``reduce_bytes``: the largest such)."""
    alive = survivors(flat.shape[1])
    partner = alive[np.arange(alive.size) ^ distance]
    src, dst = flat[:, alive], flat[:, partner]
    size = np.broadcast_to(np.asarray(sizes, dtype=float), src.shape).ravel()
    reduce_bytes = float(size.max()) if reduce else 0.0
    return Step(src.ravel().astype(np.int64), dst.ravel().astype(np.int64), size, reduce_bytes)


def block_sums(weights: np.ndarray, width: int, partner: bool) -> np.ndarray:
    """Per survivor i: the weight of the aligned block of ``width`` new ranks holding i
    (or, with ``partner``, holding i XOR width)."""
    p = weights.size
    ranks = np.arange(p) ^ width if partner else np.arange(p)
    per_block = weights.reshape(p // width, width).sum(axis=1)
    return per_block[ranks // width]


def doubling(flat: np.ndarray, shard: float, weights: np.ndarray) -> list[Step]:
    """Recursive-doubling all-gather among the survivors: in step k each sends all it
    holds (the shards of its block of 2^k new ranks, ``shard`` x weight each)."""
    levels = weights.size.bit_length() - 1
    return [
        exchange(flat, 1 << k, shard * block_sums(weights, 1 << k, False), False)
        for k in range(levels)
    ]


def halving(flat: np.ndarray, shard: float, weights: np.ndarray) -> list[Step]:
    """Recursive-halving reduce-scatter among the survivors: at distance p/2, p/4, ...,
    1 each sends the blocks its partner's half keeps (``shard`` x weight each)."""
    levels = weights.size.bit_length() - 1
    distances = [weights.size >> (k + 1) for k in range(levels)]
    return [exchange(flat, d, shard * block_sums(weights, d, True), True) for d in distances]


def all_gather(flat: np.ndarray, size: float) -> list[Step]:
    """Recursive-doubling all-gather of ``size`` gathered bytes, folded if needed."""
    n = flat.shape[1]
    shard = size / n
    return (
        fold_in(flat, shard, False)
        + doubling(flat, shard, fold_weights(n))
        + fold_out(flat, size - shard)
    )


def build(op: Op, size: float, group: Group) -> list[list[Step]]:
    flat, n = group.flat, group.size
    if op not in ("all-reduce", "all-gather"):
        raise AlgorithmError(f"recursive-doubling does not implement {op}")
    if n == 1:
        return [[]]
    if op == "all-gather":
        return [all_gather(flat, size)]
    p = 1 << (n.bit_length() - 1)
    full = np.full(p, float(size))
    middle = [exchange(flat, 1 << k, full, True) for k in range(p.bit_length() - 1)]
    return [fold_in(flat, size, True) + middle + fold_out(flat, size)]
