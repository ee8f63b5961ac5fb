"""Mesh axes as the builders use them: roles, sizes of named axes and collective groups.

A training step's mesh axes play the roles of :data:`~.roles.ROLES` (``data``,
``fsdp``, ``tensor``, ``expert``, ``pipeline``, ``context`` and any registered
since). A mesh axis named after a role plays it (``mesh: {data: 72, pipeline: 16,
tensor: 8}``); the ``*_axis`` fields name another axis for a role and override.
"""

from __future__ import annotations

from collections.abc import Iterable

from tpusim.program.builders.roles import ROLES, Shard, roles_that
from tpusim.program.ir import ProgramError


def role_axes(mesh: dict[str, int], axes: dict[str, str | None]) -> dict[str, str | None]:
    """``axes`` (``<role>_axis`` -> axis name or None, for some of the registered
    roles) with every registered role's field: an unset one takes the role's
    ``default_axis`` when the mesh has it, else the mesh axis of the role's name when
    the mesh has one and no other role names it. A ``default_axis`` the mesh lacks
    (``data_axis: data`` on a mesh without that axis) is unset."""
    out = {role.field: axes.get(role.field, role.default_axis) for _, role in ROLES.items()}
    out |= dict(axes)
    for _, role in ROLES.items():
        default = role.default_axis
        if default is not None and out[role.field] == default and default not in mesh:
            out[role.field] = None
    named = {a for a in out.values() if a is not None}
    for name, role in ROLES.items():
        if out.get(role.field) is None and name in mesh and name not in named:
            out[role.field] = name
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
    """The distinct named axes among ``axes``, in the order given."""
    return tuple(dict.fromkeys(a for a in axes if a))


def sharding_axes(axes: dict[str, str | None], shard: Shard) -> tuple[str, ...]:
    """The distinct named axes of the roles that shard ``shard`` (``axes``:
    ``<role>_axis`` -> axis name or None, as :func:`role_axes` gives), in role order."""
    return batch_axes(*(axes.get(role.field) for role in roles_that(shard)))
