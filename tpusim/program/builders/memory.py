"""HBM a training step keeps on one chip, per pipeline stage and over the step.

Per stage, per chip (parameters are tensor- and expert-local, fsdp-sharded):

* weights: ``dtype`` bytes per parameter; optimiser state:
  ``TrainingStep.optimizer_state_bytes`` (fp32 master, two fp32 moments; bf16 moments
  with ``weight_dtype: bf16``); gradients: the master weights' bytes (fp32 with
  ``weight_dtype: fp32``), at least ``gradient_dtype``'s (the sharded buffer,
  :func:`held_gradient_bytes`). With ``shard_optimizer_over_data`` (ZeRO-1) the
  optimiser state (the fp32 master and the moments) is split over the data axes too;
  with
  ``optimizer_memory_host_offload`` it lives in host memory and one layer's share is
  in HBM while it is updated (streamed, an assumption); with
  ``param_memory_host_offload`` the weights live in host memory and
  ``fsdp_prefetch_layers`` layers' shards are in HBM at once;
* activations saved for the backward, per layer and microbatch, without remat
  (``remat_policy: none``): ``tokens * (6 d_model / sp + attention)`` elements (norm
  inputs and outputs, residual, split over the tensor axis ``sp`` under sequence
  parallelism; Q, K, V and the attention output, with MLA also its two latents) + with
  ``attention_kernel: naive`` the softmax output (``seqs * heads * seq * keys``), with
  ``flash`` only the fp32 logsumexp (``seqs * heads * seq``, 4 bytes each) + the MLP
  hidden (2 x ``rows *
  d_ff``: before and after the activation; 3 x gated) + for MoE the dispatched tokens
  (``rows * d_model``) and the shared experts' hidden, all in ``dtype``; under context
  parallelism also the K and V gathered from the other chips. Under a remat
  policy only the tensors it keeps on device (:mod:`.remat`; the layer input at
  least) are held, and while a layer's backward runs its whole set is live (buffers,
  the kept ones not counted twice, under sequence parallelism with the two blocks'
  inputs gathered whole) with the next layer's offloaded tensors being prefetched. A
  stage holds :meth:`PipelineSchedule.in_flight` chunk-microbatches of activations at
  its peak;
* buffers, the larger of two phases that are not live at once: a layer's (under FSDP
  the gathered weights of ``fsdp_prefetch_layers`` layers and the gradient of its
  largest weight tensor before that tensor's reduce-scatter; under remat the layer's
  live set, above) and the loss's (with a vocabulary :data:`LOGITS_BUFFERS` buffer of
  logits, in ``num_vocab_tiling`` tiles).

Takeaway: weights, optimiser and gradients shrink with every axis that shards them
(tensor, expert, fsdp, context, pipeline; the optimiser also with ZeRO-1);
activations shrink with microbatches, 1F1B, remat, offload, sequence and context
parallelism.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tpusim.program.builders.attention import logsumexp_bytes
from tpusim.program.builders.layer_shape import LayerShape
from tpusim.program.builders.parallel import kv_bytes

if TYPE_CHECKING:
    from tpusim.program.builders.training import TrainingStep

LOGITS_BUFFERS = 1
"""Buffers of ``head_tokens x vocab_local`` elements live at the loss: the logits,
whose gradient (softmax minus the one-hot targets, an elementwise fusion of the same
shape and dtype) XLA writes into the logits' own buffer once they are dead (buffer
assignment shares an elementwise user's output with a dead operand of the same
shape); the loss's per-row reductions are negligible. An assumption; it was 2 (logits
and gradient apart), which put 11.7 GiB on Llama 3.1 8B at 24,576 tokens per chip."""

#: Categories of :class:`StageMemory`, in the order of a report or a stacked plot.
MEMORY_PARTS = ("weights", "optimizer", "gradients", "activations", "buffers")


@dataclass(frozen=True)
class StageMemory:
    """Peak bytes per chip of one pipeline stage, by category."""

    stage: int
    weights_bytes: float
    optimizer_bytes: float
    gradients_bytes: float
    activations_bytes: float
    buffers_bytes: float

    @property
    def total_bytes(self) -> float:
        return sum(self.parts().values())

    def parts(self) -> dict[str, float]:
        """Category -> bytes, in :data:`MEMORY_PARTS` order."""
        return {part: getattr(self, f"{part}_bytes") for part in MEMORY_PARTS}


def saved_bytes(s: LayerShape) -> float:
    """Activations one layer saves for its backward for one microbatch (no
    recomputation), in bytes."""
    if s.attention == "mla":
        qk = s.heads * (s.head_dim + s.rope_head_dim)
        attention = s.q_lora_rank + s.kv_lora_rank + 2 * qk + 2 * s.heads * s.head_dim
    else:
        attention = (2 * s.heads + 2 * s.kv) * s.head_dim
    hidden = s.mlp_matrices if s.mlp == "gated" else 2
    mlp = hidden * s.rows * s.d_ff + hidden * s.tokens * s.shared_d_ff
    return (
        s.tokens * (6 * s.d_model // s.sequence_shards + attention)
        + mlp
        + (s.rows * s.d_model if s.experts else 0)
    ) * s.bytes_per_element + attention_saved_bytes(s)


def attention_saved_bytes(s: LayerShape) -> float:
    """What the attention proper keeps beyond Q, K, V and its output: the softmax
    output (``seqs * heads * seq * keys`` elements) with ``naive``; the logsumexp (fp32
    per query row and head, :func:`.attention.logsumexp_bytes`) with ``flash``."""
    if s.attention_kernel == "flash":
        return logsumexp_bytes(s.attention_call)
    return s.seqs * s.heads * s.seq * s.keys * s.bytes_per_element


def stage_memory(step: TrainingStep, stage: int) -> StageMemory:
    """The peak memory of pipeline stage ``stage`` (see the module docstring). Every
    per-layer count depends on a layer only through its shape (``step.shape``: one or
    two objects), so each is counted once per shape (``first``: a layer of each), and
    a max over the layers is the max over those; a chunk is walked as runs of one
    shape (:meth:`TrainingStep.layer_runs`), adding a layer's bytes once per layer."""
    a, b = step.args, step.bytes_per_element
    params = step.stage_params(stage) / step.shard
    s = step.schedule
    chunks = [step.layer_runs(s.chunk_range(c)) for c in s.stage_chunks(stage)]
    first = list({id(step.shape(f)): f for runs in chunks for f, _ in runs}.values())
    kept = {id(step.shape(layer)): kept_bytes(step, layer) for layer in first}
    per_chunk = max(
        sum(kept[id(step.shape(f))] for f, n in runs for _ in range(n)) for runs in chunks
    )
    optimizer = params * step.optimizer_state_bytes / step.zero_shard
    largest = max(step.params(layer).total for layer in first) / step.shard
    layer_phase = max(transient_bytes(step, layer) for layer in first)
    layer_phase += fsdp_buffers(step, first)
    buffers = max(layer_phase, logits_bytes(step))
    if a.optimizer_memory_host_offload:
        optimizer, buffers = 0.0, buffers + largest * step.optimizer_state_bytes / step.zero_shard
    weights = params * b
    if a.param_memory_host_offload:
        weights, buffers = 0.0, buffers + a.prefetch_layers * largest * b
    return StageMemory(
        stage=stage,
        weights_bytes=weights,
        optimizer_bytes=optimizer,
        gradients_bytes=params * held_gradient_bytes(step),
        activations_bytes=s.in_flight(stage) * per_chunk,
        buffers_bytes=buffers,
    )


