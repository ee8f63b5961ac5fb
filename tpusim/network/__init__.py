"""Moving bytes over a topology: one interface, registered fidelities.

A fidelity is a backend in :data:`NETWORKS` (:mod:`tpusim.network.backends`); a run
picks one, with that backend's own options, in a :class:`NetworkSettings`, and
:func:`make_network` builds it. Shipped (:mod:`tpusim.network.fidelities`), in this
order: ``analytic`` (closed form, no queueing), ``flow`` (max-min fair fluid flows,
the default) and ``packet`` (per-link queues, cut-through).
"""

from __future__ import annotations

from tpusim.network.analytic import AnalyticNetwork
from tpusim.network.backends import (
    NETWORKS,
    BackendOptions,
    FidelityName,
    NetworkBackend,
    NetworkSettings,
    make_network,
    option_keys,
)
from tpusim.network.base import FlowBatch, Network
from tpusim.network.fidelities import ANALYTIC, FLOW, PACKET, FlowOptions, PacketOptions
from tpusim.network.flow import FlowNetwork, max_min_rates
from tpusim.network.packet import DEFAULT_PACKET_BYTES, PacketNetwork
from tpusim.network.tree import NetworkTree, network_tree, tree_of

__all__ = [
    "DEFAULT_PACKET_BYTES",
    "NETWORKS",
    "AnalyticNetwork",
    "BackendOptions",
    "FidelityName",
    "FlowBatch",
    "FlowNetwork",
    "FlowOptions",
    "Network",
    "NetworkBackend",
    "NetworkSettings",
    "NetworkTree",
    "PacketNetwork",
    "PacketOptions",
    "make_network",
    "max_min_rates",
    "network_tree",
    "option_keys",
    "tree_of",
]

NETWORKS.register_all([("analytic", ANALYTIC), ("flow", FLOW), ("packet", PACKET)])
