"""Moving bytes over a topology: one interface, three fidelities.

``make_network(fidelity, env, topology)`` builds the ``analytic`` (closed form,
no contention), ``flow`` (max-min fair fluid flows, the default) or ``packet``
(per-link queues, cut-through) model behind :class:`Network`.
"""

from __future__ import annotations

import simpy

from tpusim.network.analytic import AnalyticNetwork
from tpusim.network.base import FIDELITIES, Fidelity, FlowBatch, Network
from tpusim.network.flow import FlowNetwork, max_min_rates
from tpusim.network.packet import DEFAULT_PACKET_BYTES, PacketNetwork
from tpusim.topology import Topology

__all__ = [
    "DEFAULT_PACKET_BYTES",
    "FIDELITIES",
    "AnalyticNetwork",
    "Fidelity",
    "FlowBatch",
    "FlowNetwork",
    "Network",
    "PacketNetwork",
    "make_network",
    "max_min_rates",
]


def make_network(
    fidelity: Fidelity,
    env: simpy.Environment,
    topology: Topology,
    packet_bytes: float = DEFAULT_PACKET_BYTES,
    check_capacity: bool = False,
    flow_tolerance: float | None = None,
    link_efficiency: float = 1.0,
) -> Network:
    """The network model of ``fidelity`` on ``topology`` inside ``env``.

    ``flow_tolerance`` (flow fidelity only) sets both the max-min rate tolerance and
    the drain merge tolerance of :class:`FlowNetwork` (1% each by default);
    ``link_efficiency`` scales every link's bandwidth (:meth:`Network.set_link_efficiency`)."""
    network = _network(fidelity, env, topology, packet_bytes, check_capacity, flow_tolerance)
    if link_efficiency != 1.0:
        network.set_link_efficiency(link_efficiency)
    return network


def _network(
    fidelity: Fidelity,
    env: simpy.Environment,
    topology: Topology,
    packet_bytes: float,
    check_capacity: bool,
    flow_tolerance: float | None,
) -> Network:
    if fidelity == "analytic":
        return AnalyticNetwork(env, topology)
    if fidelity == "flow":
        if flow_tolerance is None:
            return FlowNetwork(env, topology, check_capacity=check_capacity)
        return FlowNetwork(
            env,
            topology,
            check_capacity=check_capacity,
            merge_tolerance=flow_tolerance,
            rate_tolerance=flow_tolerance,
        )
    if fidelity == "packet":
        return PacketNetwork(env, topology, packet_bytes=packet_bytes)
    raise ValueError(f"unknown fidelity '{fidelity}' (choose from {', '.join(FIDELITIES)})")
