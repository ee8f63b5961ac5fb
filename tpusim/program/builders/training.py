"""The transformer training step (forward, backward, optimiser) on one chip.

Per chip:

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
"""

from __future__ import annotations

from dataclasses import dataclass

from tpusim.program.builders.checks import check_training
from tpusim.program.builders.layers import (
    BACKWARD_ELEMENTWISE_FACTOR,
    LayerShape,
    LayerStep,
    Phase,
    emit_step,
    layer_steps,
)
from tpusim.program.builders.mesh import batch_axes, collective_axes
from tpusim.program.builders.oplist import OpList
from tpusim.program.ir import Program

__all__ = [
    "ADAM_STATE_BYTES",
    "BACKWARD_ELEMENTWISE_FACTOR",
    "FSDP_PREFETCH_LAYERS",
    "TrainingPlan",
    "training_step",
]

ADAM_STATE_BYTES = 12.0
"""Optimiser bytes per parameter besides the weights: fp32 master copy + two fp32 moments."""

FSDP_PREFETCH_LAYERS = 2
"""Layers of gathered weights live at once under FSDP (the current one and the next)."""


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
    ints = dict(
        layers=layers,
        d_model=d_model,
        d_ff=d_ff,
        heads=heads,
        head_dim=head_dim,
        seq=seq,
        batch=batch,
    )
    axes = dict(
        data_axis=data_axis, fsdp_axis=fsdp_axis, tensor_axis=tensor_axis, expert_axis=expert_axis
    )
    b, mesh, sizes = check_training(
        ints, experts=experts, top_k=top_k, dtype=dtype, mesh=mesh, axes=axes
    )
    plan = TrainingPlan.of(ints, experts, top_k, dtype, b, mesh, axes, sizes)
    out = OpList()
    last, grad_syncs = emit_layers(out, plan)
    out.add(
        "optimizer",
        "elementwise",
        [last, *grad_syncs],
        bytes=plan.local_params * (2 * ADAM_STATE_BYTES + 2 * b),
    )
    kind = f"moe{experts}x{top_k}" if experts else "dense"
    return Program(
        name=f"training_step[{kind},L{layers},d{d_model},B{batch}x{seq}]",
        ops=tuple(out.ops),
        mesh=mesh,
        memory_bytes={"hbm": float(plan.hbm_bytes())},
    )