def held_gradient_bytes(step: TrainingStep) -> float:
    """Bytes per parameter of the gradients the step holds: those of the master
    weights' dtype (fp32 with ``weight_dtype: fp32``: MaxText differentiates its fp32
    parameters, and XLA's buffers of the v5e 128B run hold the gradients of every
    scanned weight as one fp32 stack), at least ``gradient_dtype``'s (the dtype they
    are reduced in)."""
    master = 4.0 if step.args.weight_dtype == "fp32" else 0.0
    return max(step.gradient_bytes, master)


def kept_bytes(step: TrainingStep, layer: int) -> float:
    """HBM one layer keeps for its backward per microbatch: every activation without
    remat, else the tensors the policy keeps on device (the layer input at least)."""
    shape = step.shape(layer)
    if not step.remat.recomputes:
        return saved_bytes(shape) + gathered_kv_bytes(shape)
    return step.remat.bytes_at(shape, "device")


def gathered_kv_bytes(s: LayerShape) -> float:
    """Under context parallelism, the K and V of the other chips' positions one layer
    all-gathers (the backward reads them too); 0 without."""

    return kv_bytes(s) * (1 - s.seq / s.keys)


def transient_bytes(step: TrainingStep, layer: int) -> float:
    """HBM live while one layer's backward runs under remat: its whole saved set
    (recomputed, fetched from host or kept; the kept tensors but the layer input are
    already counted in the activations), plus the next layer's offloaded tensors
    being prefetched; 0 without remat."""
    if not step.remat.recomputes:
        return 0.0
    shape = step.shape(layer)
    kept = step.remat.bytes_at(shape, "device", skip=("decoder_layer_input",))
    live = saved_bytes(shape) + gathered_kv_bytes(shape) + sequence_gathered_bytes(shape)
    return live - kept + step.offloaded_bytes(layer)


