"""Recursive halving (reduce-scatter) and doubling (all-gather), Rabenseifner's all-reduce.

Step k of the reduce-scatter pairs position i with i XOR n/2^(k+1) and exchanges
half of what is left; the all-gather retraces the steps in reverse. Cost for n a
power of two: lg n steps per phase, V(n-1)/n bytes per chip per phase; with
uncontended one-hop partners (hop latency a, one-direction bandwidth W)
reduce-scatter / all-gather take lg n a + (n-1)/n V / W, all-reduce twice that
(MPICH reduce_scatter_intra_recursive_halving.c,
allreduce_intra_reduce_scatter_allgather.c; formulas.md 2.2). Other group sizes
fold as MPICH does (:mod:`tpusim.collectives.recursive_doubling`): the r = n - p
extra chips hand their data to a partner first (V for a reduce-scatter or
all-reduce, their shard for an all-gather) and get their result back after
(V/n, V - V/n or V): 2 extra steps; in a reduce-scatter or all-gather the survivors
standing for two chips carry two shards. Partners far apart share links on a torus,
which the flow and packet fidelities see. Raises AlgorithmError for other ops.
"""

from __future__ import annotations

import numpy as np

from tpusim.collectives.base import AlgorithmError, Group, Op, Step
from tpusim.collectives.recursive_doubling import (
    all_gather,
    doubling,
    fold_in,
    fold_out,
    fold_weights,
    halving,
)


def build(op: Op, size: float, group: Group) -> list[list[Step]]:
    flat, n = group.flat, group.size
    if op not in ("all-reduce", "reduce-scatter", "all-gather"):
        raise AlgorithmError(f"halving-doubling does not implement {op}")
    if n == 1:
        return [[]]
    if op == "all-gather":
        return [all_gather(flat, size)]
    if op == "reduce-scatter":
        shard = size / n
        weights = fold_weights(n)
        return [fold_in(flat, size, True) + halving(flat, shard, weights) + fold_out(flat, shard)]
    ones = np.ones(fold_weights(n).size, dtype=np.int64)
    part = size / ones.size
    return [
        fold_in(flat, size, True)
        + halving(flat, part, ones)
        + doubling(flat, part, ones)
        + fold_out(flat, size)
    ]
