"""The MLP block's op templates: a dense MLP (``plain``: up, activation, down;
``gated``: SwiGLU's gate, up, activation, down) or a MoE layer (a router, the routed
experts behind a dispatch and a combine all-to-all, and ``shared`` always-on experts
as a tensor-sharded dense MLP), with the MoE's load (busiest chip's rows, drops,
grouped-matmul padding)."""

from __future__ import annotations

import math
from dataclasses import replace

from tpusim.program.builders.layer_shape import LayerShape
from tpusim.program.builders.template import LayerStep, collective_step

GMM_TILE_ROWS = 512
"""Rows of one megablox grouped-matmul tile (published: MaxText's ``sparse_matmul``,
``tile_size = (512, 1024, 1024)`` for (m, k, n), ``MaxText/layers/moe.py``); each
expert's group of rows pads up to it."""


def mlp_steps(s: LayerShape, block: str, rows: int, width: int) -> list[LayerStep]:
    """Up (and gate) projection, activation, down projection of ``rows`` rows at a
    local width of ``width``; SwiGLU's activation reads gate and up, writes one."""
    b = s.bytes_per_element
    if s.mlp == "gated":
        return [
            LayerStep(f"{block}.gate", "matmul", m=rows, k=s.d_model, n=width),
            LayerStep(f"{block}.up", "matmul", m=rows, k=s.d_model, n=width),
            LayerStep(f"{block}.act", "elementwise", bytes=3 * rows * width * b),
            LayerStep(f"{block}.down", "matmul", m=rows, k=width, n=s.d_model),
        ]
    return [
        LayerStep(f"{block}.up", "matmul", m=rows, k=s.d_model, n=width),
        LayerStep(f"{block}.act", "elementwise", bytes=2 * rows * width * b),
        LayerStep(f"{block}.down", "matmul", m=rows, k=width, n=s.d_model),
    ]


def moe_steps(s: LayerShape) -> list[LayerStep]:
    """Router, the shared experts (a dense MLP), dispatch, the local experts, combine
    and the combine's weighted sum (``(top_k + 1) a``).

    ``rows = tokens * top_k`` routed rows per chip on average; the busiest chip gets
    ``1 + routing_skew`` times the mean (see :func:`expert_rows`), and an SPMD step
    runs at its pace. Dropless with ``sparse_matmul`` (megablox, MaxText's default):
    the tokens sorted by expert (``moe.permute``: reads the ``tokens``, writes the
    ``rows``, of ``d_model`` each) and, behind an expert axis, sorted again by local
    expert after the dispatch all-to-all (``moe.local_permute``, read + write of the
    chip's rows); the experts as grouped matmuls of the chip's rows at
    :func:`grouped_matmul_efficiency`; the mirror ``unpermute`` ops after. With
    ``capacity_factor`` ``cf > 0`` an expert keeps at most ``cf`` times its mean rows
    (the rest dropped): sparse, the chip computes ``min(1 + skew, cf)`` x rows;
    dense dispatch (``sparse_matmul: false``, MaxText's einsum dispatch) pads every
    expert to its capacity: ``cf`` x rows through the experts and the all-to-alls and a
    dispatch and a combine einsum (one-hot masks over each sequence's tokens,
    ``seqs x (cf seq top_k) x seq x d_model``, not model FLOPs)."""
    rows, b = s.rows, s.bytes_per_element
    busy = expert_rows(s)
    moved = busy * s.d_model * b
    shared = mlp_steps(s, "moe.shared", s.tokens, s.shared_d_ff) if s.shared_d_ff else []
    experts = mlp_steps(s, "moe", busy, s.d_ff)
    useful, eff = rows / busy, grouped_matmul_efficiency(s) if s.sparse_matmul else 1.0
    experts = [_scaled(st, useful, eff, s.sparse_matmul, dropless_rows(s)) for st in experts]
    before, after = _dispatch_ops(s, busy)
    return [
        LayerStep("moe.router", "matmul", m=s.tokens, k=s.d_model, n=s.experts),
        *shared,
        *before[:1],
        *collective_step("moe.dispatch", "all-to-all", moved, s.expert, "both", "experts"),
        *before[1:],
        *experts,
        *after[:-1],
        *collective_step("moe.combine", "all-to-all", moved, s.expert, "both", "experts"),
        *after[-1:],
        LayerStep("moe.combine_sum", "elementwise", bytes=(s.top_k + 1) * s.act_bytes),
    ]


