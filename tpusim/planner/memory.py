"""Memory pruning: prepare each candidate with the training builder and keep those whose
peak stage fits in the chip's HBM, before anything is simulated.

The builder's own checks (:func:`~tpusim.program.builders.prepare_training`: heads,
kv_heads and d_ff divisible by the tensor axis, experts by the expert axis, the batch
by the batch axes and the microbatches, a pipeline no deeper than the layers) reject a
layout with a :class:`~tpusim.program.ir.ProgramError`; the memory model
(:func:`~tpusim.program.builders.memory.peak_stage`, closed form) gives its peak
bytes per chip, against the capacity the run's check uses
(:class:`~tpusim.hardware.MemoryTracker`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import TYPE_CHECKING, Any

from tpusim.hardware import MemoryTracker
from tpusim.planner.candidates import Layout
from tpusim.program.builders import TrainingStep, prepare_training
from tpusim.program.builders.counts import LocalParameters
from tpusim.program.builders.layer_shape import LayerShape
from tpusim.program.builders.memory import peak_stage
from tpusim.program.builders.remat import Placement, RematPlacement
from tpusim.program.builders.roles import PIPELINE
from tpusim.program.ir import ProgramError

if TYPE_CHECKING:
    from tpusim.config.chip import ChipSpec


class _MemoRemat(RematPlacement):
    """A remat placement whose byte counts are memoised per layer shape object: the memory
    model asks for each of a step's layers, whose shapes are one or two objects of the
    plan (keyed by identity: hashing a shape costs as much as the count)."""

    def __init__(self, remat: RematPlacement):
        super().__init__(remat.policy, remat.placement)
        object.__setattr__(self, "memo", {})

    def bytes_at(self, s: LayerShape, where: Placement, skip: tuple[str, ...] = ()) -> float:
        memo: dict[tuple[int, str, tuple[str, ...]], float] = self.memo  # type: ignore[attr-defined]
        key = (id(s), where, skip)
        if key not in memo:
            memo[key] = super().bytes_at(s, where, skip)
        return memo[key]


class _MemoStep(TrainingStep):
    """A step whose per-layer parameter counts are memoised per layer shape object
    (the memory model sums them over every layer of every stage)."""

    def params(self, layer: int) -> LocalParameters:
        memo: dict[int, LocalParameters] = self.__dict__.setdefault("memo", {})
        shape = self.shape(layer)
        if id(shape) not in memo:
            memo[id(shape)] = super().params(layer)
        return memo[id(shape)]


def memo_step(step: TrainingStep) -> TrainingStep:
    """``step`` with memoised per-layer counts (same numbers: the tests compare)."""
    values = {f.name: getattr(step, f.name) for f in fields(step)}
    return _MemoStep(**(values | {"remat": _MemoRemat(step.remat)}))


@dataclass(frozen=True)
class Fitted:
    """A layout the builder accepts: peak HBM per chip of its peak stage, the chip's
    HBM capacity (bytes) and the builder fields it was planned on (``base``)."""

    layout: Layout
    peak_hbm_bytes: float
    capacity_bytes: float
    base: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @cached_property
    def step(self) -> TrainingStep:
        """The builder's step of the layout: kept from :func:`assess`, or built on first
        use when the layout was assessed in a worker process (only figures come back)."""
        return prepare_training(**(self.base | self.layout.fields()))

    @property
    def fits(self) -> bool:
        return self.peak_hbm_bytes <= self.capacity_bytes

    @property
    def shortfall_bytes(self) -> float:
        """Bytes over capacity (<= 0 when it fits)."""
        return self.peak_hbm_bytes - self.capacity_bytes


Outcome = Fitted | str | None
"""What pruning made of one layout: planned (fitting or not), rejected by the
builder's checks (the reason, naming the layout) or skipped (None, see :func:`prune`)."""


@dataclass
class MemoryReport:
    """What pruning found: layouts considered, rejected by the builder's checks (with
    the first reason seen), too big for HBM, and those that fit."""

    considered: int = 0
    rejected: int = 0
    first_rejection: str | None = None
    too_big: list[Fitted] = field(default_factory=list)
    fitting: list[Fitted] = field(default_factory=list)

    @property
    def planned(self) -> int:
        """Layouts the builder accepted (fitting or not)."""
        return len(self.too_big) + len(self.fitting)

    def add(self, outcome: Outcome) -> None:
        """One more layout considered, with what pruning made of it."""
        self.considered += 1
        if isinstance(outcome, str):
            self.rejected += 1
            self.first_rejection = self.first_rejection or outcome
        elif outcome is not None:
            (self.fitting if outcome.fits else self.too_big).append(outcome)

    def smallest_shortfall(self) -> Fitted | None:
        """The accepted layout that misses HBM by the fewest bytes (None: none)."""
        return min(self.too_big, key=lambda f: f.shortfall_bytes, default=None)


def assess(layout: Layout, base: dict[str, Any], chip: ChipSpec) -> Fitted:
    """``layout`` planned on top of the builder fields ``base``; raises ProgramError
    when the builder rejects it."""
    step = prepare_training(**(base | layout.fields()))
    capacity = MemoryTracker(chip).capacity_bytes()
    fitted = Fitted(layout, peak_stage(memo_step(step)).total_bytes, capacity, base)
    object.__setattr__(fitted, "step", step)  # the cached_property's value, already built
    return fitted


def outcomes(layouts: Iterable[Layout], base: dict[str, Any], chip: ChipSpec) -> Iterator[Outcome]:
    """Each layout of ``layouts`` planned, in order. A mesh and remat whose smallest
    microbatch count fits keeps only that count among those without a pipeline (more
    accumulation steps only add weight gathers there): the others are skipped."""
    settled: set[tuple[object, ...]] = set()
    for layout in layouts:
        key = (tuple(layout.mesh.items()), layout.remat.name, layout.flags)
        if PIPELINE.name not in layout.mesh and key in settled:
            yield None
            continue
        try:
            fitted = assess(layout, base, chip)
        except ProgramError as exc:
            yield f"{layout.label()}: {exc}"
            continue
        if fitted.fits:
            settled.add(key)
        yield fitted


def prune(layouts: Iterable[Layout], base: dict[str, Any], chip: ChipSpec) -> MemoryReport:
    """Every layout of ``layouts`` planned and sorted into the report's lists
    (:func:`outcomes`)."""
    report = MemoryReport()
    for outcome in outcomes(layouts, base, chip):
        report.add(outcome)
    return report
