"""Pods joined by a two-tier non-blocking Clos fabric (DCN, Virgo).

Inside a pod, chips talk over the pod's own topology (ICI). Every chip also has
a fabric port to a leaf switch (``chips_per_leaf`` chips per leaf, leaves never
span pods); leaves connect to the spine tier. A non-blocking two-tier Clos with
ideal ECMP spreading behaves, for bandwidth, like one aggregated spine whose
link to each leaf carries the sum of that leaf's chip ports, so that is how it is
modelled: nodes are the chips, then the leaves, then one spine node.

Routing: chips of the same pod use the pod's route; chips of different pods go
chip -> leaf -> spine -> leaf -> chip (4 hops, each paying ``hop_latency_s``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from tpusim.topology.base import Axis, LinkTable, Topology
from tpusim.topology.registry import build_topology

if TYPE_CHECKING:
    from tpusim.config.loader import System


class ClosFabric(Topology):
    """``pods`` copies of ``pod`` joined by a Clos fabric; ``bandwidth_per_chip_Bps`` is
    each chip's fabric bandwidth in one direction, ``hop_latency_s`` per fabric link."""

    kind = "clos"

    def __init__(
        self,
        pod: Topology,
        pods: int,
        *,
        bandwidth_per_chip_Bps: float,
        hop_latency_s: float,
        chips_per_leaf: int = 64,
        name: str = "dcn",
    ):
        if pods < 1 or chips_per_leaf < 1:
            raise ValueError("pods and chips_per_leaf must be >= 1")
        self.pod, self.pods, self.name = pod, int(pods), name
        self.pod_chips = pod.num_chips
        self.num_chips = self.pod_chips * self.pods
        self.chips_per_leaf = int(chips_per_leaf)
        self.leaves_per_pod = -(-self.pod_chips // self.chips_per_leaf)
        self.num_leaves = self.leaves_per_pod * self.pods
        self.spine = self.num_chips + self.num_leaves
        self.bandwidth_per_chip_Bps = float(bandwidth_per_chip_Bps)
        self.hop_latency_s = float(hop_latency_s)

    @property
    def num_nodes(self) -> int:
        return self.num_chips + self.num_leaves + 1

    def leaf_of(self, chips: np.ndarray | int) -> np.ndarray:
        """Node id of the leaf switch each chip hangs from."""
        pod, local = np.divmod(np.asarray(chips, dtype=np.int64), self.pod_chips)
        return self.num_chips + pod * self.leaves_per_pod + local // self.chips_per_leaf

    def build_links(self) -> LinkTable:
        pod_links = self.pod.links
        tables = [pod_links.offset(i * self.pod_chips) for i in range(self.pods)]
        chips = np.arange(self.num_chips, dtype=np.int64)
        leaves = np.arange(self.num_chips, self.spine, dtype=np.int64)
        chips_under = np.bincount(self.leaf_of(chips) - self.num_chips, minlength=self.num_leaves)
        fabric = LinkTable.build(
            [
                (
                    chips,
                    self.leaf_of(chips),
                    self.bandwidth_per_chip_Bps,
                    self.hop_latency_s,
                    self.name,
                ),
                (
                    leaves,
                    np.full(leaves.size, self.spine),
                    chips_under * self.bandwidth_per_chip_Bps,
                    self.hop_latency_s,
                    self.name,
                ),
            ]
        )
        names = (*pod_links.kind_names, self.name)
        kinds = [t.kind for t in tables] + [fabric.kind + len(pod_links.kind_names)]
        everything = [*tables, fabric]
        return LinkTable(
            np.concatenate([t.src for t in everything]),
            np.concatenate([t.dst for t in everything]),
            np.concatenate([t.bandwidth_Bps for t in everything]),
            np.concatenate([t.latency_s for t in everything]),
            np.concatenate(kinds),
            names,
        )

    def route(self, src: int, dst: int) -> list[int]:
        src, dst = self.check_chip(src), self.check_chip(dst)
        (ps, s), (pd, d) = divmod(src, self.pod_chips), divmod(dst, self.pod_chips)
        if ps == pd:
            return [n + ps * self.pod_chips for n in self.pod.route(s, d)]
        return [src, int(self.leaf_of(src)), self.spine, int(self.leaf_of(dst)), dst]

    @property
    def vectorised_routes(self) -> bool:
        """Vectorised when the pod's routes are (the fabric legs are a lookup)."""
        return self.pod.vectorised_routes

    def route_links_many(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The routes of many pairs at once as CSR ``(ptr, link ids)``, the same as
        :meth:`route`'s: pairs inside a pod take the pod's batch routes (its links are
        pod ``p``'s copy, ids shifted by ``p`` x the pod's links), the others the four
        fabric links, looked up for all of them together. Pair by pair when the pod's
        routes are not vectorised. Raises ValueError for a chip outside the fabric."""
        src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        if not self.pod.vectorised_routes:
            return self._routes_pair_by_pair(src, dst)
        for chips in (src, dst):
            if chips.size and (chips.min() < 0 or chips.max() >= self.num_chips):
                self.check_chip(int(chips[(chips < 0) | (chips >= self.num_chips)][0]))
        pod_of_src, local_src = np.divmod(src, self.pod_chips)
        pod_of_dst, local_dst = np.divmod(dst, self.pod_chips)
        inside = np.flatnonzero(pod_of_src == pod_of_dst)
        pod_ptr, pod_links = self.pod.route_links_many(local_src[inside], local_dst[inside])
        pod_hops = np.diff(pod_ptr)
        hops = np.full(src.size, 4, dtype=np.int64)  # chip, leaf, spine, leaf, chip
        hops[inside] = pod_hops
        ptr = np.zeros(src.size + 1, dtype=np.int64)
        np.cumsum(hops, out=ptr[1:])
        links = np.empty(int(ptr[-1]), dtype=np.int64)
        owner = np.repeat(inside, pod_hops)  # the pair of each pod route entry
        entry = np.arange(pod_links.size) - np.repeat(pod_ptr[:-1], pod_hops)
        links[ptr[owner] + entry] = pod_links + pod_of_src[owner] * len(self.pod.links)
        across = np.flatnonzero(pod_of_src != pod_of_dst)
        self._fabric_legs(src[across], dst[across], links, ptr[across])
        return ptr, links

    def _fabric_legs(
        self, src: np.ndarray, dst: np.ndarray, links: np.ndarray, first: np.ndarray
    ) -> None:
        """Write the four fabric links of each pair (chips of different pods) into
        ``links`` from position ``first``; ValueError if one does not exist."""
        spine = np.full(src.size, self.spine, dtype=np.int64)
        nodes = (src, self.leaf_of(src), spine, self.leaf_of(dst), dst)
        for leg in range(4):
            ids = self.find_links(nodes[leg], nodes[leg + 1])
            if np.any(ids < 0):
                k = int(np.flatnonzero(ids < 0)[0])
                raise ValueError(f"route {int(src[k])} -> {int(dst[k])} uses a missing link")
            links[first + leg] = ids

    def hops_from(self, src: int) -> np.ndarray:
        ps, s = divmod(self.check_chip(src), self.pod_chips)
        hops = np.full(self.num_chips, 4, dtype=np.int64)
        hops[ps * self.pod_chips : (ps + 1) * self.pod_chips] = self.pod.hops_from(s)
        return hops

    def hop_histogram(self) -> np.ndarray:
        inside = self.pod.hop_histogram() * self.pods
        hist = np.zeros(max(inside.size, 5), dtype=np.int64)
        hist[: inside.size] += inside
        hist[4] += self.num_chips * (self.num_chips - self.pod_chips)
        return hist

    def bisection_cuts(self) -> Iterator[tuple[str, np.ndarray]]:
        side = np.zeros(self.num_nodes, dtype=bool)
        side[: self.num_chips // 2] = True
        leaf = self.leaf_of(np.arange(self.num_chips)) - self.num_chips
        first_chip_of_leaf = np.unique(leaf, return_index=True)[1]  # leaves hold contiguous chips
        side[self.num_chips : self.spine] = side[first_chip_of_leaf]
        yield "first half of the chips (pod-major)", side

    def axis_structure(self) -> tuple[np.ndarray, tuple[Axis, ...]]:
        """``pod`` first (no known structure between pods), then the pod's own axes."""
        pod_chips, pod_axes = self.pod.axis_structure()
        chips = np.stack([pod_chips + i * self.pod_chips for i in range(self.pods)])
        return chips, (Axis("pod", self.pods, "any"), *pod_axes)

    def describe(self) -> dict[str, Any]:
        return {
            "pods": self.pods,
            "pod_kind": self.pod.kind,
            "chips_per_pod": self.pod_chips,
            "fabric": self.name,
            "chips_per_leaf": self.chips_per_leaf,
            "leaves": self.num_leaves,
            "bandwidth_per_chip_Bps": self.bandwidth_per_chip_Bps,
            "hop_latency_s": self.hop_latency_s,
            "pod": self.pod.describe(),
        }


def build_clos(system: System) -> ClosFabric:
    """Pods of a loaded multi-pod system joined by its fabric (``fabric: {kind: clos}``);
    the pod is built by its own kind's builder."""
    fabric = system.spec.fabric
    assert system.pod is not None and fabric is not None and system.spec.pods is not None
    return ClosFabric(
        build_topology(system.pod),
        system.spec.pods,
        bandwidth_per_chip_Bps=system.fabric_bandwidth_per_chip_Bps,
        hop_latency_s=fabric.hop_latency_s,
        chips_per_leaf=fabric.chips_per_leaf,
        name=fabric.name,
    )
