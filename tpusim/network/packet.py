"""Packet fidelity: flows cut into packets that queue for each link (cut-through).

Each directed link is a SimPy ``Resource`` of capacity 1 (its serialiser): a
packet holds it for ``packet_bytes / bandwidth`` and then spends the link's
latency on the wire without holding it. A flow injects its next packet when the
previous one has left its first link, so flows sharing a link interleave
packet by packet (round robin), which is what max-min sharing approximates.

Cut-through: the per-hop latency is paid once per hop per packet, and the
serialisation of a packet overlaps across hops except on its first link, so an
uncontended flow of ``b`` bytes over ``h`` hops arrives after
``h * latency + b / bandwidth + (h - 1) * packet_bytes / bandwidth``; the last
term is the packet-size error, small when packets are small.

Cost: one SimPy event per packet per hop. For small systems and for checking
the flow fidelity.
"""

from __future__ import annotations

import numpy as np
import simpy

from tpusim.network.base import FlowBatch, Network
from tpusim.topology import Topology

DEFAULT_PACKET_BYTES = 64 * 1024


class PacketNetwork(Network):
    """Packet-level network; ``packet_bytes`` is the packet payload (bytes)."""

    fidelity = "packet"

    def __init__(
        self, env: simpy.Environment, topology: Topology, packet_bytes: float = DEFAULT_PACKET_BYTES
    ):
        super().__init__(env, topology)
        if packet_bytes <= 0:
            raise ValueError("packet_bytes must be > 0")
        self.packet_bytes = float(packet_bytes)
        self._links: dict[int, simpy.Resource] = {}

    def _resource(self, link: int) -> simpy.Resource:
        res = self._links.get(link)
        if res is None:
            res = self._links[link] = simpy.Resource(self.env, capacity=1)
        return res

    def _send(self, batch: FlowBatch) -> simpy.Event:
        flows = [
            self.env.process(
                self._flow(batch.links[batch.ptr[i] : batch.ptr[i + 1]], float(batch.bytes[i]))
            )
            for i in range(len(batch))
        ]
        return self.env.all_of(flows)

    def _flow(self, route: np.ndarray, size: float):
        """Inject the packets of one flow back to back on its first link, then wait for all."""
        if route.size == 0 or size <= 0:
            return
        n_packets = max(1, int(np.ceil(size / self.packet_bytes)))
        last = size - (n_packets - 1) * self.packet_bytes
        first_link = int(route[0])
        in_flight = []
        for k in range(n_packets):
            payload = last if k == n_packets - 1 else self.packet_bytes
            with self._resource(first_link).request() as req:
                yield req
                in_flight.append(self.env.process(self._onward(route, payload)))
                yield self.env.timeout(payload / self.bandwidth_Bps[first_link])
        yield self.env.all_of(in_flight)

    def _onward(self, route: np.ndarray, payload: float):
        """One packet, from the moment its first link starts sending it to full arrival.

        Cut-through: the head reaches the next link ``latency`` after a link starts
        sending; it waits there only if that link is busy; the link is then held for
        the packet's serialisation time. The packet has fully arrived one
        serialisation time after its head reaches the destination.
        """
        self.num_events += 1
        yield self.env.timeout(self.latency_s[route[0]])
        for link in route[1:]:
            link = int(link)
            resource = self._resource(link)
            req = resource.request()
            yield req
            self.num_events += 1
            release = self.env.timeout(payload / self.bandwidth_Bps[link])
            release.callbacks.append(lambda _e, r=resource, q=req: r.release(q))
            yield self.env.timeout(self.latency_s[link])
        yield self.env.timeout(payload / self.bandwidth_Bps[route[-1]])
