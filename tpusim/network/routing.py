"""Routing choices: minimal, Valiant and UGAL, applied to a flow batch when it is sent.

- ``minimal``: the topology's deterministic minimal route (nothing to do).
- ``valiant`` (Valiant 1982; on Dragonfly/Boardfly at the group level, Kim et al.
  2008): every flow goes minimally to an intermediate chip the topology draws
  (:meth:`~tpusim.topology.base.Topology.valiant_intermediates`) and minimally on to its
  destination. Spreads any pattern over the network at the cost of longer routes
  (at most twice the load of a minimal route on a uniform pattern).
- ``ugal`` (Universal Globally-Adaptive Load-balanced, Singh 2005): each flow takes the
  minimal route or one of :data:`UGAL_CANDIDATES` Valiant routes, whichever the flow
  model predicts is fastest given the load on the links: for a path P,
  ``bytes * max over l in P of (flows on l + 1) / bandwidth(l) + latency(P)``, the time
  of the flow if it got an equal share of its busiest link (ties: the minimal route).
  The load is the flows in flight plus the whole batch on its minimal routes (the
  queues a router sees fill with its own traffic, the flow itself included on its
  minimal route); the flows choose in :data:`UGAL_CHUNKS` rounds, a flow that leaves
  its minimal route moving its count to the route chosen. A uniform pattern (every
  link equally loaded) thus stays minimal; a hot spot spreads until the loads even out.

Multipath: under ``valiant`` and ``ugal`` each flow of a batch of at most
:data:`MULTIPATH_MAX_FLOWS` flows is split into :data:`MULTIPATH_CHUNKS` equal chunks,
each routed on its own (Valiant: its own intermediate; UGAL: its own choice), as an
adaptive network routes packets of one message over several paths.

Random draws come from the simulation's RNG: the same seed, the same routes.
"""

from __future__ import annotations

import numpy as np

from tpusim.config.faults import ROUTINGS, Routing
from tpusim.network.base import FlowBatch, Network

__all__ = [
    "MULTIPATH_CHUNKS",
    "ROUTINGS",
    "UGAL_CANDIDATES",
    "UGAL_CHUNKS",
    "Router",
    "Routing",
    "make_router",
    "split_flows",
]

UGAL_CANDIDATES = 16
"""Non-minimal (Valiant) candidates each flow weighs against its minimal route under
UGAL (count). Assumption (speed against quality): UGAL as published weighs one; more
keep the flows of one batch from piling onto the same intermediate group (32 chips of
a TPU 8i group sending to the next group: 8 candidates leave two flows sharing a global
link, 2.0x the injection bound; 16 reach 1.03x). Fewer are weighed when a batch is
large (:data:`UGAL_ROUTE_BUDGET`)."""

UGAL_ROUTE_BUDGET = 2_000_000
"""Most candidate routes UGAL builds per batch (count; speed and memory only): a batch
of n flows weighs max(1, min(UGAL_CANDIDATES, budget // n)) Valiant candidates."""

MULTIPATH_CHUNKS = 16
"""Chunks each flow is split into under non-minimal routing (count). Assumption (speed
against quality): 32 chips of a TPU 8i group sending to the next group have 70 global
links out of the group; 16 chunks of each flow spread over them (1 chunk: at most 32
links, 2.2x the injection bound)."""

MULTIPATH_MAX_FLOWS = 4096
"""Largest batch (flows) whose flows are split into chunks (count; speed only): a
larger batch (an all-to-all) already spreads over the network by its own number."""

UGAL_MARGIN = 0.1
"""How much faster (fraction) a non-minimal route must be predicted than the minimal one
for a flow to take it (dimensionless): UGAL's threshold (Singh 2005, the bias T of
q_min H_min <= q_nm H_nm + T). Without one, flows whose routes are predicted equal within
rounding leave their minimal routes on a uniform pattern, each detour loads two global
links, and the detours cascade (1.56x minimal on a 256-chip Boardfly all-to-all).
Assumption: 10% keeps that all-to-all minimal and a group's hot spot within 1.5x of
its injection bound."""

UGAL_CHUNKS = 64
"""Rounds in which the flows of one batch choose under UGAL (count). Assumption: within a
round flows see only the earlier rounds' choices; a batch of at most this many flows
chooses one flow at a time (exact greedy), a larger one in rounds of len / 64."""


