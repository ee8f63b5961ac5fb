"""Per-layer op templates of the training step, and how a template becomes ops.

A template (:class:`LayerStep`) is one op of a layer's forward pass; the same list,
reversed, drives the backward pass. :func:`emit_step` turns one template into the
forward op or into its backward op(s): a matmul ``(batch, m, k, n)`` becomes a
gradient of its first operand ``(batch, m, n, k)`` (``.bwd_input``) then of its
second ``(batch, k, m, n)`` (``.bwd_weight``); an elementwise op moves
:data:`BACKWARD_ELEMENTWISE_FACTOR` times its forward bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tpusim.program.builders.oplist import OpList

Phase = Literal["fwd", "bwd"]
StepPhase = Literal["both", "fwd", "bwd"]

BACKWARD_ELEMENTWISE_FACTOR = 1.5
"""Backward bytes of an elementwise op over its forward bytes (3 passes against 2)."""


@dataclass(frozen=True)
class LayerShape:
    """Per-chip sizes of one transformer layer (tensor- and expert-local).

    ``seqs`` sequences of ``seq`` tokens (``tokens`` in all), ``heads`` local heads of
    ``head_dim``, ``d_ff`` local MLP width, ``rows`` MLP rows (``tokens * top_k`` for
    MoE), ``bytes_per_element`` of the dtype; ``tensor`` and ``expert`` are the axes of
    the tensor-parallel all-reduces and the MoE all-to-alls (empty: left out).
    """

    seqs: int
    seq: int
    d_model: int
    heads: int
    head_dim: int
    d_ff: int
    experts: int
    top_k: int
    bytes_per_element: float
    tensor: tuple[str, ...]
    expert: tuple[str, ...]

    @property
    def tokens(self) -> int:
        return self.seqs * self.seq

    @property
    def rows(self) -> int:
        return self.tokens * self.top_k if self.experts else self.tokens

    @property
    def act_bytes(self) -> float:
        """Bytes of one activation, ``tokens * d_model`` elements."""
        return self.tokens * self.d_model * self.bytes_per_element


@dataclass(frozen=True)
class LayerStep:
    """One forward op of a layer; ``phase`` says in which pass it appears."""

    name: str
    kind: Literal["matmul", "elementwise", "collective"]
    batch: int = 1
    m: int = 0
    k: int = 0
    n: int = 0
    bytes: float = 0.0
    collective: str = ""
    axes: tuple[str, ...] = ()
    phase: StepPhase = "both"


def layer_steps(s: LayerShape) -> list[LayerStep]:
    """The forward templates of one layer: attention then the dense MLP or MoE."""
    mlp = moe_steps(s) if s.experts else dense_mlp_steps(s)
    return [
        *attention_steps(s),
        LayerStep("mlp.norm", "elementwise", bytes=2 * s.act_bytes),
        *collective_step("mlp.tp_allreduce", "all-reduce", s.act_bytes, s.tensor, "bwd"),
        *mlp,
        *collective_step("mlp.tp_allreduce", "all-reduce", s.act_bytes, s.tensor, "fwd"),
        LayerStep("mlp.residual", "elementwise", bytes=3 * s.act_bytes),
    ]


def attention_steps(s: LayerShape) -> list[LayerStep]:
    """Norm, QKV, scores, softmax, context, output projection, residual; the
    tensor-parallel all-reduce after the block (forward) and at its input (backward)."""
    act, b, h = s.act_bytes, s.bytes_per_element, s.heads
    return [
        LayerStep("attn.norm", "elementwise", bytes=2 * act),
        *collective_step("attn.tp_allreduce", "all-reduce", act, s.tensor, "bwd"),
        LayerStep("attn.qkv", "matmul", m=s.tokens, k=s.d_model, n=3 * h * s.head_dim),
        LayerStep("attn.scores", "matmul", batch=s.seqs * h, m=s.seq, k=s.head_dim, n=s.seq),
        LayerStep("attn.softmax", "elementwise", bytes=2 * s.seqs * h * s.seq * s.seq * b),
        LayerStep("attn.context", "matmul", batch=s.seqs * h, m=s.seq, k=s.seq, n=s.head_dim),
        LayerStep("attn.out", "matmul", m=s.tokens, k=h * s.head_dim, n=s.d_model),
        *collective_step("attn.tp_allreduce", "all-reduce", act, s.tensor, "fwd"),
        LayerStep("attn.residual", "elementwise", bytes=3 * act),
    ]


def dense_mlp_steps(s: LayerShape) -> list[LayerStep]:
    """Up projection, activation, down projection."""
    return [
        LayerStep("mlp.up", "matmul", m=s.tokens, k=s.d_model, n=s.d_ff),
        LayerStep("mlp.act", "elementwise", bytes=2 * s.tokens * s.d_ff * s.bytes_per_element),
        LayerStep("mlp.down", "matmul", m=s.tokens, k=s.d_ff, n=s.d_model),
    ]


def moe_steps(s: LayerShape) -> list[LayerStep]:
    """Router, dispatch all-to-all, the local experts as one grouped matmul each way,
    combine all-to-all and the combine's weighted sum."""
    rows, b = s.rows, s.bytes_per_element
    moved = rows * s.d_model * b
    return [
        LayerStep("moe.router", "matmul", m=s.tokens, k=s.d_model, n=s.experts),
        *collective_step("moe.dispatch", "all-to-all", moved, s.expert, "both"),
        LayerStep("moe.up", "matmul", m=rows, k=s.d_model, n=s.d_ff),
        LayerStep("moe.act", "elementwise", bytes=2 * rows * s.d_ff * b),
        LayerStep("moe.down", "matmul", m=rows, k=s.d_ff, n=s.d_model),
        *collective_step("moe.combine", "all-to-all", moved, s.expert, "both"),
        LayerStep("moe.combine_sum", "elementwise", bytes=(s.top_k + 1) * s.act_bytes),
    ]


