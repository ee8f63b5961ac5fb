"""Builders of common programs: a transformer training step and an LLM decode step.

Both are pure functions of the model shape and the logical mesh, returning an SPMD
:class:`~tpusim.program.ir.Program` of what *one chip* runs. Every op names its
dependencies; names are ``L<layer>.<block>.<op>.<phase>`` (``L3.attn.qkv.fwd``).

Model (both builders): a pre-norm transformer layer of attention (QKV projection,
scores, attention x V, output projection) and an MLP of two matrices (up, down; no
gate, no biases), plus two norms. Embeddings and the LM head are left out: the
programs cover the ``layers`` transformer layers only.

Training step (:func:`training_step`), per chip:

* ``tokens = batch * seq / shards`` where ``batch`` is the global batch in sequences
  and ``shards`` the product of the sizes of the distinct batch axes (``data_axis``,
  ``fsdp_axis`` and, when it is a separate axis, ``expert_axis``: the expert axis
  also shards the batch, as in MaxText). Tensor parallelism (Megatron) divides
  ``heads`` and ``d_ff`` by the tensor axis size; activations are replicated across
  it (no sequence parallelism).
* Elementwise ops (assumption, in units of ``a = tokens * d_model * dtype bytes``):
  each norm 2a (read, write), each residual add 3a (two reads, one write), the MLP
  activation 2 x ``tokens * d_ff_local`` x bytes, and the softmax 2 x the score bytes
  (``local_seqs * heads_local * seq**2``): no flash-attention fusion, consistent with
  the score matmuls writing their output to HBM. A backward elementwise op moves
  1.5x its forward bytes (reads the saved activation and the incoming gradient,
  writes one gradient: 3 passes against 2).
* Backward: every forward matmul ``(batch, m, k, n)`` becomes a gradient of its first
  operand ``(batch, m, n, k)`` (``.bwd_input``) and of its second ``(batch, k, m, n)``
  (``.bwd_weight``), the same FLOPs each, so the step does 3x the forward FLOPs. For
  the attention matmuls the "weight" is the second activation operand (K or V).
* Collectives follow nccl-tests sizes (all-reduce, all-to-all: bytes per chip;
  all-gather: gathered output; reduce-scatter: full input). A collective whose group
  has one chip is left out.
* Tensor parallelism: a synchronous all-reduce over ``tensor_axis`` of
  ``tokens * d_model`` activations after attention and after the MLP in the forward,
  and of their gradients at the inputs of both blocks in the backward.
* Data parallelism: after a layer's backward its weight gradients are all-reduced
  asynchronously (``overlap=True``) over the batch axes that replicate them, while the
  backward of earlier layers goes on; ``optimizer`` runs after every gradient
  collective.
* FSDP: a layer's (tensor-local) weights are all-gathered over ``fsdp_axis`` before
  its forward and again before its backward (async, prefetching one layer ahead);
  its gradients are reduce-scattered over ``fsdp_axis``, and the shard all-reduced
  over the data axis when that has more than one chip.
* MoE (``experts > 0``): the MLP becomes a router matmul (``tokens x d_model x
  experts``) plus ``experts / expert-axis size`` local experts. Tokens go to
  ``top_k`` experts with capacity factor 1 and perfect balance, so every chip sends
  and receives ``tokens * top_k`` rows: an all-to-all over ``expert_axis`` of
  ``tokens * top_k * d_model`` bytes before and after the experts (dispatch,
  combine), forward and backward. The local experts run as one grouped matmul with
  ``m = tokens * top_k`` (exact FLOPs; the cost model then reads one expert's
  weights, not all local experts'). The combine's weighted sum is an elementwise op
  of ``(top_k + 1) * a``. Expert weights are sharded over ``expert_axis`` so their
  gradients are not all-reduced over it; dense weights are.
* Memory (``memory_bytes["hbm"]``): per parameter held by the chip (tensor-, expert-
  and fsdp-sharded) ``dtype bytes`` (weights) + 12 (Adam: fp32 master copy and two
  fp32 moments) + ``dtype bytes`` (gradients); with FSDP, the gathered weights of two
  layers (prefetch) plus one layer's full gradient; activations saved for the
  backward (no rematerialisation), per layer: ``tokens * (6 d_model + 4 heads_local
  head_dim)`` elements (norm inputs and outputs, residual, Q, K, V, attention output)
  + the softmax output (``local_seqs * heads_local * seq**2``) + the MLP hidden before
  and after the activation (``2 * rows * d_ff_local``, ``rows = tokens * top_k`` for
  MoE, which also keeps the dispatched tokens, ``rows * d_model``), all in ``dtype``.
* The optimiser is one elementwise op over the chip's parameters: 24 + 2 x dtype
  bytes per parameter (reads the gradient, reads and writes the fp32 master, m and v,
  writes the new weights).

Decode step (:func:`decode_step`): see its docstring.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from tpusim.hardware.costs import DTYPE_BYTES
from tpusim.program.ir import Op, Program, ProgramError

ADAM_STATE_BYTES = 12.0
"""Optimiser bytes per parameter besides the weights: fp32 master copy + two fp32 moments."""

BACKWARD_ELEMENTWISE_FACTOR = 1.5
"""Backward bytes of an elementwise op over its forward bytes (3 passes against 2)."""

FSDP_PREFETCH_LAYERS = 2
"""Layers of gathered weights live at once under FSDP (the current one and the next)."""


# ----------------------------------------------------------------------------- helpers


def parameters_per_layer(
    d_model: int,
    d_ff: int,
    heads: int,
    head_dim: int,
    experts: int = 0,
    *,
    kv_heads: int | None = None,
) -> int:
    """Parameters of one transformer layer (the whole layer, before any sharding).

    Attention: ``d_model * (heads + 2 kv_heads) * head_dim`` (Q, K, V) plus
    ``heads * head_dim * d_model`` (output); MLP: ``2 * d_model * d_ff`` (up, down), or
    ``experts`` times that plus a ``d_model * experts`` router; two norm scales of
    ``d_model``. No biases. ``kv_heads`` defaults to ``heads`` (multi-head attention).
    """
    kv = heads if kv_heads is None else kv_heads
    attention = d_model * (heads + 2 * kv) * head_dim + heads * head_dim * d_model
    mlp = 2 * d_model * d_ff
    if experts:
        mlp = experts * mlp + d_model * experts
    return attention + mlp + 2 * d_model


def step_flops(program: Program) -> float:
    """Total useful FLOPs of ``program`` per chip (the sum of ``op.flops``)."""
    return sum(op.flops for op in program.ops)


def _positive_ints(**values: Any) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ProgramError(f"{name} must be a positive integer, got {value!r}")


def _dtype_bytes(dtype: str) -> float:
    if dtype not in DTYPE_BYTES:
        raise ProgramError(f"dtype '{dtype}' is unknown (choose from {', '.join(DTYPE_BYTES)})")
    return DTYPE_BYTES[dtype]  # type: ignore[index]


def _check_mesh(mesh: Any) -> dict[str, int]:
    if not isinstance(mesh, dict) or not mesh:
        raise ProgramError(f"mesh must be a non-empty dict of axis name -> size, got {mesh!r}")
    for axis, size in mesh.items():
        if not isinstance(axis, str) or not axis:
            raise ProgramError(f"mesh axis names must be non-empty strings, got {axis!r}")
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ProgramError(f"mesh axis '{axis}' size must be a positive integer, got {size!r}")
    return dict(mesh)


def _axis_size(mesh: dict[str, int], field_name: str, axis: str | None) -> int:
    if axis is None:
        return 1
    if axis not in mesh:
        raise ProgramError(
            f"{field_name} '{axis}' is not an axis of the mesh (axes: {', '.join(mesh)})"
        )
    return mesh[axis]


def _divides(field_name: str, value: int, by: int, what: str) -> None:
    if value % by:
        raise ProgramError(f"{field_name} ({value}) is not divisible by {what} ({by})")


def _group(mesh: dict[str, int], axes: Iterable[str | None]) -> tuple[str, ...]:
    """Distinct named axes of more than one chip, in the order given."""
    return tuple(a for a in dict.fromkeys(axes) if a is not None and mesh[a] > 1)


class _Ops:
    """Accumulates ops, checking name uniqueness early (with a clear message)."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self._names: set[str] = set()

    def add(self, name: str, kind: str, after: Iterable[str | None], **fields: Any) -> str:
        if name in self._names:  # a builder bug, not a user error
            raise AssertionError(f"duplicate op name {name}")
        self._names.add(name)
        deps = tuple(dict.fromkeys(a for a in after if a))
        self.ops.append(Op(name=name, kind=kind, after=deps, **fields))  # type: ignore[arg-type]
        return name


