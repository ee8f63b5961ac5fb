"""A layer's op template (:class:`LayerStep`), and how a template becomes ops.

A template is one op of a layer's forward pass; the same list, reversed, drives the
backward pass. :func:`emit_step` turns one template into the forward op or into its
backward op(s): a matmul ``(batch, m, k, n)`` becomes a gradient of its first operand
``(batch, m, n, k)`` (``.bwd_input``) then of its second ``(batch, k, m, n)``
(``.bwd_weight``); an elementwise op moves :data:`BACKWARD_ELEMENTWISE_FACTOR` times
its forward bytes; a fused kernel (flash attention) becomes its backward kernel
(``.bwd``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tpusim.hardware.efficiency import EIGHT_BIT
from tpusim.program.builders.attention import KernelWork
from tpusim.program.builders.oplist import OpList
from tpusim.program.builders.roles import Shard

Phase = Literal["fwd", "bwd"]
StepPhase = Literal["both", "fwd", "bwd"]

BACKWARD_ELEMENTWISE_FACTOR = 1.5
"""Backward bytes of an elementwise op over its forward bytes (3 passes against 2)."""


@dataclass(frozen=True)
class LayerStep:
    """One forward op of a layer; ``phase`` says in which pass it appears; a matmul's
    ``useful`` share of its FLOPs counts as model FLOPs (padding, dispatch einsums
    do not) and ``efficiency`` divides its compute time (a grouped matmul's); a
    collective's ``shard`` is what its group's axes shard (the mechanism that issues
    it: ``matrices`` for a tensor all-reduce) and ``role`` the role that issues it
    (set by :meth:`~.training.TrainingStep.issued` from the step's role axes)."""

    name: str
    kind: Literal["matmul", "elementwise", "collective", "embedding", "kernel"]
    batch: int = 1
    m: int = 0
    k: int = 0
    n: int = 0
    bytes: float = 0.0
    collective: str = ""
    axes: tuple[str, ...] = ()
    phase: StepPhase = "both"
    useful: float = 1.0
    efficiency: float = 1.0
    grouped: bool = False
    dropless_rows: int = 0
    gather: bool = False
    work: KernelWork | None = None
    work_bwd: KernelWork | None = None
    shard: Shard | None = None
    role: str = ""

    @property
    def forward_flops(self) -> float:
        """Useful FLOPs of the forward op (0 for ops without MXU work)."""
        if self.kind == "kernel":
            return self.work.flops if self.work else 0.0
        return 2.0 * self.batch * self.m * self.k * self.n if self.kind == "matmul" else 0.0


def collective_step(
    name: str,
    op: str,
    size_bytes: float,
    axes: tuple[str, ...],
    phase: StepPhase,
    shard: Shard,
) -> list[LayerStep]:
    """A synchronous collective template over ``axes``, which shard ``shard``, or
    none when its group is one chip."""
    if not axes:
        return []
    return [
        LayerStep(
            name, "collective", bytes=size_bytes, collective=op, axes=axes, phase=phase, shard=shard
        )
    ]


def emit_step(
    out: OpList, step: LayerStep, prefix: str, phase: Phase, after: list[str | None], dtype: str
) -> str:
    """Add ``step``'s op(s) for ``phase`` under ``prefix``; return the last op's name.

    An embedding template (``m`` rows of ``bytes`` each) is a lookup forward and a
    scatter-add of the same bytes (an elementwise op) backward."""
    name = f"{prefix}.{step.name}.{phase}"
    if step.kind == "collective":
        return out.add(
            name,
            "collective",
            after,
            collective=step.collective,
            size_bytes=step.bytes,
            axes=step.axes,
            role=step.role,
        )
    if step.kind == "embedding":
        if phase == "fwd":
            return out.add(name, "embedding", after, rows=step.m, row_bytes=step.bytes)
        return out.add(name, "elementwise", after, bytes=step.m * step.bytes * 2)
    if step.kind == "kernel":
        work = step.work if phase == "fwd" else step.work_bwd
        assert work is not None
        kernel_dtype = "bf16" if dtype in EIGHT_BIT else dtype  # attention is not quantized
        return out.add(name, "kernel", after, dtype=kernel_dtype, **work.op_fields())
    if step.kind == "elementwise":
        scale = 1.0 if phase == "fwd" else BACKWARD_ELEMENTWISE_FACTOR
        # a layer's fusions (norms, activations, residuals) do vector work per element
        extra = {"gather": True} if step.gather else {"vector": True}
        return out.add(name, "elementwise", after, bytes=step.bytes * scale, **extra)
    if phase == "fwd":
        return out.add(
            name, "matmul", after, m=step.m, k=step.k, n=step.n, **step_shape(step, dtype)
        )
    return _matmul_backward(out, step, prefix, after, dtype)


def _matmul_backward(
    out: OpList, step: LayerStep, prefix: str, after: list[str | None], dtype: str
) -> str:
    """The input gradient then the weight gradient of a forward matmul."""
    shape = step_shape(step, dtype)
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
        **_rows_in_k(shape),
    )


def step_shape(step: LayerStep, dtype: str) -> dict[str, int | str | float | bool]:
    """The matmul op fields of ``step`` besides its sizes: batch, dtype, efficiency,
    whether it is grouped."""
    shape: dict[str, int | str | float | bool] = {"batch": step.batch, "dtype": dtype}
    if step.efficiency != 1.0:
        shape["efficiency"] = step.efficiency
    if step.grouped:
        shape["grouped"] = True
    if step.dropless_rows:
        shape["dropless_rows"] = step.dropless_rows
    return shape


def _rows_in_k(shape: dict[str, int | str | float | bool]) -> dict[str, int | str | float | bool]:
    """A weight gradient's fields: a grouped matmul's rows are its contraction."""
    if not shape.get("grouped"):
        return shape
    return {**{k: v for k, v in shape.items() if k != "grouped"}, "grouped_k": True}
