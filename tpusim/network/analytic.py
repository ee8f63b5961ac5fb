"""Analytic fidelity: closed-form alpha-beta time per flow, no contention.

Each flow runs alone at the bandwidth of the slowest link on its route, so a
batch takes ``max(bytes / min_link_bandwidth + path_latency)``. Instant; the
reference the other fidelities must match on uncontended patterns.
"""

from __future__ import annotations

import numpy as np
import simpy

from tpusim.network.base import FlowBatch, Network


class AnalyticNetwork(Network):
    """No-contention network: one SimPy timeout per batch."""

    fidelity = "analytic"

    def batch_time_s(self, batch: FlowBatch) -> float:
        """Seconds until the last flow of ``batch`` arrives, if nothing else shares its links."""
        if len(batch) == 0:
            return 0.0
        has_route = batch.hops > 0
        slowest = np.full(len(batch), np.inf)
        if batch.links.size:
            per_entry = self.bandwidth_Bps[batch.links]
            slowest[has_route] = np.minimum.reduceat(per_entry, batch.ptr[:-1][has_route])
        times = np.where(has_route, batch.bytes / slowest, 0.0) + self.path_latency_s(batch)
        return float(times.max())

    def _send(self, batch: FlowBatch) -> simpy.Event:
        self.num_events += 1
        return self.env.timeout(self.batch_time_s(batch))
