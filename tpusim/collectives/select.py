"""Choosing a collective's algorithm by predicted cost: ``--algorithm auto``.

As NCCL's tuner does, ``auto`` predicts the registered algorithms that can run the
collective on its group and keeps the fastest. Each algorithm declares the ops and
group shapes it supports and its cost class (:mod:`tpusim.collectives.costs`); from
it, before anything is built, a closed-form lower bound:

    launch_s + min_steps x step_sync_s + messages_s
      + max(min_steps x smallest hop latency
              + max(sent_bytes / the busiest sender's link bandwidth,
                    pair_bytes x |A| x |B| / bandwidth of the cut between halves A, B),
            all-pairs steps x group diameter (hops) x smallest hop latency
              + the other steps x smallest hop latency)

(the cut term only for all-pairs exchanges, over the narrowest cut halving one axis
of the group: on a 1 GiB all-reduce over an 8x8x16 torus it is ~20x the torus
algorithm's time, so ``direct``'s million transfers are never built; the diameter
term is the latency bound of small all-pairs exchanges: at 1 KiB on tpu8i-1024, every
one of direct's two steps crosses 7 hops, above one-shot's whole time, so its two
million transfers are never routed). Algorithms are
visited in order of that bound; one whose bound reaches the best prediction so far is
not built, one whose built schedule's bound (per step: the bytes a
chip sends over its links, plus the smallest link latency) reaches it is not routed.
The prediction is the analytic fidelity's time under the cost model
(:class:`~tpusim.collectives.offload.OnChipModel`):

    launch_s + max over pipelines of sum over steps of
        [ max(flow alone on its route, busiest link + longest route crossing it)
          + step_sync_s + messages_s + non-overlapped reduction ]

and, for a schedule of several pipelines, at least the launch plus the busiest link's
bytes summed over all of them (pipelines that drift apart share links).

Predictions of several pipelines are approximate (their pipelines share links in
ways only a simulation follows), so when more than one algorithm is predicted within
``REFINE_MARGIN`` of the best, those are simulated alone at the run's own fidelity
(the engine passes ``simulate``) and the fastest is kept. At a fidelity that declares
a relative tolerance (the flow fidelity, :attr:`~tpusim.network.Network.relative_tolerance`) a
one-pipeline schedule's simulated time is first bounded without simulating (per step,
:func:`~tpusim.network.flow_blocks.alone_bounds` plus the on-chip cost, which only grows
with the transfer time); a close candidate whose lower bound exceeds another's upper
bound cannot be the fastest and is not simulated, and when one is left, nothing is.
A candidate whose declared transfers exceed :data:`MAX_BUILD_TRANSFERS` (an all-pairs
exchange over 9,216 chips) is not tried: building it would not fit in memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tpusim.collectives.base import AlgorithmError, Group, Schedule, Step
from tpusim.collectives.costs import CostClass
from tpusim.collectives.offload import OnChipModel
from tpusim.network.analytic import AnalyticNetwork
from tpusim.network.base import FlowBatch, Network
from tpusim.network.flow_blocks import alone_bounds
from tpusim.vocabulary import Op

AUTO = "auto"
"""The algorithm name that asks for cost-based selection."""

MAX_BUILD_TRANSFERS = 4_000_000
"""Most transfers (summed over a collective's groups and steps, from the cost class's
``transfers``) ``auto`` builds and routes for one candidate: a memory budget, not a
physical limit. Each routed transfer holds its route (a few hops of int64 ids) and
per-flow state, ~1 KiB in all: 4 M stay within ~4 GB, so the 1,152-chip Boardfly's
direct all-reduce (2.65 M) is a candidate and a 9,216-chip one (170 M, ~170 GB) is not
(assumption; ``--algorithm direct`` still builds it when asked)."""

AUTO_MAX_CHIPS = 16_384
"""Largest group (chips) on which ``auto`` predicts every algorithm; a bigger one (the
134,400-chip Virgo system) runs the structural default, hierarchical on pods, because
building and routing every candidate there takes minutes (assumption; a speed limit,
covering every single pod and Boardfly tpusim ships)."""

REFINE_MARGIN = 0.15
"""Algorithms predicted within this fraction of the best are simulated to choose
(dimensionless): the largest under-prediction seen on the selection test grid is 14%
(the torus algorithm's broadcast on a 2x4 mesh, whose pipelines collide)."""


@dataclass(frozen=True)
class Prediction:
    """An algorithm and its predicted time (s); ``routed`` is False when its lower bound
    ``bound_s`` already exceeded a better prediction and it was not predicted in full."""

    algorithm: str
    bound_s: float
    time_s: float
    routed: bool


class Predictor:
    """Predicts schedules' times on ``network`` (a fresh analytic network that only
    routes and holds link bandwidths, never sends; the engine builds it) under
    ``onchip``; ``batch_of(step)`` gives a step's routed flow batch (the engine passes
    its cache, so the chosen schedule's routes are computed once); ``simulate(schedule)``,
    if given, is the schedule's time simulated alone at the run's fidelity (close calls);
    ``faults_of``, if given, is a network whose routing policy and failed or degraded
    links the predictions take (the survivors are what ``auto`` plans on)."""

    def __init__(
        self,
        network: AnalyticNetwork,
        onchip: OnChipModel,
        batch_of: Callable[[Step], FlowBatch],
        simulate: Callable[[Schedule], float] | None = None,
        faults_of: Network | None = None,
    ):
        self.onchip, self.batch_of, self.simulate = onchip, batch_of, simulate
        self.network = network
        topology = network.topology
        self.network.set_link_efficiency(onchip.link_efficiency)
        if faults_of is not None:
            self.network.copy_links_from(faults_of)
        links = topology.links
        n = topology.num_chips
        self.out_Bps = np.bincount(links.src, weights=self.network.bandwidth_Bps, minlength=n)
        self.min_latency_s = float(links.latency_s.min()) if len(links) else 0.0
        self._cuts: dict[tuple, list[tuple[int, float]]] = {}
        # the run's network's own relative tolerance (None: none known, no bounds)
        self.tolerance = None if faults_of is None else faults_of.relative_tolerance

    def closed_bound_s(self, cost: CostClass, op: Op, group: Group, size: float) -> float:
        """A time no schedule of an algorithm of class ``cost`` can beat on ``group``
        (nothing built; see the module docstring)."""
        n = group.size
        if n <= 1:
            return 0.0
        steps = cost.min_steps(op, n)
        messages = max(0, math.ceil(cost.messages(op, n) / self.onchip.ports) - 1)
        inject_s = cost.sent_bytes(op, size, n) / self._most_out_Bps(group)
        cut_s = self._cut_s(group, cost.pair_bytes(op, size, n))
        transfer_s = steps * self.min_latency_s + max(inject_s, cut_s)
        all_pairs = min(cost.all_pairs_steps(op, n), steps)
        if all_pairs:  # each all-pairs step crosses the group's diameter, at least
            across_s = self._diameter_hops(group) * self.min_latency_s
            transfer_s = max(
                transfer_s, (steps - all_pairs) * self.min_latency_s + all_pairs * across_s
            )
        extra_s = min(steps, 1) * messages * self.onchip.message_s
        return self.onchip.launch_s + steps * self.onchip.step_sync_s + extra_s + transfer_s

    def _diameter_hops(self, group: Group) -> int:
        """Hops of the longest shortest path between two chips of ``group`` (routes,
        minimal or not, take at least that many): the topology's diameter when the
        group is all of its chips, else 1 (not computed: a safe floor)."""
        topology = self.network.topology
        if group.num_groups != 1 or group.size != topology.num_chips:
            return 1
        return max(1, topology.diameter_hops)

    def _most_out_Bps(self, group: Group) -> float:
        """The largest bandwidth any chip of ``group`` sends at (B/s)."""
        # a chip listed twice counts once either way: no np.unique (which loads numpy.ma)
        return float(self.out_Bps[group.chips.ravel()].max()) or math.inf

    def _cuts_of(self, group: Group) -> list[tuple[int, float]]:
        """Per axis of the group, the cut halving it: (ordered pairs of one group with a
        chip below half the axis and one above, bandwidth in B/s per group of the links
        leaving the first half). Every byte between the halves crosses those links."""
        key = (group.chips.shape, hash(group.chips.tobytes()))
        if key not in self._cuts:
            links, n, cuts = self.network.topology.links, group.size, []
            for axis in range(1, group.chips.ndim):
                k = group.chips.shape[axis]
                if k < 2:
                    continue
                first = np.zeros(self.out_Bps.size, dtype=bool)
                first[np.take(group.chips, np.arange(k // 2), axis=axis).ravel()] = True
                leaving = first[links.src] & ~first[links.dst]
                a = n // k * (k // 2)
                cuts.append((a * (n - a), float(self.network.bandwidth_Bps[leaving].sum())))
            self._cuts[key] = [(p, bw / group.num_groups) for p, bw in cuts]
        return self._cuts[key]

    def _cut_s(self, group: Group, pair_bytes: float) -> float:
        """Seconds to move ``pair_bytes`` between every ordered pair across the narrowest
        cut (0 without all-pairs bytes); inf across a cut with no link left."""
        if not pair_bytes:
            return 0.0
        return max(
            (pairs * pair_bytes / bw if bw > 0 else math.inf for pairs, bw in self._cuts_of(group)),
            default=0.0,
        )

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
            batch = self.network.routed(self.batch_of(step))
            load += count * np.bincount(
                batch.links, weights=batch.bytes_per_entry, minlength=load.size
            )
        used = load > 0
        shared = self.onchip.launch_s + float((load[used] / self.network.bandwidth_Bps[used]).max())
        return max(critical, shared)

    def simulated_bounds_s(self, schedule: Schedule) -> tuple[float, float] | None:
        """Bounds (s) on ``simulate(schedule)`` at the run's fidelity within its relative
        tolerance, for a schedule of one pipeline; None for several or a fidelity that
        declares none (:attr:`~tpusim.network.Network.relative_tolerance`)."""
        pipelines = [p for p in schedule.pipelines if p]
        if self.tolerance is None or len(pipelines) != 1:
            return None
        tol = self.tolerance
        lower = upper = self.onchip.launch_s
        for step in pipelines[0]:
            batch = self.network.routed(self.batch_of(step))
            latency = self.network.path_latency_s(batch)
            bounds = alone_bounds(batch, self.network.bandwidth_Bps, latency)
            low, high = bounds.lower_s * (1 - tol), bounds.upper_s * (1 + 2 * tol)
            lower += low + self.onchip.after_transfer_s(step, low)
            upper += high + self.onchip.after_transfer_s(step, high)
        return lower, upper

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
        sync_s = self.onchip.step_sync_s + self.onchip.messages_s(step)
        return inject_s + self.min_latency_s + sync_s

    def _step_time_s(self, step: Step) -> float:
        transfer_s = self.network.batch_time_s(self.network.routed(self.batch_of(step)))
        return transfer_s + self.onchip.after_transfer_s(step, transfer_s)


def affordable(cost: CostClass, op: Op, group: Group) -> bool:
    """Whether a candidate of class ``cost`` fits :data:`MAX_BUILD_TRANSFERS` on ``group``."""
    return cost.transfers(op, group.size) * group.num_groups <= MAX_BUILD_TRANSFERS


def choose(
    op: Op,
    size: float,
    group: Group,
    candidates: list[tuple[str, CostClass]],
    build: Callable[[str], Schedule],
    predictor: Predictor,
) -> tuple[Schedule, list[Prediction]]:
    """The fastest of ``candidates`` for ``op`` of ``size`` bytes (names and declared
    cost classes of algorithms that support ``op`` on ``group``; ``build(name)`` builds
    one, raising ValueError when it cannot) and every prediction made, in the order
    tried (see the module docstring). Raises AlgorithmError when none can run it."""
    bounds = [predictor.closed_bound_s(cost, op, group, size) for _, cost in candidates]
    best: Schedule | None = None
    best_s, predictions, predicted = math.inf, [], []
    for i in np.argsort(bounds, kind="stable"):
        name, bound_s = candidates[i][0], bounds[i]
        if bound_s >= best_s:
            predictions.append(Prediction(name, bound_s, math.inf, False))
            continue
        try:
            schedule = build(name)
        except ValueError:  # AlgorithmError, or a phase that cannot run this op
            continue
        bound_s = max(bound_s, predictor.lower_bound_s(schedule))
        time_s = predictor.time_s(schedule) if bound_s < best_s else math.inf
        predictions.append(Prediction(name, bound_s, time_s, time_s < math.inf))
        predicted.append((schedule, time_s))
        if time_s < best_s:
            best, best_s = schedule, time_s
    if best is None:
        raise AlgorithmError(f"no algorithm can run {op} on this group of {group.size} chips")
    close = [s for s, t in predicted if t <= best_s * (1 + REFINE_MARGIN)]
    if len(close) > 1 and predictor.simulate is not None:
        close = _possibly_fastest(close, predictor)
        simulated = [predictor.simulate(s) for s in close] if len(close) > 1 else [0.0]
        best = close[int(np.argmin(simulated))]
    return best, predictions


def _possibly_fastest(close: list[Schedule], predictor: Predictor) -> list[Schedule]:
    """The schedules of ``close`` (in order) whose simulated time can be the least: all
    of them unless every one has flow bounds, then those whose lower bound does not
    exceed the least upper bound."""
    bounds = [predictor.simulated_bounds_s(s) for s in close]
    known = [b for b in bounds if b is not None]
    if len(known) < len(bounds):
        return close
    least_upper = min(high for _, high in known)
    return [s for s, (low, _) in zip(close, known, strict=True) if low <= least_upper]
