"""Mesh axes as the builders use them: roles, sizes of named axes and collective groups.

A training step's mesh axes play roles: ``data``, ``fsdp``, ``tensor``, ``expert``,
``pipeline`` and ``context``. A mesh axis named after a role plays it (``mesh:
{data: 72, pipeline: 16, tensor: 8}``); the ``*_axis`` fields name another axis for a
role and override.
"""

from __future__ import annotations

from collections.abc import Iterable

from tpusim.program.ir import ProgramError

ROLES = ("data", "fsdp", "tensor", "expert", "pipeline", "context")
"""Mesh axis roles, each with its ``<role>_axis`` field."""


def role_axes(mesh: dict[str, int], axes: dict[str, str | None]) -> dict[str, str | None]:
    """``axes`` (``<role>_axis`` -> axis name or None) with every unset role taken by
    the mesh axis of the role's name, when the mesh has one and no other role names it.
    A ``data_axis`` of ``data`` (the default) on a mesh without that axis is unset."""
    out = dict(axes)
    if out.get("data_axis") == "data" and "data" not in mesh:
        out["data_axis"] = None
    named = {a for a in out.values() if a is not None}
    for role in ROLES:
        field = f"{role}_axis"
        if out.get(field) is None and role in mesh and role not in named:
            out[field] = role
    return out


def axis_size(mesh: dict[str, int], field_name: str, axis: str | None) -> int:
    """Size of ``axis`` in ``mesh`` (1 for ``None``).

    Raises :class:`ProgramError` naming ``field_name`` if the mesh has no such axis.
    """
    if axis is None:
        return 1
    if axis not in mesh:
        raise ProgramError(
            f"{field_name} '{axis}' is not an axis of the mesh (axes: {', '.join(mesh)})"
        )
    return mesh[axis]


def collective_axes(mesh: dict[str, int], axes: Iterable[str | None]) -> tuple[str, ...]:
    """Distinct named axes of more than one chip, in the order given: the axes a
    collective spans (empty when it would be a one-chip group, which is left out)."""
    return tuple(a for a in dict.fromkeys(axes) if a is not None and mesh[a] > 1)


def batch_axes(*axes: str | None) -> tuple[str, ...]:
    """The distinct named axes among ``axes`` (the data, fsdp and expert axes, which
    all shard the batch), in the order given."""
    return tuple(dict.fromkeys(a for a in axes if a))