@dataclass(frozen=True)
class TrainingPlan:
    """What one chip does in a training step: its layer shape and the collective
    groups. ``dense_params`` and ``expert_params`` are the parameters of one layer
    the chip computes with (tensor- and expert-local, full over fsdp); gradients are
    all-reduced over ``dense_axes`` (dense weights: every batch axis but fsdp, which
    shards them) and ``expert_axes`` (expert weights: not over the expert axis
    either); ``shard`` is the fsdp size (1 without FSDP)."""

    layers: int
    dtype: str
    layer: LayerShape
    fsdp_group: tuple[str, ...]
    dense_axes: tuple[str, ...]
    expert_axes: tuple[str, ...]
    shard: int
    dense_params: int
    expert_params: int

    @classmethod
    def of(
        cls,
        ints: dict[str, int],
        experts: int,
        top_k: int,
        dtype: str,
        b: float,
        mesh: dict[str, int],
        axes: dict[str, str | None],
        sizes: dict[str, int],
    ) -> TrainingPlan:
        """The plan of checked arguments (see :func:`training_step`)."""
        data, fsdp = axes["data_axis"], axes["fsdp_axis"]
        tensor, expert = axes["tensor_axis"], axes["expert_axis"]
        batch = batch_axes(data, fsdp, expert)
        shards = 1
        for axis in batch:
            shards *= mesh[axis]
        tp, ep = sizes["tensor_axis"], sizes["expert_axis"]
        layer = LayerShape(
            seqs=ints["batch"] // shards,
            seq=ints["seq"],
            d_model=ints["d_model"],
            heads=ints["heads"] // tp,
            head_dim=ints["head_dim"],
            d_ff=ints["d_ff"] // tp,
            experts=experts,
            top_k=top_k,
            bytes_per_element=b,
            tensor=collective_axes(mesh, [tensor]),
            expert=collective_axes(mesh, [expert]),
        )
        dense, expert_params = _layer_params(layer, experts // ep)
        fsdp_group = collective_axes(mesh, [fsdp])
        return cls(
            layers=ints["layers"],
            dtype=dtype,
            layer=layer,
            fsdp_group=fsdp_group,
            dense_axes=collective_axes(mesh, [a for a in batch if a != fsdp]),
            expert_axes=collective_axes(mesh, [a for a in batch if a not in (fsdp, expert)]),
            shard=sizes["fsdp_axis"] if fsdp_group else 1,
            dense_params=dense,
            expert_params=expert_params,
        )

    @property
    def layer_params(self) -> int:
        return self.dense_params + self.expert_params

    @property
    def local_params(self) -> float:
        """Parameters the chip holds (and updates) over all layers."""
        return self.layers * self.layer_params / self.shard

    def hbm_bytes(self) -> float:
        """Resident bytes: weights, gradients and Adam state of the local parameters,
        saved activations of every layer and, with FSDP, the gathered weights."""
        b = self.layer.bytes_per_element
        hbm = self.local_params * (2 * b + ADAM_STATE_BYTES) + self.layers * _saved_bytes(
            self.layer
        )
        if self.fsdp_group:
            hbm += (FSDP_PREFETCH_LAYERS + 1) * self.layer_params * b
        return hbm


def _layer_params(s: LayerShape, local_experts: int) -> tuple[int, int]:
    """Dense and expert parameters of one layer the chip computes with."""
    dense = 4 * s.d_model * s.heads * s.head_dim + 2 * s.d_model
    if s.experts:
        return dense + s.d_model * s.experts, local_experts * 2 * s.d_model * s.d_ff
    return dense + 2 * s.d_model * s.d_ff, 0


def _saved_bytes(s: LayerShape) -> float:
    """Activations one layer saves for its backward (no rematerialisation)."""
    return (
        s.tokens * (6 * s.d_model + 4 * s.heads * s.head_dim)
        + s.seqs * s.heads * s.seq * s.seq
        + 2 * s.rows * s.d_ff
        + (s.rows * s.d_model if s.experts else 0)
    ) * s.bytes_per_element


def emit_layers(out: OpList, plan: TrainingPlan) -> tuple[str, list[str]]:
    """The forward of layers 0..L-1 then the backward of L-1..0, with the FSDP
    gathers and the gradient collectives; returns the last compute op's name and the
    gradient collectives' names."""
    steps = layer_steps(plan.layer)
    stages: list[tuple[int, Phase]] = [(layer, "fwd") for layer in range(plan.layers)]
    stages += [(layer, "bwd") for layer in reversed(range(plan.layers))]
    stage_end: list[str] = []
    gathers: list[str] = []
    grad_syncs: list[str] = []
    last: str | None = None
    for i, (layer, phase) in enumerate(stages):
        prefix = f"L{layer}"
        gather = None
        if plan.fsdp_group:
            prefetch_after = (
                stage_end[i - FSDP_PREFETCH_LAYERS] if i >= FSDP_PREFETCH_LAYERS else None
            )
            gather = weight_gather(
                out, plan, prefix, phase, gathers[-1] if gathers else None, prefetch_after
            )
            gathers.append(gather)
        last = emit_pass(out, plan, steps, prefix, phase, last, gather)
        stage_end.append(last)
        if phase == "bwd":
            grad_syncs += gradient_sync(out, plan, prefix, last)
    assert last is not None
    return last, grad_syncs


def weight_gather(
    out: OpList,
    plan: TrainingPlan,
    prefix: str,
    phase: Phase,
    previous_gather: str | None,
    stage_done: str | None,
) -> str:
    """The async FSDP all-gather of a layer's weights before its forward or backward.

    It follows the previous gather and waits for the stage
    :data:`FSDP_PREFETCH_LAYERS` back to end (so at most that many layers of
    gathered weights are live)."""
    return out.add(
        f"{prefix}.weights.allgather.{phase}",
        "collective",
        [previous_gather, stage_done],
        collective="all-gather",
        size_bytes=plan.layer_params * plan.layer.bytes_per_element,
        axes=plan.fsdp_group,
        overlap=True,
    )


def emit_pass(
    out: OpList,
    plan: TrainingPlan,
    steps: list[LayerStep],
    prefix: str,
    phase: Phase,
    last: str | None,
    gather: str | None,
) -> str:
    """One layer's forward (``steps`` in order) or backward (reversed), each op after
    the previous; the first also waits for the layer's gathered weights (FSDP)."""
    ordered = steps if phase == "fwd" else list(reversed(steps))
    extra = gather
    for step in ordered:
        if step.phase in ("both", phase):
            last = emit_step(out, step, prefix, phase, [last, extra], plan.dtype)
            extra = None
    assert last is not None
    return last


def gradient_sync(out: OpList, plan: TrainingPlan, prefix: str, after: str) -> list[str]:
    """The async collectives that sync one layer's weight gradients; returns their names.

    With FSDP a reduce-scatter over the fsdp axis first; then one all-reduce per
    distinct group of axes that replicate the weights (dense and expert weights
    share one when their groups coincide)."""
    b = plan.layer.bytes_per_element
    names: list[str] = []
    dep = after
    if plan.fsdp_group:
        dep = out.add(
            f"{prefix}.grad.reduce_scatter",
            "collective",
            [after],
            collective="reduce-scatter",
            size_bytes=plan.layer_params * b,
            axes=plan.fsdp_group,
            overlap=True,
        )
        names.append(dep)
    groups: dict[tuple[str, ...], float] = {}
    for axes, params in (
        (plan.dense_axes, plan.dense_params),
        (plan.expert_axes, plan.expert_params),
    ):
        if axes and params:
            groups[axes] = groups.get(axes, 0.0) + params * b / plan.shard
    for axes, size in groups.items():
        suffix = "" if axes == plan.dense_axes else ".experts"
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
