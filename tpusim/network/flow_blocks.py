"""The per-batch state of the flow fidelity (:mod:`.flow`) and its bookkeeping.

A :class:`FlowBlock` holds the flows of one batch still draining (numpy arrays, one
row per flow, one route entry per flow-link pair). This module also holds the drain
tolerances (which flows count as drained at an instant), the grouping of drained
flows by arrival latency, and the building of the max-min problem of a set of blocks.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tpusim.network.base import FlowBatch
from tpusim.network.maxmin import MaxMinProblem

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


@dataclass
class FlowBlock:
    """The flows of one batch still draining: all started together at ``started_at``.

    ``flow_of_entry`` / ``links``: each flow's route entries (flow index within the
    block, directed link id), in flow order, kept whole while the block lives: a flow
    that drained is marked ``dead`` (its ``remaining`` is infinite, so its rate, kept
    until the next solve gives it 0, moves nothing: it never drains again), so
    the max-min indexes built over the block stay valid. ``link_set``: the distinct
    links of the block, found when a re-solve first needs them.
    """

    bid: int
    started_at: float
    remaining: np.ndarray
    rate: np.ndarray
    latency: np.ndarray
    flow_of_entry: np.ndarray
    links: np.ndarray
    batch: FlowBatch
    dead: np.ndarray
    num_live: int
    link_set: np.ndarray | None = None
    owner: int = -1

    def distinct_links(self, num_links: int) -> np.ndarray:
        """Distinct link ids of the block (``num_links``: links of the topology);
        counting them is linear where a unique would sort."""
        if self.link_set is None:
            self.link_set = np.flatnonzero(np.bincount(self.links, minlength=num_links))
        return self.link_set

    def drained(
        self, first_s: float, lag_s: float, merge_tolerance: float, now_s: float
    ) -> np.ndarray:
        """Mask of the flows that count as drained at ``now_s``: within the drain
        horizon of the earliest drain time ``first_s``, plus ``lag_s`` seconds of
        waiting the clock could not represent, plus ``merge_tolerance`` of the block's
        age (see :class:`~tpusim.network.flow.FlowNetwork`)."""
        horizon = (
            lag_s
            + max(first_s, MIN_DRAIN_HORIZON_S) * DRAIN_REL_TIME_TOL
            + (merge_tolerance * (now_s - self.started_at))
        )
        return self.remaining <= self.rate * horizon + DRAIN_BYTE_SLACK

    def retire(self, done: np.ndarray, num_done: int | None = None) -> None:
        """Mark the flows of ``done`` (a mask of live flows; ``num_done`` of them, if
        counted already) drained."""
        self.dead |= done
        self.remaining[done] = np.inf  # inf - rate x dt stays inf: its rate is not read
        self.num_live -= int(done.sum()) if num_done is None else num_done


def blocks_problem(
    blocks: list[FlowBlock], bandwidth_Bps: np.ndarray
) -> tuple[MaxMinProblem, dict[int, int]]:
    """The max-min problem of the flows of ``blocks`` over links of ``bandwidth_Bps``
    (flows in block order, drained ones already removed), and each block's first flow
    in it (block id -> flow index)."""
    flow_counts = [b.remaining.size for b in blocks]
    entry_counts = [b.links.size for b in blocks]
    if len(blocks) == 1:
        flows, links, dead = blocks[0].flow_of_entry, blocks[0].links, blocks[0].dead
    else:
        flows = np.concatenate(_offset([b.flow_of_entry for b in blocks], flow_counts))
        links = np.concatenate([b.links for b in blocks])
        dead = np.concatenate([b.dead for b in blocks])

    def link_order() -> np.ndarray:
        if len(blocks) == 1:  # nothing to offset: the batch's own order
            return blocks[0].batch.link_order
        return np.concatenate(_offset([b.batch.link_order for b in blocks], entry_counts))

    num_flows = sum(flow_counts)
    any_dead = dead if dead.any() else None
    problem = MaxMinProblem(flows, links, bandwidth_Bps, num_flows, link_order, any_dead)
    starts = np.concatenate([[0], np.cumsum(flow_counts)[:-1]])
    return problem, dict(zip((b.bid for b in blocks), starts.tolist(), strict=True))


def latency_groups(latency: np.ndarray) -> list[tuple[float, int]]:
    """Distinct latencies with their counts, in increasing order."""
    if (latency == latency[0]).all():
        return [(float(latency[0]), int(latency.size))]
    values, counts = np.unique(latency, return_counts=True)
    return [(float(v), int(c)) for v, c in zip(values, counts, strict=True)]


def _offset(parts: list[np.ndarray], sizes: list[int]) -> list[np.ndarray]:
    """``parts`` shifted so that part k starts after the ``sizes`` of parts 0..k-1."""
    out, start = [], 0
    for part, size in zip(parts, sizes, strict=True):
        out.append(part + start)
        start += size
    return out


@dataclass(frozen=True)
class AloneBounds:
    """Bounds (s) on a batch's flows run alone on idle links, max-min fair and exact:
    ``lower_s``/``upper_s`` on the time until its last flow arrives, ``drain_s`` the
    longest any flow can take to drain, ``rate_Bps`` per routed flow the rate it never
    drops below (see :func:`alone_bounds`)."""

    lower_s: float
    upper_s: float
    drain_s: float
    rate_Bps: np.ndarray

    def determined(self, tolerance: float) -> bool:
        """Whether the midpoint is within ``tolerance`` (relative) of every time in the
        bounds: the batch is then answered in closed form."""
        return self.upper_s - self.lower_s <= 2 * tolerance * self.lower_s

    @property
    def time_s(self) -> float:
        return 0.5 * (self.lower_s + self.upper_s)


def alone_bounds(batch: FlowBatch, bandwidth_Bps: np.ndarray, latency_s: np.ndarray) -> AloneBounds:
    """Bounds on the batch's routed flows sharing links max-min fairly with nothing
    else (``latency_s``: each flow's path latency; the flow fidelity's timing: a flow of
    b bytes arrives ``drain + latency`` after it starts).

    Lower: a flow never beats its route's slowest link alone (``b / c_min + latency``),
    and link l cannot drain its load before ``load_l / c_l``, which its last flow then
    crosses with at least the smallest latency of the flows on l. On a most crowded
    link (``N_l / c_l`` the largest, w*) the bound is exact: progressive filling raises
    every flow to 1 / w* before any link saturates, and that link saturates there, so
    each of its flows runs at exactly 1 / w* until the first of them drains; those
    with its fewest bytes b drain at ``b x w*`` and arrive their latency later (with
    equal bytes, e.g. one step of all-pairs, this meets the upper bound). Upper: at every
    instant a max-min fair flow has its bottleneck link l, saturated, where no flow gets
    more than it, so its rate is at least ``c_l / n_l`` >= ``min over its route of
    c_l / N_l`` (N_l: the batch's flows on l, an upper bound on those still there);
    it drains within ``b x max_l N_l / c_l``. Links of capacity 0 make it unbounded."""
    routed = batch.routed
    links = batch.links
    bytes_, lat = batch.bytes[routed], latency_s[routed]
    size = bandwidth_Bps.size
    count = np.bincount(links, minlength=size)
    used = np.flatnonzero(count)
    capacity = bandwidth_Bps[used]
    if not used.size or not (capacity > 0).all():
        return AloneBounds(0.0, math.inf if used.size else 0.0, math.inf, np.zeros(bytes_.size))
    starts = batch.ptr[:-1][routed]
    crowding = np.zeros(size)
    crowding[used] = count[used] / capacity  # s per byte at the link's fair share
    on_entry = crowding[links]
    worst = np.maximum.reduceat(on_entry, starts)  # s per byte on each route's worst link
    drain = bytes_ * worst
    upper = float((lat + drain).max())
    lower = _most_crowded_s(batch, on_entry, bytes_, lat)
    if lower < upper:  # the other two bounds (never above the upper one) may be higher
        hops = batch.hops[routed]
        slowest = np.minimum.reduceat(bandwidth_Bps[links], starts)
        least_lat = np.full(size, np.inf)
        np.minimum.at(least_lat, links, np.repeat(lat, hops))
        load = np.bincount(links, weights=batch.bytes_per_entry, minlength=size)[used]
        lower = max(
            float((bytes_ / slowest + lat).max()),
            float((load / capacity + least_lat[used]).max()),
            lower,
        )
    return AloneBounds(lower, upper, float(drain.max()), 1.0 / worst)


def _most_crowded_s(
    batch: FlowBatch, on_entry: np.ndarray, bytes_: np.ndarray, lat: np.ndarray
) -> float:
    """The latest arrival among the flows with the fewest bytes on the most crowded
    links, exact for them (see :func:`alone_bounds`), so a lower bound on the batch's
    last arrival. ``on_entry``: each route entry's link crowding (s per byte at its
    fair share); ``bytes_``, ``lat``: per routed flow."""
    worst = float(on_entry.max())
    entries = np.flatnonzero(on_entry == worst)
    flows = batch.flow_of(entries)
    if not batch.routed.all():  # index among the routed flows
        flows = (np.cumsum(batch.routed) - 1)[flows]
    links = batch.links[entries]
    fewest = np.full(int(links.max()) + 1, np.inf)
    np.minimum.at(fewest, links, bytes_[flows])
    first = bytes_[flows] == fewest[links]
    return float((bytes_[flows][first] * worst + lat[flows][first]).max())


class ClosedBatch:
    """A batch the flow fidelity answered in closed form: its routed flows arrive
    together at ``started_at + bounds.time_s`` unless a contending batch or a link
    change reopens it as flows first (``active`` False)."""

    def __init__(self, batch: FlowBatch, bid: int, started_at: float, bounds: AloneBounds):
        self.batch, self.bid, self.started_at, self.bounds = batch, bid, started_at, bounds
        self.active = True
        self._links: np.ndarray | None = None

    @property
    def drained_at(self) -> float:
        """The instant (s) by which every byte has left the links (only latency is left)."""
        return self.started_at + self.bounds.drain_s

    def shares(self, links: np.ndarray | None, num_links: int) -> bool:
        """Whether any of ``links`` (None: any link at all) is one of the batch's."""
        if links is None:
            return True
        if self._links is None:
            self._links = np.bincount(self.batch.links, minlength=num_links) > 0
        return bool(self._links[links].any())

    def landed(self, arrive: Callable[[int, int, float], None]) -> Callable[..., None]:
        """The callback of its arrival timer: ``arrive(bid, flows, 0)`` unless reopened."""

        def land(_event: object) -> None:
            if self.active:
                self.active = False
                arrive(self.bid, int(self.batch.routed.sum()), 0.0)

        return land
