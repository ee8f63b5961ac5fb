"""One layer pass of a training step as ops, with XLA's overlap of its collectives.

:func:`emit_steps` turns a layer's templates (:mod:`.layers`) into the ops of its
forward or backward pass, each after the previous, as XLA's latency-hiding scheduler
orders them (``overlap``):

* A layer's collectives are asynchronous (``-start``/``-done``): they do not hold the
  TensorCore. Forward, what follows needs their result, so a tensor-parallel
  all-reduce is exposed unless other work (an FSDP gather, a gradient collective) is
  in flight. Backward, the all-reduce of an input gradient starts as soon as the
  input gradient (``.bwd_input``) is made and runs beside the weight gradient
  (``.bwd_weight``), which does not need it; the op after waits for both.
* Without ``overlap`` every collective of the pass is synchronous (holds the
  TensorCore) and follows the op before it: the step is the sum of its ops.
* ``windowed`` under sequence parallelism: the reduce-scatter after a projection is the
  same chunked loop of permutes without the all-gather (the last partial sums added to
  the local chunk's), and the all-gather before a projection becomes ``tp - 1``
  permutes of one shard each, chunk ``j`` of the projection multiplying shard ``j`` as
  soon as it arrives (chunk 0 the local shard at once).
* ``windowed`` (``collective_matmul``, XLA's windowed einsum): the tensor-parallel
  all-reduce after a projection (forward: ``attn.out``, ``mlp.down``; backward: the
  input gradient of ``attn.qkv``, ``mlp.up``/``gate``) becomes a reduce-scatter
  decomposed into ``tp - 1`` collective-permutes of ``1/tp`` of the activations, each
  in flight while the TensorCore computes one of the matmul's ``tp`` row chunks
  (``.c0``..): permute ``j`` carries the partial sums of chunk ``j - 1`` (after the
  permute before it), so the pair costs ``chunk + sum_j max(chunk, permute_j)``;
  then the all-gather of the reduced shards back to every rank (an asynchronous
  all-gather of the activations). The all-gather is not windowed into the next
  projection: the norm and residual between need whole activations unless they are
  sequence-sharded (sequence parallelism). The partial-sum additions are left out
  (``tokens * d_model / tp`` elements each).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tpusim.program.builders.oplist import OpList
from tpusim.program.builders.template import LayerStep, Phase, emit_step, step_shape


@dataclass(frozen=True)
class PassOptions:
    """How a pass's collectives run: ``overlap`` (asynchronous), ``windowed``
    (collective matmul), the logical ``mesh`` (axis sizes) and the matmul ``dtype``."""

    overlap: bool
    windowed: bool
    mesh: dict[str, int]
    dtype: str


def emit_steps(
    out: OpList,
    steps: list[LayerStep],
    prefix: str,
    phase: Phase,
    after: list[str | None],
    opts: PassOptions,
) -> str:
    """The ops of ``steps`` (already in the pass's order) under ``prefix``; the first
    waits for ``after``. Returns the last op's name (see the module docstring)."""
    deps, i, split = after, 0, False
    while i < len(steps):
        step = steps[i]
        following = steps[i + 1] if i + 1 < len(steps) else None
        if step.kind == "collective" and split and i + 1 < len(steps):
            # beside the weight gradient (deps[1]), which the op after it waits for;
            # the last op of a pass stands for all of it and waits for every dep
            deps = [_collective(out, step, prefix, phase, deps[:1], opts), *deps[1:]]
        elif _gathered_into(step, following, opts):
            assert following is not None
            deps = _all_gather_matmul(out, step, following, prefix, phase, deps, opts)
            i += 1
        elif step.kind == "collective":
            deps = [_collective(out, step, prefix, phase, deps, opts)]
        elif _windowed(step, following, opts):
            assert following is not None
            ends = i + 2 == len(steps)
            deps = _collective_matmul(out, step, following, prefix, phase, deps, opts, ends)
            i += 1
        else:
            name = emit_step(out, step, prefix, phase, deps, opts.dtype)
            deps = _after_matmul(step, prefix, phase, name, following, opts)
        split = len(deps) > 1 and step.kind == "matmul"
        i += 1
    assert len(deps) == 1 and deps[0] is not None
    return deps[0]


def _after_matmul(
    step: LayerStep,
    prefix: str,
    phase: Phase,
    name: str,
    following: LayerStep | None,
    opts: PassOptions,
) -> list[str | None]:
    """What the next op waits for: ``name``, or, backward before an asynchronous
    collective, the input gradient first (the collective's dependency) then ``name``
    (the weight gradient, which the op after the collective also waits for)."""
    async_next = following is not None and following.kind == "collective" and opts.overlap
    if phase == "bwd" and step.kind == "matmul" and async_next:
        return [f"{prefix}.{step.name}.bwd_input", name]
    return [name]


def _collective(
    out: OpList,
    step: LayerStep,
    prefix: str,
    phase: Phase,
    deps: list[str | None],
    opts: PassOptions,
) -> str:
    """The collective, after ``deps``; asynchronous with ``overlap``."""
    name = f"{prefix}.{step.name}.{phase}"
    fields = dict(collective=step.collective, size_bytes=step.bytes, axes=step.axes)
    return out.add(name, "collective", deps, overlap=opts.overlap, role=step.role, **fields)


def _group(step: LayerStep, opts: PassOptions) -> int:
    return math.prod(opts.mesh[a] for a in step.axes) if step.axes else 1


def _windowed(step: LayerStep, following: LayerStep | None, opts: PassOptions) -> bool:
    """Whether ``step`` is a projection whose tensor all-reduce (or, under sequence
    parallelism, reduce-scatter) is windowed into it."""
    if not (opts.windowed and opts.overlap and step.kind == "matmul" and following):
        return False
    reduces = following.collective in ("all-reduce", "reduce-scatter")
    return following.kind == "collective" and reduces and _group(following, opts) > 1


def _gathered_into(step: LayerStep, following: LayerStep | None, opts: PassOptions) -> bool:
    """Whether ``step`` is a sequence-parallel all-gather windowed into the projection
    after it (collective matmul: each shard arrives while the last one is multiplied)."""
    if not (opts.windowed and opts.overlap and following and following.kind == "matmul"):
        return False
    gathers = step.kind == "collective" and step.collective == "all-gather"
    return gathers and _group(step, opts) > 1


def _all_gather_matmul(
    out: OpList,
    gather: LayerStep,
    step: LayerStep,
    prefix: str,
    phase: Phase,
    deps: list[str | None],
    opts: PassOptions,
) -> list[str | None]:
    """The all-gather ``gather`` as ``tp - 1`` collective-permutes of one shard each,
    the projection ``step`` in ``tp`` row chunks: chunk ``j`` multiplies shard ``j``
    once its permute has brought it (chunk 0 the local shard at once). Backward the
    chunks are the input gradient's and the weight gradient follows."""
    tp = _group(gather, opts)
    base = f"{prefix}.{step.name}"
    m, k, n = (step.m, step.k, step.n) if phase == "fwd" else (step.m, step.n, step.k)
    label = f"{base}.fwd" if phase == "fwd" else f"{base}.bwd_input"
    shape = step_shape(step, opts.dtype)
    rows = math.ceil(m / tp)
    name = f"{prefix}.{gather.name}.{phase}"
    chunk = out.add(f"{label}.c0", "matmul", deps, m=rows, k=k, n=n, **shape)
    permute: str | None = None
    for j in range(1, tp):
        permute = out.add(
            f"{name}.ag{j}",
            "collective",
            [permute or deps[0]],
            collective="collective-permute",
            size_bytes=gather.bytes / tp,
            axes=gather.axes,
            overlap=True,
            role=gather.role,
        )
        chunk = out.add(f"{label}.c{j}", "matmul", [chunk, permute], m=rows, k=k, n=n, **shape)
    if phase == "fwd":
        return [chunk]
    wshape = dict(m=step.k, k=step.m, n=step.n)
    return [out.add(f"{base}.bwd_weight", "matmul", [chunk], **wshape, **shape)]


def _collective_matmul(
    out: OpList,
    step: LayerStep,
    reduce: LayerStep,
    prefix: str,
    phase: Phase,
    deps: list[str | None],
    opts: PassOptions,
    ends: bool = False,
) -> list[str | None]:
    """The projection ``step`` in ``tp`` row chunks with the reduce-scatter permutes
    between them, then the all-gather (see the module docstring). Backward the chunks
    are the input gradient's and the weight gradient follows them (before the
    all-gather when the pair ``ends`` the pass). Returns what the next op waits for."""
    tp = math.prod(opts.mesh[a] for a in reduce.axes)
    base = f"{prefix}.{step.name}"
    m, k, n = (step.m, step.k, step.n) if phase == "fwd" else (step.m, step.n, step.k)
    label = f"{base}.fwd" if phase == "fwd" else f"{base}.bwd_input"
    shape = step_shape(step, opts.dtype)
    rows = math.ceil(m / tp)
    chunk = out.add(f"{label}.c0", "matmul", deps, m=rows, k=k, n=n, **shape)
    permute: str | None = None
    name = f"{prefix}.{reduce.name}.{phase}"
    for j in range(1, tp):
        permute = out.add(
            f"{name}.rs{j}",
            "collective",
            [chunk, permute],
            collective="collective-permute",
            size_bytes=reduce.bytes / tp,
            axes=reduce.axes,
            overlap=True,
            role=reduce.role,
        )
        chunk = out.add(f"{label}.c{j}", "matmul", [chunk], m=rows, k=k, n=n, **shape)
    weight = None
    if phase == "bwd":
        wshape = dict(m=step.k, k=step.m, n=step.n)
        weight = out.add(f"{base}.bwd_weight", "matmul", [chunk], **wshape, **shape)
    if reduce.collective == "reduce-scatter":  # sequence parallel: the shard stays
        # the last partial sums added to the local chunk's: read two, write one shard
        added = out.add(
            f"{name}.sum", "elementwise", [chunk, permute, weight], bytes=3 * reduce.bytes / tp
        )
        return [added]
    fields = dict(collective="all-gather", size_bytes=reduce.bytes, axes=reduce.axes)
    fields["role"] = reduce.role
    first = [chunk, permute, weight if ends else None]
    gathered = out.add(f"{name}.ag", "collective", first, overlap=True, **fields)
    return [gathered] if weight is None or ends else [gathered, weight]
