"""The gradient collectives of a training step (see :mod:`.training` for the model):
after each layer's backward, the FSDP reduce-scatter; after its last, one
all-reduce per group of axes that replicate its weights (hierarchical over axes of
several roles) or, under ZeRO-1, a reduce-scatter over the data axes. Each is
issued by the role of its group (:meth:`~.training.TrainingStep.issuer`).
"""

from __future__ import annotations

from tpusim.program.builders.host_offload import Emits
from tpusim.program.builders.roles import Shard

REPLICAS: tuple[Shard, ...] = ("batch", "layers")
"""What the axes that replicate a weight shard: the batch (data-like roles) and, for
the embedding and head, the layers (the pipeline). A gradient collective over them is
issued by the first registered role that plays one of its axes."""


def gradient_sync(
    e: Emits, prefix: str, dense_params: float, expert_params: float, final: bool = True
) -> list[str]:
    """The async collectives that sync one layer's weight gradients (in the gradient
    dtype); returns their names.

    With FSDP a reduce-scatter over the fsdp axis (every backward iteration); then,
    after the last, one all-reduce per distinct group of axes that replicate the
    weights (dense and expert weights share one when their groups coincide; see
    :func:`all_reduce`); the embedding and head (``prefix`` ``embed``, ``head``) are
    replicated over the pipeline axis too."""
    step, b = e.step, e.step.gradient_bytes
    names: list[str] = []
    dep = e.last
    if step.fsdp_group:
        scattered = dense_params + (0.0 if step.experts_on_fsdp else expert_params)
        dep = e.out.add(
            f"{prefix}.grad.reduce_scatter",
            "collective",
            [e.last],
            collective="reduce-scatter",
            size_bytes=scattered * b,
            axes=step.fsdp_group,
            overlap=step.args.async_collectives,
            role=step.issuer(("weights",), step.fsdp_group),
        )
        names.append(dep)
    if not final:
        return names
    groups: dict[tuple[str, ...], float] = {}
    head = prefix in ("head", "embed")
    dense_axes = (*step.dense_axes, *step.pipeline_group) if head else step.dense_axes
    for axes, params in ((dense_axes, dense_params), (step.expert_axes, expert_params)):
        if axes and params:
            groups[axes] = groups.get(axes, 0.0) + params * b / step.shard
    for axes, size in groups.items():
        suffix = "" if axes == dense_axes else ".experts"
        if axes == step.zero_group and not head:
            names.append(zero_scatter(e, f"{prefix}.grad{suffix}", dep, size, axes))
        else:
            names.append(all_reduce(e, f"{prefix}.grad{suffix}", dep, size, axes))
    return names


def zero_scatter(
    e: Emits, prefix: str, after: str | None, size_bytes: float, axes: tuple[str, ...]
) -> str:
    """ZeRO-1: the async reduce-scatter of a layer's gradient (``size_bytes`` in) over
    the data axes, in place of its all-reduce (see :mod:`.host_offload`)."""
    fields = dict(collective="reduce-scatter", size_bytes=size_bytes, axes=axes, overlap=True)
    fields["role"] = e.step.issuer(REPLICAS, axes)
    return e.out.add(f"{prefix}.zero_scatter", "collective", [after], **fields)


def all_reduce(
    e: Emits, prefix: str, after: str | None, size_bytes: float, axes: tuple[str, ...]
) -> str:
    """An async gradient all-reduce of ``size_bytes`` over ``axes`` (mesh axes of
    different roles); over two or more, hierarchical as a 2-D all-reduce is: a
    reduce-scatter over the last axis, an all-reduce of the shard over the others, an
    all-gather back over the last (the three issued by the role of the whole group).
    Returns the last op's name."""
    role = e.step.issuer(REPLICAS, axes)

    def add(name: str, op: str, dep: str | None, size: float, over: tuple[str, ...]) -> str:
        fields = dict(collective=op, size_bytes=size, axes=over, role=role)
        fields["overlap"] = e.step.args.async_collectives
        return e.out.add(f"{prefix}.{name}", "collective", [dep], **fields)

    if len(axes) == 1:
        return add("allreduce", "all-reduce", after, size_bytes, axes)
    inner, outer = axes[-1:], axes[:-1]
    shard = size_bytes / e.step.mesh[inner[0]]
    scattered = add("inner_reduce_scatter", "reduce-scatter", after, size_bytes, inner)
    reduced = add("allreduce", "all-reduce", scattered, shard, outer)
    return add("inner_all_gather", "all-gather", reduced, size_bytes, inner)
