"""The interface every topology implements, and the metrics derived from it.

A topology is a pure graph: nodes ``0 .. num_chips-1`` are chips (switches of a
fabric follow them), and every physical link is a pair of directed links, each
with its own bandwidth (bytes/s, one direction) and latency (s). Routes are
deterministic and minimal for the topology's routing rule; hop counts and
metrics are those of that rule, computed with closed forms or numpy, never
with an all-pairs Python loop.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

import numpy as np


@dataclass(frozen=True)
class LinkTable:
    """Directed links as parallel numpy arrays (one row per link direction).

    ``kind`` indexes ``kind_names`` (e.g. ``ici``, ``board``, ``global``, ``fabric``).
    """

    src: np.ndarray
    dst: np.ndarray
    bandwidth_Bps: np.ndarray
    latency_s: np.ndarray
    kind: np.ndarray
    kind_names: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.src.size)

    @staticmethod
    def build(pairs: Sequence[tuple[np.ndarray, np.ndarray, Any, float, str]]) -> LinkTable:
        """Links from ``(a, b, bandwidth_Bps, latency_s, kind)`` groups; each a-b pair
        becomes two directed links, a->b and b->a. Bandwidth is a scalar or one per pair."""
        names = tuple(dict.fromkeys(kind for *_, kind in pairs))
        src, dst, bw, lat, kinds = [], [], [], [], []
        for a, b, bandwidth, latency, kind in pairs:
            n = a.size
            src += [a, b]
            dst += [b, a]
            per_pair = np.broadcast_to(np.asarray(bandwidth, dtype=np.float64), (n,))
            bw += [per_pair, per_pair]
            lat.append(np.full(2 * n, float(latency)))
            kinds.append(np.full(2 * n, names.index(kind), dtype=np.int8))
        cat = np.concatenate
        return LinkTable(
            cat(src).astype(np.int64),
            cat(dst).astype(np.int64),
            cat(bw),
            cat(lat),
            cat(kinds),
            names,
        )

    def offset(self, by: int) -> LinkTable:
        """The same links with every node id shifted by ``by`` (to place a pod)."""
        return LinkTable(
            self.src + by,
            self.dst + by,
            self.bandwidth_Bps,
            self.latency_s,
            self.kind,
            self.kind_names,
        )


class Topology(ABC):
    """Chips and directed links with deterministic minimal routes and their metrics."""

    kind: ClassVar[str]
    num_chips: int

    @property
    def num_nodes(self) -> int:
        """Chips plus switches (a fabric's leaves and spines come after the chips)."""
        return self.num_chips

    # -- what each topology provides ------------------------------------------------
    @abstractmethod
    def _build_links(self) -> LinkTable: ...

    @abstractmethod
    def route(self, src: int, dst: int) -> list[int]:
        """Nodes visited from chip ``src`` to chip ``dst``, both included."""

    @abstractmethod
    def hops_from(self, src: int) -> np.ndarray:
        """Hops of the route from chip ``src`` to every chip (int array of num_chips)."""

    @abstractmethod
    def hop_histogram(self) -> np.ndarray:
        """``h[d]`` = ordered pairs of distinct chips whose route has ``d`` hops."""

    @abstractmethod
    def bisection_cuts(self) -> Iterator[tuple[str, np.ndarray]]:
        """Balanced cuts of the topology's natural kind: (name, bool mask over nodes)."""

    # -- shared machinery ----------------------------------------------------------
    @cached_property
    def links(self) -> LinkTable:
        return self._build_links()

    @cached_property
    def _link_keys(self) -> tuple[np.ndarray, np.ndarray]:
        keys = self.links.src * self.num_nodes + self.links.dst
        order = np.argsort(keys, kind="stable")
        return keys[order], order

    def find_links(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Ids (rows of :attr:`links`) of the directed links ``src[i] -> dst[i]``; -1 where
        there is no such link. Vectorised (one binary search over sorted link keys)."""
        keys, order = self._link_keys
        wanted = np.asarray(src, dtype=np.int64) * self.num_nodes + np.asarray(dst, dtype=np.int64)
        if keys.size == 0:
            return np.full(wanted.shape, -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(keys, wanted), keys.size - 1)
        return np.where(keys[pos] == wanted, order[pos], -1)

    def link_ids(self, path: Sequence[int]) -> np.ndarray:
        """Ids of the directed links along a node path; ValueError if a step has no link."""
        nodes = np.asarray(path, dtype=np.int64)
        ids = self.find_links(nodes[:-1], nodes[1:])
        if np.any(ids < 0):
            raise ValueError(f"path {list(path)} uses a link that does not exist")
        return ids

    def route_links(self, src: int, dst: int) -> np.ndarray:
        """Link ids of the route from chip ``src`` to chip ``dst``."""
        return self.link_ids(self.route(src, dst))

    def hops(self, src: int, dst: int) -> int:
        """Hops of the route from chip ``src`` to chip ``dst``."""
        return len(self.route(src, dst)) - 1

    def _check_chip(self, chip: int) -> int:
        if not 0 <= chip < self.num_chips:
            raise ValueError(f"chip {chip} is not in 0..{self.num_chips - 1}")
        return int(chip)

    @cached_property
    def diameter_hops(self) -> int:
        hist = self.hop_histogram()
        nonzero = np.nonzero(hist)[0]
        return int(nonzero[-1]) if nonzero.size else 0

    @cached_property
    def mean_hops(self) -> float:
        """Mean hops over ordered pairs of distinct chips."""
        hist = self.hop_histogram()
        total = hist.sum()
        return float((np.arange(hist.size) * hist).sum() / total) if total else 0.0

    def crossing_bandwidth_Bps(self, side: np.ndarray) -> float:
        """Bandwidth of the links from nodes in ``side`` to nodes outside it (one direction)."""
        crossing = side[self.links.src] & ~side[self.links.dst]
        return float(self.links.bandwidth_Bps[crossing].sum())

    @cached_property
    def bisection_bandwidth_Bps(self) -> float:
        """Minimum over :meth:`bisection_cuts` of the one-direction crossing bandwidth."""
        cuts = [self.crossing_bandwidth_Bps(mask) for _, mask in self.bisection_cuts()]
        return min(cuts) if cuts else 0.0

    @property
    def num_links(self) -> int:
        """Bidirectional links (each is two rows of :attr:`links`)."""
        return len(self.links) // 2

    def link_counts(self) -> dict[str, int]:
        """Bidirectional links per link kind."""
        counts = np.bincount(self.links.kind, minlength=len(self.links.kind_names)) // 2
        return {name: int(c) for name, c in zip(self.links.kind_names, counts, strict=True)}

    def degree_stats(self) -> dict[str, float]:
        """Links per chip (each bidirectional link counted once per end): min, mean, max."""
        deg = np.bincount(self.links.src, minlength=self.num_nodes)[: self.num_chips]
        return {"min": int(deg.min()), "mean": float(deg.mean()), "max": int(deg.max())}

    def describe(self) -> dict[str, Any]:
        """Topology-specific parameters for reports (shape, wraparound, arrangement...)."""
        return {}

    def port_name(self, link: int) -> str:
        """A readable name of the port a directed link leaves from (for traces)."""
        kind = self.links.kind_names[int(self.links.kind[link])]
        return f"{kind} port to {int(self.links.dst[link])}"
