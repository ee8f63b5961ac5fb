"""Argument checks of the builders' Python API, one function per builder.

The scenario schema (pydantic) already checks the same fields when a builder runs
from YAML; these checks exist for callers of the Python API (tests, notebooks), and
for the rules the schema cannot see: axes that must exist in the mesh, be distinct
and cover it, and sizes that must divide. Each raises :class:`ProgramError` with a
one-line message that starts with the offending field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tpusim.hardware.costs import DTYPE_BYTES
from tpusim.program.builders.args import TrainingArgs
from tpusim.program.builders.mesh import axis_size, role_axes, sharding_axes
from tpusim.program.builders.moe_checks import check_moe
from tpusim.program.builders.pipeline import PIPELINE_SCHEDULES
from tpusim.program.builders.remat import RematPlacement, remat_placement
from tpusim.program.builders.roles import CONTEXT, EXPERT, PIPELINE, ROLES, TENSOR, Role
from tpusim.program.ir import ProgramError


@dataclass(frozen=True)
class CheckedTraining:
    """What :func:`check_training` found: bytes per element of ``dtype`` and of
    ``gradient_dtype``, the mesh, the axis of each role and each role's size (both
    by the role's field, ``tensor_axis``), and the remat placement."""

    bytes_per_element: float
    gradient_bytes: float
    mesh: dict[str, int]
    axes: dict[str, str | None]
    sizes: dict[str, int]
    remat: RematPlacement

    def size(self, role: Role) -> int:
        """The size of ``role``'s axis (1 without one)."""
        return self.sizes[role.field]

    def axis(self, role: Role) -> str | None:
        """``role``'s axis (None without one)."""
        return self.axes[role.field]


def check_training(args: TrainingArgs) -> CheckedTraining:
    """Check :func:`~tpusim.program.builders.training_step`'s arguments (one-line
    :class:`ProgramError` naming the first bad field and its numbers)."""
    if (args.batch is None) == (args.global_batch is None):
        raise ProgramError("give exactly one of batch and global_batch (sequences per step)")
    ints = {k: getattr(args, k) for k in ("layers", "d_model", "d_ff", "heads", "head_dim")}
    positive_ints(**ints, seq=args.seq, batch=args.sequences, top_k=args.top_k)
    positive_ints(microbatches=args.microbatches, virtual_stages=args.virtual_stages)
    positive_ints(num_vocab_tiling=args.num_vocab_tiling)
    if args.num_vocab_tiling > args.sequences * args.seq:
        raise ProgramError(
            f"num_vocab_tiling {args.num_vocab_tiling:,} is more tiles than the step's "
            f"{args.sequences * args.seq:,} tokens (the logits are tiled over tokens)"
        )
    _check_optional_counts(args)
    b = activation_bytes(args.dtype)
    grad = bytes_per_element(args.gradient_dtype, "gradient_dtype")
    _check_kinds(args)
    mesh = checked_mesh(args.mesh)
    axes = role_axes(mesh, args.axes)
    sizes = {role.field: axis_size(mesh, role.field, axes[role.field]) for _, role in ROLES.items()}
    check_moe(args, sizes[EXPERT.field])
    if args.experts == 0 and axes[EXPERT.field] is not None and sizes[EXPERT.field] > 1:
        raise ProgramError(f"{EXPERT.field} is set but experts is 0")
    _check_distinct(axes)
    _check_covered(mesh, axes)
    _check_divisions(args, mesh, axes, sizes)
    _check_layout(args, axes, sizes)
    remat = remat_placement(args.remat_policy, args.recompute, args.remat_tensors)
    return CheckedTraining(b, grad, mesh, axes, sizes, remat)


def _check_optional_counts(args: TrainingArgs) -> None:
    """The counts that may be 0 (no experts, no vocabulary, no MLA latents)."""
    non_negative_ints(
        experts=args.experts,
        shared_experts=args.shared_experts,
        vocab=args.vocab,
        dense_layers=args.dense_layers,
        q_lora_rank=args.q_lora_rank,
        kv_lora_rank=args.kv_lora_rank,
        rope_head_dim=args.rope_head_dim,
    )


