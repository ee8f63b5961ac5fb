"""One-shot all-reduce: every chip sends its whole input to every other chip in one
step and reduces the n - 1 copies it receives.

The small-message all-reduce of TensorRT-LLM's custom all-reduce and PyTorch's
symmetric-memory ``one_shot_all_reduce`` (each rank reads every peer's buffer and
reduces locally), as against their "two-shot" (a direct reduce-scatter then a direct
all-gather: ``direct``). One step instead of two, at the price of n - 1 times the
bytes: with hop latency a on the longest route, one-direction link bandwidth W and
p links per chip, T >= a + (n - 1) V / (p W); it wins only while the latency term
dominates. Raises AlgorithmError for every op but all-reduce.
"""

from __future__ import annotations

from tpusim.collectives.base import AlgorithmError, Group, Op, Step
from tpusim.collectives.phases import all_pairs_step


def build(op: Op, size: float, group: Group) -> list[list[Step]]:
    if op != "all-reduce":
        raise AlgorithmError(f"one-shot implements all-reduce only (not {op})")
    n = group.size
    if n == 1:
        return [[]]
    return [[all_pairs_step(group.flat, 1, size, reduce_bytes=(n - 1) * size)]]
