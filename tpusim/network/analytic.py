"""Analytic fidelity: closed-form alpha-beta time per batch, bounded by the busiest link.

A batch takes the larger of two lower bounds on any fair sharing of the links:

- every flow alone on its route: ``bytes / min_link_bandwidth + path_latency``;
- the busiest link: ``link_bytes / link_bandwidth`` for the link with the most load
  per unit bandwidth, plus the smallest path latency in the batch (its last byte
  must still cross its route).

On uncontended patterns the second never exceeds the first and the model is the
classic alpha-beta one; on contended ones (all-to-all, permutes sharing links) it is
what a max-min fair network reaches when the bottleneck link's flows are all alike.
Instant: one SimPy timeout per batch.
"""

from __future__ import annotations

import numpy as np
import simpy

from tpusim.network.base import FlowBatch, Network


class AnalyticNetwork(Network):
    """Contention bounded by the busiest link, no queueing: one SimPy timeout per batch."""

    fidelity = "analytic"

    def batch_time_s(self, batch: FlowBatch) -> float:
        """Seconds until the last flow of ``batch`` arrives (the larger of the two bounds)."""
        if len(batch) == 0:
            return 0.0
        has_route = batch.hops > 0
        if not has_route.any():
            return 0.0
        latency = self.path_latency_s(batch)
        per_entry = self.bandwidth_Bps[batch.links]
        slowest = np.full(len(batch), np.inf)
        slowest[has_route] = np.minimum.reduceat(per_entry, batch.ptr[:-1][has_route])
        alone = float((np.where(has_route, batch.bytes / slowest, 0.0) + latency).max())
        load = np.bincount(batch.links, weights=batch.bytes_per_entry)
        used = np.flatnonzero(load)
        busiest = float((load[used] / self.bandwidth_Bps[used]).max())
        return max(alone, busiest + float(latency[has_route].min()))

    def _send(self, batch: FlowBatch) -> simpy.Event:
        self.num_events += 1
        return self.env.timeout(self.batch_time_s(batch))
