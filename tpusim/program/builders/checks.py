"""Argument checks of the builders' Python API, one function per builder.

The scenario schema (pydantic) already checks the same fields when a builder runs
from YAML; these checks exist for callers of the Python API (tests, notebooks), and
for the rules the schema cannot see: axes that must exist in the mesh, be distinct
and cover it, and sizes that must divide. Each raises :class:`ProgramError` with a
one-line message that starts with the offending field.
"""

from __future__ import annotations

import math
from typing import Any

from tpusim.hardware.costs import DTYPE_BYTES
from tpusim.program.builders.mesh import axis_size, batch_axes
from tpusim.program.ir import ProgramError

AXIS_FIELDS = ("data_axis", "fsdp_axis", "tensor_axis", "expert_axis")
"""The training step's named mesh axes, in the order their sizes are looked up."""


def check_training(
    ints: dict[str, int],
    *,
    experts: int,
    top_k: int,
    dtype: str,
    mesh: Any,
    axes: dict[str, str | None],
) -> tuple[float, dict[str, int], dict[str, int]]:
    """Check :func:`~tpusim.program.builders.training_step`'s arguments.

    ``ints`` are the fields that must be positive integers (by name), ``axes`` maps
    each of :data:`AXIS_FIELDS` to its axis name or ``None``. Returns the dtype's
    bytes per element, the mesh as a dict and the size of each named axis field.
    Raises :class:`ProgramError` naming the first bad field.
    """
    positive_ints(**ints)
    if isinstance(experts, bool) or not isinstance(experts, int) or experts < 0:
        raise ProgramError(f"experts must be a non-negative integer, got {experts!r}")
    dtype_bytes = bytes_per_element(dtype)
    mesh = checked_mesh(mesh)
    sizes = {name: axis_size(mesh, name, axes[name]) for name in AXIS_FIELDS}
    if experts == 0 and axes["expert_axis"] is not None:
        raise ProgramError("expert_axis is set but experts is 0")
    _check_distinct(axes)
    _check_covered(mesh, axes)
    batch = batch_axes(axes["data_axis"], axes["fsdp_axis"], axes["expert_axis"])
    shards = math.prod(mesh[axis] for axis in batch)
    tensor = f"the tensor axis size of '{axes['tensor_axis']}'"
    divides("batch", ints["batch"], shards, "the product of the batch axes " + "x".join(batch))
    divides("heads", ints["heads"], sizes["tensor_axis"], tensor)
    divides("d_ff", ints["d_ff"], sizes["tensor_axis"], tensor)
    if experts:
        positive_ints(top_k=top_k)
        if top_k > experts:
            raise ProgramError(f"top_k ({top_k}) is larger than experts ({experts})")
        expert = f"the expert axis size of '{axes['expert_axis']}'"
        divides("experts", experts, sizes["expert_axis"], expert)
    return dtype_bytes, mesh, sizes


def check_decode(
    ints: dict[str, int], *, dtype: str, kv_cache: str, mesh: Any, tensor_axis: str | None
) -> tuple[float, dict[str, int], int]:
    """Check :func:`~tpusim.program.builders.decode_step`'s arguments.

    Returns the dtype's bytes per element, the mesh as a dict and the tensor axis
    size. Raises :class:`ProgramError` naming the first bad field.
    """
    positive_ints(**ints)
    dtype_bytes = bytes_per_element(dtype)
    if kv_cache not in ("hbm", "sram"):
        raise ProgramError(f"kv_cache must be 'hbm' or 'sram', got {kv_cache!r}")
    mesh = checked_mesh(mesh)
    tp = axis_size(mesh, "tensor_axis", tensor_axis)
    heads, kv = ints["heads"], ints["kv_heads"]
    tensor = f"the tensor axis size of '{tensor_axis}'"
    divides("heads", heads, kv, "kv_heads")
    divides("heads", heads, tp, tensor)
    divides("kv_heads", kv, tp, tensor)
    divides("d_ff", ints["d_ff"], tp, tensor)
    return dtype_bytes, mesh, tp


def positive_ints(**values: Any) -> None:
    """Raise :class:`ProgramError` for the first value that is not an int > 0."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ProgramError(f"{name} must be a positive integer, got {value!r}")


def bytes_per_element(dtype: str) -> float:
    """Bytes of one ``dtype`` element; :class:`ProgramError` for an unknown dtype."""
    if dtype not in DTYPE_BYTES:
        raise ProgramError(f"dtype '{dtype}' is unknown (choose from {', '.join(DTYPE_BYTES)})")
    return DTYPE_BYTES[dtype]  # type: ignore[index]


def checked_mesh(mesh: Any) -> dict[str, int]:
    """``mesh`` as a dict of non-empty axis names to positive sizes, or
    :class:`ProgramError` naming the bad axis."""
    if not isinstance(mesh, dict) or not mesh:
        raise ProgramError(f"mesh must be a non-empty dict of axis name -> size, got {mesh!r}")
    for axis, size in mesh.items():
        if not isinstance(axis, str) or not axis:
            raise ProgramError(f"mesh axis names must be non-empty strings, got {axis!r}")
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ProgramError(f"mesh axis '{axis}' size must be a positive integer, got {size!r}")
    return dict(mesh)


def divides(field_name: str, value: int, by: int, what: str) -> None:
    """Raise :class:`ProgramError` unless ``by`` divides ``value``."""
    if value % by:
        raise ProgramError(f"{field_name} ({value}) is not divisible by {what} ({by})")


def _check_distinct(axes: dict[str, str | None]) -> None:
    """Each named axis plays one role, except that the expert axis may be the data
    axis (experts sharded over the data-parallel replicas)."""
    for field in ("fsdp_axis", "tensor_axis", "expert_axis"):
        for other in ("data_axis", "fsdp_axis", "tensor_axis"):
            if field == other or axes[field] is None:
                continue
            if axes[field] == axes[other] and not (field == "expert_axis" and other == "data_axis"):
                raise ProgramError(f"{field} '{axes[field]}' is also {other}")


def _check_covered(mesh: dict[str, int], axes: dict[str, str | None]) -> None:
    """Every mesh axis of more than one chip is one of the named axes."""
    used = {axis for axis in axes.values() if axis is not None}
    for axis, size in mesh.items():
        if axis not in used and size > 1:
            raise ProgramError(
                f"mesh axis '{axis}' (size {size}) is not data_axis, fsdp_axis, tensor_axis "
                "or expert_axis"
            )