# ----------------------------------------------------------------------- training step


@dataclass(frozen=True)
class _Step:
    """One forward step of a layer; ``phase`` says in which pass it appears."""

    name: str
    kind: Literal["matmul", "elementwise", "collective"]
    batch: int = 1
    m: int = 0
    k: int = 0
    n: int = 0
    bytes: float = 0.0
    collective: str = ""
    axes: tuple[str, ...] = ()
    phase: Literal["both", "fwd", "bwd"] = "both"


def training_step(
    *,
    layers: int,
    d_model: int,
    d_ff: int,
    heads: int,
    head_dim: int,
    seq: int,
    batch: int,
    dtype: str = "bf16",
    mesh: dict[str, int],
    data_axis: str | None = "data",
    fsdp_axis: str | None = None,
    tensor_axis: str | None = None,
    experts: int = 0,
    expert_axis: str | None = None,
    top_k: int = 2,
) -> Program:
    """One training step (forward, backward, optimiser) of a dense or MoE transformer.

    ``batch`` is the global batch in sequences of ``seq`` tokens; ``mesh`` maps axis
    names to sizes and every axis of more than one chip must be one of the named axes.
    See the module docstring for the ops, collectives and memory this produces.
    Raises :class:`ProgramError` naming the bad field.
    """
    _positive_ints(
        layers=layers,
        d_model=d_model,
        d_ff=d_ff,
        heads=heads,
        head_dim=head_dim,
        seq=seq,
        batch=batch,
    )
    if isinstance(experts, bool) or not isinstance(experts, int) or experts < 0:
        raise ProgramError(f"experts must be a non-negative integer, got {experts!r}")
    b = _dtype_bytes(dtype)
    mesh = _check_mesh(mesh)
    named = {
        "data_axis": data_axis,
        "fsdp_axis": fsdp_axis,
        "tensor_axis": tensor_axis,
        "expert_axis": expert_axis,
    }
    sizes = {field: _axis_size(mesh, field, axis) for field, axis in named.items()}
    if experts == 0 and expert_axis is not None:
        raise ProgramError("expert_axis is set but experts is 0")
    for field in ("fsdp_axis", "tensor_axis", "expert_axis"):
        for other in ("data_axis", "fsdp_axis", "tensor_axis"):
            if field == other or named[field] is None:
                continue
            if named[field] == named[other] and not (
                field == "expert_axis" and other == "data_axis"
            ):
                raise ProgramError(f"{field} '{named[field]}' is also {other}")
    used = {axis for axis in named.values() if axis is not None}
    for axis, size in mesh.items():
        if axis not in used and size > 1:
            raise ProgramError(
                f"mesh axis '{axis}' (size {size}) is not data_axis, fsdp_axis, tensor_axis "
                "or expert_axis"
            )

    tp, fsdp, ep = sizes["tensor_axis"], sizes["fsdp_axis"], sizes["expert_axis"]
    batch_axes = tuple(dict.fromkeys(a for a in (data_axis, fsdp_axis, expert_axis) if a))
    shards = 1
    for axis in batch_axes:
        shards *= mesh[axis]
    _divides("batch", batch, shards, "the product of the batch axes " + "x".join(batch_axes))
    _divides("heads", heads, tp, f"the tensor axis size of '{tensor_axis}'")
    _divides("d_ff", d_ff, tp, f"the tensor axis size of '{tensor_axis}'")
    if experts:
        _positive_ints(top_k=top_k)
        if top_k > experts:
            raise ProgramError(f"top_k ({top_k}) is larger than experts ({experts})")
        _divides("experts", experts, ep, f"the expert axis size of '{expert_axis}'")

    seqs = batch // shards
    tokens = seqs * seq
    h = heads // tp
    f = d_ff // tp
    e_local = experts // ep
    rows = tokens * top_k if experts else tokens
    act = tokens * d_model * b

    # Parameters this chip computes with (tensor- and expert-local, full over fsdp).
    dense_params = 4 * d_model * h * head_dim + 2 * d_model
    if experts:
        expert_params = e_local * 2 * d_model * f
        dense_params += d_model * experts  # the router, replicated
    else:
        expert_params = 0
        dense_params += 2 * d_model * f
    layer_params = dense_params + expert_params

    def sync(name: str, op: str, size: float, axes: tuple[str, ...], phase: str) -> list[_Step]:
        if not axes:
            return []
        return [_Step(name, "collective", bytes=size, collective=op, axes=axes, phase=phase)]  # type: ignore[arg-type]

    tensor = _group(mesh, [tensor_axis])
    attn: list[_Step] = [
        _Step("attn.norm", "elementwise", bytes=2 * act),
        *sync("attn.tp_allreduce", "all-reduce", act, tensor, "bwd"),
        _Step("attn.qkv", "matmul", m=tokens, k=d_model, n=3 * h * head_dim),
        _Step("attn.scores", "matmul", batch=seqs * h, m=seq, k=head_dim, n=seq),
        _Step("attn.softmax", "elementwise", bytes=2 * seqs * h * seq * seq * b),
        _Step("attn.context", "matmul", batch=seqs * h, m=seq, k=seq, n=head_dim),
        _Step("attn.out", "matmul", m=tokens, k=h * head_dim, n=d_model),
        *sync("attn.tp_allreduce", "all-reduce", act, tensor, "fwd"),
        _Step("attn.residual", "elementwise", bytes=3 * act),
    ]
    mlp: list[_Step] = [
        _Step("mlp.norm", "elementwise", bytes=2 * act),
        *sync("mlp.tp_allreduce", "all-reduce", act, tensor, "bwd"),
    ]
    if experts:
        a2a = _group(mesh, [expert_axis])
        mlp += [
            _Step("moe.router", "matmul", m=tokens, k=d_model, n=experts),
            *sync("moe.dispatch", "all-to-all", rows * d_model * b, a2a, "both"),
            _Step("moe.up", "matmul", m=rows, k=d_model, n=f),
            _Step("moe.act", "elementwise", bytes=2 * rows * f * b),
            _Step("moe.down", "matmul", m=rows, k=f, n=d_model),
            *sync("moe.combine", "all-to-all", rows * d_model * b, a2a, "both"),
            _Step("moe.combine_sum", "elementwise", bytes=(top_k + 1) * act),
        ]
    else:
        mlp += [
            _Step("mlp.up", "matmul", m=tokens, k=d_model, n=f),
            _Step("mlp.act", "elementwise", bytes=2 * tokens * f * b),
            _Step("mlp.down", "matmul", m=tokens, k=f, n=d_model),
        ]
    mlp += [
        *sync("mlp.tp_allreduce", "all-reduce", act, tensor, "fwd"),
        _Step("mlp.residual", "elementwise", bytes=3 * act),
    ]
    layer_steps = attn + mlp

    out = _Ops()
    fsdp_group = _group(mesh, [fsdp_axis])
    # Gradient all-reduce groups: dense weights are replicated over every batch axis but
    # fsdp (which shards them); expert weights also not over the expert axis.
    dense_axes = _group(mesh, [a for a in batch_axes if a != fsdp_axis])
    expert_axes = _group(mesh, [a for a in batch_axes if a not in (fsdp_axis, expert_axis)])
    shard = fsdp if fsdp_group else 1

    def emit(step: _Step, prefix: str, phase: str, after: list[str | None]) -> str:
        name = f"{prefix}.{step.name}.{phase}"
        if step.kind == "collective":
            return out.add(
                name,
                "collective",
                after,
                collective=step.collective,
                size_bytes=step.bytes,
                axes=step.axes,
            )
        if step.kind == "elementwise":
            scale = 1.0 if phase == "fwd" else BACKWARD_ELEMENTWISE_FACTOR
            return out.add(name, "elementwise", after, bytes=step.bytes * scale)
        shape = dict(batch=step.batch, dtype=dtype)
        if phase == "fwd":
            return out.add(name, "matmul", after, m=step.m, k=step.k, n=step.n, **shape)
        grad_in = out.add(
            f"{prefix}.{step.name}.bwd_input",
            "matmul",
            after,
            m=step.m,
            k=step.n,
            n=step.k,
            **shape,
        )
        return out.add(
            f"{prefix}.{step.name}.bwd_weight",
            "matmul",
            [grad_in],
            m=step.k,
            k=step.m,
            n=step.n,
            **shape,
        )

    # Compute stages in order: forward of layers 0..L-1, then backward of L-1..0.
    stages = [(layer, "fwd") for layer in range(layers)]
    stages += [(layer, "bwd") for layer in reversed(range(layers))]
    stage_end: list[str] = []
    gathers: list[str] = []
    grad_syncs: list[str] = []
    last: str | None = None
    for i, (layer, phase) in enumerate(stages):
        prefix = f"L{layer}"
        if fsdp_group:
            gathers.append(
                out.add(
                    f"{prefix}.weights.allgather.{phase}",
                    "collective",
                    [
                        gathers[-1] if gathers else None,
                        stage_end[i - FSDP_PREFETCH_LAYERS] if i >= FSDP_PREFETCH_LAYERS else None,
                    ],
                    collective="all-gather",
                    size_bytes=layer_params * b,
                    axes=fsdp_group,
                    overlap=True,
                )
            )
        steps = layer_steps if phase == "fwd" else list(reversed(layer_steps))
        # the first op of a stage also waits for the layer's gathered weights (FSDP)
        extra = gathers[-1] if fsdp_group else None
        for step in steps:
            if step.phase in ("both", phase):
                last = emit(step, prefix, phase, [last, extra])
                extra = None
        assert last is not None
        stage_end.append(last)
        if phase == "bwd":
            grad_syncs += _gradient_sync(
                out,
                prefix,
                last,
                b,
                dense_params,
                expert_params,
                shard,
                fsdp_group,
                dense_axes,
                expert_axes,
            )

    local_params = layers * layer_params / shard
    out.add(
        "optimizer",
        "elementwise",
        [last, *grad_syncs],
        bytes=local_params * (2 * ADAM_STATE_BYTES + 2 * b),
    )

    saved = (
        tokens * (6 * d_model + 4 * h * head_dim)
        + seqs * h * seq * seq
        + 2 * rows * f
        + (rows * d_model if experts else 0)
    ) * b
    hbm = local_params * (2 * b + ADAM_STATE_BYTES) + layers * saved
    if fsdp_group:
        hbm += (FSDP_PREFETCH_LAYERS + 1) * layer_params * b
    kind = f"moe{experts}x{top_k}" if experts else "dense"
    return Program(
        name=f"training_step[{kind},L{layers},d{d_model},B{batch}x{seq}]",
        ops=tuple(out.ops),
        mesh=mesh,
        memory_bytes={"hbm": float(hbm)},
    )


