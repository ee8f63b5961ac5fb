"""HBM a training step keeps on one chip, per pipeline stage and over the step.

Per stage, per chip (parameters are tensor- and expert-local, fsdp-sharded):

* weights: ``dtype`` bytes per parameter; optimiser state: :data:`ADAM_STATE_BYTES`
  (fp32 master, two fp32 moments); gradients: ``gradient_dtype`` bytes (the sharded
  accumulator);
* activations saved for the backward, per layer and microbatch: ``tokens * (6 d_model
  + attention)`` elements (norm inputs and outputs, residual; Q, K, V and the
  attention output, with MLA also its two latents) + with ``attention_kernel: naive``
  the softmax output (``seqs * heads * seq**2``), with ``flash`` only the fp32
  logsumexp (``seqs * heads * seq``, 4 bytes each) + the MLP hidden (2 x ``rows *
  d_ff``: before and after the activation; 3 x gated) + for MoE the dispatched tokens
  (``rows * d_model``) and the shared experts' hidden, all in ``dtype``. With
  ``recompute`` only a layer's input (``tokens * d_model``) is kept and one layer's
  full set is live while it is recomputed. A stage holds
  :meth:`PipelineSchedule.in_flight` chunk-microbatches of activations at its peak;
* buffers: under FSDP the gathered weights of :data:`FSDP_PREFETCH_LAYERS` layers and
  one layer's full gradient; with a vocabulary the logits and their gradient.

Takeaway: weights, optimiser and gradients shrink with every axis that shards them
(tensor, expert, fsdp, pipeline); activations shrink with microbatches, 1F1B and
recomputation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tpusim.program.builders.attention import logsumexp_bytes
from tpusim.program.builders.layers import LayerShape

if TYPE_CHECKING:
    from tpusim.program.builders.training import TrainingPlan

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
        s.tokens * (6 * s.d_model + attention) + mlp + (s.rows * s.d_model if s.experts else 0)
    ) * s.bytes_per_element + attention_saved_bytes(s)


def attention_saved_bytes(s: LayerShape) -> float:
    """What the attention proper keeps beyond Q, K, V and its output: the softmax
    output (``seqs * heads * seq**2`` elements) with ``naive``; the logsumexp (fp32
    per query row and head, :func:`.attention.logsumexp_bytes`) with ``flash``."""
    if s.attention_kernel == "flash":
        return logsumexp_bytes(s.attention_call)
    return s.seqs * s.heads * s.seq * s.seq * s.bytes_per_element


def stage_memory(plan: TrainingPlan, stage: int) -> StageMemory:
    """The peak memory of pipeline stage ``stage`` (see the module docstring)."""
    from tpusim.program.builders.training import ADAM_STATE_BYTES, FSDP_PREFETCH_LAYERS

    b = plan.bytes_per_element
    params = plan.stage_params(stage) / plan.shard
    s = plan.schedule
    chunks = [list(s.chunk_range(c)) for c in s.stage_chunks(stage)]
    layers = [layer for chunk in chunks for layer in chunk]
    if plan.args.recompute:
        per_chunk = max(len(chunk) for chunk in chunks) * plan.dense.act_bytes
        transient = max(saved_bytes(plan.shape(layer)) for layer in layers)
    else:
        per_chunk = max(sum(saved_bytes(plan.shape(layer)) for layer in c) for c in chunks)
        transient = 0.0
    buffers = transient + 2 * plan.head_tokens * plan.vocab_local * b
    if plan.fsdp_group:
        largest = max(plan.params(layer).total for layer in layers)
        buffers += largest * (FSDP_PREFETCH_LAYERS * b + plan.gradient_bytes)
    return StageMemory(
        stage=stage,
        weights_bytes=params * b,
        optimizer_bytes=params * ADAM_STATE_BYTES,
        gradients_bytes=params * plan.gradient_bytes,
        activations_bytes=s.in_flight(stage) * per_chunk,
        buffers_bytes=buffers,
    )


def peak_stage(plan: TrainingPlan) -> StageMemory:
    """The stage with the most bytes per chip (the one that must fit)."""
    stages = [stage_memory(plan, stage) for stage in range(plan.schedule.stages)]
    return max(stages, key=lambda m: m.total_bytes)


def memory_timeline(plan: TrainingPlan, stage: int) -> list[tuple[float, dict[str, float]]]:
    """Bytes by category over the step on stage ``stage``: (fraction of the stage's
    schedule done, bytes per :data:`MEMORY_PARTS`) after each forward or backward of
    a chunk-microbatch, bubbles left out; activations rise with the forwards and fall
    with the backwards as the schedule (GPipe, 1F1B, interleaved) orders them."""
    peak = stage_memory(plan, stage)
    per_chunk = peak.activations_bytes / plan.schedule.in_flight(stage)
    held = plan.schedule.held(stage)
    points = [(0.0, peak.parts() | {"activations": 0.0})]
    for k, count in enumerate(held, start=1):
        points.append((k / len(held), peak.parts() | {"activations": count * per_chunk}))
    return points
