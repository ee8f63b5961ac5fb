"""Analytic fidelity: closed-form alpha-beta time per batch, bounded by the busiest link.

A batch takes the larger of two lower bounds on any fair sharing of the links:

- every flow alone on its route: ``bytes / min_link_bandwidth + path_latency``;
- the busiest link: ``link_bytes / link_bandwidth`` for the link with the most load
  per unit bandwidth, plus the longest path latency among the flows that cross it
  (sharing it fairly, flows of equal size finish it together, and the one with the
  longest route arrives last).

On uncontended patterns the second never exceeds the first and the model is the
classic alpha-beta one. On contended ones (all-to-all, permutes sharing links) it is
what a max-min fair network gives when the bottleneck's flows are alike; otherwise it
can differ from the flow fidelity by at most the spread of route latencies through
the bottleneck (a few hop latencies), small beside any sizeable drain time.
Instant: one SimPy timeout per batch.
"""

from __future__ import annotations

import numpy as np
import simpy

from tpusim.network.base import FlowBatch, Network
from tpusim.topology import Topology

HOT_LINK_REL_TOL = 1e-9
"""Links within this fraction of the busiest link's drain time count as busiest
(dimensionless): equal loads differ only by float round-off."""


class AnalyticNetwork(Network):
    """Contention bounded by the busiest link, no queueing: one SimPy timeout per batch."""

    fidelity = "analytic"

    def __init__(self, env: simpy.Environment, topology: Topology):
        super().__init__(env, topology)
        # id(batch) -> (batch, seconds): a ring sends the same batch step after step
        self._times: dict[int, tuple[FlowBatch, float]] = {}

    def _links_changed(self, links: np.ndarray) -> None:
        self._times.clear()

    def batch_time_s(self, batch: FlowBatch) -> float:
        """Seconds until the last flow of ``batch`` arrives (the larger of the two bounds);
        cached per batch while link capacities stand."""
        cached = self._times.get(id(batch))
        if cached is not None and cached[0] is batch:
            return cached[1]
        time_s = self._batch_time_s(batch)
        self._times[id(batch)] = (batch, time_s)
        return time_s

    def _batch_time_s(self, batch: FlowBatch) -> float:
        if len(batch) == 0:
            return 0.0
        has_route = batch.hops > 0
        if not has_route.any():
            return 0.0
        latency = self.path_latency_s(batch)
        slowest = np.full(len(batch), np.inf)
        slowest[has_route] = self.slowest_link_Bps(batch, has_route)
        alone = float((np.where(has_route, batch.bytes / slowest, 0.0) + latency).max())
        return max(alone, self._busiest_link_s(batch, latency))

    def _busiest_link_s(self, batch: FlowBatch, latency: np.ndarray) -> float:
        """The busiest link's bytes / bandwidth plus the longest route crossing it."""
        load = batch.link_loads(int(batch.links.max()) + 1)
        drain = np.zeros(load.size)
        used = np.flatnonzero(load)
        drain[used] = load[used] / self.bandwidth_Bps[used]
        busiest = float(drain.max())
        hot_entries = np.flatnonzero((drain >= busiest * (1 - HOT_LINK_REL_TOL))[batch.links])
        return busiest + float(latency[batch.flow_of(hot_entries)].max())

    def _send(self, batch: FlowBatch) -> simpy.Event:
        self.num_events += 1
        return self.env.timeout(self.batch_time_s(batch))
