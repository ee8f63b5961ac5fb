"""Faults resolved on a topology, and routes around failed links.

:func:`resolve_faults` turns a :class:`~tpusim.config.faults.FaultSet` into a
:class:`FaultSchedule` of directed link ids, chips and instants, checking every entry
against the topology (a link or chip that does not exist is an InputError naming the
entry). Random link failures are drawn from the simulation's RNG: the same seed fails
the same links.

:class:`SurvivingRoutes` routes around failed links: the shortest path, in hops, over
the links still up (breadth-first trees over the surviving graph, one per source,
cached until the set of failed links changes). A route that had a minimal surviving
alternative gets one of the same length, so rerouting is minimal where possible and
the shortest surviving path otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from tpusim.config.faults import ChipFailurePolicy, FaultSet, FaultSpec
from tpusim.errors import InputError, SimulationError
from tpusim.later import LaterModule
from tpusim.topology import Topology
from tpusim.topology.shortest_paths import Adjacency, route_steps, shortest_path_tree

if TYPE_CHECKING:
    from scipy import sparse
    from scipy.sparse import csgraph
else:  # only a fault set with failed links asks which chips still connect
    sparse = LaterModule("scipy.sparse")
    csgraph = LaterModule("scipy.sparse.csgraph")

__all__ = [
    "ChipFault",
    "FaultSchedule",
    "LinkFault",
    "SurvivingRoutes",
    "resolve_faults",
]


@dataclass(frozen=True)
class LinkFault:
    """From ``at_s`` on, the directed links ``links`` keep ``fraction`` of their
    bandwidth (0: down). ``pair``: the two chips, for reports."""

    at_s: float
    links: np.ndarray
    fraction: float
    pair: tuple[int, int]


@dataclass(frozen=True)
class ChipFault:
    """Chip ``chip`` is down from ``at_s`` on."""

    at_s: float
    chip: int


@dataclass(frozen=True)
class FaultSchedule:
    """A fault set resolved on one topology."""

    link_faults: list[LinkFault] = field(default_factory=list)
    chip_faults: list[ChipFault] = field(default_factory=list)
    slow_chips: dict[int, float] = field(default_factory=dict)
    on_chip_failure: ChipFailurePolicy = "fail"

    @property
    def empty(self) -> bool:
        return not (self.link_faults or self.chip_faults or self.slow_chips)

    @property
    def failed_links(self) -> list[list[int]]:
        """Chip pairs of the links that go down (JSON ``failed_links``)."""
        return [list(f.pair) for f in self.link_faults if f.fraction == 0]

    def link_times_s(self) -> list[float]:
        """Distinct instants at which link capacities change, in order."""
        return sorted({f.at_s for f in self.link_faults})

    def chips_down_at(self, time_s: float) -> list[int]:
        """Chips down at ``time_s`` (sorted)."""
        return sorted({f.chip for f in self.chip_faults if f.at_s <= time_s})


def _link_pair(topology: Topology, a: int, b: int, where: str) -> np.ndarray:
    """The directed links a->b and b->a; InputError naming ``where`` if there is none."""
    n = topology.num_chips
    if not (0 <= a < n and 0 <= b < n):
        raise InputError(f"{where}: link [{a}, {b}]: chips are 0..{n - 1}")
    ids = topology.find_links(np.array([a, b]), np.array([b, a]))
    if np.any(ids < 0):
        raise InputError(f"{where}: link [{a}, {b}] does not exist (no direct link)")
    return ids


def _check_chip(topology: Topology, chip: int, where: str) -> int:
    if not 0 <= chip < topology.num_chips:
        raise InputError(
            f"{where}: chip {chip} does not exist (chips are 0..{topology.num_chips - 1})"
        )
    return chip


def _listed(spec: FaultSpec, topology: Topology, where: str, out: FaultSchedule) -> None:
    if spec.link is not None:
        a, b = spec.link
        ids = _link_pair(topology, a, b, where)
        fraction = 0.0 if spec.kind == "link_down" else float(spec.bandwidth_fraction or 1.0)
        out.link_faults.append(LinkFault(spec.at, ids, fraction, (a, b)))
    elif spec.kind == "chip_down":
        out.chip_faults.append(ChipFault(spec.at, _check_chip(topology, spec.chip or 0, where)))
    else:
        chip = _check_chip(topology, spec.chip or 0, where)
        out.slow_chips[chip] = max(out.slow_chips.get(chip, 1.0), float(spec.slowdown or 1.0))


def random_link_pairs(topology: Topology, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` distinct chip-to-chip links (rows ``[a, b]``, a < b) drawn from ``rng``;
    InputError if the topology has fewer."""
    links = topology.links
    n = topology.num_chips
    both = (links.src < links.dst) & (links.dst < n)
    candidates = np.flatnonzero(both)
    if count > candidates.size:
        raise InputError(f"fail_links: {count} links asked, the topology has {candidates.size}")
    chosen = np.sort(rng.choice(candidates, size=count, replace=False))
    return np.stack([links.src[chosen], links.dst[chosen]], axis=1)


