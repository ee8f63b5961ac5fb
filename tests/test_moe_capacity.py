"""MoE capacity physics (issue 33): dropping tokens never makes the step slower.

A capacity factor ``cf`` caps the busiest chip's routed rows at ``cf x rows`` (hand
count below); the experts' grouped matmuls then stream those rows plus half a
megablox tile of padding per group that holds a row. Their time must not rise as
``cf`` falls (it did: 0.001 was 2.7 times slower than dropless, because the tile
padding was charged on top of the few useful rows' own sublane padding and shape
term). The oracle for the cost of few rows is a brute-force scan over every row count
a kernel could be given (a second implementation of the closed-form minimum the cost
model uses); the end-to-end step time is swept through ``tpusim run``.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from tpusim.config import load_system
from tpusim.engine import Simulation
from tpusim.engine.handlers import contended_s
from tpusim.hardware import ChipCostModel
from tpusim.program.builders import training_step
from tpusim.program.builders.mlp import GMM_TILE_ROWS

D, SEQ, TOP_K, EXPERTS, EP = 1024, 512, 2, 8, 4
MOE = dict(
    layers=1, d_model=D, d_ff=4096, heads=8, head_dim=128, seq=SEQ, batch=16,
    experts=EXPERTS, top_k=TOP_K, expert_d_ff=1024, mesh={"data": 4, "expert": EP},
)  # fmt: skip
ROWS = SEQ * TOP_K  # one sequence per chip (16 over 4 x 4), top_k rows per token
LOCAL = EXPERTS // EP
SWEEP = [0.0005 * 1.25**i for i in range(40)]  # 0.0005 .. 3.0, geometric
EXPERT_OPS = ("up", "down")


@pytest.fixture(scope="module")
def costs() -> ChipCostModel:
    return ChipCostModel(load_system("ironwood-256").chip)


def expert_s(costs: ChipCostModel, cf: float, dtype: str = "bf16") -> float:
    """Seconds of the busiest chip's expert matmuls (forward and both gradients)."""
    ops = training_step(**MOE, capacity_factor=cf, dtype=dtype).ops
    mine = [op for op in ops if op.kind == "matmul" and op.name.split(".")[2] in EXPERT_OPS]
    assert len(mine) == 6
    return sum(contended_s(grouped(costs, op), op, 0.0, 0.0) for op in mine)


def grouped(costs: ChipCostModel, op):
    """The cost of a grouped op, as the engine's matmul handler asks for it."""
    assert op.grouped or op.grouped_k
    shape = (op.m, op.n, op.k, op.efficiency, op.dtype, op.memory, op.batch)
    return costs.grouped_matmul(*shape, op.grouped_k, op.dropless_rows)


def busy_rows(cf: float) -> int:
    """Hand count: uniform routing (no skew), so the busiest chip wants ``ROWS`` rows
    and keeps ``min(1, cf)`` of them."""
    return math.ceil(ROWS * min(1.0, cf)) if cf > 0 else ROWS


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_expert_time_never_falls_as_capacity_grows(costs, dtype):
    times = [expert_s(costs, cf, dtype) for cf in SWEEP]
    dropless = expert_s(costs, -1, dtype)
    assert all(a <= b for a, b in itertools.pairwise(times)), times
    assert all(t <= dropless for cf, t in zip(SWEEP, times, strict=True) if cf <= 1)
    assert times[-1] == pytest.approx(dropless, rel=1e-12)  # cf 3 drops nothing


@pytest.mark.parametrize("cf", [0.001, 0.01, 0.1, 0.3, 0.7])
def test_capped_rows_cost_their_streamed_rows(costs, cf):
    """With a capacity, the forward expert matmul of ``busy`` rows streams ``busy +
    min(local, busy) x tile / 2`` rows (hand count) through the MXU: FLOPs ``2 x
    pad8(streamed) x n x k`` (n, k are whole MXU tiles here) at the chip's bf16 rate
    times the shape term ``x / (x + 256)`` and the grouped-matmul term; never more
    than the dropless rows' cost (1,024 rows, each group half a tile over)."""
    ops = training_step(**MOE, capacity_factor=cf).ops
    (up,) = [op for op in ops if op.name == "L0.moe.up.fwd"]
    busy = busy_rows(cf)
    pad = min(LOCAL, busy) * GMM_TILE_ROWS / 2
    assert (up.m, up.dropless_rows, up.n, up.k) == (busy, ROWS, 1024, D)
    assert up.efficiency == pytest.approx(busy / (busy + pad), rel=1e-12)
    streamed = -(-(busy + int(pad)) // 8) * 8
    rate = costs.achievable_flops("bf16") * costs.terms.grouped_matmul
    oracle = 2 * streamed * 1024 * D / (rate * streamed / (streamed + 256))
    dropless = 2 * ROWS * 1024 * D / (rate * ROWS / (ROWS + 256)) * (ROWS + pad) / ROWS
    got = grouped(costs, up).compute_s
    assert got == pytest.approx(min(oracle, dropless), rel=1e-12)
    assert got < dropless


def test_dropless_rows_keep_the_tile_padding_over_their_own(costs):
    """Dropless, 1,024 rows over 2 local experts: past the minimum, so the cost is the
    dense matmul of the rows over their useful share (unchanged by the fix)."""
    (up,) = [op for op in training_step(**MOE).ops if op.name == "L0.moe.up.fwd"]
    assert up.dropless_rows == 0
    dense = costs.matmul(ROWS, up.n, up.k, grouped=True)
    share = ROWS / (ROWS + LOCAL * GMM_TILE_ROWS / 2)
    got = grouped(costs, up)
    assert got.compute_s == dense.compute_s / up.efficiency  # bit for bit: the goldens
    assert up.efficiency == pytest.approx(share, rel=1e-12)
    assert got.memory_s == dense.memory_s  # traffic: the useful rows


T44 = Path(__file__).parent / "corpus" / "round3" / "t44.yaml"  # 16 v5e chips


def test_step_time_never_falls_as_capacity_grows():
    """The whole step simulated on 16 chips (data 4 x expert 4): the all-to-alls and
    the permutes move the kept rows, the experts compute them."""
    system = load_system(str(T44))
    steps = [
        Simulation(system, training_step(**MOE, capacity_factor=cf)).run().step_time_s
        for cf in (0.001, 0.01, 0.1, 0.5, 1.0, -1)
    ]
    assert steps == sorted(steps), steps
    assert steps[0] < steps[-1]