def _gradient_sync(
    out: _Ops,
    prefix: str,
    after: str,
    b: float,
    dense_params: int,
    expert_params: int,
    shard: int,
    fsdp_group: tuple[str, ...],
    dense_axes: tuple[str, ...],
    expert_axes: tuple[str, ...],
) -> list[str]:
    """The async collectives that sync one layer's weight gradients; returns their names."""
    names: list[str] = []
    dep = after
    if fsdp_group:
        dep = out.add(
            f"{prefix}.grad.reduce_scatter",
            "collective",
            [after],
            collective="reduce-scatter",
            size_bytes=(dense_params + expert_params) * b,
            axes=fsdp_group,
            overlap=True,
        )
        names.append(dep)
    groups: dict[tuple[str, ...], float] = {}
    for axes, params in ((dense_axes, dense_params), (expert_axes, expert_params)):
        if axes and params:
            groups[axes] = groups.get(axes, 0.0) + params * b / shard
    for axes, size in groups.items():
        suffix = "" if axes == dense_axes else ".experts"
        names.append(
            out.add(
                f"{prefix}.grad{suffix}.allreduce",
                "collective",
                [dep],
                collective="all-reduce",
                size_bytes=size,
                axes=axes,
                overlap=True,
            )
        )
    return names


# ------------------------------------------------------------------------- decode step