def resolve_faults(
    fault_set: FaultSet, topology: Topology, rng: np.random.Generator
) -> FaultSchedule:
    """``fault_set`` on ``topology``; random links come from ``fault_set.seed`` if set, else from
    ``rng``. Raises InputError naming the first entry that names no link or chip."""
    out = FaultSchedule(on_chip_failure=fault_set.on_chip_failure)
    for i, spec in enumerate(fault_set.faults):
        _listed(spec, topology, f"faults[{i}] ({spec.kind})", out)
    if fault_set.fail_links:
        draw = rng if fault_set.seed is None else np.random.default_rng(fault_set.seed)
        for a, b in random_link_pairs(topology, fault_set.fail_links, draw).tolist():
            ids = _link_pair(topology, a, b, "fail_links")
            out.link_faults.append(LinkFault(0.0, ids, 0.0, (a, b)))
    return out


class DisconnectedError(SimulationError):
    """Failed links cut chips of a collective's group off from the rest (exit 1): a
    runtime cannot run the collective on that group."""


class SurvivingRoutes:
    """Shortest routes over the links whose ``alive`` flag is set (a bool per directed
    link of ``topology``). Raises SimulationError when failures cut a pair apart."""

    def __init__(self, topology: Topology, alive: np.ndarray):
        self.topology = topology
        links = topology.links
        self._ids = np.flatnonzero(alive)
        self._adjacency = Adjacency.of_links(
            links.src[self._ids], links.dst[self._ids], topology.num_nodes
        )
        self._trees: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        keys = links.src[self._ids] * topology.num_nodes + links.dst[self._ids]
        order = np.argsort(keys, kind="stable")
        self._keys, self._key_ids = keys[order], self._ids[order]
        self._isolated = np.bincount(links.src[self._ids], minlength=topology.num_nodes) == 0
        self._components: np.ndarray | None = None

    def components(self) -> np.ndarray:
        """Per node, the label of its strongly connected component over the links still
        up (two chips can reach each other both ways iff their labels match)."""
        if self._components is None:
            links, n = self.topology.links, self.topology.num_nodes
            ids = self._ids
            graph = sparse.coo_matrix((np.ones(ids.size), (links.src[ids], links.dst[ids])), (n, n))
            self._components = csgraph.connected_components(
                graph, directed=True, connection="strong"
            )[1]
        return self._components

    def unreachable(self, chips: np.ndarray) -> np.ndarray:
        """The chips of each row of ``chips`` (groups x members) that cannot reach the
        row's first chip both ways over the surviving links."""
        labels = self.components()[chips]
        return chips[labels != labels[:, :1]]

    def _tree(self, src: int) -> tuple[np.ndarray, np.ndarray]:
        tree = self._trees.get(src)
        if tree is None:
            tree = self._trees[src] = shortest_path_tree(self._adjacency, src)
        return tree

    def links_many(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """CSR ``(ptr, link ids)`` of the surviving routes of the pairs (src[k], dst[k]).
        A pair with an end whose every link is down (a chip that failed) gets no route:
        its bytes are lost with the chip."""
        isolated = self._isolated[src] | self._isolated[dst]
        if isolated.any():
            ptr, links = (
                self.links_many(src[~isolated], dst[~isolated])
                if (~isolated).any()
                else (np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64))
            )
            hops = np.zeros(src.size, dtype=np.int64)
            hops[~isolated] = np.diff(ptr)
            out = np.zeros(src.size + 1, dtype=np.int64)
            np.cumsum(hops, out=out[1:])
            return out, links
        sources, which = np.unique(src, return_inverse=True)
        trees = [self._tree(int(s)) for s in sources]
        dist = np.stack([t[0] for t in trees])
        pred = np.stack([t[1] for t in trees])
        try:
            ptr, a, b = route_steps(dist, pred, which.reshape(-1), dst)
        except ValueError:
            cut = dist[which.reshape(-1), dst] < 0
            k = int(np.flatnonzero(cut)[0])
            raise DisconnectedError(
                f"failed links cut chip {int(src[k])} off from chip {int(dst[k])}: no route left"
            ) from None
        wanted = a * self.topology.num_nodes + b
        pos = np.searchsorted(self._keys, wanted)
        return ptr, self._key_ids[pos]
