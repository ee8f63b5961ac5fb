"""Recursive halving (reduce-scatter) and doubling (all-gather), Rabenseifner's all-reduce.

Needs a power-of-two group. Step k of the reduce-scatter pairs position i with
i XOR n/2^(k+1) and exchanges half of what is left; the all-gather retraces the
steps in reverse. Cost: lg n steps per phase, V(n-1)/n bytes per chip per phase
(MPICH reduce_scatter_intra_recursive_halving.c; formulas.md 2.2). Partners far
apart share links on a torus, which the flow and packet fidelities see.
"""

from __future__ import annotations

import numpy as np

from tpusim.collectives.base import AlgorithmError, Group, Op, Step


def _exchange(flat: np.ndarray, distance: int, size: float, reduce: bool) -> Step:
    n = flat.shape[1]
    partner = np.arange(n) ^ distance
    return Step.of(flat, flat[:, partner], size, reduce=reduce)


def build(op: Op, size: float, group: Group) -> list[list[Step]]:
    n, flat = group.size, group.flat
    if n & (n - 1):
        raise AlgorithmError(f"halving-doubling needs a power-of-two group (got {n} chips)")
    if op not in ("all-reduce", "reduce-scatter", "all-gather"):
        raise AlgorithmError(f"halving-doubling does not implement {op}")
    levels = n.bit_length() - 1
    halving = [_exchange(flat, n >> (k + 1), size / 2 ** (k + 1), True) for k in range(levels)]
    doubling = [_exchange(flat, 1 << k, size * (1 << k) / n, False) for k in range(levels)]
    steps = {"reduce-scatter": halving, "all-gather": doubling, "all-reduce": halving + doubling}[
        op
    ]
    return [steps]
