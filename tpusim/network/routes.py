"""Turning transfers (src chip, dst chip, bytes) into flow batches with routes.

Routes are the topology's deterministic routes. A topology whose batch routes are
vectorised (:attr:`~tpusim.topology.base.Topology.vectorised_routes`) routes a whole
batch at once, cached per whole (src array, dst array), so one cache shared by runs
of the same collective at several sizes (a bandwidth curve) routes each step once;
any other is routed pair by pair, cached per (src, dst) pair: a collective repeats
the same pairs step after step. Batches whose transfers all go to a direct neighbour
(ring steps on a torus) are resolved in one vectorised lookup with no Python loop
over transfers.
"""

from __future__ import annotations

import numpy as np

from tpusim.network.base import FlowBatch, LinkOrder
from tpusim.topology import Topology

_NO_LINKS = np.zeros(0, dtype=np.int64)


NEIGHBOUR_PROBE = 64
"""Pairs (count) looked up first to tell a batch of neighbour transfers from one that
needs routes; only if all of them are neighbours is the whole batch looked up."""


class RouteCache:
    """Builds :class:`FlowBatch` es on ``topology``; ``split_ports`` splits a transfer
    evenly over the topology's port routes where it has them
    (:attr:`~tpusim.topology.base.Topology.has_port_routes`: on a torus one
    dimension-order route per moving axis, each starting on a different port, as a
    point-to-point copy does on TPU ICI)."""

    def __init__(self, topology: Topology):
        self.topology = topology
        self._paths: dict[tuple[int, int], np.ndarray] = {}
        self._ports: dict[tuple[int, int], list[np.ndarray]] = {}
        self._many: dict[tuple[bytes, bytes], tuple[np.ndarray, np.ndarray, LinkOrder]] = {}
        # neighbour lookups of whole batches (-1 where a transfer is not one hop), kept
        # for runs that rebuild their schedules (a Monte Carlo over failed links)
        self._hops: dict[tuple[bytes, bytes], np.ndarray] = {}

    def _links(self, src: int, dst: int) -> np.ndarray:
        key = (src, dst)
        path = self._paths.get(key)
        if path is None:
            topo = self.topology
            path = self._paths[key] = topo.link_ids(topo.route(src, dst))
        return path

    def _port_links(self, src: int, dst: int) -> list[np.ndarray]:
        key = (src, dst)
        paths = self._ports.get(key)
        if paths is None:
            topo = self.topology
            if src == dst:
                paths = [_NO_LINKS]
            else:
                paths = [topo.link_ids(nodes) for nodes in topo.port_routes(src, dst)]
            self._ports[key] = paths
        return paths

    def batch(
        self, src: np.ndarray, dst: np.ndarray, sizes: np.ndarray, split_ports: bool = False
    ) -> FlowBatch:
        """Flows for the transfers; a chip sending to itself gives an empty route."""
        src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        sizes = np.asarray(sizes, dtype=np.float64)
        topo = self.topology
        if split_ports and topo.has_port_routes:
            return self._split(src, dst, sizes)
        key = (src.tobytes(), dst.tobytes())
        if src.size and not np.any(src == dst):
            links = self._hops.get(key)
            if links is None:
                # a few pairs first: a million-pair all-pairs step is not looked up whole
                links = topo.find_links(src[:NEIGHBOUR_PROBE], dst[:NEIGHBOUR_PROBE])
                if src.size > NEIGHBOUR_PROBE and np.all(links >= 0):
                    links = topo.find_links(src, dst)
                self._hops[key] = links
            if links.size == src.size and np.all(links >= 0):  # every transfer one hop
                return FlowBatch(src, dst, sizes, np.arange(src.size + 1), links)
        if topo.vectorised_routes:
            routed = self._many.get(key)
            if routed is None:
                ptr, links = topo.route_links_many(src, dst)
                routed = self._many[key] = (ptr, links, LinkOrder(links))
            return FlowBatch(src, dst, sizes, *routed)
        paths = [
            self._links(int(s), int(d)) if s != d else _NO_LINKS
            for s, d in zip(src.tolist(), dst.tolist(), strict=True)
        ]
        return self._pack(src, dst, sizes, paths)

    def _split(self, src: np.ndarray, dst: np.ndarray, sizes: np.ndarray) -> FlowBatch:
        out_src, out_dst, out_size, paths = [], [], [], []
        for s, d, b in zip(src.tolist(), dst.tolist(), sizes.tolist(), strict=True):
            parts = self._port_links(s, d)
            for links in parts:
                out_src.append(s)
                out_dst.append(d)
                out_size.append(b / len(parts))
                paths.append(links)
        return self._pack(np.array(out_src), np.array(out_dst), np.array(out_size), paths)

    @staticmethod
    def _pack(
        src: np.ndarray, dst: np.ndarray, sizes: np.ndarray, paths: list[np.ndarray]
    ) -> FlowBatch:
        ptr = np.zeros(len(paths) + 1, dtype=np.int64)
        ptr[1:] = np.cumsum([p.size for p in paths])
        links = np.concatenate(paths) if paths else np.zeros(0, dtype=np.int64)
        return FlowBatch(src, dst, sizes, ptr, links.astype(np.int64))
