"""Tests for the defaults of tpusim.topology.base.Topology (breadth-first routes and
metrics, one axis, one plot row) and tpusim.topology.shortest_paths.

The oracle is a plain queue-based BFS written here, on random connected graphs
(Hypothesis) and on the shipped topologies' own link tables, whose minimal routes
give the same hop counts.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest
from helpers import histogram, trim
from hypothesis import given, settings
from hypothesis import strategies as st

from tpusim.topology import Boardfly, ClosFabric, LinkTable, Topology, Torus

BW = 10e9
LAT = 1e-6


class Graph(Topology):
    """A topology given by its undirected edges only: every capability is a default."""

    kind = "graph"

    def __init__(self, num_chips, edges):
        self.num_chips = num_chips
        self.edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)

    def build_links(self):
        return LinkTable.build([(self.edges[:, 0], self.edges[:, 1], BW, LAT, "edge")])


class SameLinks(Topology):
    """Another topology's links with none of its routing: the defaults on a known graph."""

    kind = "same-links"

    def __init__(self, other):
        self.other, self.num_chips = other, other.num_chips

    @property
    def num_nodes(self):
        return self.other.num_nodes

    def build_links(self):
        return self.other.links


def neighbours(topo):
    adj = [set() for _ in range(topo.num_nodes)]
    for s, d in zip(topo.links.src.tolist(), topo.links.dst.tolist(), strict=True):
        adj[s].add(d)
    return adj


def bfs(adj, src):
    dist = [-1] * len(adj)
    dist[src] = 0
    queue = deque([src])
    while queue:
        u = queue.popleft()
        for v in adj[u]:
            if dist[v] < 0:
                dist[v] = dist[u] + 1
                queue.append(v)
    return dist


@st.composite
def connected_graphs(draw):
    """A random spanning tree on n chips plus a few random extra edges."""
    n = draw(st.integers(2, 14))
    parents = [draw(st.integers(0, v - 1)) for v in range(1, n)]
    edges = {(p, v) for v, p in enumerate(parents, start=1)}
    extra = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=n))
    edges |= {(min(a, b), max(a, b)) for a, b in extra if a != b}
    return Graph(n, sorted(edges))


@settings(max_examples=60, deadline=None)
@given(connected_graphs())
def test_default_routes_are_shortest_with_the_lowest_predecessor(topo):
    adj = neighbours(topo)
    dist = [bfs(adj, s) for s in range(topo.num_chips)]
    for s in range(topo.num_chips):
        assert topo.hops_from(s).tolist() == dist[s]
        for d in range(topo.num_chips):
            route = topo.route(s, d)
            assert route[0] == s and route[-1] == d and len(route) - 1 == dist[s][d]
            for i in range(1, len(route)):  # each step back is the lowest closer neighbour
                closer = [u for u in adj[route[i]] if dist[s][u] == dist[s][route[i]] - 1]
                assert route[i - 1] == min(closer)
    assert trim(topo.hop_histogram()) == histogram(dist)


@settings(max_examples=40, deadline=None)
@given(connected_graphs(), st.data())
def test_default_batch_routes_equal_pair_routes(topo, data):
    n = topo.num_chips
    pairs = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1))))
    src = np.array([p[0] for p in pairs], dtype=np.int64)
    dst = np.array([p[1] for p in pairs], dtype=np.int64)
    ptr, links = topo.route_links_many(src, dst)
    assert ptr.size == len(pairs) + 1
    for k, (s, d) in enumerate(pairs):
        assert links[ptr[k] : ptr[k + 1]].tolist() == topo.link_ids(topo.route(s, d)).tolist()
    assert topo.vectorised_routes