def sequence_gathered_bytes(s: LayerShape) -> float:
    """Under sequence parallelism (``sequence_shards`` > 1), the inputs of the attention
    and MLP blocks all-gathered whole (``tokens x d_model`` each) beyond the shards
    :func:`saved_bytes` counts: the matmuls read them whole (XLA's buffers of the v5e
    128B run, tensor 16, hold ``tokens x d_model`` bf16 arrays in the backward); 0
    without."""
    shards = s.sequence_shards
    return 2 * s.act_bytes * (1 - 1 / shards) if shards > 1 else 0.0


def logits_bytes(step: TrainingStep) -> float:
    """The loss's buffer: :data:`LOGITS_BUFFERS` of ``head_tokens x vocab_local``
    elements, divided by ``num_vocab_tiling`` (MaxText computes the logits and the
    loss in that many token tiles, one tile live at a time)."""
    tiles = step.args.num_vocab_tiling
    return LOGITS_BUFFERS * step.head_tokens * step.vocab_local * step.bytes_per_element / tiles


def fsdp_buffers(step: TrainingStep, layers: list[int]) -> float:
    """Under FSDP: the gathered weights of ``fsdp_prefetch_layers`` layers (the one
    running and the ones prefetched) and the largest weight tensor's whole gradient
    before its reduce-scatter (XLA reduce-scatters each weight's gradient as its
    weight-gradient matmul ends; :func:`largest_tensor`)."""
    if not step.fsdp_group:
        return 0.0
    gathered = max(step.gathered_params(layer) for layer in layers) * step.bytes_per_element
    gradient = max(largest_tensor(step.shape(layer), step) for layer in layers)
    return step.args.prefetch_layers * gathered + gradient * step.gradient_bytes


def largest_tensor(s: LayerShape, step: TrainingStep) -> float:
    """Elements of a layer's largest weight tensor (tensor-local, whole over fsdp): an
    attention projection (``d_model x heads x head_dim``, MLA's up-projections), an MLP
    matrix (``d_model x d_ff``) or, in a MoE layer, one stacked matrix of the chip's
    routed experts (``local_experts x d_model x d_ff``)."""
    attention = s.d_model * max(s.heads, s.kv) * (s.head_dim + s.rope_head_dim)
    if s.attention == "mla":
        attention = max(attention, s.kv_lora_rank * s.heads * 2 * s.head_dim)
    mlp = s.d_model * max(s.d_ff, s.shared_d_ff)
    experts = step.local_experts * s.d_model * s.d_ff if s.experts else 0
    return float(max(attention, mlp, experts))


def peak_stage(step: TrainingStep) -> StageMemory:
    """The stage with the most bytes per chip (the one that must fit; the first of
    equals). Two stages of the same :func:`stage_content` differ only in their
    activations, ``in_flight(stage)`` chunk-microbatches of the same bytes, and
    :meth:`PipelineSchedule.in_flight` never grows with the stage, so only the first
    stage of each content is counted (the same answer as counting every stage)."""
    seen: set[tuple[tuple[tuple[int, int], ...], ...]] = set()
    stages = []
    for stage in range(step.schedule.stages):
        content = stage_content(step, stage)
        if content not in seen:
            seen.add(content)
            stages.append(stage_memory(step, stage))
    return max(stages, key=lambda m: m.total_bytes)


