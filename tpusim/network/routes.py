"""Turning transfers (src chip, dst chip, bytes) into flow batches with routes.

Routes are the topology's deterministic routes, cached per (src, dst) pair: a
collective repeats the same pairs step after step. Vectorised route lookups are
also cached per whole (src array, dst array), so one cache shared by runs of the
same collective at several sizes (a bandwidth curve) routes each step once.
Batches whose transfers all go to a direct neighbour (ring steps on a torus) are
resolved in one vectorised lookup with no Python loop over transfers.
"""

from __future__ import annotations

import numpy as np

from tpusim.network.base import FlowBatch
from tpusim.topology import Boardfly, Topology, Torus


class RouteCache:
    """Builds :class:`FlowBatch` es on ``topology``; ``split_ports`` splits a transfer
    on a torus over one dimension-order route per moving axis (each starts on a
    different port), as a point-to-point copy does on TPU ICI."""

    def __init__(self, topology: Topology):
        self.topology = topology
        self._paths: dict[tuple[int, int, int], np.ndarray] = {}
        self._many: dict[tuple[bytes, bytes], tuple[np.ndarray, np.ndarray]] = {}

    def _links(self, src: int, dst: int, rotation: int = 0) -> np.ndarray:
        key = (src, dst, rotation)
        path = self._paths.get(key)
        if path is None:
            topo = self.topology
            if rotation and isinstance(topo, Torus):
                axes = topo.moving_axes(src, dst)
                order = axes[rotation:] + axes[:rotation]
                nodes = topo.route(
                    src,
                    dst,
                    axis_order=order + [a for a in range(len(topo.dims)) if a not in order],
                )
            else:
                nodes = topo.route(src, dst)
            path = self._paths[key] = topo.link_ids(nodes)
        return path

    def batch(
        self, src: np.ndarray, dst: np.ndarray, sizes: np.ndarray, split_ports: bool = False
    ) -> FlowBatch:
        """Flows for the transfers; a chip sending to itself gives an empty route."""
        src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        sizes = np.asarray(sizes, dtype=np.float64)
        if split_ports and isinstance(self.topology, Torus):
            return self._split(src, dst, sizes)
        if src.size and not np.any(src == dst):
            links = self.topology.find_links(src, dst)
            if np.all(links >= 0):  # every transfer goes to a neighbour: one hop each
                return FlowBatch(src, dst, sizes, np.arange(src.size + 1), links)
        topo = self.topology
        if isinstance(topo, Boardfly) or (isinstance(topo, Torus) and not topo.twisted):
            key = (src.tobytes(), dst.tobytes())
            routed = self._many.get(key)
            if routed is None:
                routed = self._many[key] = topo.route_links_many(src, dst)
            return FlowBatch(src, dst, sizes, *routed)
        paths = [
            self._links(int(s), int(d)) if s != d else np.zeros(0, dtype=np.int64)
            for s, d in zip(src.tolist(), dst.tolist(), strict=True)
        ]
        return self._pack(src, dst, sizes, paths)

    def _split(self, src: np.ndarray, dst: np.ndarray, sizes: np.ndarray) -> FlowBatch:
        assert isinstance(self.topology, Torus)
        out_src, out_dst, out_size, paths = [], [], [], []
        for s, d, b in zip(src.tolist(), dst.tolist(), sizes.tolist(), strict=True):
            parts = max(1, len(self.topology.moving_axes(s, d)))
            for r in range(parts):
                out_src.append(s)
                out_dst.append(d)
                out_size.append(b / parts)
                paths.append(self._links(s, d, r) if s != d else np.zeros(0, dtype=np.int64))
        return self._pack(np.array(out_src), np.array(out_dst), np.array(out_size), paths)

    @staticmethod
    def _pack(
        src: np.ndarray, dst: np.ndarray, sizes: np.ndarray, paths: list[np.ndarray]
    ) -> FlowBatch:
        ptr = np.zeros(len(paths) + 1, dtype=np.int64)
        ptr[1:] = np.cumsum([p.size for p in paths])
        links = np.concatenate(paths) if paths else np.zeros(0, dtype=np.int64)
        return FlowBatch(src, dst, sizes, ptr, links.astype(np.int64))
