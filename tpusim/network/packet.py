"""Packet fidelity: flows cut into packets that queue for each link (cut-through).

Each directed link is a serialiser that sends one packet at a time and picks
the next packet round robin over the flows waiting for it (fair queuing, as a
switch arbitrates between its input ports): a packet holds the link for
``packet_bytes / bandwidth`` and then spends the link's latency on the wire
without holding it. A flow injects its next packet when the previous one has
left its first link, and keeps at most a window of packets in flight (its
bandwidth-delay product plus two, like the credits of link-level flow control),
so a flow held up downstream backs off upstream instead of flooding. Backlogged
flows sharing a link thus get equal shares and a flow limited elsewhere leaves
its unused share to others: what max-min sharing in the flow fidelity computes.

Cut-through: the per-hop latency is paid once per hop per packet, and the
serialisation of a packet overlaps across hops except on its first link, so an
uncontended flow of ``b`` bytes over ``h`` hops arrives after
``h * latency + b / bandwidth + (h - 1) * packet_bytes / bandwidth``; the last
term is the packet-size error, small when packets are small.

Cost: one SimPy event per packet per hop. For small systems and for checking
the flow fidelity.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import simpy

from tpusim.network.base import FlowBatch, Network
from tpusim.topology import Topology

DEFAULT_PACKET_BYTES = 64 * 1024
"""Default packet payload (bytes). The packet-size error of an uncontended flow is
``(hops - 1) * packet_bytes / bandwidth``: 64 KiB keeps it under 1% of a 1 GiB
transfer's time on a 16-hop route while a 1 GiB flow stays at 16,384 packets per hop
(the fidelity costs one event per packet per hop)."""

WINDOW_SLACK_PACKETS = 2
"""Packets a flow may have in flight beyond its bandwidth-delay product: one being
serialised on the first link and one whose credit is on its way back, so an
uncontended flow is never throttled by its own window."""


class RoundRobinLink:
    """One direction of a link: one packet at a time, next packet round robin over flows.

    A custom SimPy resource: ``request(flow)`` returns an event that fires when the
    packet may start; ``release()`` hands the link to the next flow in turn.
    """

    def __init__(self, env: simpy.Environment):
        self.env = env
        self.busy = False
        self._waiting: dict[int, deque[simpy.Event]] = {}
        self._turns: deque[int] = deque()

    def request(self, flow: int) -> simpy.Event:
        event = self.env.event()
        if not self.busy:
            self.busy = True
            return event.succeed()
        queue = self._waiting.get(flow)
        if queue is None:
            queue = self._waiting[flow] = deque()
            self._turns.append(flow)
        queue.append(event)
        return event

    def release_on(self, _event: simpy.Event) -> None:
        """:meth:`release` as an event callback (when a packet's hold ends)."""
        self.release()

    def release(self) -> None:
        if not self._turns:
            self.busy = False
            return
        flow = self._turns.popleft()
        queue = self._waiting[flow]
        event = queue.popleft()
        if queue:
            self._turns.append(flow)
        else:
            del self._waiting[flow]
        event.succeed()


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
        self._links: dict[int, RoundRobinLink] = {}
        self._next_flow = 0

    def _link(self, link: int) -> RoundRobinLink:
        server = self._links.get(link)
        if server is None:
            server = self._links[link] = RoundRobinLink(self.env)
        return server

    def _send(self, batch: FlowBatch) -> simpy.Event:
        flows = []
        for i in range(len(batch)):
            route = batch.links[batch.ptr[i] : batch.ptr[i + 1]]
            flows.append(
                self.env.process(self._flow(self._next_flow, route, float(batch.bytes[i])))
            )
            self._next_flow += 1
        return self.env.all_of(flows)

    def _flow(self, flow: int, route: np.ndarray, size: float):
        """Inject the packets of one flow back to back on its first link, then wait for all."""
        if route.size == 0 or size <= 0:
            return
        n_packets = max(1, int(np.ceil(size / self.packet_bytes)))
        last = size - (n_packets - 1) * self.packet_bytes
        first = self._link(int(route[0]))
        serialise = self.bandwidth_Bps[int(route[0])]
        window = self._window(route)
        in_flight: list[simpy.Process] = []
        turn = first.request(flow)
        for k in range(n_packets):
            payload = last if k == n_packets - 1 else self.packet_bytes
            yield turn
            in_flight.append(self.env.process(self._onward(flow, route, payload)))
            yield self.env.timeout(payload / serialise)
            if k == n_packets - 1:
                first.release()
                break
            blocker = in_flight[k + 1 - window] if k + 1 >= window else None
            if blocker is None or blocker.triggered:
                turn = first.request(flow)  # next packet ready: queue it before letting go
                first.release()
            else:  # window full: credits come back when the oldest packet arrives
                first.release()
                yield blocker
                turn = first.request(flow)
        yield self.env.all_of(in_flight)

    def _window(self, route: np.ndarray) -> int:
        """Packets a flow may have in flight: its bandwidth-delay product plus two, so an
        uncontended flow is never throttled while a blocked one backs up (credits)."""
        delay = float(self.latency_s[route].sum())
        fastest = float(self.bandwidth_Bps[route].max())
        return int(np.ceil(delay * fastest / self.packet_bytes)) + WINDOW_SLACK_PACKETS

    def _onward(self, flow: int, route: np.ndarray, payload: float):
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
            server = self._link(link)
            yield server.request(flow)
            self.num_events += 1
            held = self.env.timeout(payload / self.bandwidth_Bps[link])
            held.callbacks.append(server.release_on)
            yield self.env.timeout(self.latency_s[link])
        yield self.env.timeout(payload / self.bandwidth_Bps[route[-1]])
