"""Translate one published workload case into ``training_step`` fields (MaxText flags
-> tpusim mesh roles and fields): :func:`translate` is the one place this happens. A
field the case needs that the current ``training_step`` lacks is listed in
:attr:`Translation.missing`, never approximated silently."""

from __future__ import annotations

from dataclasses import dataclass

from tpusim.program.builders.roles import CONTEXT, DATA, FSDP, ROLES
from tpusim.validation.workload_mesh import dcn_mesh, slices_mesh
from tpusim.validation.workloads import RunSpec

DCN_ROLES = (DATA.name, FSDP.name)
"""The roles whose axes may span the slices (DCN): data and FSDP replicas. Pipeline,
tensor or context parallelism over DCN is not modelled (listed as missing)."""


@dataclass(frozen=True)
class Translation:
    """A case as ``training_step`` fields: ``fields`` (with ``mesh`` in chips) and the
    CONTRACT-21 fields the case needs that the current ``training_step`` lacks."""

    fields: dict[str, object]
    missing: tuple[str, ...]


def translate(spec: RunSpec, available: set[str] | None = None) -> Translation:
    """``spec`` as ``training_step`` fields (see :data:`MESH_FLAGS`): the mesh in
    chips, the global batch in sequences, the dtype, remat, attention kernel and MoE
    flags; ``available`` is the set of ``training_step`` fields (default: the current
    :class:`~tpusim.workloads.training_step.TrainingWorkload`'s). Raises ValueError for
    a mesh the slice cannot hold."""
    if available is None:
        from tpusim.workloads.training_step import TrainingWorkload

        available = set(TrainingWorkload.field_names())
    mesh = slices_mesh(spec)
    fields: dict[str, object] = {
        "model": spec.model,
        "seq": spec.seq,
        "batch": spec.global_batch,
        "dtype": spec.tpusim_dtype,
        "mesh": mesh,
    }
    wanted = {**_remat_fields(spec, available), **_flag_fields(spec), **_tensor_fields(mesh)}
    missing = [name for name in wanted if name not in available]
    if CONTEXT.name in mesh and not _context_role(available):
        missing.append(CONTEXT.field)
    if spec.num_slices > 1 and any(r not in DCN_ROLES for r in dcn_mesh(spec)):
        missing.append("num_slices")  # pipeline, tensor or context over DCN: not modelled
    fields.update({k: v for k, v in wanted.items() if k in available})
    return Translation(fields, tuple(missing))


def _context_role(available: set[str]) -> bool:
    """Whether a mesh axis named ``context`` plays the context role (CONTRACT-21)."""
    return CONTEXT.name in ROLES or CONTEXT.field in available


def _remat_fields(spec: RunSpec, available: set[str]) -> dict[str, object]:
    """``remat_policy`` (and ``remat_tensors``); ``full`` and ``none`` are the old
    ``recompute: true/false`` when the field is not there yet (the same thing)."""
    if "remat_policy" not in available and spec.remat_policy in ("full", "none"):
        return {"recompute": spec.remat_policy == "full"}
    out: dict[str, object] = {"remat_policy": spec.remat_policy}
    if spec.remat_tensors is not None:
        out["remat_tensors"] = dict(spec.remat_tensors)
    return out


def _tensor_fields(mesh: dict[str, int]) -> dict[str, object]:
    """``sequence_parallel`` under a tensor axis: MaxText shards the residual stream's
    embedding over ``tensor`` (``configs/base.yml`` logical_axis_rules:
    ``activation_embed`` -> ``tensor``), so each chip holds ``1 / tensor`` of every
    layer input and norm, and each tensor-parallel all-reduce is a reduce-scatter and
    an all-gather: tpusim's sequence parallelism, the same bytes held and moved (the
    split is over the embedding instead of the sequence)."""
    return {"sequence_parallel": True} if mesh.get("tensor", 1) > 1 else {}


def _flag_fields(spec: RunSpec) -> dict[str, object]:
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