def concat_routes(
    first: tuple[np.ndarray, np.ndarray], second: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Route k of ``first`` followed by route k of ``second`` (both CSR ``(ptr, links)``)."""
    (p1, l1), (p2, l2) = first, second
    h1, h2 = np.diff(p1), np.diff(p2)
    ptr = np.zeros(h1.size + 1, dtype=np.int64)
    np.cumsum(h1 + h2, out=ptr[1:])
    key = np.concatenate(
        [np.repeat(np.arange(h1.size), h1) * 2, np.repeat(np.arange(h2.size), h2) * 2 + 1]
    )
    order = np.argsort(key, kind="stable")
    return ptr, np.concatenate([l1, l2])[order]


class Router:
    """Applies a routing policy to each batch a network sends (a callable on
    :attr:`Network.routing`); ``rng`` is the simulation's."""

    def __init__(
        self, routing: Routing, rng: np.random.Generator, candidates: int = UGAL_CANDIDATES
    ):
        if routing not in ROUTINGS:
            raise ValueError(f"unknown routing '{routing}' (choose from {', '.join(ROUTINGS)})")
        self.routing, self.rng, self.candidates = routing, rng, int(candidates)
        self.nonminimal_flows = 0

    def __call__(self, batch: FlowBatch, network: Network) -> FlowBatch:
        if self.routing == "minimal" or not len(batch):
            return batch
        if len(batch) <= MULTIPATH_MAX_FLOWS:
            batch = split_flows(batch, MULTIPATH_CHUNKS)
        if self.routing == "valiant":
            return self._valiant(batch, network)
        return self._ugal(batch, network)

    def _valiant_routes(self, batch: FlowBatch, network: Network) -> tuple[np.ndarray, np.ndarray]:
        topo = network.topology
        mid = topo.valiant_intermediates(batch.src, batch.dst, self.rng)
        return concat_routes(
            topo.route_links_many(batch.src, mid), topo.route_links_many(mid, batch.dst)
        )

    def _valiant(self, batch: FlowBatch, network: Network) -> FlowBatch:
        ptr, links = self._valiant_routes(batch, network)
        moved = np.diff(ptr) != batch.hops
        self.nonminimal_flows += int(moved.sum())
        return FlowBatch(batch.src, batch.dst, batch.bytes, ptr, links)

    def _ugal(self, batch: FlowBatch, network: Network) -> FlowBatch:
        options = [(batch.ptr, batch.links)]
        count = max(1, min(self.candidates, UGAL_ROUTE_BUDGET // max(len(batch), 1)))
        options += [self._valiant_routes(batch, network) for _ in range(count)]
        load = _active_flows(network).astype(np.float64)
        load += np.bincount(batch.links, minlength=load.size)
        bandwidth, latency = network.bandwidth_Bps, network.latency_s
        n = len(batch)
        chosen = np.zeros(n, dtype=np.int64)
        rounds = min(n, UGAL_CHUNKS)
        for start in range(rounds):
            rows = np.arange(start, n, rounds)  # strided: a flow's chunks in different rounds
            np.subtract.at(load, batch.links[_entries(batch.ptr, rows)], 1.0)
            cost = np.stack(
                [_cost(o, rows, load, bandwidth, latency, batch.bytes) for o in options]
            )
            cost[1:] *= 1 + UGAL_MARGIN
            pick = np.argmin(cost, axis=0)  # ties: the minimal route (option 0)
            chosen[rows] = pick
            for k in np.unique(pick):
                entries = _entries(options[k][0], rows[pick == k])
                np.add.at(load, options[k][1][entries], 1.0)
        self.nonminimal_flows += int((chosen > 0).sum())
        return _assemble(batch, options, chosen)


def split_flows(batch: FlowBatch, chunks: int) -> FlowBatch:
    """``batch`` with every flow split into ``chunks`` equal flows on its route."""
    if chunks <= 1:
        return batch
    rows = np.repeat(np.arange(len(batch)), chunks)
    hops = batch.hops[rows]
    ptr = np.zeros(rows.size + 1, dtype=np.int64)
    np.cumsum(hops, out=ptr[1:])
    links = batch.links[_entries(batch.ptr, rows)]
    return FlowBatch(batch.src[rows], batch.dst[rows], batch.bytes[rows] / chunks, ptr, links)


def _active_flows(network: Network) -> np.ndarray:
    """Flows on each link now (the flow fidelity keeps them; others: none)."""
    return network.link_flow_counts()


def _entries(ptr: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Entry indices of CSR rows ``rows``, concatenated."""
    counts = ptr[rows + 1] - ptr[rows]
    if not counts.sum():
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(counts)
    return np.repeat(ptr[rows] - ends + counts, counts) + np.arange(int(ends[-1]))


def _cost(
    option: tuple[np.ndarray, np.ndarray],
    rows: np.ndarray,
    load: np.ndarray,
    bandwidth: np.ndarray,
    latency: np.ndarray,
    sizes: np.ndarray,
) -> np.ndarray:
    """Predicted seconds of flows ``rows`` on ``option`` (see the module docstring)."""
    ptr, links = option
    hops = ptr[rows + 1] - ptr[rows]
    out = np.zeros(rows.size)
    has = hops > 0
    if not has.any():
        return out
    entries = links[_entries(ptr, rows)]
    share = (load[entries] + 1.0) / np.maximum(bandwidth[entries], 1e-300)
    starts = np.concatenate([[0], np.cumsum(hops)[:-1]])[has]
    worst = np.maximum.reduceat(share, starts)
    path_latency = np.add.reduceat(latency[entries], starts)
    out[has] = sizes[rows][has] * worst + path_latency
    return out


def _assemble(
    batch: FlowBatch, options: list[tuple[np.ndarray, np.ndarray]], chosen: np.ndarray
) -> FlowBatch:
    """The batch with flow k on route ``options[chosen[k]]``."""
    hops = np.zeros(len(batch), dtype=np.int64)
    parts, owners = [], []
    for k, (ptr, links) in enumerate(options):
        rows = np.flatnonzero(chosen == k)
        if not rows.size:
            continue
        hops[rows] = ptr[rows + 1] - ptr[rows]
        parts.append(links[_entries(ptr, rows)])
        owners.append(np.repeat(rows, ptr[rows + 1] - ptr[rows]))
    out_ptr = np.zeros(len(batch) + 1, dtype=np.int64)
    np.cumsum(hops, out=out_ptr[1:])
    order = np.argsort(np.concatenate(owners), kind="stable")
    return FlowBatch(batch.src, batch.dst, batch.bytes, out_ptr, np.concatenate(parts)[order])


def make_router(routing: Routing, rng: np.random.Generator) -> Router | None:
    """The router of ``routing`` (None for ``minimal``: the healthy path is untouched)."""
    return None if routing == "minimal" else Router(routing, rng)
