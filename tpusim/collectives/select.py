"""Choosing a collective's algorithm by predicted cost: ``--algorithm auto``.

As NCCL's tuner does, ``auto`` predicts every registered algorithm that can run the
collective on its group and keeps the fastest. The prediction is the analytic
fidelity's time under the current cost model (:class:`~tpusim.collectives.offload.OnChipModel`):

    launch_s + max over pipelines of sum over steps of
        [ max(flow alone on its route, busiest link + longest route crossing it)
          + step_sync_s + non-overlapped reduction ]

and, for a schedule of several pipelines, at least the launch plus the busiest link's
bytes summed over all of them (pipelines that drift apart share links).

Predictions of several pipelines are approximate (their pipelines share links in
ways only a simulation follows), so when more than one algorithm is predicted within
``REFINE_MARGIN`` of the best, those are simulated alone at the run's own fidelity
(the engine passes ``simulate``) and the fastest is kept.

Algorithms are predicted in order of a cheap lower bound (per step: the bytes a chip
sends over all its links' bandwidth, plus the smallest link latency), and one whose
bound already exceeds the best prediction is not routed at all: a 1 GiB all-reduce
on a 9,216-chip pod never routes the binomial tree. Direct all-pairs exchanges on
more than ``DIRECT_MAX_CHIPS`` chips and ring relay all-to-alls on more than
``RELAY_ALL_TO_ALL_MAX_CHIPS`` are not candidates (their n^2 transfers).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import simpy

from tpusim.collectives.base import AlgorithmError, Group, Schedule, Step
from tpusim.collectives.offload import OnChipModel
from tpusim.network.analytic import AnalyticNetwork
from tpusim.network.base import FlowBatch
from tpusim.topology import Topology
from tpusim.vocabulary import Op

AUTO = "auto"
"""The algorithm name that asks for cost-based selection."""

DIRECT_MAX_CHIPS = {"torus": 1152, "other": 256}
"""Largest group (chips) on which a one-step all-pairs exchange (``direct``) is a
candidate, on torus axes and elsewhere: beyond, its n^2 flows with uneven routes make
routing and the flow fidelity slow (assumption; a speed limit, not a physical one)."""

AUTO_MAX_CHIPS = 16_384
"""Largest group (chips) on which ``auto`` predicts every algorithm; a bigger one (the
134,400-chip Virgo system) runs the structural default, hierarchical on pods, because
building and routing every candidate there takes minutes (assumption; a speed limit,
covering every single pod and Boardfly tpusim ships)."""

REFINE_MARGIN = 0.15
"""Algorithms predicted within this fraction of the best are simulated to choose
(dimensionless): the largest under-prediction seen on the selection test grid is 14%
(the torus algorithm's broadcast on a 2x4 mesh, whose pipelines collide)."""

ALL_PAIRS_ALGORITHMS = ("direct",)
"""Algorithms whose steps exchange between every pair of the group's chips."""

RELAY_ALL_TO_ALL_MAX_CHIPS = 256
"""Largest group (chips) on which a ring relay all-to-all (``ring``, ``bidir-ring``) is
a candidate: it takes ~n distinct steps of n transfers (n^2 arrays to build) and its
bandwidth term grows with n (V(n-1)/(4W) on a bidirectional ring), so past a few hundred
chips it is both slow to build and never the fastest (assumption; a speed limit)."""

RELAY_ALGORITHMS = ("ring", "bidir-ring")
"""Algorithms whose all-to-all relays chunks around a ring."""


@dataclass(frozen=True)
class Prediction:
    """An algorithm and its predicted time (s); ``routed`` is False when its lower bound
    ``bound_s`` already exceeded a better prediction and it was not predicted in full."""

    algorithm: str
    bound_s: float
    time_s: float
    routed: bool


class Predictor:
    """Predicts schedules' times on ``topology`` under ``onchip``; ``batch_of(step)``
    gives a step's routed flow batch (the engine passes its cache, so the chosen
    schedule's routes are computed once); ``simulate(schedule)``, if given, is the
    schedule's time simulated alone at the run's fidelity (for close calls)."""

    def __init__(
        self,
        topology: Topology,
        onchip: OnChipModel,
        batch_of: Callable[[Step], FlowBatch],
        simulate: Callable[[Schedule], float] | None = None,
    ):
        self.onchip, self.batch_of, self.simulate = onchip, batch_of, simulate
        self.network = AnalyticNetwork(simpy.Environment(), topology)
        self.network.set_link_efficiency(onchip.link_efficiency)
        links = topology.links
        n = topology.num_chips
        self.out_Bps = np.bincount(links.src, weights=self.network.bandwidth_Bps, minlength=n)
        self.min_latency_s = float(links.latency_s.min()) if len(links) else 0.0

    def lower_bound_s(self, schedule: Schedule) -> float:
        """A time no fidelity can beat (no routes needed)."""
        return self._total(schedule, self._step_bound_s)

    def time_s(self, schedule: Schedule) -> float:
        """The analytic fidelity's time of ``schedule`` (routes every step), and at least
        the launch plus the busiest link's bytes over all pipelines: concurrent pipelines
        that drift apart (the torus algorithm's parts on axes of unequal length) end up
        sharing links, which a pipeline-by-pipeline sum cannot see."""
        critical = self._total(schedule, self._step_time_s)
        pipelines = [p for p in schedule.pipelines if p]
        if len(pipelines) < 2:
            return critical
        load = np.zeros(self.network.bandwidth_Bps.size)
        repeats: dict[int, tuple[Step, int]] = {}
        for step in (s for p in pipelines for s in p):
            kept = repeats.get(id(step))
            repeats[id(step)] = (step, kept[1] + 1 if kept else 1)
        for step, count in repeats.values():
            batch = self.batch_of(step)
            load += count * np.bincount(
                batch.links, weights=batch.bytes_per_entry, minlength=load.size
            )
        shared = self.onchip.launch_s + float((load / self.network.bandwidth_Bps).max())
        return max(critical, shared)

    def _total(self, schedule: Schedule, step_s: Callable[[Step], float]) -> float:
        pipelines = [p for p in schedule.pipelines if p]
        if not pipelines:
            return 0.0
        known: dict[int, float] = {}  # a ring repeats one Step object: cost it once

        def cost(step: Step) -> float:
            if id(step) not in known:
                known[id(step)] = step_s(step)
            return known[id(step)]

        return self.onchip.launch_s + max(sum(cost(s) for s in p) for p in pipelines)

    def _step_bound_s(self, step: Step) -> float:
        moving = step.src != step.dst
        if not moving.any():
            return self.onchip.step_sync_s
        sent = np.bincount(step.src[moving], weights=step.bytes[moving])
        used = np.flatnonzero(sent)
        inject_s = float((sent[used] / self.out_Bps[used]).max())
        return inject_s + self.min_latency_s + self.onchip.step_sync_s

    def _step_time_s(self, step: Step) -> float:
        transfer_s = self.network.batch_time_s(self.batch_of(step))
        return transfer_s + self.onchip.after_transfer_s(step, transfer_s)


def too_big(algorithm: str, group: Group, op: Op | None = None) -> bool:
    """True when ``algorithm`` is not a candidate for ``op`` on ``group`` for its size: an
    all-pairs exchange past DIRECT_MAX_CHIPS, a ring relay all-to-all past
    RELAY_ALL_TO_ALL_MAX_CHIPS."""
    limit = DIRECT_MAX_CHIPS["torus" if group.on_torus_axes else "other"]
    if algorithm in ALL_PAIRS_ALGORITHMS and group.size > limit:
        return True
    relay = op == "all-to-all" and algorithm in RELAY_ALGORITHMS
    return relay and group.size > RELAY_ALL_TO_ALL_MAX_CHIPS


def choose(
    op: Op,
    group: Group,
    candidates: list[Schedule],
    predictor: Predictor,
) -> tuple[Schedule, list[Prediction]]:
    """The fastest of ``candidates`` (schedules of ``op`` on ``group``) and every
    prediction made, in the order tried. Raises AlgorithmError when there is none."""
    if not candidates:
        raise AlgorithmError(f"no algorithm can run {op} on this group of {group.size} chips")
    bounds = [predictor.lower_bound_s(s) for s in candidates]
    best, best_s, predictions = candidates[0], math.inf, []
    predicted_s = [math.inf] * len(candidates)  # by candidate; inf: pruned, not routed
    for i in np.argsort(bounds, kind="stable"):
        schedule, bound_s = candidates[i], bounds[i]
        if bound_s >= best_s:
            predictions.append(Prediction(schedule.algorithm, bound_s, math.inf, False))
            continue
        predicted_s[i] = time_s = predictor.time_s(schedule)
        predictions.append(Prediction(schedule.algorithm, bound_s, time_s, True))
        if time_s < best_s:
            best, best_s = schedule, time_s
    close = [
        s for s, t in zip(candidates, predicted_s, strict=True) if t <= best_s * (1 + REFINE_MARGIN)
    ]
    if len(close) > 1 and predictor.simulate is not None:
        simulated = [predictor.simulate(s) for s in close]
        best = close[int(np.argmin(simulated))]
    return best, predictions
