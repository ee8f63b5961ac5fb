"""HLO array and tuple shapes (``f32[128,256]{1,0}``, ``(f32[2], bf16[4,4])``) and their bytes."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from tpusim.program.hlo.syntax import split_top

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
#: An element type this table does not list is taken as 4 bytes (the f32/s32 width).
UNKNOWN_DTYPE_BYTES = 4

_ARRAY_RE = re.compile(r"^([a-z][a-z0-9]*)\[([^\]]*)\](\{[^{}]*\})?$")


def dtype_bytes(dtype: str) -> float:
    """Bytes per element of ``dtype``: the table, f8* as 1, f6*/f4* as 0.5, others 4."""
    if dtype in DTYPE_BYTES:
        return DTYPE_BYTES[dtype]
    if dtype.startswith(("f8", "f6", "f4")):
        return 1 if dtype.startswith("f8") else 0.5
    return UNKNOWN_DTYPE_BYTES


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

    The layout (``{1,0:T(8,128)}``) is read past and dropped. Raises ValueError.
    """
    text = text.strip()
    if text.startswith("("):
        inner = text[1 : text.rindex(")")]
        elems = tuple(parse_shape(p) for p in split_top(inner) if p.strip())
        return Shape("tuple", (), elems)
    m = _ARRAY_RE.match(text)
    if not m:
        if re.fullmatch(r"[a-z][a-z0-9]*", text):  # e.g. "token" without brackets
            return Shape(text, ())
        raise ValueError(f"bad shape '{text}'")
    dims = tuple(int(d.replace("<=", "").strip()) for d in m.group(2).split(",") if d.strip())
    return Shape(m.group(1), dims)
