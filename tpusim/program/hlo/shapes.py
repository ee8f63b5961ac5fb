"""HLO array and tuple shapes (``f32[128,256]{1,0}``, ``(f32[2], bf16[4,4])``) and their bytes."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from tpusim.program.hlo.syntax import nesting_depth, split_top

#: Bytes per element of each HLO element type (sub-byte types as fractions of a byte).
DTYPE_BYTES: dict[str, float] = {
    "pred": 1,
    "s2": 0.25,
    "u2": 0.25,
    "s4": 0.5,
    "u4": 0.5,
    "s8": 1,
    "u8": 1,
    "s16": 2,
    "u16": 2,
    "s32": 4,
    "u32": 4,
    "s64": 8,
    "u64": 8,
    "f16": 2,
    "bf16": 2,
    "f32": 4,
    "f64": 8,
    "c64": 8,
    "c128": 16,
    "token": 0,
    "opaque": 0,
}
#: Sub-byte integer types of newer XLA (``s1``, ``u1``): an eighth of a byte.
DTYPE_BYTES.update({"s1": 0.125, "u1": 0.125})
#: XLA's small float families by their width prefix (``f8e4m3fn``, ``f6e2m3fn``,
#: ``f4e2m1fn``, ...), bytes per element: f8 one byte (published, XLA
#: ``primitive_util``); f6 taken as f4, half a byte (assumption: its packing on TPU
#: is not published).
FLOAT_FAMILY_BYTES: dict[str, float] = {"f8": 1, "f6": 0.5, "f4": 0.5}
#: Largest array, bytes (2**63 - 1): XLA's ``ShapeUtil::ValidateShape`` refuses a shape
#: whose byte size does not fit in int64 (published, XLA ``shape_util.cc``).
MAX_ARRAY_BYTES = 2**63 - 1
#: Deepest tuple nesting read, levels (assumption: compiled modules nest tuples a few
#: levels deep, loop state of nested pytrees included; past this the text is not XLA's
#: and reading it would only exhaust the stack).
MAX_TUPLE_DEPTH = 64

_ARRAY_RE = re.compile(r"^([a-z][a-z0-9]*)\[([^\]]*)\](\{[^{}]*\})?$")


def dtype_bytes(dtype: str) -> float:
    """Bytes per element of ``dtype`` (:data:`DTYPE_BYTES`, :data:`FLOAT_FAMILY_BYTES`).

    Raises ValueError naming an element type XLA does not print: its width, and so
    every byte count of the module, would be a guess.
    """
    if dtype in DTYPE_BYTES:
        return DTYPE_BYTES[dtype]
    if re.fullmatch(r"f[864]e\d+m\d+[a-z]*", dtype):
        return FLOAT_FAMILY_BYTES[dtype[:2]]
    raise ValueError(f"unknown element type '{dtype}' (its size in bytes is not known)")


@dataclass(frozen=True)
class Shape:
    """An array shape ``dtype[dims]`` or a tuple of shapes (``dtype == "tuple"``)."""

    dtype: str
    dims: tuple[int, ...] = ()
    elements: tuple[Shape, ...] = ()

    @property
    def is_tuple(self) -> bool:
        return self.dtype == "tuple"

    @property
    def num_elements(self) -> int:
        return math.prod(self.dims)

    @property
    def bytes(self) -> float:
        """Bytes of the array, or the sum over a tuple's elements (layouts ignored)."""
        if self.is_tuple:
            return sum(e.bytes for e in self.elements)
        return self.num_elements * dtype_bytes(self.dtype)

    def leaves(self) -> list[Shape]:
        """The array shapes of a (nested) tuple, in order; ``[self]`` for an array."""
        return [x for e in self.elements for x in e.leaves()] if self.is_tuple else [self]


def parse_shape(text: str) -> Shape:
    """``f32[128,256]{1,0}``, ``(f32[2], bf16[4,4])``, ``s32[]``, ``token[]``.

    The layout (``{1,0:T(8,128)}``) is read past and dropped. Raises ValueError on a
    malformed shape, an unknown element type, a negative dimension, an array over
    :data:`MAX_ARRAY_BYTES` or tuples nested over :data:`MAX_TUPLE_DEPTH` deep.
    """
    text = text.strip()
    depth = nesting_depth(text, "(", ")")
    if depth > MAX_TUPLE_DEPTH:
        raise ValueError(f"tuple shape nested {depth} deep (limit {MAX_TUPLE_DEPTH})")
    return _parse(text)


def _parse(text: str) -> Shape:
    if text.startswith("("):
        if not text.endswith(")"):
            raise ValueError(f"bad tuple shape '{text[:40]}'")
        elems = tuple(_parse(p.strip()) for p in split_top(text[1:-1]) if p.strip())
        return Shape("tuple", (), elems)
    m = _ARRAY_RE.match(text)
    if not m:
        if re.fullmatch(r"[a-z][a-z0-9]*", text):  # e.g. "token" without brackets
            return _array(text, ())
        raise ValueError(f"bad shape '{text[:40]}'")
    try:
        dims = tuple(int(d.replace("<=", "").strip()) for d in m.group(2).split(",") if d.strip())
    except ValueError:
        raise ValueError(f"bad dimensions in shape '{text[:40]}'") from None
    return _array(m.group(1), dims)


def _array(dtype: str, dims: tuple[int, ...]) -> Shape:
    """The array shape, checked: known element type, dimensions >= 0, bytes in int64."""
    width = dtype_bytes(dtype)
    if any(d < 0 for d in dims):
        raise ValueError(f"negative dimension in {dtype}{list(dims)}")
    if math.prod(dims) * width > MAX_ARRAY_BYTES:
        raise ValueError(f"{dtype}{list(dims)} holds over 2**63-1 bytes (XLA's limit)")
    return Shape(dtype, dims)