def collective_step(
    name: str, op: str, size_bytes: float, axes: tuple[str, ...], phase: StepPhase
) -> list[LayerStep]:
    """A synchronous collective template, or none when its group is one chip."""
    if not axes:
        return []
    return [LayerStep(name, "collective", bytes=size_bytes, collective=op, axes=axes, phase=phase)]


def emit_step(
    out: OpList, step: LayerStep, prefix: str, phase: Phase, after: list[str | None], dtype: str
) -> str:
    """Add ``step``'s op(s) for ``phase`` under ``prefix``; return the last op's name."""
    name = f"{prefix}.{step.name}.{phase}"
    if step.kind == "collective":
        return out.add(
            name,
            "collective",
            after,
            collective=step.collective,
            size_bytes=step.bytes,
            axes=step.axes,
        )
    if step.kind == "elementwise":
        scale = 1.0 if phase == "fwd" else BACKWARD_ELEMENTWISE_FACTOR
        return out.add(name, "elementwise", after, bytes=step.bytes * scale)
    if phase == "fwd":
        return out.add(name, "matmul", after, m=step.m, k=step.k, n=step.n, **_shape(step, dtype))
    return _matmul_backward(out, step, prefix, after, dtype)


def _matmul_backward(
    out: OpList, step: LayerStep, prefix: str, after: list[str | None], dtype: str
) -> str:
    """The input gradient then the weight gradient of a forward matmul."""
    shape = _shape(step, dtype)
    grad_in = out.add(
        f"{prefix}.{step.name}.bwd_input", "matmul", after, m=step.m, k=step.n, n=step.k, **shape
    )
    return out.add(
        f"{prefix}.{step.name}.bwd_weight",
        "matmul",
        [grad_in],
        m=step.k,
        k=step.m,
        n=step.n,
        **shape,
    )


def _shape(step: LayerStep, dtype: str) -> dict[str, int | str]:
    return {"batch": step.batch, "dtype": dtype}
