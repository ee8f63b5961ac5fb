"""Reuse of identical loop iterations of a training step: watch a short simulated
loop, check that its steady iterations repeat, and extrapolate the whole step.

:class:`IterationClock` is an observer of the short run: when the last op of a loop
iteration finishes it notes the time and the bytes every link has carried so far, and
it sums each iteration's compute and collective time. :meth:`IterationClock.steady`
compares two successive steady iterations of each loop (forward: the last two;
backward: the two before the last, which runs the gradient collectives) and gives one
steady forward plus one steady backward iteration's share of the step, compute,
communication and busy times and link bytes, or None when they differ.
:func:`extrapolate` adds that share once per missing iteration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tpusim.results.observers import BaseObserver
from tpusim.results.simulation import OpRecord, Results

#: Units of the ops that count as compute (as the engine's busy time counts them).
COLLECTIVE = "collective"


@dataclass
class IterationShare:
    """What one steady forward plus one steady backward iteration add to a step."""

    step_s: float
    compute_s: float
    communication_s: float
    busy_s: float
    link_bytes: np.ndarray


@dataclass
class IterationClock(BaseObserver):
    """Observer of a short run with loop marks (:class:`~tpusim.program.builders.emit.LoopMarks`).

    ``network`` (set before the run) is the simulation's network, whose
    ``link_bytes`` are read at each iteration's end."""

    marks: Any
    network: Any = None
    ends: dict[tuple[str, int], float] = field(default_factory=dict)
    link_bytes: dict[tuple[str, int], np.ndarray] = field(default_factory=dict)
    compute_s: dict[tuple[str, int], float] = field(default_factory=dict)
    collective_s: dict[tuple[str, int], float] = field(default_factory=dict)
    spans: dict[tuple[str, int], list[tuple[float, float]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.last_op = {
            name: (phase, j)
            for phase, names in (("fwd", self.marks.fwd_ends), ("bwd", self.marks.bwd_ends))
            for j, name in enumerate(names)
        }

    def op_finished(self, record: OpRecord) -> None:
        key = self.marks.iteration_of.get(record.name)
        if key is None or not record.chips.startswith("spmd"):
            return
        if record.kind != COLLECTIVE:
            self.compute_s[key] = self.compute_s.get(key, 0.0) + record.end_at - record.start_at
        if record.name in self.last_op and record.unit in ("tensorcore", "ici", "sparsecore"):
            self.ends[key] = max(self.ends.get(key, 0.0), record.end_at)
            self.link_bytes[key] = np.array(self.network.link_bytes, dtype=float)

    def collective_ran(self, name: str, start_at: float, end_at: float) -> None:
        key = self.marks.iteration_of.get(name)
        if key is not None:
            self.collective_s[key] = self.collective_s.get(key, 0.0) + end_at - start_at
            self.spans.setdefault(key, []).append((start_at, end_at))

    def steady(self, results: Results, tolerance: float) -> IterationShare | None:
        """One steady forward + backward iteration's share, or None if not periodic."""
        n = len(self.marks.fwd_ends)
        fwd, bwd = ("fwd", n - 1), ("bwd", n - 2)
        before_fwd, before_bwd = ("fwd", n - 2), ("bwd", n - 3)
        durations = [self._duration(k) for k in (fwd, before_fwd, bwd, before_bwd)]
        if None in durations:
            return None
        d_fwd, d_fwd_before, d_bwd, d_bwd_before = (float(d) for d in durations)  # type: ignore[arg-type]
        scale = tolerance * results.step_time_s
        if abs(d_fwd - d_fwd_before) > scale or abs(d_bwd - d_bwd_before) > scale:
            return None
        keys = (fwd, bwd)
        return IterationShare(
            step_s=d_fwd + d_bwd,
            compute_s=sum(self.compute_s.get(k, 0.0) for k in keys),
            communication_s=sum(self.collective_s.get(k, 0.0) for k in keys),
            busy_s=sum(_union_s(self.spans.get(k, [])) for k in keys),
            link_bytes=self._bytes(fwd) + self._bytes(bwd),
        )

    def _duration(self, key: tuple[str, int]) -> float | None:
        phase, j = key
        if key not in self.ends or (phase, j - 1) not in self.ends:
            return None
        return self.ends[key] - self.ends[(phase, j - 1)]

    def _bytes(self, key: tuple[str, int]) -> np.ndarray:
        phase, j = key
        return self.link_bytes[key] - self.link_bytes[(phase, j - 1)]


def _union_s(spans: list[tuple[float, float]]) -> float:
    """Length of the union of intervals ``spans`` (s)."""
    busy, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            busy += end - max(start, reach)
            reach = end
    return busy


@dataclass
class ExtrapolatedResults(Results):
    """Results of a step extrapolated from a shorter simulated loop: the summary's
    times and link bytes cover the whole step, ``ops`` the simulated run;
    ``busy_time_s`` is the extrapolated time with a collective in flight."""

    busy_time_s: float = 0.0

    @property
    def communication_busy_time_s(self) -> float:
        return self.busy_time_s


def extrapolate(results: Results, share: IterationShare, more: int) -> ExtrapolatedResults:
    """``results`` with ``more`` steady iterations of each loop inserted."""
    return ExtrapolatedResults(
        system=results.system,
        program=results.program,
        fidelity=results.fidelity,
        chips=results.chips,
        step_time_s=results.step_time_s + more * share.step_s,
        compute_time_s=results.compute_time_s + more * share.compute_s,
        communication_time_s=results.communication_time_s + more * share.communication_s,
        flops_per_chip=results.flops_per_chip,
        peak_flops=results.peak_flops,
        ops=results.ops,
        link_bytes=results.link_bytes + more * share.link_bytes,
        links=results.links,
        max_hops=results.max_hops,
        mean_hops=results.mean_hops,
        busy_time_s=results.communication_busy_time_s + more * share.busy_s,
    )
