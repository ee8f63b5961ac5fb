"""FLOPs of an HLO ``convolution``, padding counted as XLA's ``HloCostAnalysis`` does.

XLA's TPU backend writes many batched matmuls as convolutions whose batch runs along a
padded spatial window (``window={size=2 pad=1_1 rhs_reversal=1}``): half of such a
window's positions fall on padding and do no work. So, with ``dim_labels`` naming the
axes (``bf0_0oi->b0f``: ``b`` batch, ``f``/``i``/``o`` features, digits spatial):

    FLOPs = 2 x (output elements / output spatial positions) x input features per group
              x prod over spatial axes of the (output position, kernel position) pairs
                that land on a real input element

(strides, padding, input and kernel dilation from ``window``). Without ``dim_labels``
the estimate of :func:`approximate_flops` stands.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from tpusim.program.hlo.parse import Instruction
from tpusim.program.hlo.shapes import Shape
from tpusim.program.hlo.syntax import int_list

_LABELS_RE = re.compile(r"([^_]+)_([^-]+)->(.+)")
#: Most (output, kernel) position pairs counted one by one per spatial axis; past it
#: padding is ignored (assumption: TPU modules' windows are a few positions).
MAX_PAIRS = 1_000_000


@dataclass(frozen=True)
class Window:
    """A convolution's window per spatial axis: ``pad_lo`` positions of padding before
    the input, ``stride``, input (``lhs``) and kernel (``rhs``) dilation."""

    pad_lo: tuple[int, ...]
    stride: tuple[int, ...]
    lhs: tuple[int, ...]
    rhs: tuple[int, ...]


def window(ins: Instruction, axes: int) -> Window:
    """The ``window={size=.. stride=.. pad=lo_hi lhs_dilate=.. rhs_dilate=..}`` of
    ``ins`` (each value ``x``-separated per axis; defaults: no padding, 1)."""
    text = ins.attrs.get("window", "").strip("{}")
    fields = dict(part.split("=", 1) for part in text.split() if "=" in part)

    def per_axis(key: str) -> tuple[int, ...]:
        return tuple(int(v) for v in fields[key].split("x")) if key in fields else (1,) * axes

    pads = [int_list(p) for p in fields["pad"].split("x")] if "pad" in fields else []
    pad_lo = tuple(p[0] if p else 0 for p in pads) if pads else (0,) * axes
    return Window(pad_lo, per_axis("stride"), per_axis("lhs_dilate"), per_axis("rhs_dilate"))


def _valid_pairs(
    n_in: int, n_out: int, k: int, stride: int, pad_lo: int, lhs: int, rhs: int
) -> int:
    """(output, kernel) position pairs of one axis that read a real input element."""
    if n_out * k > MAX_PAIRS:
        return n_out * k
    count = 0
    for o in range(n_out):
        for j in range(k):
            at = o * stride + j * rhs - pad_lo
            count += at >= 0 and at % lhs == 0 and at // lhs < n_in
    return count


def convolution_flops(ins: Instruction, lhs: Shape | None, rhs: Shape | None) -> float | None:
    """FLOPs of ``ins`` (see the module doc); None when the labels or shapes do not fit."""
    found = _LABELS_RE.fullmatch(ins.attrs.get("dim_labels", ""))
    if found is None or lhs is None or rhs is None:
        return None
    lhs_l, rhs_l, out_l = found.groups()
    out = ins.shape
    if (len(lhs_l), len(rhs_l), len(out_l)) != (len(lhs.dims), len(rhs.dims), len(out.dims)):
        return None
    spatial = sorted(c for c in lhs_l if c.isdigit())
    if "i" not in rhs_l or any(d not in rhs_l or d not in out_l for d in spatial):
        return None
    win = window(ins, len(spatial))
    if min(len(win.pad_lo), len(win.stride), len(win.lhs), len(win.rhs)) < len(spatial):
        return None
    pairs, positions = 1, 1
    for a, d in enumerate(spatial):
        n_in, k = lhs.dims[lhs_l.index(d)], rhs.dims[rhs_l.index(d)]
        n_out = out.dims[out_l.index(d)]
        pairs *= _valid_pairs(n_in, n_out, k, win.stride[a], win.pad_lo[a], win.lhs[a], win.rhs[a])
        positions *= n_out
    if positions == 0:
        return 0.0
    return 2.0 * out.num_elements / positions * rhs.dims[rhs_l.index("i")] * pairs


def approximate_flops(out: Shape, kernel: Shape | None, kernel_out: int) -> float:
    """2 x output elements x kernel elements / kernel output features (padding, strides
    and dilation taken as already in the output shape)."""
    if kernel is None or not kernel.dims:
        return 2.0 * out.num_elements
    return 2.0 * out.num_elements * math.prod(kernel.dims) / kernel_out
