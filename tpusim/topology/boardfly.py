"""Boardfly (TPU 8i): a Dragonfly-like hierarchy of fully connected levels.

``p`` chips on a board are fully connected (``local`` links); the ``a`` boards of a
group are fully connected (``board`` links, ``links_per_board_pair`` per pair of
boards); the ``g`` groups are fully connected (``global`` links,
``links_per_group_pair`` per pair of groups). Google's 8i pod is p=4, a=8, g=36
(1,152 chips); the 1,024-chip configuration has 32 groups.

Chip ids are group-major: chip = (group * a + board) * p + position.

Each link class has its own bandwidth and hop latency: ``local`` takes the chip's ICI
figures, ``board`` and ``global`` default to them and are overridden in the system's
``topology:`` block (``board_link_bandwidth``, ``board_hop_latency``,
``global_link_bandwidth``, ``global_hop_latency``), each with its source or
assumption in the system file's ``sources:``.

Arrangement (which chip ends each inter-board and inter-group link; Google has
not published it, so this is a documented choice):

- Board links: board ``i`` numbers its peers ``j != i`` in ascending order
  (rank r = j if j < i else j - 1); link ``l`` to peer rank r leaves from port
  ``r + l*(a-1)``, and port q sits on chip ``q mod p`` of the board.
- Global links: group ``i`` numbers its peer groups by rank: ``absolute`` in
  ascending order (r = j if j < i else j - 1), ``relative`` by distance
  (r = (j - i - 1) mod g, Hastings et al. 2015). Link ``l`` leaves from port
  ``r + l*(g-1)``; port q sits on board ``q mod a``, chip ``(q // a) mod p``, which
  spreads global links over all boards before doubling up on a chip.

Routing is hierarchical minimal (Dragonfly "minimal"): local-global-local with at
most one global link, at most one board link inside each group and local hops
inside boards; among the parallel links of a pair the shortest route is taken
(ties: the lowest link index). Its worst case is 7 hops: local, board, local,
global, local, board, local, which is Google's published diameter.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from tpusim.config.system import BoardflyTopologySpec
from tpusim.topology.base import Axis, LinkTable, PlotLayout, Topology

if TYPE_CHECKING:
    from tpusim.config.loader import System

Arrangement = Literal["absolute", "relative"]


class Boardfly(Topology):
    """Boardfly of ``groups`` x ``boards_per_group`` x ``chips_per_board`` chips.

    Bandwidths are bytes/s in one direction per link; latencies in seconds.
    """

    kind = "boardfly"

    def __init__(
        self,
        chips_per_board: int,
        boards_per_group: int,
        groups: int,
        *,
        link_bandwidth_Bps: float,
        hop_latency_s: float,
        board_link_bandwidth_Bps: float | None = None,
        global_link_bandwidth_Bps: float | None = None,
        global_hop_latency_s: float | None = None,
        links_per_board_pair: int = 1,
        board_hop_latency_s: float | None = None,
        links_per_group_pair: int = 1,
        arrangement: Arrangement = "absolute",
    ):
        self.p, self.a, self.g = int(chips_per_board), int(boards_per_group), int(groups)
        if min(self.p, self.a, self.g, links_per_board_pair, links_per_group_pair) < 1:
            raise ValueError("Boardfly counts must all be >= 1")
        self.n_board, self.n_global = int(links_per_board_pair), int(links_per_group_pair)
        self.arrangement = arrangement
        self.bw = {
            "local": float(link_bandwidth_Bps),
            "board": float(board_link_bandwidth_Bps or link_bandwidth_Bps),
            "global": float(global_link_bandwidth_Bps or link_bandwidth_Bps),
        }
        self.latency = {
            "local": float(hop_latency_s),
            "board": float(hop_latency_s if board_hop_latency_s is None else board_hop_latency_s),
            "global": float(
                hop_latency_s if global_hop_latency_s is None else global_hop_latency_s
            ),
        }
        self.chips_per_group = self.p * self.a
        self.num_chips = self.chips_per_group * self.g
        self._in_group = self._intra_group()

    # -- arrangement -------------------------------------------------------------------
    def board_port_chip(self, board: int, peer: int, link: int) -> int:
        """Position on ``board`` of the chip ending its ``link``-th link to board ``peer``."""
        rank = peer if peer < board else peer - 1
        return (rank + link * (self.a - 1)) % self.p

    def global_port_chip(self, group: int, peer: int, link: int) -> int:
        """Index inside ``group`` (board * p + position) of the chip ending its
        ``link``-th global link to group ``peer``."""
        if self.arrangement == "absolute":
            rank = peer if peer < group else peer - 1
        else:
            rank = (peer - group - 1) % self.g
        port = rank + link * (self.g - 1)
        return (port % self.a) * self.p + (port // self.a) % self.p

    @property
    def _global_ends(self) -> np.ndarray:
        """``ends[i, j, l]``: in-group index of the chip of group i ending link l to group j."""
        if not hasattr(self, "_ends_cache"):
            ends = np.zeros((self.g, self.g, self.n_global), dtype=np.int64)
            for i in range(self.g):
                for j in range(self.g):
                    for link in range(self.n_global if i != j else 0):
                        ends[i, j, link] = self.global_port_chip(i, j, link)
            self._ends_cache = ends
        return self._ends_cache

    # -- links -------------------------------------------------------------------------
    def build_links(self) -> LinkTable:
        groups = []
        base = np.arange(0, self.num_chips, self.p)  # first chip of every board
        for u in range(self.p):
            for v in range(u + 1, self.p):
                groups.append(
                    (base + u, base + v, self.bw["local"], self.latency["local"], "local")
                )
        group_base = np.arange(0, self.num_chips, self.chips_per_group)
        for i in range(self.a):
            for j in range(i + 1, self.a):
                for link in range(self.n_board):
                    u, v = self._board_end(i, j, link), self._board_end(j, i, link)
                    groups.append(
                        (
                            group_base + u,
                            group_base + v,
                            self.bw["board"],
                            self.latency["board"],
                            "board",
                        )
                    )
        gi, gj = np.triu_indices(self.g, k=1)
        ends = self._global_ends
        for link in range(self.n_global):
            u = gi * self.chips_per_group + ends[gi, gj, link]
            v = gj * self.chips_per_group + ends[gj, gi, link]
            groups.append((u, v, self.bw["global"], self.latency["global"], "global"))
        return LinkTable.build(groups)

    # -- routing inside a group -----------------------------------------------------------
    def _intra_group(self) -> tuple[np.ndarray, np.ndarray]:
        """Hops between in-group indices, and for each pair the board link its route takes."""
        n, p = self.chips_per_group, self.p
        board = np.arange(n) // p
        local = (np.arange(n)[:, None] != np.arange(n)[None, :]).astype(np.int64)
        hops = local.copy()
        choice = np.zeros((n, n), dtype=np.int64)
        for i in range(self.a):
            for j in range(self.a):
                if i == j:
                    continue
                rows, cols = np.ix_(board == i, board == j)
                via = np.stack(
                    [
                        local[rows, self._board_end(i, j, link)]
                        + 1
                        + local[self._board_end(j, i, link), cols]
                        for link in range(self.n_board)
                    ]
                )
                hops[rows, cols] = via.min(axis=0)
                choice[rows, cols] = via.argmin(axis=0)
        return hops, choice

    def _board_end(self, board: int, peer: int, link: int) -> int:
        """In-group index of the chip of ``board`` ending its ``link``-th link to ``peer``."""
        return board * self.p + self.board_port_chip(board, peer, link)

    def _group_path(self, group: int, s: int, d: int) -> list[int]:
        """Chip ids from in-group index s to d inside ``group``."""
        first = group * self.chips_per_group
        if s == d:
            return [first + s]
        bs, bd = s // self.p, d // self.p
        if bs == bd:
            return [first + s, first + d]
        link = int(self._in_group[1][s, d])
        u, v = self._board_end(bs, bd, link), self._board_end(bd, bs, link)
        path = [s] + ([u] if u != s else []) + [v] + ([d] if d != v else [])
        return [first + x for x in path]

    def _global_link(self, gs: int, gd: int, s: int, d: int) -> int:
        hops = self._in_group[0]
        ends = self._global_ends
        costs = hops[s, ends[gs, gd]] + hops[ends[gd, gs], d]
        return int(np.argmin(costs))

    def route(self, src: int, dst: int) -> list[int]:
        src, dst = self.check_chip(src), self.check_chip(dst)
        gs, s = divmod(src, self.chips_per_group)
        gd, d = divmod(dst, self.chips_per_group)
        if gs == gd:
            return self._group_path(gs, s, d)
        link = self._global_link(gs, gd, s, d)
        ends = self._global_ends
        return self._group_path(gs, s, int(ends[gs, gd, link])) + self._group_path(
            gd, int(ends[gd, gs, link]), d
        )

    @property
    def _link_tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(inner, outer, hops, ends)`` for :meth:`route_links_many`, int32:
        ``inner[(g * n + s) * n + d]`` the link ids, in order, of the route from in-group
        index s to d inside group g (padded with -1 to 3); ``outer[i * g + j, l]`` the id
        of group i's ``l``-th global link to group j and ``ends[i * g + j, l]`` the
        in-group index of its chip; ``hops`` the in-group hop counts."""
        if not hasattr(self, "_link_tables_cache"):
            n, g = self.chips_per_group, self.g
            path = np.full((1, n, n, 4), -1, dtype=np.int64)  # in-group chips of each route
            for s, d in np.ndindex(n, n):
                route = self._group_path(0, s, d)
                path[0, s, d, : len(route)] = route
            nodes = np.where(path >= 0, path + (np.arange(g) * n)[:, None, None, None], -1)
            step = (nodes[..., :-1] >= 0) & (nodes[..., 1:] >= 0)
            inner = np.full(step.shape, -1, dtype=np.int64)
            inner[step] = self.find_links(nodes[..., :-1][step], nodes[..., 1:][step])
            ends = self._global_ends
            first = np.arange(g)[:, None, None] * n
            outer = self.find_links(
                first + ends, first.transpose(1, 0, 2) + ends.transpose(1, 0, 2)
            )
            self._link_tables_cache = (
                inner.reshape(g * n * n, 3).astype(np.int32),
                outer.reshape(g * g, -1).astype(np.int32),
                self._in_group[0].astype(np.int32),
                ends.reshape(g * g, -1).astype(np.int32),
            )
        return self._link_tables_cache

    def route_links_many(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The routes of many pairs at once as CSR ``(ptr, link ids)``, the same as
        :meth:`route`'s, read from :attr:`_link_tables` (in-group part, global link,
        in-group part; a pair in one group has only the first part)."""
        n, g = self.chips_per_group, self.g
        src, dst = np.asarray(src, dtype=np.int32), np.asarray(dst, dtype=np.int32)
        gs, s = np.divmod(src, np.int32(n))
        gd, d = np.divmod(dst, np.int32(n))
        inner, outer, hops, ends = self._link_tables
        cross = gs != gd
        pair, back = gs * np.int32(g) + gd, gd * np.int32(g) + gs
        if ends.shape[1] == 1:  # one global link between two groups: no choice
            best = np.zeros(src.size, dtype=np.int32)
        else:
            out_ends, in_ends = ends[pair], ends[back]
            best = np.argmin(hops[s[:, None], out_ends] + hops[in_ends, d[:, None]], axis=1)
        e_out = np.where(cross, ends[pair, best], d)
        e_in = np.where(cross, ends[back, best], d)
        slots = np.empty((src.size, 7), dtype=np.int32)
        slots[:, :3] = inner[(gs * np.int32(n) + s) * np.int32(n) + e_out]
        slots[:, 3] = np.where(cross, outer[pair, best], -1)
        slots[:, 4:] = inner[(gd * np.int32(n) + e_in) * np.int32(n) + d]
        valid = slots >= 0
        ptr = np.zeros(src.size + 1, dtype=np.int64)
        np.cumsum(valid.sum(axis=1), out=ptr[1:])
        return ptr, slots[valid].astype(np.int64)

    @property
    def vectorised_routes(self) -> bool:
        return True

    def valiant_intermediates(
        self, src: np.ndarray, dst: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        """Dragonfly Valiant (Kim et al. 2008) at the group level: a flow between two
        groups goes through a random third group, entering it minimally and leaving it
        from the chip that ends the intermediate group's global link to the destination
        group; a flow inside one group stays minimal (its intermediate is its source)."""
        src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        gs, gd = src // self.chips_per_group, dst // self.chips_per_group
        mid = src.copy()
        cross = gs != gd
        if self.g < 3 or not cross.any():
            return mid
        # a random group other than both ends: draw among g - 2 and skip past them
        k = rng.integers(0, self.g - 2, size=int(cross.sum()))
        lo, hi = np.minimum(gs[cross], gd[cross]), np.maximum(gs[cross], gd[cross])
        k = k + (k >= lo)
        k = k + (k >= hi)
        mid[cross] = k * self.chips_per_group + self._global_ends[k, gd[cross], 0]
        return mid

    def _hops_to_groups(self, gs: int, s: int) -> np.ndarray:
        """(g, chips_per_group) hops from in-group chip s of group gs to every chip."""
        hops = self._in_group[0]
        ends = self._global_ends
        out = hops[s][ends[gs]][:, :, None] + 1 + hops[ends[:, gs]]  # (g, links, n)
        result = out.min(axis=1)
        result[gs] = hops[s]
        return result

    def hops_from(self, src: int) -> np.ndarray:
        gs, s = divmod(self.check_chip(src), self.chips_per_group)
        return self._hops_to_groups(gs, s).ravel()

    def hop_histogram(self) -> np.ndarray:
        hops, ends = self._in_group[0], self._global_ends
        hist = np.bincount(hops.ravel()) * self.g
        for gs in range(self.g):
            # (n src, g, links, n dst): every source chip of group gs at once
            out = hops[:, ends[gs]][:, :, :, None] + 1 + hops[ends[:, gs]][None]
            best = out.min(axis=2)
            best[:, gs] = -1
            counts = np.bincount(best[best >= 0].ravel())
            hist = _add(hist, counts)
        hist[0] -= self.num_chips
        return hist

    def bisection_cuts(self) -> Iterator[tuple[str, np.ndarray]]:
        ids = np.arange(self.num_chips)
        yield "first half of groups", ids < self.num_chips // 2
        in_group = ids % self.chips_per_group
        yield "first half of every group", in_group < self.chips_per_group // 2
        if self.a == 1:
            yield "first half of every board", ids % self.p < self.p // 2

    def axis_structure(self) -> tuple[np.ndarray, tuple[Axis, ...]]:
        """``chips[group, board, chip]``; every level is fully connected (``full``), so
        collectives exchange directly, spreading over all links."""
        ids = np.arange(self.num_chips, dtype=np.int64)
        return ids.reshape(self.g, self.a, self.p), (
            Axis("group", self.g, "full"),
            Axis("board", self.a, "full"),
            Axis("chip", self.p, "full"),
        )

    def plot_layout(self) -> PlotLayout:
        """Groups (rows) by chips within the group (columns)."""
        group, within = np.divmod(np.arange(self.num_chips), self.chips_per_group)
        return PlotLayout(
            row=group,
            col=within,
            shape=(self.g, self.chips_per_group),
            xlabel="chip within group (index)",
            ylabel="group (index)",
            title=f"Boardfly p={self.p} a={self.a} g={self.g}",
        )

    def describe(self) -> dict[str, Any]:
        return {
            "chips_per_board": self.p,
            "boards_per_group": self.a,
            "groups": self.g,
            "links_per_board_pair": self.n_board,
            "links_per_group_pair": self.n_global,
            "arrangement": self.arrangement,
            "link_bandwidth_Bps": dict(self.bw),
            "hop_latency_s": dict(self.latency),
        }


def build_boardfly(system: System) -> Boardfly:
    """The Boardfly of a loaded one-pod system (``topology: {kind: boardfly}``)."""
    spec = system.spec.topology
    assert isinstance(spec, BoardflyTopologySpec)
    return Boardfly(
        spec.chips_per_board,
        spec.boards_per_group,
        spec.groups,
        link_bandwidth_Bps=system.link_bandwidth_Bps,
        hop_latency_s=system.hop_latency_s,
        board_link_bandwidth_Bps=spec.board_link_bandwidth_Bps,
        global_link_bandwidth_Bps=spec.global_link_bandwidth_Bps,
        global_hop_latency_s=spec.global_hop_latency_s,
        board_hop_latency_s=spec.board_hop_latency_s,
        links_per_board_pair=spec.links_per_board_pair,
        links_per_group_pair=spec.links_per_group_pair,
        arrangement=spec.arrangement,
    )


def _add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.zeros(max(a.size, b.size), dtype=np.int64)
    out[: a.size] += a
    out[: b.size] += b
    return out