def expert_rows(s: LayerShape) -> int:
    """Rows the busiest chip's experts compute: ``rows (1 + routing_skew)``
    dropless, capped at ``capacity_factor * rows`` with a capacity, and exactly that
    with dense dispatch (padded to capacity). ``routing_skew`` is the busiest expert
    chip's routed rows over the mean, minus 1 (0: perfect balance)."""
    rows, cf = s.rows, s.capacity_factor
    if not s.sparse_matmul:
        return math.ceil(cf * rows)
    wanted = rows * (1.0 + s.routing_skew)
    return math.ceil(wanted if cf <= 0 else min(wanted, cf * rows))


def dropped_fraction(s: LayerShape) -> float:
    """Share of the busiest expert chip's routed rows dropped over capacity:
    ``max(0, 1 - cf / (1 + skew))``; 0 dropless."""
    if s.capacity_factor <= 0:
        return 0.0
    return max(0.0, 1.0 - s.capacity_factor / (1.0 + s.routing_skew))


def grouped_matmul_efficiency(s: LayerShape) -> float:
    """Useful over padded rows of the experts' grouped matmul on the busiest chip:
    each of its non-empty groups pads to :data:`GMM_TILE_ROWS`, half a tile on
    average (derived, assuming group sizes uniform modulo the tile):
    ``rows / (rows + min(E_local, rows) * GMM_TILE_ROWS / 2)``, with ``E_local =
    experts / expert-axis size`` taken as ``experts`` without an expert axis; at most
    ``rows`` groups hold a row, so a handful of rows (a tight capacity) pads a handful
    of tiles, not one per expert."""
    local = s.local_experts or s.experts
    busy = expert_rows(s)
    return busy / (busy + min(local, busy) * GMM_TILE_ROWS / 2)


def dropless_rows(s: LayerShape) -> int:
    """The busiest chip's rows without a capacity, when a capacity drops some (a
    grouped matmul is never charged more than for those: see
    :meth:`~tpusim.hardware.ChipCostModel.grouped_matmul`); 0 when none are dropped
    or the dispatch is dense."""
    wanted = math.ceil(s.rows * (1.0 + s.routing_skew))
    return wanted if s.sparse_matmul and expert_rows(s) < wanted else 0


def _scaled(step: LayerStep, useful: float, eff: float, grouped: bool, most: int) -> LayerStep:
    if step.kind != "matmul":
        return step
    return replace(step, useful=useful, efficiency=eff, grouped=grouped, dropless_rows=most)


def _dispatch_ops(s: LayerShape, busy: int) -> tuple[list[LayerStep], list[LayerStep]]:
    """What sorts the rows before the experts (the first one before the dispatch
    all-to-all) and after them (the last one after the combine): see :func:`moe_steps`."""
    d, b = s.d_model, s.bytes_per_element
    if not s.sparse_matmul:
        rows = math.ceil(s.capacity_factor * s.seq * s.top_k)
        return (
            [LayerStep("moe.dispatch_einsum", "matmul", s.seqs, rows, s.seq, d, useful=0.0)],
            [LayerStep("moe.combine_einsum", "matmul", s.seqs, rows, s.seq, d, useful=0.0)],
        )
    permute = LayerStep(
        "moe.permute", "elementwise", bytes=(s.tokens + s.rows) * d * b, gather=True
    )
    unpermute = LayerStep("moe.unpermute", "elementwise", bytes=2 * s.rows * d * b, gather=True)
    if not s.expert:
        return [permute], [unpermute]
    local = 2 * busy * d * b
    return (
        [permute, LayerStep("moe.local_permute", "elementwise", bytes=local, gather=True)],
        [LayerStep("moe.local_unpermute", "elementwise", bytes=local, gather=True), unpermute],
    )