@pytest.mark.parametrize(
    "pod",
    [
        Torus((4, 5), (True, False), link_bandwidth_Bps=BW, hop_latency_s=LAT),
        Torus((3, 3, 6), (True,) * 3, link_bandwidth_Bps=BW, hop_latency_s=LAT, twisted=True),
    ],
    ids=["torus-4x5", "twisted-3x3x6"],
)
def test_defaults_on_a_torus_graph_give_its_minimal_hops(pod):
    plain = SameLinks(pod)
    assert plain.hop_histogram().tolist() == pod.hop_histogram().tolist()
    for src in (0, pod.num_chips // 2, pod.num_chips - 1):
        assert plain.hops_from(src).tolist() == pod.hops_from(src).tolist()


def test_defaults_route_through_fabric_switches():
    pod = Torus((2, 2), (False, False), link_bandwidth_Bps=BW, hop_latency_s=LAT)
    clos = ClosFabric(pod, 3, bandwidth_per_chip_Bps=BW, hop_latency_s=LAT, chips_per_leaf=2)
    plain = SameLinks(clos)
    assert plain.hops_from(0).tolist() == clos.hops_from(0).tolist()
    route = plain.route(0, 11)
    assert len(route) == 5 and route[2] == clos.spine  # chip, leaf, spine, leaf, chip


def _clos(pod, pods, chips_per_leaf=64):
    """``pods`` copies of ``pod`` on one fabric (ClosFabric's default 64 chips per leaf),
    each chip at the pod's link bandwidth."""
    return ClosFabric(
        pod, pods, bandwidth_per_chip_Bps=BW, hop_latency_s=LAT, chips_per_leaf=chips_per_leaf
    )


@pytest.mark.parametrize(
    "topo, vectorised",
    [
        (
            _clos(Torus((2, 3), (False, True), link_bandwidth_Bps=BW, hop_latency_s=LAT), 2, 4),
            True,
        ),
        (
            _clos(Torus((2, 2), (True, True), link_bandwidth_Bps=BW, hop_latency_s=LAT), 3, 3),
            True,
        ),
        (
            _clos(Boardfly(2, 2, 3, link_bandwidth_Bps=BW, hop_latency_s=LAT), 2),
            True,
        ),
        (
            _clos(
                Torus((3, 6), (True, True), link_bandwidth_Bps=BW, hop_latency_s=LAT, twisted=True),
                2,
            ),
            False,
        ),
        (
            Torus((3, 6), (True, True), link_bandwidth_Bps=BW, hop_latency_s=LAT, twisted=True),
            False,
        ),
        (Torus((3, 4), (True, False), link_bandwidth_Bps=BW, hop_latency_s=LAT), True),
        (Boardfly(2, 3, 3, link_bandwidth_Bps=BW, hop_latency_s=LAT), True),
    ],
    ids=[
        "clos",
        "clos-2x2-pods",
        "clos-boardfly-pods",
        "clos-twisted-pods",
        "twisted",
        "torus",
        "boardfly",
    ],
)
def test_batch_routes_of_every_shipped_topology_equal_its_routes(topo, vectorised):
    """An overridden route() keeps route_links_many right (pair by pair, where the
    topology has no vectorised one of its own)."""
    n = topo.num_chips
    src, dst = (a.ravel() for a in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    ptr, links = topo.route_links_many(src, dst)
    for k in range(src.size):
        want = topo.link_ids(topo.route(int(src[k]), int(dst[k]))).tolist()
        assert links[ptr[k] : ptr[k + 1]].tolist() == want
    assert topo.vectorised_routes == vectorised


def test_a_split_topology_says_so():
    topo = Graph(4, [(0, 1), (2, 3)])
    assert topo.hops_from(0).tolist() == [0, 1, -1, -1]
    with pytest.raises(ValueError, match="chip 2 cannot be reached"):
        topo.route(0, 2)
    with pytest.raises(ValueError, match="cannot be reached"):
        topo.route_links_many(np.array([1, 0]), np.array([0, 3]))
    with pytest.raises(ValueError, match="the topology is split"):
        topo.hop_histogram()


def test_default_cut_axes_and_layout():
    topo = Graph(5, [(i, (i + 1) % 5) for i in range(5)])
    (name, side), *others = list(topo.bisection_cuts())
    assert not others and name == "first half of the chip ids"
    assert side.tolist() == [True, True, False, False, False]
    assert topo.bisection_bandwidth_Bps == pytest.approx(2 * BW)  # 1->2 and 0->4
    chips, axes = topo.axis_structure()
    assert chips.tolist() == [0, 1, 2, 3, 4] and [a.kind for a in axes] == ["any"]
    assert topo.port_routes(0, 2) == [topo.route(0, 2)] and not topo.has_port_routes
    layout = topo.plot_layout()
    assert layout.shape == (1, 5) and layout.col.tolist() == [0, 1, 2, 3, 4]


def test_chip_ids_are_checked():
    topo = Graph(3, [(0, 1), (1, 2)])
    with pytest.raises(ValueError, match=r"chip 3 is not in 0\.\.2"):
        topo.route(0, 3)
    with pytest.raises(ValueError, match=r"chip -1 is not in 0\.\.2"):
        topo.hops_from(-1)
    with pytest.raises(ValueError, match=r"chip 5 is not in 0\.\.2"):
        topo.route_links_many(np.array([0, 1]), np.array([1, 5]))
    with pytest.raises(ValueError, match=r"chip -2 is not in 0\.\.2"):
        topo.route_links_many(np.array([-2]), np.array([1]))
