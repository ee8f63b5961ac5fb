"""The interface every topology implements, and the metrics derived from it.

A topology is a pure graph: nodes ``0 .. num_chips-1`` are chips (switches of a
fabric follow them), and every physical link is a pair of directed links, each
with its own bandwidth (bytes/s, one direction) and latency (s). Routes are
deterministic and minimal for the topology's routing rule; hop counts and
metrics are those of that rule, computed with closed forms or numpy, never
with an all-pairs Python loop.

A new topology only has to list its links (:meth:`Topology.build_links`): every
other capability has a default on the base class (breadth-first shortest routes
and metrics, one axis of chips, one row of chips in plots) that works, untuned,
with the collectives, the network models and the plots. The shipped topologies
override them with closed forms and their own structure.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar, Literal

import numpy as np

from tpusim.topology.shortest_paths import Adjacency, route_steps, shortest_path_tree

AxisKind = Literal["ring", "line", "full", "any"]
#: Shortest-path trees a topology keeps (two int64 arrays of ``num_nodes`` each): enough
#: for every source of a few-thousand-chip collective, bounded so a large topology that
#: relies on the default routes holds at most 64 KiB per node.
MAX_CACHED_TREES = 4096

#: Most nodes for which find_links reads a dense node-by-node table (<= 32 MiB).
DENSE_LINK_NODES = 2048


@dataclass(frozen=True)
class Axis:
    """One axis of a group: ``ring`` (a wrapped torus axis), ``line`` (a torus axis
    without wraparound), ``full`` (chips all directly linked, a Boardfly board) or
    ``any`` (no known structure)."""

    name: str
    size: int
    kind: AxisKind


@dataclass(frozen=True)
class PlotLayout:
    """Where every chip sits in a 2-D picture of per-chip values: chip ``i`` in cell
    ``(row[i], col[i])`` of a ``shape`` grid; chips sharing a cell are averaged."""

    row: np.ndarray
    col: np.ndarray
    shape: tuple[int, int]
    xlabel: str
    ylabel: str
    title: str

    def grid(self, per_chip: np.ndarray) -> np.ndarray:
        """The ``shape`` grid of the mean of ``per_chip`` over each cell's chips (0 if none)."""
        total = np.zeros(self.shape)
        hits = np.zeros(self.shape)
        np.add.at(total, (self.row, self.col), per_chip)
        np.add.at(hits, (self.row, self.col), 1)
        return total / np.maximum(hits, 1)


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
    """Chips and directed links with deterministic minimal routes and their metrics.

    Subclasses set ``kind`` and ``num_chips`` and implement :meth:`build_links`; the
    rest has defaults (see the module docstring) to override where the topology
    knows better.
    """

    kind: ClassVar[str]
    num_chips: int
    #: True when a point-to-point copy is split evenly over :meth:`port_routes`
    #: (TPU ICI: one dimension-order route per moving torus axis).
    has_port_routes: ClassVar[bool] = False

    @property
    def num_nodes(self) -> int:
        """Chips plus switches (a fabric's leaves and spines come after the chips)."""
        return self.num_chips

    # -- what each topology provides ------------------------------------------------
    @abstractmethod
    def build_links(self) -> LinkTable:
        """Every directed link (see :meth:`LinkTable.build`); called once, by :attr:`links`."""

    def route(self, src: int, dst: int) -> list[int]:
        """Nodes visited from chip ``src`` to chip ``dst``, both included.

        Default: the shortest route in hops, read from a breadth-first tree grown from
        ``src`` (ties go to the lowest-numbered predecessor, see
        :mod:`tpusim.topology.shortest_paths`). Raises ValueError if ``dst`` cannot be
        reached. A subclass that overrides this keeps a correct :meth:`route_links_many`
        (one call of this per pair) unless it overrides that too.
        """
        src, dst = self.check_chip(src), self.check_chip(dst)
        dist, pred = self._tree(src)
        _, a, _ = route_steps(dist[None], pred[None], np.zeros(1, dtype=np.int64), np.array([dst]))
        return [*a.tolist(), dst]

    def hops_from(self, src: int) -> np.ndarray:
        """Hops of the route from chip ``src`` to every chip (int array of num_chips).

        Default: breadth-first distances (-1 for a chip that cannot be reached)."""
        return self._tree(self.check_chip(src))[0][: self.num_chips]

    def hop_histogram(self) -> np.ndarray:
        """``h[d]`` = ordered pairs of distinct chips whose route has ``d`` hops.

        Default: one breadth-first tree per chip (num_chips numpy passes, not cached);
        raises ValueError if some chip cannot reach another."""
        hist = np.zeros(self.num_nodes, dtype=np.int64)  # no route is longer than that
        for src in range(self.num_chips):
            dist = shortest_path_tree(self._adjacency, src)[0][: self.num_chips]
            if np.any(dist < 0):
                raise ValueError(f"chip {src} cannot reach every chip: the topology is split")
            counts = np.bincount(dist)
            hist[: counts.size] += counts
        hist = hist[: int(np.flatnonzero(hist).max(initial=0)) + 1]
        hist[0] -= self.num_chips
        return hist

    def bisection_cuts(self) -> Iterator[tuple[str, np.ndarray]]:
        """Balanced cuts of the topology's natural kind: (name, bool mask over nodes).

        Default: the first half of the chip ids (switches on the other side)."""
        side = np.zeros(self.num_nodes, dtype=bool)
        side[: self.num_chips // 2] = True
        yield "first half of the chip ids", side

    def axis_structure(self) -> tuple[np.ndarray, tuple[Axis, ...]]:
        """All chips as one array with named axes: ``chips[i0, i1, ...]`` is the chip at
        position (i0, i1, ...), and ``axes`` name and describe those positions.

        Default: one axis ``chips`` of kind ``any`` in chip-id order."""
        ids = np.arange(self.num_chips, dtype=np.int64)
        return ids, (Axis("chips", self.num_chips, "any"),)

    def plot_layout(self) -> PlotLayout:
        """Where each chip goes in a 2-D picture of per-chip values.

        Default: one row of chips in id order."""
        n = self.num_chips
        return PlotLayout(
            row=np.zeros(n, dtype=np.int64),
            col=np.arange(n, dtype=np.int64),
            shape=(1, n),
            xlabel="chip (index)",
            ylabel="row (index)",
            title=f"{type(self).__name__} ({n} chips)",
        )

    def port_routes(self, src: int, dst: int) -> list[list[int]]:
        """The routes a point-to-point copy from ``src`` to ``dst`` is split evenly over
        when :attr:`has_port_routes` is true. Default: the one :meth:`route`."""
        return [self.route(src, dst)]

    @property
    def vectorised_routes(self) -> bool:
        """True when :meth:`route_links_many` routes a batch without a Python loop over
        its pairs (callers then route whole batches instead of caching pair by pair).
        Default: true while :meth:`route` is the base class's breadth-first route."""
        return self._default_routes

    def route_links_many(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The routes of many pairs at once as CSR ``(ptr, link ids)``: pair ``k`` uses
        links ``ids[ptr[k]:ptr[k + 1]]`` in order (none when ``src[k] == dst[k]``); the
        same routes as :meth:`route`.

        Default: breadth-first trees from each distinct source, read back for every
        pair together; if a subclass overrides :meth:`route`, one call of it per pair.
        """
        src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        if not self._default_routes:
            return self._routes_pair_by_pair(src, dst)
        outside = (dst < 0) | (dst >= self.num_chips)
        if np.any(outside):
            self.check_chip(int(dst[outside][0]))  # raises, naming the chip
        sources, tree = np.unique(src, return_inverse=True)
        trees = [self._tree(self.check_chip(int(s))) for s in sources]
        empty = np.zeros((0, self.num_nodes), dtype=np.int64)
        dist = np.stack([t[0] for t in trees]) if trees else empty
        pred = np.stack([t[1] for t in trees]) if trees else empty
        ptr, a, b = route_steps(dist, pred, tree.reshape(-1), dst)
        return ptr, self.find_links(a, b)

    def valiant_intermediates(
        self, src: np.ndarray, dst: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        """Intermediate chip of each pair for Valiant routing (route to it minimally,
        then minimally on to the destination); a pair whose intermediate is its source
        stays minimal. Default: a uniformly random chip (Valiant 1982)."""
        return rng.integers(0, self.num_chips, size=np.asarray(src).size)

    def chip_position(self, chip: int) -> str:
        """Where ``chip`` sits, by the axes of :meth:`axis_structure`: ``x=1, y=0, z=3``."""
        chips, axes = self.axis_structure()
        where = np.argwhere(chips == self.check_chip(chip))
        if not where.size:
            return f"chip {chip}"
        return ", ".join(f"{a.name}={int(i)}" for a, i in zip(axes, where[0], strict=True))

    # -- shared machinery ----------------------------------------------------------
    @cached_property
    def links(self) -> LinkTable:
        return self.build_links()

    @property
    def _default_routes(self) -> bool:
        return type(self).route is Topology.route

    def _routes_pair_by_pair(
        self, src: np.ndarray, dst: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`route_links_many` through one :meth:`route` call per pair."""
        paths = [
            self.link_ids(self.route(s, d)) if s != d else np.zeros(0, dtype=np.int64)
            for s, d in zip(src.tolist(), dst.tolist(), strict=True)
        ]
        ptr = np.zeros(len(paths) + 1, dtype=np.int64)
        ptr[1:] = np.cumsum([p.size for p in paths])
        return ptr, np.concatenate([np.zeros(0, dtype=np.int64), *paths])

    @cached_property
    def _adjacency(self) -> Adjacency:
        return Adjacency.of_links(self.links.src, self.links.dst, self.num_nodes)

    @cached_property
    def _trees(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        return {}

    def _tree(self, src: int) -> tuple[np.ndarray, np.ndarray]:
        """(dist, pred) of the breadth-first tree from node ``src``, cached."""
        tree = self._trees.get(src)
        if tree is None:
            if len(self._trees) >= MAX_CACHED_TREES:
                self._trees.clear()
            tree = self._trees[src] = shortest_path_tree(self._adjacency, src)
        return tree

    @cached_property
    def _link_keys(self) -> tuple[np.ndarray, np.ndarray]:
        keys = self.links.src * self.num_nodes + self.links.dst
        order = np.argsort(keys, kind="stable")
        return keys[order], order

    @cached_property
    def _dense_links(self) -> np.ndarray | None:
        """``table[u, v]``: id of the first link ``u -> v`` (-1: none); None if too big."""
        n = self.num_nodes
        if n > DENSE_LINK_NODES:
            return None
        table = np.full(n * n, -1, dtype=np.int64)
        keys, first = np.unique(self.links.src * n + self.links.dst, return_index=True)
        table[keys] = first
        return table.reshape(n, n)

    def find_links(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Ids (rows of :attr:`links`) of the directed links ``src[i] -> dst[i]``, the
        first of a pair; -1 where there is no such link. Vectorised: a dense table read
        (up to DENSE_LINK_NODES nodes), else a binary search over sorted link keys."""
        src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        dense = self._dense_links
        if dense is not None:  # a node outside 0..n-1 has no link
            inside = (src >= 0) & (src < dense.shape[0]) & (dst >= 0) & (dst < dense.shape[0])
            return np.where(inside, dense[src * inside, dst * inside], -1)
        keys, order = self._link_keys
        wanted = src * self.num_nodes + dst
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

    def hops(self, src: int, dst: int) -> int:
        """Hops of the route from chip ``src`` to chip ``dst``."""
        return len(self.route(src, dst)) - 1

    def check_chip(self, chip: int) -> int:
        """``chip`` as an int; ValueError if it is not a chip of this topology."""
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