def _check_layout(args: TrainingArgs, axes: dict[str, str | None], sizes: dict[str, int]) -> None:
    """Context parallelism splits every sequence over the context axis, sequence
    parallelism each chip's slice over the tensor axis: both must divide; the host
    link's bandwidth is positive."""
    context = sizes[CONTEXT.field]
    divides("seq", args.seq, context, f"the context axis size of '{axes[CONTEXT.field]}'")
    if args.collective_matmul and not args.async_collectives:
        raise ProgramError(
            "collective_matmul needs async_collectives: a windowed einsum overlaps its "
            "permutes with the matmul's chunks, which synchronous collectives cannot"
        )
    if args.sequence_parallel:
        tensor = f"the tensor axis size of '{axes[TENSOR.field]}' (sequence_parallel)"
        field = "seq per context shard" if context > 1 else "seq"
        divides(field, args.seq // context, sizes[TENSOR.field], tensor)
    if args.shard_optimizer_over_data and args.experts and sizes[EXPERT.field] > 1:
        raise ProgramError(
            "shard_optimizer_over_data with experts sharded over an expert axis is not "
            "modelled (their optimiser state is not replicated over the data axes)"
        )
    if not args.host_bandwidth_Bps > 0:
        raise ProgramError(f"host_bandwidth_Bps must be > 0, got {args.host_bandwidth_Bps!r}")


def _check_kinds(args: TrainingArgs) -> None:
    """The closed choices: mlp, attention, pipeline; MLA's ranks; experts' fields."""
    choose("mlp", args.mlp, ("plain", "gated"))
    choose("attention", args.attention, ("gqa", "mla"))
    choose("pipeline", args.pipeline, PIPELINE_SCHEDULES)
    if args.attention == "mla":
        positive_ints(kv_lora_rank=args.kv_lora_rank, rope_head_dim=args.rope_head_dim)
    if args.virtual_stages > 1 and args.pipeline != "interleaved":
        raise ProgramError(
            f"virtual_stages ({args.virtual_stages}) needs pipeline: interleaved "
            f"(got {args.pipeline})"
        )
    if args.experts:
        if args.top_k > args.experts:
            raise ProgramError(f"top_k ({args.top_k}) is larger than experts ({args.experts})")
        if args.expert_d_ff is not None:
            positive_ints(expert_d_ff=args.expert_d_ff)
        if args.dense_layers >= args.layers:
            raise ProgramError(
                f"dense_layers ({args.dense_layers}) must be fewer than layers ({args.layers})"
            )


def _check_divisions(
    args: TrainingArgs, mesh: dict[str, int], axes: dict[str, str | None], sizes: dict[str, int]
) -> None:
    """Sizes the mesh axes must divide, and a pipeline no deeper than the layers."""
    batch = sharding_axes(axes, "batch")
    shards = math.prod(mesh[axis] for axis in batch)
    what = "the product of the batch axes " + ("x".join(batch) or "(none)")
    field = "batch" if args.batch is not None else "global_batch"
    divides(field, args.sequences, shards, what)
    per_shard = args.sequences // shards
    divides(f"{field} per batch shard", per_shard, args.microbatches, "microbatches")
    tp = sizes[TENSOR.field]
    tensor = f"the tensor axis size of '{axes[TENSOR.field]}'"
    divides("heads", args.heads, tp, tensor)
    kv = args.kv_heads if args.kv_heads is not None else args.heads
    positive_ints(kv_heads=kv)
    divides("heads", args.heads, kv, "kv_heads")
    if kv % tp and tp % kv:
        raise ProgramError(f"kv_heads ({kv}) and {tensor} ({tp}): neither divides the other")
    divides("d_ff", args.d_ff, tp, tensor)
    if args.experts:
        width = args.expert_d_ff or args.d_ff
        divides("expert_d_ff" if args.expert_d_ff else "d_ff", width, tp, tensor)
        expert = f"the expert axis size of '{axes[EXPERT.field]}'"
        divides("experts", args.experts, sizes[EXPERT.field], expert)
    stages = sizes[PIPELINE.field] * args.virtual_stages
    if stages > args.layers:
        name = "pipeline stages x virtual_stages" if args.virtual_stages > 1 else "pipeline stages"
        raise ProgramError(
            f"{name} ({stages}, axis '{axes[PIPELINE.field]}') exceed layers ({args.layers})"
        )


def check_decode(
    ints: dict[str, int], *, dtype: str, kv_cache: str, mesh: object, tensor_axis: str | None
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
    tp = axis_size(mesh, TENSOR.field, tensor_axis)
    heads, kv = ints["heads"], ints["kv_heads"]
    tensor = f"the tensor axis size of '{tensor_axis}'"
    divides("heads", heads, kv, "kv_heads")
    divides("heads", heads, tp, tensor)
    divides("kv_heads", kv, tp, tensor)
    divides("d_ff", ints["d_ff"], tp, tensor)
    return dtype_bytes, mesh, tp


def positive_ints(**values: object) -> None:
    """Raise :class:`ProgramError` for the first value that is not an int > 0."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ProgramError(f"{name} must be a positive integer, got {value!r}")


def bytes_per_element(dtype: str, field_name: str = "dtype") -> float:
    """Bytes of one ``dtype`` element; :class:`ProgramError` naming ``field_name`` for
    an unknown dtype."""
    if dtype not in DTYPE_BYTES:
        choices = ", ".join(DTYPE_BYTES)
        raise ProgramError(f"{field_name} '{dtype}' is unknown (choose from {choices})")
    return DTYPE_BYTES[dtype]  # type: ignore[index]


def activation_bytes(dtype: str) -> float:
    """Bytes of one activation (and gathered weight) element of a step computing in
    ``dtype``: the dtype's own, except that 8-bit and 4-bit matmul dtypes quantize their
    operands on the fly and keep activations, weights and collectives in bf16 (MaxText's
    ``quantization: fp8_full``/``int8``); :class:`ProgramError` for an unknown dtype."""
    own = bytes_per_element(dtype)
    return max(own, DTYPE_BYTES["bf16"])


def non_negative_ints(**values: object) -> None:
    """Raise :class:`ProgramError` for the first value that is not an int >= 0."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ProgramError(f"{name} must be a non-negative integer, got {value!r}")


def choose(field_name: str, value: object, choices: tuple[str, ...]) -> None:
    """Raise :class:`ProgramError` unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ProgramError(f"{field_name} '{value}' is unknown (choose from {', '.join(choices)})")


def checked_mesh(mesh: object) -> dict[str, int]:
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
    """Each named axis plays one role, except where a role declares it may share
    another's (:attr:`Role.may_share`: the expert axis may be the data axis, experts
    sharded over the data-parallel replicas, or the fsdp axis, MaxText's
    ``fsdp_shard_on_exp``)."""
    roles = [role for _, role in ROLES.items()]
    for i, role in enumerate(roles):
        for other in roles[:i]:
            shared = other.name in role.may_share or role.name in other.may_share
            axis = axes[role.field]
            if axis is not None and axis == axes[other.field] and not shared:
                raise ProgramError(f"{role.field} '{axis}' is also {other.field}")


def _check_covered(mesh: dict[str, int], axes: dict[str, str | None]) -> None:
    """Every mesh axis of more than one chip is one of the named axes."""
    used = {axis for axis in axes.values() if axis is not None}
    for axis, size in mesh.items():
        if axis not in used and size > 1:
            names = ROLES.names()
            fields = [ROLES.get(name).field for name in names]
            raise ProgramError(
                f"mesh axis '{axis}' (size {size}) plays no role: name it "
                f"{_either(names)}, or give it to {_either(fields)}"
            )


def _either(words: list[str] | tuple[str, ...]) -> str:
    """``a, b or c``."""
    return " or ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)
