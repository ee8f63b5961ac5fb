"""Translate one published workload case into ``training_step`` fields (MaxText flags
-> tpusim mesh roles and fields): :func:`translate` is the one place this happens. A
field the case needs that the current ``training_step`` lacks is listed in
:attr:`Translation.missing`, never approximated silently."""

from __future__ import annotations

import math
from dataclasses import dataclass

from tpusim.validation.maxtext_flags import MESH_FLAGS
from tpusim.validation.workloads import WorkloadCaseSpec


@dataclass(frozen=True)
class Translation:
    """A case as ``training_step`` fields: ``fields`` (with ``mesh`` in chips) and the
    CONTRACT-21 fields the case needs that the current ``training_step`` lacks."""

    fields: dict[str, object]
    missing: tuple[str, ...]


def device_mesh(spec: WorkloadCaseSpec) -> dict[str, int]:
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


def chip_mesh(spec: WorkloadCaseSpec) -> dict[str, int]:
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
    return mesh or {"fsdp": 1}


def dcn_mesh(spec: WorkloadCaseSpec) -> dict[str, int]:
    """MaxText's DCN mesh over the slices, by tpusim role axis (``-1`` takes the slices
    the other axes leave; MaxText's default ``dcn_data_parallelism: -1``). Raises
    ValueError when the axes do not multiply out to the slices."""
    sizes: dict[str, int] = {}
    rest = None
    for axis, role in MESH_FLAGS.items():
        value = spec.layout.get(f"dcn_{axis}_parallelism", -1 if axis == "data" else 1)
        if (
            value == -1
            and axis == "data"
            and any(
                spec.layout.get(f"dcn_{a}_parallelism") == -1 for a in MESH_FLAGS if a != "data"
            )
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


def slices_mesh(spec: WorkloadCaseSpec) -> dict[str, int]:
    """The whole run's mesh in chips: the DCN axes first (they take the slices, the
    outermost physical axis), then the ICI ones; a role on both (FSDP over DCN) is one
    axis spanning the slices and its ICI part. Raises ValueError as the two parts do."""
    ici = chip_mesh(spec)
    if spec.num_slices == 1:
        return ici
    dcn = dcn_mesh(spec)
    mesh = {role: size * ici.pop(role, 1) for role, size in dcn.items()}
    return {**mesh, **{r: n for r, n in ici.items() if n > 1 or not mesh}}


def translate(spec: WorkloadCaseSpec, available: set[str] | None = None) -> Translation:
    """``spec`` as ``training_step`` fields (see :data:`MESH_FLAGS`): the mesh in
    chips, the global batch in sequences, the dtype, remat, attention kernel and MoE
    flags; ``available`` is the set of ``training_step`` fields (default: the current
    :class:`~tpusim.workloads.training_step.TrainingWorkload`'s). Raises ValueError for
    a mesh the slice cannot hold."""
    if available is None:
        from tpusim.workloads.training_step import TrainingWorkload

        available = set(TrainingWorkload.model_fields)
    mesh = slices_mesh(spec)
    fields: dict[str, object] = {
        "model": spec.model,
        "seq": spec.seq,
        "batch": spec.global_batch,
        "dtype": spec.tpusim_dtype,
        "mesh": mesh,
    }
    wanted = {**_remat_fields(spec, available), **_flag_fields(spec)}
    missing = [name for name in wanted if name not in available]
    if "context" in mesh and not _context_role(available):
        missing.append("context_axis")
    if spec.num_slices > 1 and any(r not in ("data", "fsdp") for r in dcn_mesh(spec)):
        missing.append("num_slices")  # pipeline, tensor or context over DCN: not modelled
    fields.update({k: v for k, v in wanted.items() if k in available})
    return Translation(fields, tuple(missing))


def _context_role(available: set[str]) -> bool:
    """Whether a mesh axis named ``context`` plays the context role (CONTRACT-21)."""
    from tpusim.program.builders.roles import ROLES

    return "context" in ROLES or "context_axis" in available


def _remat_fields(spec: WorkloadCaseSpec, available: set[str]) -> dict[str, object]:
    """``remat_policy`` (and ``remat_tensors``); ``full`` and ``none`` are the old
    ``recompute: true/false`` when the field is not there yet (the same thing)."""
    if "remat_policy" not in available and spec.remat_policy in ("full", "none"):
        return {"recompute": spec.remat_policy == "full"}
    out: dict[str, object] = {"remat_policy": spec.remat_policy}
    if spec.remat_tensors is not None:
        out["remat_tensors"] = dict(spec.remat_tensors)
    return out


def _flag_fields(spec: WorkloadCaseSpec) -> dict[str, object]:
    """The cost flags as CONTRACT-21 fields (the MaxText default where not given)."""
    layout = spec.layout
    out: dict[str, object] = {}
    attention = layout.get("attention")
    if attention in ("flash", "dot_product"):
        out["attention_kernel"] = "flash" if attention == "flash" else "naive"
    if "capacity_factor" in layout:
        out["capacity_factor"] = layout["capacity_factor"]
    if "sparse_matmul" in layout:
        out["sparse_matmul"] = layout["sparse_matmul"]
    # MaxText's base.yml default is weight_dtype float32: the experts' fp32 master
    # weights are what the FSDP all-gather moves unless the recipe says bfloat16
    if layout.get("weight_dtype", "float32") == "float32" and _has_experts(spec.model):
        out["expert_weight_dtype"] = "fp32"
    if layout.get("weight_dtype") == "bfloat16":
        out["weight_dtype"] = "bf16"
    if layout.get("num_vocab_tiling", 1) > 1:
        out["num_vocab_tiling"] = layout["num_vocab_tiling"]
    return out


def _has_experts(model: str) -> bool:
    from tpusim.config.loader import load_model

    return load_model(model).moe is not None