def stage_content(step: TrainingStep, stage: int) -> tuple[tuple[tuple[int, int], ...], ...]:
    """What :func:`stage_memory` reads of stage ``stage`` besides its index: its chunks,
    each as how many layers of each shape (by identity) it has, in no order (the
    memory sums over a chunk's layers and takes maxima over chunks and shapes)."""
    s = step.schedule
    out = []
    for chunk in s.stage_chunks(stage):
        runs = step.layer_runs(s.chunk_range(chunk))
        out.append(tuple(sorted((id(step.shape(first)), n) for first, n in runs)))
    return tuple(sorted(out))


def memory_timeline(step: TrainingStep, stage: int) -> list[tuple[float, dict[str, float]]]:
    """Bytes by category over the step on stage ``stage``, layer by layer: (fraction of
    the stage's schedule done, bytes per :data:`MEMORY_PARTS` from that point on), one
    point per layer of each forward or backward of a chunk-microbatch (the schedule's
    order: GPipe, 1F1B, interleaved; bubbles left out) and one for the loss on the
    stage that computes it, then a last point at 1.0 with no activations.

    Through a forward, each layer adds what it keeps for its backward
    (:func:`kept_bytes`) while its weights are gathered (:func:`fsdp_buffers` of that
    layer, freed after it); the loss holds :func:`logits_bytes`; through a backward,
    each layer (in reverse) holds its remat live set (:func:`transient_bytes`) and its
    gathered weights and gradient buffer, then frees what it kept. The gradients are
    held from the first backward on (MaxText's scan writes every layer's gradient into
    one stacked buffer made when the backward loop starts), the whole step when
    microbatches accumulate. The peak of the points is :func:`stage_memory`'s total
    when every layer has one shape."""
    peak = stage_memory(step, stage)
    s = step.schedule
    layers = _largest_chunk(step, stage)
    kept = [kept_bytes(step, layer) for layer in layers]
    scale = peak.activations_bytes / s.in_flight(stage) / sum(kept) if sum(kept) else 0.0
    order, loss_turn = s.order(stage), _loss_turn(step, stage)
    accumulates = s.microbatches > 1
    states: list[tuple[float, float, float]] = []  # gradients, activations, buffers
    held = 0.0
    for k, direction in enumerate(order):
        grads = peak.gradients_bytes if accumulates or -1 in order[: k + 1] else 0.0
        walk = list(zip(layers, kept, strict=True))
        for layer, size in walk if direction > 0 else walk[::-1]:
            during = held + size * scale if direction > 0 else held
            states.append((grads, during, _layer_buffers(step, layer, direction < 0)))
            held += size * scale * direction
        if k == loss_turn:
            states.append((grads, held, logits_bytes(step)))
    fixed = peak.parts()
    points = [
        (i / len(states), fixed | {"gradients": g, "activations": a, "buffers": b})
        for i, (g, a, b) in enumerate(states)
    ]
    final = {"gradients": peak.gradients_bytes if accumulates else 0.0}
    return [*points, (1.0, fixed | final | {"activations": 0.0, "buffers": 0.0})]


def _layer_buffers(step: TrainingStep, layer: int, backward: bool) -> float:
    """Buffers while one layer runs: its gathered weights (``fsdp_prefetch_layers`` of
    them under FSDP) in the forward; in the backward also its gradient before the
    reduce-scatter (:func:`fsdp_buffers`) and its remat live set."""
    if backward:
        return fsdp_buffers(step, [layer]) + transient_bytes(step, layer)
    if not step.fsdp_group:
        return 0.0
    gathered = step.gathered_params(layer) * step.bytes_per_element
    return step.args.prefetch_layers * gathered


def _largest_chunk(step: TrainingStep, stage: int) -> list[int]:
    """The layers of the stage's chunk that keeps the most bytes (the one
    :func:`stage_memory` counts per chunk-microbatch)."""
    s = step.schedule
    chunks = [list(s.chunk_range(c)) for c in s.stage_chunks(stage)]
    return max(chunks, key=lambda c: sum(kept_bytes(step, layer) for layer in c))


def _loss_turn(step: TrainingStep, stage: int) -> int:
    """Index in the stage's order of the forward after which it computes the loss (the
    stage holding the last layer: its last forward before its first backward; -1 for
    the other stages)."""
    s = step.schedule
    if stage != (len(s.chunk_layers) - 1) % s.stages:
        return -1
    order = s.order(stage)
    return order.index(-1) - 1