def decode_step(
    *,
    layers: int,
    d_model: int,
    d_ff: int,
    heads: int,
    head_dim: int,
    kv_heads: int | None = None,
    batch: int,
    context: int,
    dtype: str = "bf16",
    kv_cache: Literal["hbm", "sram"] = "hbm",
    mesh: dict[str, int],
    tensor_axis: str | None = None,
) -> Program:
    """One decode step: one new token for each of ``batch`` sequences of ``context`` tokens.

    ``batch`` is the number of sequences one model replica (one tensor-parallel group)
    serves; mesh axes other than ``tensor_axis`` are independent replicas. Tensor
    parallelism divides ``heads``, ``kv_heads`` and ``d_ff``. Per layer: a norm
    (elementwise, ``2 batch d_model`` x bytes), the QKV matmul (``m = batch``,
    ``n = (heads + 2 kv_heads)_local * head_dim``), the write of the new K and V to the
    cache, the attention, the output projection, a tensor-parallel all-reduce of
    ``batch * d_model`` activations, the MLP norm, up, activation, down, and a second
    all-reduce.

    The attention is one elementwise op ``L<i>.attn.kv_read`` that reads the cache,
    ``batch * context * kv_heads_local * head_dim * 2 (K and V) * bytes``, from the
    ``kv_cache`` tier: a fused attention kernel whose scores stay on chip. Its time is
    exactly the cache bytes over that tier's bandwidth (plus the per-op overhead). Its
    FLOPs (``4 * batch * heads_local * context * head_dim``) are not in the program
    (elementwise ops have none): at ``heads / kv_heads`` FLOPs per byte its intensity
    is far below any TPU's ridge point, so it is memory-bound. The cache cannot be a
    matmul operand: the cost model treats a batched matmul's second operand as shared
    across the batch, while each sequence has its own K and V.

    ``memory_bytes``: the weights (``layers * parameters_per_layer / tensor`` x bytes)
    in ``"hbm"``, the KV cache (``layers * batch * context * kv_heads_local * head_dim
    * 2`` x bytes) in ``kv_cache``. Raises :class:`ProgramError` naming the bad field.
    """
    kv = heads if kv_heads is None else kv_heads
    _positive_ints(
        layers=layers,
        d_model=d_model,
        d_ff=d_ff,
        heads=heads,
        head_dim=head_dim,
        kv_heads=kv,
        batch=batch,
        context=context,
    )
    b = _dtype_bytes(dtype)
    if kv_cache not in ("hbm", "sram"):
        raise ProgramError(f"kv_cache must be 'hbm' or 'sram', got {kv_cache!r}")
    mesh = _check_mesh(mesh)
    tp = _axis_size(mesh, "tensor_axis", tensor_axis)
    _divides("heads", heads, kv, "kv_heads")
    _divides("heads", heads, tp, f"the tensor axis size of '{tensor_axis}'")
    _divides("kv_heads", kv, tp, f"the tensor axis size of '{tensor_axis}'")
    _divides("d_ff", d_ff, tp, f"the tensor axis size of '{tensor_axis}'")
    h, kvh, f = heads // tp, kv // tp, d_ff // tp
    act = batch * d_model * b
    cache_per_layer = batch * context * kvh * head_dim * 2 * b
    tensor = _group(mesh, [tensor_axis])

    out = _Ops()
    last: str | None = None
    prefix = ""

    def add(name: str, kind: str, **fields: Any) -> None:
        nonlocal last
        last = out.add(f"{prefix}.{name}", kind, [last], **fields)

    for layer in range(layers):
        prefix = f"L{layer}"
        mm = dict(dtype=dtype, memory="hbm")
        add("attn.norm", "elementwise", bytes=2 * act)
        add("attn.qkv", "matmul", m=batch, k=d_model, n=(h + 2 * kvh) * head_dim, **mm)
        add("attn.kv_write", "elementwise", bytes=batch * kvh * head_dim * 2 * b, memory=kv_cache)
        add("attn.kv_read", "elementwise", bytes=cache_per_layer, memory=kv_cache)
        add("attn.out", "matmul", m=batch, k=h * head_dim, n=d_model, **mm)
        if tensor:
            add(
                "attn.tp_allreduce",
                "collective",
                collective="all-reduce",
                size_bytes=act,
                axes=tensor,
            )
        add("mlp.norm", "elementwise", bytes=2 * act)
        add("mlp.up", "matmul", m=batch, k=d_model, n=f, **mm)
        add("mlp.act", "elementwise", bytes=2 * batch * f * b)
        add("mlp.down", "matmul", m=batch, k=f, n=d_model, **mm)
        if tensor:
            add(
                "mlp.tp_allreduce",
                "collective",
                collective="all-reduce",
                size_bytes=act,
                axes=tensor,
            )

    weights = (
        layers
        * (
            d_model * (h + 2 * kvh) * head_dim
            + h * head_dim * d_model
            + 2 * d_model * f
            + 2 * d_model
        )
        * b
    )
    cache = layers * cache_per_layer
    memory = {"hbm": float(weights)}
    memory[kv_cache] = memory.get(kv_cache, 0.0) + float(cache)
    return Program(
        name=f"decode_step[L{layers},d{d_model},B{batch},ctx{context},kv:{kv_cache}]",
        ops=tuple(out.ops),
        mesh=mesh,
        memory_bytes=memory,
    )
