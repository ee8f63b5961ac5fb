"""Flow fidelity: every transfer is a fluid flow; links are shared max-min fairly.

State is kept in numpy arrays (one row per active flow, one incidence entry per
flow-link pair). Rates are recomputed by vectorised progressive filling only
when the set of flows changes: when a batch starts or when flows drain. All
flows that drain at the same instant are handled by one SimPy timeout, so a
collective step of ten thousand identical flows costs one event, not ten
thousand. A drained flow arrives ``path latency`` later (cut-through).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import simpy

from tpusim.network.base import FlowBatch, Network

FULL_LINK_REL_SLACK = 1e-9
"""A link whose unused bandwidth is at most this fraction of its capacity counts as
full (dimensionless). Progressive filling subtracts ``level * crossing`` round after
round; the float round-off of that is ~1e-16 relative, so 1e-9 absorbs it with a wide
margin while staying far below any rate difference that matters (a 1e-9 relative
rate error moves a 1 s collective by 1 ns)."""

DRAIN_REL_TIME_TOL = 1e-9
"""Flows whose remaining time is within this fraction of the earliest drain time
drain with it (dimensionless): they differ from it only by float round-off, and
draining them together saves an event each."""

MIN_DRAIN_HORIZON_S = 1e-30
"""Floor (seconds) on the earliest drain time in the drain horizon, so that a flow
draining at the current instant (time 0 left) still gets a positive relative window;
far below any physical duration (a byte at 1 Pb/s takes 8e-15 s)."""

DRAIN_BYTE_SLACK = 1e-9
"""Bytes a flow may have left and still count as drained: ``remaining -= rate * dt``
leaves round-off residues (~1e-16 relative) of up to this order on transfers of ~1e7
bytes, larger ones are covered by :data:`DRAIN_REL_TIME_TOL`; a nanobyte is never a
real remainder."""

DEFAULT_MERGE_TOLERANCE = 1e-2
"""Default ``merge_tolerance`` (fraction of a flow's age): 1% earliness per flow in
exchange for one event per group of near-simultaneous drains (see FlowNetwork)."""

DEFAULT_RATE_TOLERANCE = 1e-2
"""Default ``rate_tolerance`` (relative): max-min rates to 1%, which makes Boardfly's
~1,000 distinct rates ~10x cheaper to solve; symmetric patterns stay exact."""

SIMPLE_ROUNDS = 8
"""Progressive-filling rounds done as full passes over the entries before switching
to incremental rounds: symmetric collectives finish within a few rounds, for which a
full pass is cheaper than building the CSR indexes of the incremental solver."""


def max_min_rates(
    inc_flow: np.ndarray,
    inc_link: np.ndarray,
    capacity: np.ndarray,
    num_flows: int,
    tolerance: float = 0.0,
) -> np.ndarray:
    """Max-min fair rate (bytes/s) of each flow by progressive filling.

    ``inc_flow[i]`` crosses link ``inc_link[i]`` (indices into ``capacity``, bytes/s).
    Every flow must cross at least one link. Each round raises every unfrozen flow
    by the smallest fair share left on any link, then freezes the flows of the links
    that became full. Symmetric patterns (collectives on tori) need a few rounds,
    each a pass over the entries; after ``SIMPLE_ROUNDS`` rounds the rest switches
    to incremental rounds that touch only the entries of newly frozen flows, so
    patterns with thousands of distinct rates (all-to-all on Boardfly) stay cheap.

    ``tolerance`` (relative, 0 is exact): a round also freezes every link whose fair
    share is within ``tolerance`` of the new level, at that level, so every flow ends
    on a link at least (1 - tolerance) full and no link is ever oversubscribed (the
    rest is left idle). A pattern whose rates spread over a ratio R then needs about
    ln(R) / tolerance rounds instead of one per distinct rate. A flow frozen early can
    lose more than ``tolerance`` of its exact rate when capacity it would have
    reclaimed goes idle (random instances at 1%: up to 5% on a few flows); the
    slowest flows, which end a collective, are frozen at the exact minimum.
    """
    rate = np.zeros(num_flows)
    remaining = np.array(capacity, dtype=np.float64)
    frozen = np.zeros(num_flows, dtype=bool)
    level = 0.0
    flows, links = inc_flow, inc_link
    for _ in range(SIMPLE_ROUNDS):
        if not flows.size:
            return rate
        crossing = np.bincount(links, minlength=capacity.size)
        used = np.flatnonzero(crossing)
        step = (remaining[used] / crossing[used]).min()
        level += step
        remaining[used] -= step * crossing[used]
        slack = capacity[used] * FULL_LINK_REL_SLACK
        if tolerance:
            slack = np.maximum(slack, (tolerance * level) * crossing[used])
        full = np.zeros(capacity.size, dtype=bool)
        full[used[remaining[used] <= slack]] = True
        newly = flows[full[links]]
        rate[newly] = level
        frozen[newly] = True
        # a frozen flow keeps its rate; its use of other links is already subtracted
        keep = ~frozen[flows]
        flows, links = flows[keep], links[keep]
    if flows.size:
        _incremental_rounds(flows, links, capacity, remaining, level, rate, frozen, tolerance)
    return rate


def _incremental_rounds(
    inc_flow: np.ndarray,
    inc_link: np.ndarray,
    capacity: np.ndarray,
    remaining: np.ndarray,
    level: float,
    rate: np.ndarray,
    frozen: np.ndarray,
    tolerance: float,
) -> None:
    """Finish progressive filling for the unfrozen entries (fills ``rate`` in place).

    CSR by link and by flow are built once; a round scans the links in use and the
    entries of the flows it freezes, not every entry.
    """
    used, local = np.unique(inc_link, return_inverse=True)
    cap, left = capacity[used], remaining[used]
    counts = np.bincount(local, minlength=used.size)
    crossing = counts.astype(np.float64)
    by_link = np.argsort(local, kind="stable")
    link_ptr = np.concatenate([[0], np.cumsum(counts)])
    flow_ids, flow_local = np.unique(inc_flow, return_inverse=True)
    by_flow = np.argsort(flow_local, kind="stable")
    flow_ptr = np.concatenate([[0], np.cumsum(np.bincount(flow_local, minlength=flow_ids.size))])
    done = np.zeros(flow_ids.size, dtype=bool)
    open_links = crossing > 0
    while open_links.any():
        share = np.where(open_links, left / np.where(open_links, crossing, 1.0), np.inf)
        step = share.min()
        level += step
        left -= step * crossing
        slack = np.maximum(cap * FULL_LINK_REL_SLACK, tolerance * level * crossing)
        full = np.flatnonzero(open_links & (left <= slack))
        open_links[full] = False
        newly = flow_local[by_link[_ranges(link_ptr, full)]]
        newly = np.unique(newly[~done[newly]])
        done[newly] = True
        rate[flow_ids[newly]] = level
        frozen[flow_ids[newly]] = True
        crossing -= np.bincount(local[by_flow[_ranges(flow_ptr, newly)]], minlength=used.size)
        # crossing holds whole counts as floats: > 0.5 means "at least one flow left"
        open_links &= crossing > 0.5


def _ranges(ptr: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(ptr[r], ptr[r + 1])`` for every r in ``rows``."""
    starts, counts = ptr[rows], ptr[rows + 1] - ptr[rows]
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    return np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(total)


@dataclass
class _Block:
    """The flows of one batch still draining: all started together at ``started_at``.

    ``flow_of_entry`` / ``links``: each flow's route entries (flow index within the
    block, directed link id), in flow order. ``link_set``: the distinct links of the
    block, found when a re-solve first needs them (a superset once flows drain).
    """

    bid: int
    started_at: float
    remaining: np.ndarray
    rate: np.ndarray
    latency: np.ndarray
    flow_of_entry: np.ndarray
    links: np.ndarray
    link_set: np.ndarray | None = None

    def distinct_links(self) -> np.ndarray:
        if self.link_set is None:
            self.link_set = np.unique(self.links)
        return self.link_set


class FlowNetwork(Network):
    """Max-min fair fluid network driven by one SimPy process.

    State is kept per batch (one block each), so starting or retiring a batch only
    touches that batch's arrays; rates are recomputed for everything only when a
    batch shares links with other active flows (otherwise the batch is its own
    component of the max-min problem and the others' rates stand).

    Checks, when ``check_capacity`` is set, that no link is ever offered more than
    its bandwidth (``max_link_load`` keeps the worst load / capacity seen).

    ``merge_tolerance``: when flows drain, every flow whose remaining time is within
    this fraction of its age (time since it started) drains with them. Each such
    flow arrives early by at most that fraction of its duration (1% by default);
    in exchange, flows with nearly equal finish times (all-to-all on Boardfly has
    hundreds of distinct rates) cost one event instead of hundreds. 0 is exact.

    ``rate_tolerance``: max-min rates are solved to this relative tolerance (see
    :func:`max_min_rates`; 1% by default, 0 is exact). Symmetric patterns (a
    collective on a torus, a ring) have one or a few rates and are solved exactly
    either way; Boardfly's global level has about a thousand distinct rates, and
    solving them to 1% makes a 1,024-chip all-gather ~10x cheaper.
    """

    fidelity = "flow"

    def __init__(
        self,
        env: simpy.Environment,
        topology,
        check_capacity: bool = False,
        merge_tolerance: float = DEFAULT_MERGE_TOLERANCE,
        rate_tolerance: float = DEFAULT_RATE_TOLERANCE,
    ):
        super().__init__(env, topology)
        if not 0 <= merge_tolerance < 1:
            raise ValueError("merge_tolerance must be in [0, 1)")
        if not 0 <= rate_tolerance < 1:
            raise ValueError("rate_tolerance must be in [0, 1)")
        self.rate_tolerance = float(rate_tolerance)
        self.check_capacity = check_capacity
        self.merge_tolerance = float(merge_tolerance)
        self.max_link_load = 0.0
        self._link_flows = np.zeros(len(topology.links), dtype=np.int64)  # active flows per link
        self._blocks: dict[int, _Block] = {}
        self._batches: dict[int, list] = {}  # id -> [flows still to arrive, event]
        self._next_batch = 0
        self._updated_at = env.now
        self._seeds: list[np.ndarray] = []  # links whose flows' rates must be re-solved
        self._wakeup = env.event()
        self._process = env.process(self._run())

    # -- public -----------------------------------------------------------------------
    def _send(self, batch: FlowBatch) -> simpy.Event:
        done = self.env.event()
        if len(batch) == 0:
            return done.succeed()
        self._advance()
        bid = self._next_batch
        self._next_batch += 1
        self._batches[bid] = [len(batch), done]
        routed = batch.routed
        if not routed.all():  # chip to itself: arrives at once
            self._arrive(bid, int((~routed).sum()), 0.0)
        if not routed.any():
            return done
        block = _Block(
            bid,
            self.env.now,
            batch.bytes[routed].astype(np.float64),
            np.zeros(int(routed.sum())),
            self.path_latency_s(batch)[routed],
            batch.routed_flow_of_entry,
            batch.links,
        )
        self._blocks[bid] = block
        shares_links = bool(self._link_flows[batch.links].any())
        self._link_flows += np.bincount(batch.links, minlength=self._link_flows.size)
        if shares_links:
            self._seeds.append(batch.links)
        else:  # a separate component of the max-min problem: the others' rates stand
            block.rate = self._solve(block.flow_of_entry, block.links, block.remaining.size)
        if not self._wakeup.triggered:
            self._wakeup.succeed()
        return done

    # -- the solver process -------------------------------------------------------------
    def _advance(self) -> None:
        dt = self.env.now - self._updated_at
        if dt > 0:
            for block in self._blocks.values():
                block.remaining -= block.rate * dt
        self._updated_at = self.env.now

    def _recompute(self) -> None:
        """Re-solve the blocks connected, through shared links, to the links that
        changed (the seeds); blocks in other components keep their rates, which a
        whole solve would give them too (max-min fairness splits over components)."""
        touched = np.zeros(self._link_flows.size, dtype=bool)
        touched[np.concatenate(self._seeds)] = True
        self._seeds = []
        chosen: set[int] = set()
        grew = True
        while grew:
            grew = False
            for bid, block in self._blocks.items():
                if bid not in chosen and touched[block.distinct_links()].any():
                    chosen.add(bid)
                    touched[block.distinct_links()] = True
                    grew = True
        blocks = [b for bid, b in self._blocks.items() if bid in chosen]
        if not blocks:
            return
        sizes = np.array([b.remaining.size for b in blocks])
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        flows = np.concatenate([b.flow_of_entry + o for b, o in zip(blocks, offsets, strict=False)])
        links = np.concatenate([b.links for b in blocks])
        rate = self._solve(flows, links, int(offsets[-1]))
        for block, start, stop in zip(blocks, offsets[:-1], offsets[1:], strict=True):
            block.rate = rate[start:stop]

    def _solve(self, inc_flow: np.ndarray, inc_link: np.ndarray, num_flows: int) -> np.ndarray:
        """Max-min rates of a set of flows (a whole component of the problem)."""
        capacity = self.bandwidth_Bps
        rate = max_min_rates(inc_flow, inc_link, capacity, num_flows, self.rate_tolerance)
        if self.check_capacity:
            load = np.bincount(inc_link, weights=rate[inc_flow], minlength=capacity.size)
            self.max_link_load = max(self.max_link_load, float((load / capacity).max()))
        return rate

    def _run(self):
        while True:
            if not self._blocks:
                yield self._wakeup
                self._wakeup = self.env.event()
                continue
            if self._seeds:
                self._recompute()
            self.num_events += 1
            first = min(float((b.remaining / b.rate).min()) for b in self._blocks.values())
            timer = self.env.timeout(max(first, 0.0))
            yield timer | self._wakeup
            if self._wakeup.triggered:
                self._wakeup = self.env.event()
            self._advance()
            if timer.processed or timer.triggered:
                self._drain(first)

    def _drain(self, first: float) -> None:
        """Retire the flows whose remaining bytes ran out (within tolerance)."""
        freed = []
        for bid in list(self._blocks):
            block = self._blocks[bid]
            horizon = max(first, MIN_DRAIN_HORIZON_S) * DRAIN_REL_TIME_TOL + (
                self.merge_tolerance * (self.env.now - block.started_at)
            )
            done = block.remaining <= block.rate * horizon + DRAIN_BYTE_SLACK
            if not done.any():
                continue
            for latency, count in _latency_groups(block.latency[done]):
                self._arrive(bid, count, latency)
            if done.all():
                del self._blocks[bid]
                freed.append(block.links)
                continue
            keep = ~done
            entry_keep = keep[block.flow_of_entry]
            freed.append(block.links[~entry_keep])
            block.flow_of_entry = (np.cumsum(keep) - 1)[block.flow_of_entry[entry_keep]]
            block.links = block.links[entry_keep]
            block.remaining, block.rate = block.remaining[keep], block.rate[keep]
            block.latency = block.latency[keep]
        if freed:
            gone = np.concatenate(freed)
            self._link_flows -= np.bincount(gone, minlength=self._link_flows.size)
            # links no remaining flow uses were a separate component: nothing to re-solve
            still = gone[self._link_flows[gone] > 0]
            if still.size:
                self._seeds.append(still)

    def _arrive(self, bid: int, count: int, latency: float) -> None:
        def land(_event: simpy.Event | None = None) -> None:
            entry = self._batches[bid]
            entry[0] -= count
            if entry[0] == 0:
                del self._batches[bid]
                entry[1].succeed()

        if latency > 0:
            self.env.timeout(latency).callbacks.append(land)
        else:
            land()


def _latency_groups(latency: np.ndarray) -> list[tuple[float, int]]:
    """Distinct latencies with their counts, in increasing order."""
    if (latency == latency[0]).all():
        return [(float(latency[0]), int(latency.size))]
    values, counts = np.unique(latency, return_counts=True)
    return [(float(v), int(c)) for v, c in zip(values, counts, strict=True)]
