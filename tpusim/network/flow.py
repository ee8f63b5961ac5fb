"""Flow fidelity: every transfer is a fluid flow; links are shared max-min fairly.

State is kept in numpy arrays (one row per active flow, one incidence entry per
flow-link pair). Rates are recomputed by vectorised progressive filling only
when the set of flows changes: when a batch starts or when flows drain. All
flows that drain at the same instant are handled by one SimPy timeout, so a
collective step of ten thousand identical flows costs one event, not ten
thousand. A drained flow arrives ``path latency`` later (cut-through). The per-batch
state, the drain tolerances and the building of the max-min problem are in
:mod:`.flow_blocks`.
"""

from __future__ import annotations

import numpy as np
import simpy

from tpusim.network.base import FlowBatch, Network
from tpusim.network.flow_blocks import (
    ClosedBatch,
    FlowBlock,
    alone_bounds,
    blocks_problem,
    latency_groups,
)
from tpusim.network.maxmin import MaxMinProblem, max_min_rates

__all__ = ["FlowNetwork", "max_min_rates"]

DEFAULT_MERGE_TOLERANCE = 1e-2
"""Default ``merge_tolerance`` (fraction of a flow's age): 1% earliness per flow in
exchange for one event per group of near-simultaneous drains (see FlowNetwork)."""

DEFAULT_RATE_TOLERANCE = 1e-2
"""Default ``rate_tolerance`` (relative): max-min rates to 1%, which makes Boardfly's
~1,000 distinct rates ~10x cheaper to solve; symmetric patterns stay exact."""


