"""MaxText's ICI and DCN meshes of a published workload case, by tpusim role axis:
the mesh part of the translation (:mod:`.workloads_translate`), apart so that the case
spec (:mod:`.workloads`) can check its mesh without importing the translation."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Protocol

from tpusim.program.builders.roles import FSDP
from tpusim.validation.maxtext_flags import DCN_REST_AXIS, MESH_FLAGS


class MeshedCase(Protocol):
    """What the meshes read of a case (a ``WorkloadCaseSpec``)."""

    @property
    def layout(self) -> Mapping[str, Any]: ...
    @property
    def devices(self) -> int: ...
    @property
    def devices_per_chip(self) -> int: ...
    @property
    def num_slices(self) -> int: ...


def device_mesh(spec: MeshedCase) -> dict[str, int]:
    """MaxText's ICI mesh over one slice's devices, by tpusim role axis (fsdp and
    fsdp_transpose multiplied): ``-1`` takes the devices the other axes leave.

    Raises ValueError when the axes do not divide the slice's devices."""
    sizes: dict[str, int] = {}
    rest_axis = None
    for axis, role in MESH_FLAGS.items():
        value = spec.layout.get(f"ici_{axis}_parallelism", 1)
        if value == -1:
            if rest_axis is not None:
                raise ValueError("more than one ici_*_parallelism is -1")
            rest_axis = role
            value = 1
        sizes[role] = sizes.get(role, 1) * value
    fixed = math.prod(sizes.values())
    if spec.devices % fixed:
        raise ValueError(f"the ici axes ({fixed} devices) do not divide {spec.devices} devices")
    if rest_axis is None and fixed != spec.devices:
        raise ValueError(f"the ici axes hold {fixed} devices, the slice {spec.devices}")
    if rest_axis is not None:
        sizes[rest_axis] *= spec.devices // fixed
    return sizes


def chip_mesh(spec: MeshedCase) -> dict[str, int]:
    """:func:`device_mesh` in chips: a chip's ``devices_per_chip`` devices (its
    TensorCores) are one tpusim chip, taken out of the ``-1`` axis (else the first
    role axis they divide). Axes of one chip are left out; an all-one mesh keeps
    ``fsdp: 1``. Raises ValueError when no axis divides by the devices per chip."""
    sizes = device_mesh(spec)
    per_chip = spec.devices_per_chip
    if per_chip > 1:
        rest = next(
            (MESH_FLAGS[a] for a in MESH_FLAGS if spec.layout.get(f"ici_{a}_parallelism") == -1),
            None,
        )
        order = [rest] if rest else []
        order += [r for r in dict.fromkeys(MESH_FLAGS.values()) if r != rest]
        axis = next((r for r in order if sizes[r] % per_chip == 0), None)
        if axis is None:
            raise ValueError(f"no mesh axis divides by {per_chip} devices per chip")
        sizes[axis] //= per_chip
    mesh = {role: size for role, size in sizes.items() if size > 1}
    return mesh or {FSDP.name: 1}


def dcn_mesh(spec: MeshedCase) -> dict[str, int]:
    """MaxText's DCN mesh over the slices, by tpusim role axis (``-1`` takes the slices
    the other axes leave; MaxText's default ``dcn_data_parallelism: -1``). Raises
    ValueError when the axes do not multiply out to the slices."""
    sizes: dict[str, int] = {}
    rest = None
    for axis, role in MESH_FLAGS.items():
        rest_by_default = axis == DCN_REST_AXIS
        value = spec.layout.get(f"dcn_{axis}_parallelism", -1 if rest_by_default else 1)
        others = (a for a in MESH_FLAGS if a != DCN_REST_AXIS)
        if (
            value == -1
            and rest_by_default
            and any(spec.layout.get(f"dcn_{a}_parallelism") == -1 for a in others)
        ):
            value = 1
        if value == -1:
            if rest is not None:
                raise ValueError("more than one dcn_*_parallelism is -1")
            rest, value = role, 1
        sizes[role] = sizes.get(role, 1) * value
    fixed = math.prod(sizes.values())
    if spec.num_slices % fixed or (rest is None and fixed != spec.num_slices):
        raise ValueError(f"the dcn axes ({fixed} slices) do not hold {spec.num_slices} slices")
    if rest is not None:
        sizes[rest] *= spec.num_slices // fixed
    return {role: size for role, size in sizes.items() if size > 1}


def slices_mesh(spec: MeshedCase) -> dict[str, int]:
    """The whole run's mesh in chips: the DCN axes first (they take the slices, the
    outermost physical axis), then the ICI ones; a role on both (FSDP over DCN) is one
    axis spanning the slices and its ICI part. Raises ValueError as the two parts do."""
    ici = chip_mesh(spec)
    if spec.num_slices == 1:
        return ici
    dcn = dcn_mesh(spec)
    mesh = {role: size * ici.pop(role, 1) for role, size in dcn.items()}
    return {**mesh, **{r: n for r, n in ici.items() if n > 1 or not mesh}}
