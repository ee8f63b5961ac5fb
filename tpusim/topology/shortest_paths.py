"""Breadth-first shortest-path trees on a link graph: the routes of a topology that
brings no routing rule of its own.

A tree is grown level by level from its source, every level in one numpy step. A
node first reached at level ``h`` takes as predecessor the lowest-numbered node of
level ``h - 1`` linked to it, so routes are deterministic and minimal (in hops).
A route is read back from the tree, from the destination to the source; many routes
are read at once, one step back per hop for every pair together.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

UNREACHED = -1  # dist and pred of a node the tree does not reach


@dataclass(frozen=True)
class Adjacency:
    """Out-neighbours of every node in CSR form: those of node ``u`` are
    ``indices[indptr[u]:indptr[u + 1]]``, in ascending order."""

    indptr: np.ndarray
    indices: np.ndarray

    @staticmethod
    def of_links(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> Adjacency:
        """The adjacency of directed links ``src[i] -> dst[i]`` on ``num_nodes`` nodes."""
        order = np.lexsort((dst, src))
        indptr = np.zeros(num_nodes + 1, dtype=np.int64)
        indptr[1:] = np.cumsum(np.bincount(src, minlength=num_nodes))
        return Adjacency(indptr, np.asarray(dst, dtype=np.int64)[order])

    def neighbours(self, frontier: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(parent, neighbour) for every link leaving a node of ``frontier``, parents in
        the order of ``frontier``."""
        starts = self.indptr[frontier]
        counts = self.indptr[frontier + 1] - starts
        parents = np.repeat(frontier, counts)
        within = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        return parents, self.indices[np.repeat(starts, counts) + within]


def shortest_path_tree(adjacency: Adjacency, source: int) -> tuple[np.ndarray, np.ndarray]:
    """``(dist, pred)`` over all nodes: hops from ``source`` and the predecessor on the
    route (``UNREACHED`` for the source's predecessor and for nodes it cannot reach)."""
    num_nodes = adjacency.indptr.size - 1
    dist = np.full(num_nodes, UNREACHED, dtype=np.int64)
    pred = np.full(num_nodes, UNREACHED, dtype=np.int64)
    dist[source] = 0
    frontier, level = np.array([source], dtype=np.int64), 0
    while frontier.size:
        level += 1
        parents, reached = adjacency.neighbours(frontier)  # frontier is sorted ascending
        new = dist[reached] == UNREACHED
        # the first occurrence of a node comes from its lowest-numbered parent
        nodes, first = np.unique(reached[new], return_index=True)
        dist[nodes] = level
        pred[nodes] = parents[new][first]
        frontier = nodes
    return dist, pred


def route_steps(
    dist: np.ndarray, pred: np.ndarray, tree: np.ndarray, dst: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The steps of many tree routes at once: pair ``k`` follows the tree in row
    ``tree[k]`` of ``dist`` and ``pred`` (one row per source) to ``dst[k]``.

    Returns ``(ptr, a, b)``: route ``k`` is the steps ``a[i] -> b[i]`` for ``i`` in
    ``ptr[k]:ptr[k + 1]``, from source to destination. Raises ValueError when a
    destination is not reachable.
    """
    hops = dist[tree, dst]
    if np.any(hops == UNREACHED):
        raise ValueError(f"chip {int(dst[hops == UNREACHED][0])} cannot be reached")
    ptr = np.zeros(dst.size + 1, dtype=np.int64)
    ptr[1:] = np.cumsum(hops)
    a = np.empty(int(ptr[-1]), dtype=np.int64)
    b = np.empty_like(a)
    here, left = dst.copy(), hops.copy()
    for _ in range(int(hops.max(initial=0))):
        on = left > 0
        back = pred[tree[on], here[on]]
        slot = ptr[:-1][on] + left[on] - 1
        a[slot], b[slot] = back, here[on]
        here[on], left[on] = back, left[on] - 1
    return ptr, a, b
