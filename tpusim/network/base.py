"""The interface between collectives and the network: batches of flows in, arrival events out.

A :class:`FlowBatch` is a set of transfers that start together; each follows a
fixed route (a list of directed link ids, CSR-packed). ``Network.send`` returns a
SimPy event that fires when every byte of every flow has arrived. Three
fidelities implement it (:mod:`.analytic`, :mod:`.flow`, :mod:`.packet`).

Timing convention, shared by all three: a flow of ``b`` bytes on a route of
links with latencies ``l_i`` that gets a steady rate ``r`` arrives at
``start + b / r + sum(l_i)`` (cut-through: the per-hop latency is paid once per
hop, not once per packet).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import simpy

from tpusim.network.faults import SurvivingRoutes
from tpusim.network.maxmin import stable_order
from tpusim.topology import Topology

__all__ = [
    "SCATTER_ADD_LINKS_PER_ENTRY",
    "FlowBatch",
    "LinkOrder",
    "Network",
]

SCATTER_ADD_LINKS_PER_ENTRY = 64
"""A batch with fewer route entries than ``links / 64`` adds its link bytes with
``np.add.at`` (cost per entry), a larger one with ``np.bincount`` (cost per link of
the topology). A conservative crossover (dimensionless ratio): on numpy 2 with 200,000
links ``np.add.at`` stays the cheaper one up to ~10,000 entries (links / 20); both
give the same sums, so the value only affects speed."""


SEARCH_ENTRIES_PER_ENTRY = 16
"""Route entries per looked-up entry above which :meth:`FlowBatch.flow_of` searches
``ptr`` (a binary search each) rather than spelling out every entry's flow."""


class LinkOrder:
    """The entries of a route array (directed link ids) sorted by link, stable: the
    flow solver's link index. Sorted when first asked, once for every batch that
    shares the route array (a route cache hands the same one to every size of a sweep)."""

    def __init__(self, links: np.ndarray):
        self.links = links
        self._order: np.ndarray | None = None

    def order(self) -> np.ndarray:
        if self._order is None:
            self._order = stable_order(self.links)
        return self._order


@dataclass(frozen=True)
class FlowBatch:
    """Flows that start at the same instant.

    ``ptr`` (n+1) and ``links`` are the CSR route of each flow (directed link ids
    of the topology); ``bytes`` per flow; ``src``/``dst`` chip ids (for records).
    ``sorted_links``: the :class:`LinkOrder` of ``links`` if the caller shares one
    (speed only).
    """

    src: np.ndarray
    dst: np.ndarray
    bytes: np.ndarray
    ptr: np.ndarray
    links: np.ndarray
    sorted_links: LinkOrder | None = field(default=None, compare=False, repr=False)

    def __len__(self) -> int:
        return int(self.bytes.size)

    @property
    def hops(self) -> np.ndarray:
        return np.diff(self.ptr)

    @cached_property
    def routed(self) -> np.ndarray:
        """Flows that cross at least one link (a chip sending to itself crosses none)."""
        return self.hops > 0

    @cached_property
    def routed_flow_of_entry(self) -> np.ndarray:
        """For each entry of ``links``, its flow's index among the routed flows."""
        return np.repeat(np.cumsum(self.routed) - 1, self.hops)

    @cached_property
    def link_order(self) -> np.ndarray:
        """Indices of ``links`` sorted by link id (stable): the flow solver's link index."""
        shared = self.sorted_links
        if shared is None or shared.links is not self.links:
            shared = LinkOrder(self.links)
        return shared.order()

    @cached_property
    def bytes_per_entry(self) -> np.ndarray:
        return np.repeat(self.bytes, self.hops)

    def flow_of(self, entries: np.ndarray) -> np.ndarray:
        """The flow (index into the batch) that owns each of ``entries`` (indices into
        ``links``, ascending): a search in ``ptr`` for a few entries out of many, else
        read from every entry's flow (a ring's busiest links are all of its links)."""
        if entries.size * SEARCH_ENTRIES_PER_ENTRY < self.links.size:
            return np.searchsorted(self.ptr, entries, side="right") - 1
        return np.repeat(np.arange(len(self)), self.hops)[entries]

    def link_loads(self, num_links: int) -> np.ndarray:
        """Bytes offered to each of ``num_links`` links; a batch of equal flows (one
        all-pairs step) counts entries instead of summing a weight per entry."""
        if self.bytes.size and self.bytes.min() == self.bytes.max():
            return np.bincount(self.links, minlength=num_links) * float(self.bytes[0])
        return np.bincount(self.links, weights=self.bytes_per_entry, minlength=num_links)

    def with_routes(self, which: np.ndarray, ptr: np.ndarray, links: np.ndarray) -> FlowBatch:
        """This batch with the flows of mask ``which`` on new routes (CSR ``ptr``,
        ``links``, one row per flow of ``which`` in order); the others keep theirs."""
        n = len(self)
        hops = self.hops.copy()
        new_hops = np.diff(ptr)
        hops[which] = new_hops
        out_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(hops, out=out_ptr[1:])
        out = np.empty(int(out_ptr[-1]), dtype=np.int64)
        old_flow = np.repeat(np.arange(n), self.hops)
        keep = ~which[old_flow]
        offset = np.arange(self.links.size) - self.ptr[old_flow]
        out[(out_ptr[old_flow] + offset)[keep]] = self.links[keep]
        rows = np.repeat(np.arange(new_hops.size), new_hops)
        flows = np.flatnonzero(which)[rows]
        out[out_ptr[flows] + np.arange(links.size) - ptr[rows]] = links
        return FlowBatch(self.src, self.dst, self.bytes, out_ptr, out)


