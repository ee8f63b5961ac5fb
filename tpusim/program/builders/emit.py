"""Ops of a planned training step: the forward loop, the head, the backward loop,
the gradient collectives and the optimiser (see :mod:`.training` for the model).

``iterations`` (default: the schedule's ``m v + p - 1``) sets how many times each loop
runs: a step with fewer iterations is the same program cut short, which is what the
reuse of identical iterations simulates (:mod:`tpusim.workloads.training_step`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tpusim.hardware.costs import DTYPE_BYTES
from tpusim.program.builders.gradients import gradient_sync
from tpusim.program.builders.host_offload import (
    fetch_activations,
    fetch_weights,
    offload_activations,
    optimizer_step,
)
from tpusim.program.builders.layers import TP, layer_steps
from tpusim.program.builders.memory import peak_stage
from tpusim.program.builders.oplist import OpList
from tpusim.program.builders.passes import PassOptions, emit_steps
from tpusim.program.builders.template import LayerStep, Phase, collective_step
from tpusim.program.builders.training import TrainingStep, prepare_training
from tpusim.program.ir import Op, Program


@dataclass
class Emitter:
    """Ops of one step in the making: the last compute op, the FSDP gathers and the
    ends of the layer passes (their prefetch points), the gradient collectives."""

    step: TrainingStep
    out: OpList = field(default_factory=OpList)
    last: str | None = None
    gathers: list[str] = field(default_factory=list)
    pass_ends: list[str] = field(default_factory=list)
    grad_syncs: list[str] = field(default_factory=list)
    host: list[str] = field(default_factory=list)
    marks: LoopMarks = field(default_factory=lambda: LoopMarks([], [], {}))
    chunk: list[int] = field(default_factory=list)
    by_layer: bool = False


@dataclass
class LoopMarks:
    """Where the loops' iterations are in a program: the last compute op of each
    forward and backward iteration (``fwd_ends[j]``, ``bwd_ends[j]``) and, for every
    op of an iteration, its ``(phase, j)``."""

    fwd_ends: list[str]
    bwd_ends: list[str]
    iteration_of: dict[str, tuple[str, int]]

    def mark(self, ops: list[Op], start: int, phase: Phase, j: int, last: str | None) -> None:
        """Ops ``ops[start:]`` form iteration ``j`` of ``phase``, ending with ``last``."""
        for op in ops[start:]:
            self.iteration_of[op.name] = (phase, j)
        (self.fwd_ends if phase == "fwd" else self.bwd_ends).append(last or "")


def emit_program(step: TrainingStep, iterations: int | None = None) -> Program:
    """The step's program; ``iterations`` of each loop (default: the schedule's)."""
    return emit_marked(step, iterations)[0]


def emit_marked(
    step: TrainingStep, iterations: int | None = None, layers: int | None = None
) -> tuple[Program, LoopMarks]:
    """The step's program and where its loop iterations are (see :class:`LoopMarks`).

    With ``layers`` the chunk is cut to its first ``layers`` layers (the rest of the
    step, the optimiser's bytes included, unchanged) and the marks are the layers'
    passes instead of the loop's iterations: the forward pass of layer ``j`` is
    forward "iteration" ``j``, the ``j``-th backward pass backward "iteration" ``j``."""
    n = step.schedule.iterations if iterations is None else iterations
    chunk = step.chunk()
    e = Emitter(step, chunk=chunk[:layers] if layers else chunk, by_layer=layers is not None)
    embed, head = embed_steps(step), head_steps(step)
    table = step.vocab_local * step.args.d_model
    if embed:
        e.last = emit_pass(e, embed, "embed", "fwd")
    for i in range(n):
        forward_iteration(e, i, n)
    if head:
        e.last = emit_pass(e, head, "head", "fwd")
        e.last = emit_pass(e, head, "head", "bwd")
        e.grad_syncs += gradient_sync(e, "head", table, 0)
    for i in range(n):
        backward_iteration(e, i, n)
    if embed:
        e.last = emit_pass(e, embed, "embed", "bwd")
        e.grad_syncs += gradient_sync(e, "embed", table, 0)
    optimizer_step(e, e.grad_syncs)
    program = Program(
        name=program_name(step),
        ops=tuple(e.out.ops),
        mesh=step.mesh,
        memory_bytes={"hbm": float(peak_stage(step).total_bytes)},
    )
    return program, e.marks


def program_name(step: TrainingStep) -> str:
    """``training_step[dense,L80,d8192,B1152x8192]`` (+ ``,p16m16`` when pipelined)."""
    a = step.args
    kind = f"moe{a.experts}x{a.top_k}" if a.experts else "dense"
    s = step.schedule
    pipe = f",{a.pipeline}p{s.stages}v{s.virtual}m{s.microbatches}" if s.stages > 1 else ""
    accumulate = f",m{s.microbatches}" if s.stages == 1 and s.microbatches > 1 else ""
    shape = f"L{a.layers},d{a.d_model},B{a.sequences}x{a.seq}"
    return f"training_step[{kind},{shape}{pipe}{accumulate}]"


def _prefix(i: int, n: int, slot: int) -> str:
    return f"L{slot}" if n == 1 else f"i{i}.L{slot}"


def forward_iteration(e: Emitter, i: int, n: int) -> None:
    """One microbatch through the chunk's layers, then the permute to the next stage."""
    start = len(e.out.ops)
    for slot, layer in enumerate(e.chunk):
        begin = len(e.out.ops)
        prefix = _prefix(i, n, slot)
        gather = weight_gather(e, prefix, "fwd", layer)
        e.last = emit_pass(e, e.step.steps(layer), prefix, "fwd", gather)
        e.pass_ends.append(e.last)
        offload_activations(e, prefix, layer)
        if e.by_layer:
            e.marks.mark(e.out.ops, begin, "fwd", slot, e.last)
    permute(e, f"i{i}", "fwd")
    if not e.by_layer:
        e.marks.mark(e.out.ops, start, "fwd", i, e.last)


def backward_iteration(e: Emitter, i: int, n: int) -> None:
    """The chunk's layers backward (each first recomputing what its remat policy
    does not keep, after fetching what it offloaded), their
    gradient collectives, then the permute to the previous stage."""
    step, start = e.step, len(e.out.ops)
    for j, (slot, layer) in enumerate(reversed(list(enumerate(e.chunk)))):
        begin = len(e.out.ops)
        prefix = _prefix(i, n, slot)
        gather = weight_gather(e, prefix, "bwd", layer)
        fetched = fetch_activations(e, prefix, layer)
        rerun = step.recompute_steps(layer)
        if rerun:
            e.last = emit_pass(e, rerun, f"{prefix}.re", "fwd", gather, fetched)
            gather = fetched = None
        e.last = emit_pass(e, step.steps(layer), prefix, "bwd", gather, fetched)
        e.pass_ends.append(e.last)
        params = step.params(layer)
        v = step.schedule.virtual
        e.grad_syncs += gradient_sync(e, prefix, v * params.dense, v * params.expert, i == n - 1)
        if e.by_layer:
            e.marks.mark(e.out.ops, begin, "bwd", j, e.last)
    permute(e, f"i{i}", "bwd")
    if not e.by_layer:
        e.marks.mark(e.out.ops, start, "bwd", i, e.last)


def permute(e: Emitter, prefix: str, phase: Phase) -> None:
    """The activations (forward) or their gradients (backward) of one microbatch to
    the next (previous) stage: a collective-permute over the pipeline axis (of the
    chip's sequence shard under sequence parallelism), asynchronous with
    ``async_collectives`` (the next iteration needs it: it hides only the collectives
    and gathers still in flight)."""
    if not e.step.pipeline_group:
        return
    e.last = e.out.add(
        f"{prefix}.permute.{phase}",
        "collective",
        [e.last],
        collective="collective-permute",
        size_bytes=e.step.dense.act_bytes / e.step.dense.sequence_shards,
        axes=e.step.pipeline_group,
        overlap=e.step.args.async_collectives,
        role=e.step.issuer(("layers",), e.step.pipeline_group),
    )


def weight_gather(e: Emitter, prefix: str, phase: Phase, layer: int) -> str | None:
    """The async FSDP all-gather of a layer's weights before its forward or backward.

    It follows the previous gather and waits for the pass
    ``fsdp_prefetch_layers`` back to end (so at most that many layers of
    gathered weights are live)."""
    step = e.step
    fetched = fetch_weights(e, prefix, phase, layer)
    if not step.fsdp_group:
        return fetched
    ends, depth = e.pass_ends, step.args.prefetch_layers
    after = ends[-depth] if len(ends) >= depth else None
    gather = e.out.add(
        f"{prefix}.weights.allgather.{phase}",
        "collective",
        [e.gathers[-1] if e.gathers else None, after, fetched],
        collective="all-gather",
        size_bytes=weight_bytes(step, layer),
        axes=step.fsdp_group,
        overlap=step.args.async_collectives,
        role=step.issuer(("weights",), step.fsdp_group),
    )
    e.gathers.append(gather)
    return gather


def weight_bytes(step: TrainingStep, layer: int) -> float:
    """Bytes of a layer's gathered weights: its dense weights in the step's dtype, its
    routed experts' in ``expert_weight_dtype`` (default: the step's dtype; ``fp32``
    where the recipe gathers the fp32 master weights)."""
    params = step.params(layer)
    dtype = step.args.expert_weight_dtype
    expert_bytes = DTYPE_BYTES[dtype] if dtype else step.bytes_per_element  # type: ignore[index]
    experts = 0.0 if step.experts_on_fsdp else params.expert * expert_bytes
    return params.dense * step.bytes_per_element + experts


def emit_pass(
    e: Emitter,
    steps: list[LayerStep],
    prefix: str,
    phase: Phase,
    gather: str | None = None,
    fetched: str | None = None,
) -> str:
    """One layer's forward (``steps`` in order) or backward (reversed), each op after
    the previous as :func:`~tpusim.program.builders.passes.emit_steps` overlaps them;
    the first also waits for the layer's gathered weights (FSDP) and its activations
    fetched from host (offload)."""
    ordered = steps if phase == "fwd" else list(reversed(steps))
    kept = [t for t in ordered if t.phase in ("both", phase)]
    after = [e.last, gather, fetched]
    return emit_steps(e.out, kept, prefix, phase, after, pass_options(e.step))


def pass_options(step: TrainingStep) -> PassOptions:
    """How the step's layer passes overlap their collectives."""
    a = step.args
    return PassOptions(a.async_collectives, a.collective_matmul, step.mesh, step.dtype)


def embed_steps(step: TrainingStep) -> list[LayerStep]:
    """The embedding lookup over the head's tokens and, vocabulary-parallel, the
    all-reduce of its output over the tensor axis; none without a vocabulary."""
    if not step.vocab_local:
        return []
    t, d, b = step.head_tokens, step.args.d_model, step.bytes_per_element
    tensor = step.dense.tensor
    return step.issued(
        [
            LayerStep("lookup", "embedding", m=t, bytes=d * b),
            *collective_step("tp_allreduce", "all-reduce", t * d * b, tensor, "fwd", TP),
        ]
    )


def head_steps(step: TrainingStep) -> list[LayerStep]:
    """The LM head (``tokens x d_model x vocab_local``) and its loss (softmax and
    cross-entropy, 2 passes over the logits); backward, the all-reduce of its input
    gradient over the tensor axis. None without a vocabulary."""
    if not step.vocab_local:
        return []
    t, d, vl = step.head_tokens, step.args.d_model, step.vocab_local
    b, tensor = step.bytes_per_element, step.dense.tensor
    return step.issued(
        [
            *collective_step("tp_allreduce", "all-reduce", t * d * b, tensor, "bwd", TP),
            LayerStep("proj", "matmul", m=t, k=d, n=vl),
            LayerStep("loss", "elementwise", bytes=2 * t * vl * b),
        ]
    )


def useful_flops(step: TrainingStep) -> float:
    """Model FLOPs per chip of the step (forward + 2x backward, no recomputation, no
    bubble): every microbatch through every stage's layers, averaged over the stages,
    plus the head."""
    s = step.schedule
    layers = sum(_forward_flops(layer_steps(step.shape(layer))) for layer in range(step.layers))
    head = _forward_flops(head_steps(step))
    return 3.0 * (s.microbatches * layers / s.stages + head)


def _forward_flops(steps: list[LayerStep]) -> float:
    return sum(st.forward_flops * st.useful for st in steps)


def training_step(**fields: object) -> Program:
    """One training step (forward, backward, optimiser) of a dense or MoE transformer.

    Takes the keywords of :class:`~tpusim.program.builders.args.TrainingArgs`: the
    model's shape, ``batch`` (or ``global_batch``) in sequences of ``seq`` tokens,
    ``mesh`` (axis name -> size; every axis of more than one chip plays a role), the
    ``*_axis`` role overrides and the schedule. See the module docstring for the ops,
    collectives and memory this produces. Raises :class:`ProgramError` naming the bad
    field.
    """
    return emit_program(prepare_training(**fields))