class FlowNetwork(Network):
    """Max-min fair fluid network driven by one SimPy process.

    State is kept per batch (one block each), so starting or retiring a batch only
    touches that batch's arrays; rates are recomputed for everything only when a
    batch shares links with other active flows (otherwise the batch is its own
    component of the max-min problem and the others' rates stand). The last
    component's :class:`~tpusim.network.maxmin.MaxMinProblem` is kept: while its set
    of batches stands, drained flows are removed from it and the re-solve reuses its
    indexes and restarts at the first round they change (the same rates, bit for bit,
    as a solve from scratch). The fastest flows drain first and froze last, so a
    re-solve is typically a round or two (a 1 GiB all-reduce on tpu8i-pod: 248
    rounds over 250 solves, against ~60 rounds per solve from scratch).

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

    #: Answer batches whose bounds pin them in closed form (see :meth:`_closed`): within
    #: the rate tolerance of the flows run one by one, not bit for bit. An equal-sized
    #: all-pairs step (one-shot's, direct's) is pinned exactly by the most crowded link
    #: (:func:`~tpusim.network.flow_blocks.alone_bounds`): a 1 KiB all-reduce on
    #: ``tpu8i-1024`` is one event instead of ~1 M flows drained over 168.
    closed_form = True
    #: Fewest flows of a batch answered in closed form (count): a smaller one costs a few
    #: events and is simulated exactly (its figures do not move by the tolerance).
    closed_form_min_flows = 65_536

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
        self.relative_tolerance = max(self.rate_tolerance, self.merge_tolerance)
        self.max_link_load = 0.0
        self._link_flows = np.zeros(len(topology.links), dtype=np.int64)  # active flows per link
        self._blocks: dict[int, FlowBlock] = {}
        self._batches: dict[int, list] = {}  # id -> [flows still to arrive, event]
        self._next_batch = 0
        self._updated_at = env.now
        self._seeds: list[np.ndarray] = []  # links whose flows' rates must be re-solved
        # the last max-min problem solved: its blocks' ids, itself, each block's first flow
        self._problem: tuple[tuple[int, ...], MaxMinProblem, dict[int, int]] | None = None
        self._alone: dict[int, tuple[FlowBatch, np.ndarray]] = {}  # id(batch) -> its rates
        self._closed_batches: dict[int, ClosedBatch] = {}  # answered in closed form
        self._wakeup = env.event()
        self._process = env.process(self._run())

    # -- public -----------------------------------------------------------------------
    def _send(self, batch: FlowBatch) -> simpy.Event:
        done = self.env.event()
        if len(batch) == 0:
            return done.succeed()
        self._advance()
        self._reopen_closed(batch.links)
        bid = self._next_batch
        self._next_batch += 1
        self._batches[bid] = [len(batch), done]
        routed = batch.routed
        if not routed.all():  # chip to itself: arrives at once
            self._arrive(bid, int((~routed).sum()), 0.0)
        if routed.any() and not self._closed(batch, bid):
            self._start_block(batch, bid)
        return done

    # -- batches pinned by their bounds, in closed form ----------------------------------
    def _closed(self, batch: FlowBatch, bid: int) -> bool:
        """Answer ``batch`` in closed form if it starts on idle links and its exact
        max-min arrival time is pinned by :func:`alone_bounds` to
        within the rate tolerance (upper - lower <= 2 x tolerance x lower), and it
        arrives at their midpoint, one event. Not under a routing policy (which reads
        the flows in flight) or a capacity check. Returns whether it was."""
        if not self.closed_form or self._blocks or self.routing is not None:
            return False
        if self.check_capacity or len(batch) < self.closed_form_min_flows:
            return False
        bounds = alone_bounds(batch, self.bandwidth_Bps, self.path_latency_s(batch))
        if not bounds.determined(self.rate_tolerance):
            return False
        self.num_events += 1
        closed = ClosedBatch(batch, bid, self.env.now, bounds)
        self._closed_batches[bid] = closed
        self.env.timeout(bounds.time_s).callbacks.append(closed.landed(self._arrive))
        return True

    def _reopen_closed(self, links: np.ndarray | None) -> None:
        """Closed-form batches still draining that share ``links`` (None: any link)
        become flows again, from the progress their guaranteed rates made: a batch that
        contends with them is no longer alone (error: at most their drain time)."""
        now = self.env.now
        for bid, closed in list(self._closed_batches.items()):
            if not closed.active:  # landed
                del self._closed_batches[bid]
            elif now < closed.drained_at and closed.shares(links, self._link_flows.size):
                closed.active = False
                del self._closed_batches[bid]
                done = closed.bounds.rate_Bps * (now - closed.started_at)
                routed = closed.batch.routed
                left = np.maximum(closed.batch.bytes[routed] - done, 0.0)
                self._start_block(closed.batch, bid, left, closed.started_at)

    def _start_block(
        self,
        batch: FlowBatch,
        owner: int,
        remaining: np.ndarray | None = None,
        started_at: float | None = None,
    ) -> None:
        """The routed flows of ``batch`` start draining now (with ``remaining`` bytes
        if given, else all of theirs; aged from ``started_at``, else now); they arrive
        for batch ``owner`` (the batch they belong to, or were rerouted from)."""
        routed = batch.routed
        bid = owner if owner not in self._blocks else self._new_id()
        if remaining is None:
            remaining = batch.bytes[routed].astype(np.float64)
        block = FlowBlock(
            bid,
            self.env.now if started_at is None else started_at,
            remaining,
            np.zeros(int(routed.sum())),
            self.path_latency_s(batch)[routed],
            batch.routed_flow_of_entry,
            batch.links,
            batch,
            np.zeros(int(routed.sum()), dtype=bool),
            int(routed.sum()),
            owner=owner,
        )
        self._blocks[bid] = block
        shares_links = bool(self._link_flows[batch.links].any())
        self._link_flows += np.bincount(batch.links, minlength=self._link_flows.size)
        if shares_links:
            self._seeds.append(batch.links)
        else:  # a separate component of the max-min problem: the others' rates stand
            block.rate = self._alone_rates(block)
        if not self._wakeup.triggered:
            self._wakeup.succeed()

    def _new_id(self) -> int:
        bid = self._next_batch
        self._next_batch += 1
        return bid

    # -- faults -------------------------------------------------------------------------
    def link_flow_counts(self) -> np.ndarray:
        return self._link_flows.astype(np.float64)

    def _links_changed(self, links: np.ndarray) -> None:
        """Links changed capacity now: flows in flight on a link that went down take
        the shortest surviving route with the bytes they have left (bytes delivered
        stay delivered); every rate that depends on a changed link is re-solved."""
        self._advance()
        self._reopen_closed(None)
        self._problem = None
        self._alone.clear()
        dead = self.dead
        if dead is not None:
            for block in list(self._blocks.values()):
                hit = dead[block.links] & ~block.dead[block.flow_of_entry]
                if hit.any():
                    flows = np.zeros(block.remaining.size, dtype=bool)
                    flows[block.flow_of_entry[hit]] = True
                    self._reroute(block, flows)
        self._seeds.append(links)
        if not self._wakeup.triggered:
            self._wakeup.succeed()

    def _reroute(self, block: FlowBlock, flows: np.ndarray) -> None:
        """Move the live ``flows`` (a mask) of ``block`` to surviving routes."""
        left = block.remaining[flows]
        hops = np.bincount(block.flow_of_entry, minlength=flows.size)[flows]
        entries = flows[block.flow_of_entry]
        np.subtract.at(self.link_bytes, block.links[entries], np.repeat(left, hops))
        which = np.flatnonzero(block.batch.routed)[flows]
        src, dst = block.batch.src[which], block.batch.dst[which]
        num = int(flows.sum())
        freed = self._freed_links(block, flows, num)
        self._link_flows -= np.bincount(freed, minlength=self._link_flows.size)
        if num == block.num_live:
            del self._blocks[block.bid]
        else:
            block.retire(flows)
        ptr, links = self.surviving_routes().links_many(src, dst)
        moved = FlowBatch(src, dst, left, ptr, links)
        self.rerouted_flows += num
        self._account(moved)
        lost = int((~moved.routed).sum())  # to or from a chip that went down
        if lost:
            self._arrive(block.owner, lost, 0.0)
        if lost < num:
            self._start_block(moved, block.owner)

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
        num_links = touched.size
        grew = True
        while grew:
            grew = False
            for bid, block in self._blocks.items():
                if bid not in chosen and touched[block.distinct_links(num_links)].any():
                    chosen.add(bid)
                    touched[block.distinct_links(num_links)] = True
                    grew = True
        blocks = [b for bid, b in self._blocks.items() if bid in chosen]
        if blocks:
            self._solve(blocks)

    def _alone_rates(self, block: FlowBlock) -> np.ndarray:
        """Rates of a new block alone on its links, solved once per batch: they depend
        on the batch's routes only, and a ring sends the same batch step after step."""
        batch = block.batch
        cached = self._alone.get(id(batch))
        if cached is None or cached[0] is not batch:  # the batch is kept: its id stays unique
            rate = self._solve([block])
            rate.flags.writeable = False
            self._alone[id(batch)] = cached = (batch, rate)
        return cached[1]

    def _solve(self, blocks: list[FlowBlock]) -> np.ndarray:
        """Max-min rates of the live flows of ``blocks`` (a whole component of the
        problem), stored in each block's ``rate`` and returned in block order."""
        problem = self._problem_of(blocks)
        rate = problem.rates(self.rate_tolerance)
        if self.check_capacity:
            capacity = self.bandwidth_Bps
            flows, links = problem.inc_flow, problem.inc_link
            load = np.bincount(links, weights=rate[flows], minlength=capacity.size)
            up = capacity > 0  # a failed link (capacity 0) must carry nothing
            worst = float((load[up] / capacity[up]).max()) if up.any() else 0.0
            if bool((load[~up] > 0).any()):
                worst = np.inf
            self.max_link_load = max(self.max_link_load, worst)
        start = 0
        for block in blocks:
            block.rate = rate[start : start + block.remaining.size]
            start += block.remaining.size
        return rate

    def _problem_of(self, blocks: list[FlowBlock]) -> MaxMinProblem:
        """The max-min problem of ``blocks``: the last one if it was built for the same
        blocks (its indexes are reused; drained flows were removed from it), else new."""
        key = tuple(b.bid for b in blocks)
        if self._problem is not None and self._problem[0] == key:
            return self._problem[1]
        problem, starts = blocks_problem(blocks, self.bandwidth_Bps)
        self._problem = (key, problem, starts)
        return problem

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
            timer, waited_from = self.env.timeout(max(first, 0.0)), self.env.now
            yield timer | self._wakeup
            if self._wakeup.triggered:
                self._wakeup = self.env.event()
            # A wait shorter than the clock's float resolution at this instant leaves
            # env.now unchanged; the flows still had that time (else they never drain).
            # (A Timeout is ``triggered`` from creation; ``processed`` once it fired.)
            lag = max(first - (self.env.now - waited_from), 0.0) if timer.processed else 0.0
            self._advance()
            if timer.processed or timer.triggered:
                self._drain(first, lag)

    def _drain(self, first: float, lag: float = 0.0) -> None:
        """Retire the flows whose remaining bytes ran out (within tolerance), counting
        ``lag`` seconds of waiting the clock could not represent."""
        freed = []
        for bid in list(self._blocks):
            block = self._blocks[bid]
            done = block.drained(first, lag, self.merge_tolerance, self.env.now)
            num_done = int(done.sum())
            if not num_done:
                continue
            for latency, count in latency_groups(block.latency[done]):
                self._arrive(block.owner, count, latency)
            freed.append(self._freed_links(block, done, num_done))
            if num_done == block.num_live:
                del self._blocks[bid]
            else:
                block.retire(done, num_done)
        if freed:
            gone = np.concatenate(freed)
            self._link_flows -= np.bincount(gone, minlength=self._link_flows.size)
            # links no remaining flow uses were a separate component: nothing to re-solve
            still = gone[self._link_flows[gone] > 0]
            if still.size:
                self._seeds.append(still)

    def _freed_links(self, block: FlowBlock, done: np.ndarray, num_done: int) -> np.ndarray:
        """The link ids of the entries of the flows ``done`` (a mask) of ``block``,
        removing them from the current max-min problem if it holds the block."""
        problem = self._problem
        if problem is not None and block.bid in problem[2]:
            if num_done == block.num_live:  # the block leaves: so does the problem
                self._problem = None
            else:
                return problem[1].remove(problem[2][block.bid] + np.flatnonzero(done))
        if num_done == block.remaining.size:
            return block.links
        return block.links[done[block.flow_of_entry]]

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