class Network(ABC):
    """Moves flow batches over a topology inside a SimPy environment.

    Keeps ``link_bytes`` (bytes offered to each directed link) for link records.
    """

    #: The name it is registered under in :data:`tpusim.network.NETWORKS`.
    fidelity: str

    #: The relative error a simulated time may carry against the exact answer of the
    #: same model (dimensionless), which callers bound their predictions with (the flow
    #: fidelity's solver tolerances); None: no such bound is known.
    relative_tolerance: float | None = None

    def __init__(self, env: simpy.Environment, topology: Topology):
        self.env, self.topology = env, topology
        links = topology.links
        self.bandwidth_Bps = links.bandwidth_Bps
        self.latency_s = links.latency_s
        self.link_bytes = np.zeros(len(links))
        self.num_events = 0
        self._latencies: dict[int, tuple[FlowBatch, np.ndarray]] = {}
        self._loads: dict[int, tuple[FlowBatch, np.ndarray, np.ndarray]] = {}
        self._efficiency = 1.0
        #: Fraction of its bandwidth each directed link keeps (None while all are healthy).
        self.link_fraction: np.ndarray | None = None
        #: Directed links that are down (None while all are healthy).
        self.dead: np.ndarray | None = None
        #: Flows sent around a failed link (at send time or in flight).
        self.rerouted_flows = 0
        #: Chooses each flow's path at send time (None: the topology's minimal routes).
        self.routing: Callable[[FlowBatch, Network], FlowBatch] | None = None
        #: What faults and routing did, for the JSON record (empty on the healthy path).
        self.fault_report: dict[str, Any] = {}
        self._surviving: SurvivingRoutes | None = None
        self._rerouted: dict[int, tuple[FlowBatch, FlowBatch, int]] = {}
        #: Routed flows sent, their hops in all and the longest route, on the paths
        #: actually taken (counted only under a routing policy or failures).
        self.routed_hops = (0, 0, 0)

    def set_link_efficiency(self, efficiency: float) -> None:
        """Transfers reach ``efficiency`` (0, 1] of every link's nominal bandwidth (see
        :class:`~tpusim.config.chip.CollectiveCostSpec`); call before the first send."""
        if not 0 < efficiency <= 1:
            raise ValueError(f"link efficiency must be in (0, 1] (got {efficiency:g})")
        self._efficiency = efficiency
        self._set_bandwidth()

    def _set_bandwidth(self) -> None:
        nominal = self.topology.links.bandwidth_Bps * self._efficiency
        fraction = self.link_fraction
        self.bandwidth_Bps = nominal if fraction is None else nominal * fraction

    def degrade_links(self, links: np.ndarray, fraction: float) -> None:
        """From now on the directed ``links`` keep ``fraction`` [0, 1] of their bandwidth
        (0: down; a link never recovers: the lowest fraction stands). Flows in flight
        on a link that went down reroute where the fidelity models it (:meth:`_links_changed`);
        later sends route around it."""
        if self.link_fraction is None:
            self.link_fraction = np.ones(len(self.topology.links))
        self.link_fraction[links] = np.minimum(self.link_fraction[links], fraction)
        self._set_bandwidth()
        self.dead = self.link_fraction == 0
        self._surviving = None
        self._rerouted.clear()
        self._links_changed(np.asarray(links, dtype=np.int64))

    def copy_links_from(self, other: Network) -> None:
        """Take ``other``'s link capacities as they are now (a network that predicts a
        schedule on the surviving topology; its routing policy stays its own)."""
        if other.link_fraction is not None:
            self.link_fraction = other.link_fraction.copy()
            self._set_bandwidth()
            self.dead = self.link_fraction == 0
            self._surviving = None
            self._rerouted.clear()
            self._links_changed(np.flatnonzero(self.link_fraction < 1))

    def routed(self, batch: FlowBatch) -> FlowBatch:
        """``batch`` on the paths the routing policy and the failures leave (itself on a
        healthy network under minimal routing)."""
        if self.routing is None and self.dead is None:
            return batch
        return self._routed(batch)

    def _routed(self, batch: FlowBatch) -> FlowBatch:
        """``batch`` on the paths the routing policy and the failures leave, counted in
        :attr:`routed_hops` (flows, hops, longest route) for reports."""
        if self.routing is not None:
            batch = self.routing(batch, self)
        if self.dead is not None:
            batch = self.around_failures(batch)
        hops = batch.hops
        flows, total, longest = self.routed_hops
        flows += int((hops > 0).sum())
        total += int(hops.sum())
        longest = max(longest, int(hops.max(initial=0)))
        self.routed_hops = (flows, total, longest)
        return batch

    def link_flow_counts(self) -> np.ndarray:
        """Flows on each directed link now (for adaptive routing). Default: none (a
        fidelity that keeps no flows in flight)."""
        return np.zeros(len(self.topology.links))

    def _links_changed(self, links: np.ndarray) -> None:
        """Hook: ``links`` changed capacity now. Default: nothing in flight changes."""
        return None

    def surviving_routes(self) -> SurvivingRoutes:
        """Shortest routes over the links still up (rebuilt when more links fail)."""
        if self._surviving is None:
            alive = (
                np.ones(len(self.topology.links), dtype=bool) if self.dead is None else ~self.dead
            )
            self._surviving = SurvivingRoutes(self.topology, alive)
        return self._surviving

    def around_failures(self, batch: FlowBatch) -> FlowBatch:
        """``batch`` with every flow whose route crosses a failed link on the shortest
        surviving route (counted in :attr:`rerouted_flows`); the same batch if none does."""
        cached = self._rerouted.get(id(batch))
        if cached is not None and cached[0] is batch:  # a ring repeats its step's batch
            self.rerouted_flows += cached[2]
            return cached[1]
        dead = self.dead
        if dead is None or not batch.links.size or not dead[batch.links].any():
            return batch
        hit = np.zeros(len(batch), dtype=bool)
        hit[np.repeat(np.arange(len(batch)), batch.hops)[dead[batch.links]]] = True
        ptr, links = self.surviving_routes().links_many(batch.src[hit], batch.dst[hit])
        num = int(hit.sum())
        self.rerouted_flows += num
        out = batch.with_routes(hit, ptr, links)
        self._rerouted[id(batch)] = (batch, out, num)
        return out

    def _account(self, batch: FlowBatch) -> None:
        """Add ``batch``'s bytes to :attr:`link_bytes`. A large batch's loads are kept
        (cached per batch, as the links they touch and their bytes: a ring sends its
        step's batch again and again); adding them on those links alone gives the
        dense sum's numbers (the other links would add 0.0)."""
        if batch.links.size < self.link_bytes.size // SCATTER_ADD_LINKS_PER_ENTRY:
            np.add.at(self.link_bytes, batch.links, batch.bytes_per_entry)
            return
        cached = self._loads.get(id(batch))
        if cached is None or cached[0] is not batch:
            loads = batch.link_loads(self.link_bytes.size)
            used = np.flatnonzero(loads)
            cached = self._loads[id(batch)] = (batch, used, loads[used])
        self.link_bytes[cached[1]] += cached[2]  # each link once

    def path_latency_s(self, batch: FlowBatch) -> np.ndarray:
        """Sum of link latencies along each flow's route (cached per batch)."""
        cached = self._latencies.get(id(batch))
        if cached is None or cached[0] is not batch:
            cached = self._latencies[id(batch)] = (batch, self._path_latency_s(batch))
        return cached[1]

    def _path_latency_s(self, batch: FlowBatch) -> np.ndarray:
        if self.latency_s.size and self.latency_s.min() == self.latency_s.max():
            return batch.hops * float(self.latency_s[0])  # every link alike: hops x it
        out = np.zeros(len(batch))
        has_route = batch.hops > 0
        if batch.links.size:
            starts = batch.ptr[:-1][has_route]  # empty routes own no entries: skip them
            out[has_route] = np.add.reduceat(self.latency_s[batch.links], starts)
        return out

    def slowest_link_Bps(self, batch: FlowBatch, routed: np.ndarray) -> np.ndarray:
        """The smallest bandwidth on each route of the flows of mask ``routed`` (each
        with a route)."""
        bandwidth = self.bandwidth_Bps
        if bandwidth.min() == bandwidth.max():  # every link alike
            return np.full(int(routed.sum()), float(bandwidth[0]))
        return np.minimum.reduceat(bandwidth[batch.links], batch.ptr[:-1][routed])

    def send(self, batch: FlowBatch) -> simpy.Event:
        """Start every flow of ``batch`` now; the event fires when all have arrived.
        The routing policy (if any) picks each flow's path; flows whose path crosses a
        failed link take the shortest surviving one."""
        if self.routing is not None or self.dead is not None:
            batch = self._routed(batch)
        self._account(batch)
        return self._send(batch)

    @abstractmethod
    def _send(self, batch: FlowBatch) -> simpy.Event: ...
