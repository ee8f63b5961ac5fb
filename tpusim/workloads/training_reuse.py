"""Reuse of identical loop iterations of a training step: watch a short simulated
loop, check that its steady iterations repeat, and extrapolate the whole step.

:class:`IterationClock` is an observer of the short run: when the last op of a loop
iteration finishes it notes the time and the bytes every link has carried so far, and
:meth:`IterationClock.steady` compares two successive steady iterations of each loop
(forward: the last two; backward: the two before the last, which runs the gradient
collectives) and gives one steady forward plus one steady backward iteration's share
of the step, compute, communication and busy times (integrals over the iteration's
window of the ops table) and link bytes, or None when they differ.
:func:`extrapolate` adds that share once per missing iteration.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

import numpy as np

from tpusim.results.observers import BaseObserver
from tpusim.results.overlap import breakdown
from tpusim.results.simulation import OpRecord, Results

if TYPE_CHECKING:
    from tpusim.network.base import Network
    from tpusim.program.builders.emit import LoopMarks

#: The op kind whose records are collectives (the rest count as compute, as the
#: engine's busy time counts them).
COLLECTIVE = "collective"
#: Prefix of the SPMD chip class's name in op records.
SPMD = "spmd"


@dataclass
class IterationShare:
    """What one steady forward plus one steady backward iteration add to a step."""

    step_s: float
    compute_s: float
    communication_s: float
    busy_s: float
    link_bytes: np.ndarray
    breakdown: dict[str, float] = field(default_factory=dict)


@dataclass
class IterationClock(BaseObserver):
    """Observer of a short run with loop marks (:class:`~tpusim.program.builders.emit.LoopMarks`).

    ``network`` (set before the run) is the simulation's network, whose
    ``link_bytes`` are read when each iteration's last op finishes."""

    marks: LoopMarks
    network: Network | None = None
    ends: dict[tuple[str, int], float] = field(default_factory=dict)
    link_bytes: dict[tuple[str, int], np.ndarray] = field(default_factory=dict)
    ran: list[tuple[float, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.last_op = {
            name: (phase, j)
            for phase, names in (("fwd", self.marks.fwd_ends), ("bwd", self.marks.bwd_ends))
            for j, name in enumerate(names)
        }

    def op_finished(self, record: OpRecord) -> None:
        key = self.last_op.get(record.name)
        if key is None or not record.chips.startswith(SPMD):
            return
        if record.end_at >= self.ends.get(key, 0.0):
            self.ends[key] = record.end_at
            assert self.network is not None, "set the clock's network before the run"
            self.link_bytes[key] = np.array(self.network.link_bytes, dtype=float)

    def collective_ran(self, name: str, start_at: float, end_at: float) -> None:
        self.ran.append((start_at, end_at))

    def steady(self, results: Results, tolerance: float) -> IterationShare | None:
        """One steady forward + backward iteration's share, or None if not periodic.

        Windows 1 and 2 of each loop (between the ends of successive iterations; the
        first fills the FSDP prefetch, the last ones drain it and run the gradient
        collectives) must agree on every share to ``tolerance`` (times relative to the
        step, bytes to the busiest link's). A time's share is its integral over the
        window: compute busy time, the collectives run on the network (communication
        time, as the engine sums them) and whether any collective op is in flight
        (busy time, as the ops table)."""
        compute, collectives = _intervals(results.ops)
        shares = {}
        for phase in ("fwd", "bwd"):
            first, second = (
                self._share((phase, j), compute, collectives, results.ops) for j in (1, 2)
            )
            if first is None or second is None or not _same(first, second, results, tolerance):
                return None
            shares[phase] = second
        fwd, bwd = shares["fwd"], shares["bwd"]
        return IterationShare(
            step_s=fwd.step_s + bwd.step_s,
            compute_s=fwd.compute_s + bwd.compute_s,
            communication_s=fwd.communication_s + bwd.communication_s,
            busy_s=fwd.busy_s + bwd.busy_s,
            link_bytes=fwd.link_bytes + bwd.link_bytes,
            breakdown={k: v + bwd.breakdown[k] for k, v in fwd.breakdown.items()},
        )

    def _share(
        self,
        key: tuple[str, int],
        compute: list[tuple[float, float]],
        collectives: list[tuple[float, float]],
        ops: list[OpRecord],
    ) -> IterationShare | None:
        """What the window of iteration ``key`` holds, None if it was not seen."""
        window = self._window(key)
        if window is None:
            return None
        return IterationShare(
            step_s=window[1] - window[0],
            compute_s=_covered_s(compute, *window),
            communication_s=_overlap_s(self.ran, *window),
            busy_s=_covered_s(collectives, *window),
            link_bytes=self._bytes(key),
            breakdown=breakdown(ops, *window),
        )

    def _window(self, key: tuple[str, int]) -> tuple[float, float] | None:
        phase, j = key
        before = (phase, j - 1)
        if key not in self.ends or before not in self.ends:
            return None
        return self.ends[before], self.ends[key]

    def _bytes(self, key: tuple[str, int]) -> np.ndarray:
        phase, j = key
        return self.link_bytes[key] - self.link_bytes[(phase, j - 1)]


def _same(a: IterationShare, b: IterationShare, results: Results, tolerance: float) -> bool:
    """Whether two windows' shares agree (see :meth:`IterationClock.steady`)."""
    scale = tolerance * results.step_time_s
    times = ("step_s", "compute_s", "communication_s", "busy_s")
    if any(abs(getattr(a, t) - getattr(b, t)) > scale for t in times):
        return False
    if any(abs(v - b.breakdown[k]) > scale for k, v in a.breakdown.items()):
        return False
    largest = float(np.max(results.link_bytes)) if results.link_bytes.size else 0.0
    return bool(np.all(np.abs(a.link_bytes - b.link_bytes) <= tolerance * largest))


def _intervals(ops: list[OpRecord]) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """(start, end) of the SPMD class's compute ops (async host transfers, unit
    ``host-dma``, are not compute) and of its collectives."""
    compute = [
        (r.start_at, r.end_at)
        for r in ops
        if r.chips.startswith(SPMD) and r.kind != COLLECTIVE and r.unit != "host-dma"
    ]
    collectives = [
        (r.start_at, r.end_at)
        for r in ops
        if r.chips.startswith(SPMD) and r.kind == COLLECTIVE and r.unit == "ici"
    ]
    return compute, collectives


def _overlap_s(spans: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Summed length of ``spans`` inside [lo, hi] (concurrent ones each count)."""
    return sum(max(0.0, min(end, hi) - max(start, lo)) for start, end in spans)


def _covered_s(spans: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Length of [lo, hi] covered by the union of ``spans``."""
    busy, reach = 0.0, lo
    for start, end in sorted(spans):
        start, end = max(start, reach), min(end, hi)
        if end > start:
            busy += end - start
            reach = end
    return busy


@dataclass
class TrainingResults(Results):
    """A training step's results: a simulation's, or extrapolated from a shorter
    simulated loop (then the summary's times and link bytes cover the whole step and
    ``ops`` the simulated run, and ``busy_time_s`` is the extrapolated time with a
    collective in flight; None: from ``ops``). ``memory_stage`` is the pipeline stage
    with the most HBM and ``memory_points`` its bytes by part over the step
    (:func:`~tpusim.program.builders.memory.memory_timeline`), against the chip's
    ``hbm_capacity_bytes``. ``breakdown_s`` is the extrapolated exposed and hidden
    communication per kind (None: from ``ops``)."""

    busy_time_s: float | None = None
    breakdown_s: dict[str, float] | None = None
    hbm_capacity_bytes: float = 0.0
    memory_stage: int = 0
    memory_points: list[tuple[float, dict[str, float]]] = field(default_factory=list)

    @property
    def communication_busy_time_s(self) -> float:
        if self.busy_time_s is None:
            return super().communication_busy_time_s
        return self.busy_time_s

    def communication_breakdown(self) -> dict[str, float]:
        if self.breakdown_s is None:
            return super().communication_breakdown()
        return dict(self.breakdown_s)


def training_results(results: Results, **values: object) -> TrainingResults:
    """``results`` as :class:`TrainingResults`, with ``values`` replacing fields."""
    copied = {f.name: getattr(results, f.name) for f in fields(Results)}
    if isinstance(results, TrainingResults):
        copied |= {"busy_time_s": results.busy_time_s, "breakdown_s": results.breakdown_s}
    return TrainingResults(**(copied | values))


def extrapolate(results: Results, share: IterationShare, more: int) -> TrainingResults:
    """``results`` with ``more`` steady iterations of each loop inserted."""
    return training_results(
        results,
        step_time_s=results.step_time_s + more * share.step_s,
        compute_time_s=results.compute_time_s + more * share.compute_s,
        communication_time_s=results.communication_time_s + more * share.communication_s,
        link_bytes=results.link_bytes + more * share.link_bytes,
        busy_time_s=results.communication_busy_time_s + more * share.busy_s,
        breakdown_s={
            k: v + more * share.breakdown[k] for k, v in results.communication_breakdown().items()
        },
    )
