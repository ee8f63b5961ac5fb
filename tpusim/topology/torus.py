"""n-dimensional torus / mesh with per-axis wraparound, and the TPU twisted torus.

Chip ids are mixed-radix with the first axis fastest: chip = x + X*(y + Y*z).
Axes are named x, y, z (then a3, a4, ...) in the order of ``dims``.

Routing is dimension order: axis by axis, the shorter way round a wrapped axis
(a tie, |delta| = k/2, goes in the + direction). An axis of size 1 or 2 gains no
link from wraparound (its ends are already neighbours).

Twisted torus (TPU v4/v5p, Camara et al. TPDS 2010): for shapes with one long
axis of size 2k and one or two short axes of size k, wrapping around a short
axis also moves k along the long axis. The graph is a quotient of the grid
Z^n by a lattice, so translations are automorphisms: one BFS from chip 0 gives
every distance and a deterministic minimal route for every pair by translation.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from tpusim.config.system import TorusTopologySpec, twist_axes, twisted_torus_problem
from tpusim.later import LaterModule
from tpusim.topology.base import Axis, LinkTable, PlotLayout, Topology

if TYPE_CHECKING:
    from scipy import sparse
    from scipy.sparse import csgraph

    from tpusim.config.loader import System
else:  # only twisted tori need a BFS
    sparse = LaterModule("scipy.sparse")
    csgraph = LaterModule("scipy.sparse.csgraph")

__all__ = ["Torus", "axis_name", "build_torus", "twist_axes"]


def axis_name(axis: int) -> str:
    """``x``, ``y``, ``z`` for the first three axes, then ``a3``, ``a4``..."""
    return "xyz"[axis] if axis < 3 else f"a{axis}"


class Torus(Topology):
    """A torus (or mesh, per axis) of ``prod(dims)`` chips; every link has the same
    bandwidth (bytes/s, one direction) and latency (s)."""

    kind = "torus"
    has_port_routes: ClassVar[bool] = True

    def __init__(
        self,
        dims: Sequence[int],
        wraparound: Sequence[bool],
        *,
        link_bandwidth_Bps: float,
        hop_latency_s: float,
        twisted: bool = False,
    ):
        if len(wraparound) != len(dims) or any(d < 1 for d in dims):
            raise ValueError("dims must be >= 1 with one wraparound flag per axis")
        self.dims = tuple(int(d) for d in dims)
        self.wraparound = tuple(bool(w) for w in wraparound)
        self.twisted = bool(twisted)
        if twisted:
            problem = twisted_torus_problem(self.dims, self.wraparound)
            twist = twist_axes(self.dims)
            if problem is not None or twist is None:
                raise ValueError(problem)
            self._long, self._short = twist
        self.link_bandwidth_Bps = float(link_bandwidth_Bps)
        self.hop_latency_s = float(hop_latency_s)
        self.num_chips = int(np.prod(self.dims))
        self.strides = np.cumprod((1, *self.dims[:-1])).astype(np.int64)
        # wraparound that adds a link (size-2 axes already have their one neighbour)
        self._wrap = tuple(w and d > 2 for w, d in zip(self.wraparound, self.dims, strict=True))

    # -- coordinates ----------------------------------------------------------------
    def coords(self, chips: np.ndarray | int) -> np.ndarray:
        """Coordinates (..., n_axes) of chip ids."""
        ids = np.asarray(chips, dtype=np.int64)[..., None]
        return (ids // self.strides) % np.asarray(self.dims)

    def chip_at(self, coords: np.ndarray) -> np.ndarray:
        """Chip ids of coordinates, reducing wrapped (and twisted) coordinates first."""
        c = self._reduce(np.asarray(coords, dtype=np.int64))
        return (c * self.strides).sum(axis=-1)

    def _reduce(self, c: np.ndarray) -> np.ndarray:
        c = c.copy()
        if self.twisted:
            for s in self._short:
                laps = np.floor_divide(c[..., s], self.dims[s])
                c[..., s] -= laps * self.dims[s]
                c[..., self._long] += laps * self.dims[s]
        return c % np.asarray(self.dims)

    # -- links ------------------------------------------------------------------------
    def build_links(self) -> LinkTable:
        ids = np.arange(self.num_chips, dtype=np.int64)
        c = self.coords(ids)
        groups = []
        for axis, k in enumerate(self.dims):
            inner = c[:, axis] + 1 < k
            has_plus = inner | (self._wrap[axis] & (c[:, axis] == k - 1))
            step = c.copy()
            step[:, axis] += 1
            groups.append(
                (
                    ids[has_plus],
                    self.chip_at(step[has_plus]),
                    self.link_bandwidth_Bps,
                    self.hop_latency_s,
                    "ici",
                )
            )
        return LinkTable.build(groups)

    # -- routing --------------------------------------------------------------------
    def _axis_steps(self, delta: int, axis: int) -> int:
        """Signed steps along ``axis`` for a coordinate difference ``delta`` (DOR)."""
        k = self.dims[axis]
        if not self._wrap[axis]:
            return delta
        fwd = delta % k
        return fwd if fwd <= k - fwd else fwd - k

    def route(self, src: int, dst: int, axis_order: Sequence[int] | None = None) -> list[int]:
        """Dimension-order route; ``axis_order`` (default x, y, z) picks the order of axes,
        which is how a transfer is split over several first ports."""
        src, dst = self.check_chip(src), self.check_chip(dst)
        if self.twisted:
            return self._twisted_route(src, dst)
        path, here = [src], self.coords(src).copy()
        target = self.coords(dst)
        for axis in axis_order if axis_order is not None else range(len(self.dims)):
            steps = self._axis_steps(int(target[axis] - here[axis]), axis)
            for _ in range(abs(steps)):
                here[axis] = (here[axis] + (1 if steps > 0 else -1)) % self.dims[axis]
                path.append(int((here * self.strides).sum()))
        return path

    def port_routes(self, src: int, dst: int) -> list[list[int]]:
        """One dimension-order route per moving axis, route ``r`` starting along the
        ``r``-th moving axis (then the others in order), so each leaves ``src`` by a
        different port; one route if ``src == dst`` or only one axis moves. A twisted
        torus has one minimal route per pair, repeated once per moving axis."""
        axes = self.moving_axes(src, dst)
        routes = [self.route(src, dst)]
        for r in range(1, len(axes)):
            order = axes[r:] + axes[:r]
            rest = [a for a in range(len(self.dims)) if a not in order]
            routes.append(self.route(src, dst, axis_order=order + rest))
        return routes

    @property
    def vectorised_routes(self) -> bool:
        """Dimension-order routes are vectorised; a twisted torus routes pair by pair."""
        return not self.twisted

    @property
    def _port_links(self) -> np.ndarray:
        """``table[chip, 2*axis + (0 for +, 1 for -)]``: id of the link leaving ``chip``
        one step along ``axis`` (-1 where a mesh edge has none)."""
        if not hasattr(self, "_port_cache"):
            ids = np.arange(self.num_chips, dtype=np.int64)
            c = self.coords(ids)
            table = np.full((self.num_chips, 2 * len(self.dims)), -1, dtype=np.int64)
            for axis in range(len(self.dims)):
                for direction, delta in ((0, 1), (1, -1)):
                    step = c.copy()
                    step[:, axis] += delta
                    table[:, 2 * axis + direction] = self.find_links(ids, self.chip_at(step))
            self._port_cache = table
        return self._port_cache

    def route_links_many(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Dimension-order routes of many pairs at once, as CSR ``(ptr, link ids)``;
        the same routes as :meth:`route`, without a Python loop over pairs (on a twisted
        torus, with one: see :attr:`vectorised_routes`)."""
        if self.twisted:
            return super().route_links_many(src, dst)
        src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        here = self.coords(src)
        delta = self.coords(dst) - here
        steps = np.stack(
            [self._axis_steps_many(delta[:, a], a) for a in range(len(self.dims))], axis=1
        )
        counts = np.abs(steps)
        ptr = np.zeros(src.size + 1, dtype=np.int64)
        ptr[1:] = np.cumsum(counts.sum(axis=1))
        links = np.empty(int(ptr[-1]), dtype=np.int64)
        before = ptr[:-1].copy()
        table, node = self._port_links, src.copy()
        for axis, k in enumerate(self.dims):
            n, stride = counts[:, axis], int(self.strides[axis])
            start = here[:, axis]
            rest = node - start * stride  # the chip with this axis' coordinate at 0
            if n.any():
                # entry e of a flow: j = e - its first entry; it leaves the chip j steps
                # along the axis (only that coordinate moves), by port 2 axis (+) or +1 (-)
                first = np.cumsum(n) - n
                j = np.arange(int(n.sum())) - np.repeat(first, n)
                sign = np.sign(steps[:, axis])
                pos = (np.repeat(start, n) + np.repeat(sign, n) * j) % k
                port = np.repeat(rest * table.shape[1] + 2 * axis + (sign < 0), n)
                links[np.repeat(before, n) + j] = table.ravel()[
                    port + pos * stride * table.shape[1]
                ]
                before += n
            here[:, axis] = (start + steps[:, axis]) % k
            node = rest + here[:, axis] * stride
        return ptr, links

    def _axis_steps_many(self, delta: np.ndarray, axis: int) -> np.ndarray:
        """Vectorised :meth:`_axis_steps`."""
        k = self.dims[axis]
        if not self._wrap[axis]:
            return delta
        fwd = delta % k
        return np.where(fwd <= k - fwd, fwd, fwd - k)

    def moving_axes(self, src: int, dst: int) -> list[int]:
        """Axes along which the dimension-order route from ``src`` to ``dst`` moves."""
        delta = self.coords(dst) - self.coords(src)
        return [a for a in range(len(self.dims)) if self._axis_steps(int(delta[a]), a) != 0]

    def _axis_distance(self, delta: np.ndarray, axis: int) -> np.ndarray:
        d = np.abs(delta)
        return np.minimum(d, self.dims[axis] - d) if self._wrap[axis] else d

    def hops_from(self, src: int) -> np.ndarray:
        src = self.check_chip(src)
        c = self.coords(np.arange(self.num_chips))
        if self.twisted:
            return self._bfs[0][self.chip_at(c - self.coords(src))]
        c0 = self.coords(src)
        per_axis = [self._axis_distance(c[:, a] - c0[a], a) for a in range(len(self.dims))]
        return np.sum(per_axis, axis=0)

    def hops(self, src: int, dst: int) -> int:
        if self.twisted:
            return int(self.hops_from(src)[self.check_chip(dst)])
        delta = self.coords(self.check_chip(dst)) - self.coords(self.check_chip(src))
        return int(sum(self._axis_distance(delta[a], a) for a in range(len(self.dims))))

    def hop_histogram(self) -> np.ndarray:
        if self.twisted:
            hist = np.bincount(self._bfs[0]) * self.num_chips
        else:
            hist = np.ones(1, dtype=np.int64)
            for axis, k in enumerate(self.dims):
                a = np.arange(k)
                per_axis = np.bincount(self._axis_distance(a[:, None] - a[None, :], axis).ravel())
                hist = np.convolve(hist, per_axis)
        hist = hist.astype(np.int64)
        hist[0] -= self.num_chips
        return hist

    def bisection_cuts(self) -> Iterator[tuple[str, np.ndarray]]:
        """For each axis, the first half of the chips ordered by that axis first.

        With an even axis that is the plane through its middle; with an odd one the
        middle slice is split too, so both sides always hold N//2 and N - N//2 chips.
        """
        ids = np.arange(self.num_chips)
        c = self.coords(ids)
        for axis, k in enumerate(self.dims):
            if k < 2:
                continue
            # rank of the chip's position across the other axes, 0 .. N/k - 1
            _, rest_rank = np.unique(ids - c[:, axis] * self.strides[axis], return_inverse=True)
            key = c[:, axis] * (self.num_chips // k) + rest_rank
            yield f"{axis_name(axis)} halves", key < self.num_chips // 2

    # -- twisted: one BFS from chip 0, routes by translation --------------------------
    @property
    def _bfs(self) -> tuple[np.ndarray, np.ndarray]:
        if not hasattr(self, "_bfs_cache"):
            links = self.links
            graph = sparse.csr_matrix(
                (np.ones(len(links)), (links.src, links.dst)),
                shape=(self.num_chips, self.num_chips),
            )
            order, pred = csgraph.breadth_first_order(
                graph, 0, directed=True, return_predecessors=True
            )
            dist = np.zeros(self.num_chips, dtype=np.int64)
            for node in order[1:]:
                dist[node] = dist[pred[node]] + 1
            self._bfs_cache = (dist, pred)
        return self._bfs_cache

    def _twisted_route(self, src: int, dst: int) -> list[int]:
        _, pred = self._bfs
        offset = self.coords(src)
        node = int(self.chip_at(self.coords(dst) - offset))
        from_origin = [node]
        while node != 0:
            node = int(pred[node])
            from_origin.append(node)
        shifted = self.coords(np.array(from_origin[::-1])) + offset
        return [int(n) for n in self.chip_at(shifted)]

    def axis_structure(self) -> tuple[np.ndarray, tuple[Axis, ...]]:
        """``chips[x, y, z]``; an axis is a ``ring`` if its wraparound adds a link, else a
        ``line``."""
        ids = np.arange(self.num_chips, dtype=np.int64)
        chips = ids.reshape(tuple(reversed(self.dims))).transpose()
        axes = tuple(
            Axis(axis_name(a), k, "ring" if self._wrap[a] else "line")
            for a, k in enumerate(self.dims)
        )
        return chips, axes

    def plot_layout(self) -> PlotLayout:
        """An x-by-y grid, each cell the mean over z (and further axes)."""
        c = self.coords(np.arange(self.num_chips))
        flat = len(self.dims) == 1
        shape = "x".join(str(d) for d in self.dims)
        return PlotLayout(
            row=np.zeros(self.num_chips, dtype=np.int64) if flat else c[:, 1],
            col=c[:, 0],
            shape=(1 if flat else self.dims[1], self.dims[0]),
            xlabel="x coordinate (chip index)",
            ylabel="y coordinate (chip index)",
            title=f"{shape} torus" + (" (mean over z)" if len(self.dims) > 2 else ""),
        )

    def port_name(self, link: int) -> str:
        """``ICI x+``, ``ICI z-``...: the axis and direction a link leaves its chip by."""
        row = self._port_links[int(self.links.src[link])]
        port = int(np.flatnonzero(row == link)[0])
        return f"ICI {axis_name(port // 2)}{'+-'[port % 2]}"

    def describe(self) -> dict[str, Any]:
        return {
            "dims": list(self.dims),
            "wraparound": list(self.wraparound),
            "twisted": self.twisted,
            "link_bandwidth_Bps": self.link_bandwidth_Bps,
            "hop_latency_s": self.hop_latency_s,
        }


def build_torus(system: System) -> Torus:
    """The torus of a loaded one-pod system (``topology: {kind: torus}``)."""
    spec = system.spec.topology
    assert isinstance(spec, TorusTopologySpec)
    return Torus(
        spec.dims,
        system.wraparound,
        twisted=spec.twisted,
        link_bandwidth_Bps=system.link_bandwidth_Bps,
        hop_latency_s=system.hop_latency_s,
    )
