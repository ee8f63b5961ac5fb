"""Pipeline schedules as the SPMD loop JAX and MaxText run them: layer chunks per
stage, loop iterations, the bubble and the activations each stage holds.

Definition: ``p`` stages (the pipeline axis), ``v`` virtual stages per stage
(``interleaved``; 1 otherwise), ``m`` microbatches. The ``L`` layers form ``p * v``
chunks of consecutive layers, balanced as evenly as possible (the first ``L mod pv``
chunks take one layer more); stage ``s`` holds chunks ``s, s + p, s + 2p, ...``.
Every chip runs the same loop of ``m v + p - 1`` iterations: an iteration computes
one microbatch on one chunk, then passes its activations to the next stage with a
collective-permute over the pipeline axis; the backward loop mirrors it. ``p - 1`` of
the iterations are the bubble (a stage has no microbatch yet, or none left).

Formula: with equal stages and free communication a step takes ``(m v + p - 1) / (m
v)`` of its bubble-free time; the bubble fraction is ``(p - 1) / (m v + p - 1)``.
GPipe and 1F1B take the same time and differ in the activations a stage holds at its
peak: GPipe keeps all ``m`` microbatches' (``m v`` chunk-microbatches), 1F1B at most
``p - s`` on stage ``s`` (``min(m, p)`` on stage 0); Megatron's interleaved 1F1B
holds ``2 (p - s - 1) + (v - 1) p + 1`` chunk-microbatches (Narayanan et al. 2021,
Megatron-LM ``schedules.py`` warm-up counts).

Takeaway: the bubble shrinks with more microbatches and with interleaving (``v``
divides it); 1F1B buys its memory saving for free.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

PipelineKind = Literal["gpipe", "1f1b", "interleaved"]
PIPELINE_SCHEDULES: tuple[PipelineKind, ...] = ("gpipe", "1f1b", "interleaved")


@dataclass(frozen=True)
class PipelineSchedule:
    """``stages`` (p), ``virtual`` (v), ``microbatches`` (m) and the layer count of
    each of the ``p * v`` chunks, in layer order."""

    stages: int
    virtual: int
    microbatches: int
    kind: PipelineKind
    chunk_layers: tuple[int, ...]

    @classmethod
    def of(cls, layers: int, stages: int, virtual: int, microbatches: int, kind: PipelineKind):
        """The schedule of ``layers`` layers; chunks balanced as evenly as possible."""
        chunks = stages * virtual
        base, extra = divmod(layers, chunks)
        sizes = tuple(base + (c < extra) for c in range(chunks))
        return cls(stages, virtual, microbatches, kind, sizes)

    @property
    def iterations(self) -> int:
        """Iterations of the forward loop (and of the backward loop): ``m v + p - 1``."""
        return self.microbatches * self.virtual + self.stages - 1

    @property
    def bubble_fraction(self) -> float:
        """Iterations in which a stage computes no microbatch: ``(p - 1) / (m v + p - 1)``."""
        return (self.stages - 1) / self.iterations

    @cached_property
    def chunk_starts(self) -> tuple[int, ...]:
        """The first layer of each chunk."""
        return (0, *itertools.accumulate(self.chunk_layers))[:-1]

    def chunk_range(self, chunk: int) -> range:
        """Layer indices of chunk ``chunk``."""
        start = self.chunk_starts[chunk]
        return range(start, start + self.chunk_layers[chunk])

    def stage_chunks(self, stage: int) -> list[int]:
        """Chunks stage ``stage`` holds: ``stage, stage + p, ...``."""
        return list(range(stage, self.stages * self.virtual, self.stages))

    def stage_layers(self, stage: int) -> list[int]:
        """Layer indices stage ``stage`` holds, over its chunks."""
        return [layer for c in self.stage_chunks(stage) for layer in self.chunk_range(c)]

    def in_flight(self, stage: int) -> int:
        """Chunk-microbatches of activations stage ``stage`` holds at its peak."""
        m, p, v = self.microbatches, self.stages, self.virtual
        if self.kind == "gpipe":
            return m * v
        if self.kind == "1f1b":
            return min(m, p - stage)
        return min(m * v, 2 * (p - stage - 1) + (v - 1) * p + 1)

    def order(self, stage: int) -> list[int]:
        """The forward (+1) and backward (-1) chunk-microbatches of stage ``stage`` in
        the order its schedule runs them (bubbles left out)."""
        total = self.microbatches * self.virtual
        warmup = total if self.kind == "gpipe" else self.in_flight(stage) - 1
        warmup = min(warmup, total)
        steady = [x for _ in range(total - warmup) for x in (1, -1)]
        return [1] * warmup + steady + [-1] * warmup

    def held(self, stage: int) -> list[int]:
        """Chunk-microbatches of activations held after each op of :meth:`order`."""
        out, level = [], 0
        for step in self.order(stage):
            level += step
            out.append(level)
        return out
