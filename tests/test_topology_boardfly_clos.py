"""Tests for tpusim.topology.boardfly and tpusim.topology.clos.

Oracles written here: the arrangement of the boardfly docstring re-implemented link
by link; a layered breadth-first search over (chip, phase) states that only admits
the hierarchical minimal routes (local* board? local* global? local* board? local*);
a plain BFS over the link table; closed-form link counts and Google's published
figures (reference/formulas.md 3.4-3.5).
"""

from __future__ import annotations

import math
from collections import Counter, deque

import numpy as np
import pytest
from helpers import histogram, trim
from hypothesis import given, settings
from hypothesis import strategies as st

from tpusim.topology import Boardfly, ClosFabric, Torus

BW = 100e9
LAT = 1e-6


def boardfly(p, a, g, **kw):
    kw.setdefault("link_bandwidth_Bps", BW)
    kw.setdefault("hop_latency_s", LAT)
    return Boardfly(p, a, g, **kw)


# -- oracles -------------------------------------------------------------------------------


def kind_adjacency(topo):
    """adj[u] = list of (v, kind name) from the link table."""
    adj = [[] for _ in range(topo.num_nodes)]
    names = topo.links.kind_names
    rows = zip(
        topo.links.src.tolist(), topo.links.dst.tolist(), topo.links.kind.tolist(), strict=True
    )
    for s, d, k in rows:
        adj[s].append((d, names[k]))
    return adj


def bfs(adj, src, allowed=None):
    """Plain BFS over kind_adjacency, optionally only over links of the allowed kinds."""
    dist = [-1] * len(adj)
    dist[src] = 0
    queue = deque([src])
    while queue:
        u = queue.popleft()
        for v, kind in adj[u]:
            if dist[v] < 0 and (allowed is None or kind in allowed):
                dist[v] = dist[u] + 1
                queue.append(v)
    return dist


# phases: 0 source group before its board link, 1 source group after it,
#         2 destination group before its board link, 3 destination group after it
NEXT_PHASE = {
    "local": {0: 0, 1: 1, 2: 2, 3: 3},
    "board": {0: 1, 2: 3},
    "global": {0: 2, 1: 2},
}


def layered_bfs(adj, src, num_chips):
    """Shortest hierarchical route lengths: at most one global link, at most one board
    link on each side of it, any local hops."""
    dist = {(src, 0): 0}
    queue = deque([(src, 0)])
    while queue:
        u, phase = queue.popleft()
        for v, kind in adj[u]:
            nxt = NEXT_PHASE[kind].get(phase)
            if nxt is not None and (v, nxt) not in dist:
                dist[(v, nxt)] = dist[(u, phase)] + 1
                queue.append((v, nxt))
    best = [math.inf] * num_chips
    for (v, _), d in dist.items():
        best[v] = min(best[v], d)
    return best


def route_kinds(topo, path):
    ids = topo.link_ids(path)  # raises if a step is not a link
    assert np.array_equal(topo.links.src[ids], path[:-1])
    assert np.array_equal(topo.links.dst[ids], path[1:])
    return [topo.links.kind_names[k] for k in topo.links.kind[ids]]


def expected_boardfly_links(p, a, g, n_board, n_global, arrangement):
    """Undirected links (sorted chip pair, kind) as the boardfly docstring defines them."""
    cpg = p * a
    links = Counter()
    for grp in range(g):
        for b in range(a):
            for u in range(p):
                for v in range(u + 1, p):
                    links[(grp * cpg + b * p + u, grp * cpg + b * p + v, "local")] += 1

    def board_chip(board, peer, link):
        rank = peer if peer < board else peer - 1
        return board * p + (rank + link * (a - 1)) % p

    for grp in range(g):
        for i in range(a):
            for j in range(i + 1, a):
                for link in range(n_board):
                    u = grp * cpg + board_chip(i, j, link)
                    v = grp * cpg + board_chip(j, i, link)
                    links[(min(u, v), max(u, v), "board")] += 1

    def group_chip(group, peer, link):
        if arrangement == "absolute":
            rank = peer if peer < group else peer - 1
        else:
            rank = (peer - group - 1) % g
        port = rank + link * (g - 1)
        return group * cpg + (port % a) * p + (port // a) % p

    for i in range(g):
        for j in range(i + 1, g):
            for link in range(n_global):
                u, v = group_chip(i, j, link), group_chip(j, i, link)
                links[(min(u, v), max(u, v), "global")] += 1
    return links


def table_links(topo):
    """Undirected links of the table; asserts every row has its reverse."""
    names = topo.links.kind_names
    rows = Counter(
        zip(
            topo.links.src.tolist(),
            topo.links.dst.tolist(),
            (names[k] for k in topo.links.kind.tolist()),
            strict=True,
        )
    )
    for (s, d, k), n in rows.items():
        assert rows[(d, s, k)] == n, f"link {s}->{d} ({k}) has no reverse"
    return Counter({(s, d, k): n for (s, d, k), n in rows.items() if s < d})


boardflies = st.fixed_dictionaries(
    {
        "p": st.integers(1, 4),
        "a": st.integers(1, 5),
        "g": st.integers(1, 6),
        "arrangement": st.sampled_from(["absolute", "relative"]),
        "links_per_board_pair": st.integers(1, 2),
        "links_per_group_pair": st.integers(1, 2),
    }
)

FAST = settings(max_examples=40, deadline=None)


def build(params, **kw):
    params = dict(params)
    return boardfly(params.pop("p"), params.pop("a"), params.pop("g"), **params, **kw)


# -- Boardfly: links -------------------------------------------------------------------------


@FAST
@given(boardflies)
def test_boardfly_links_follow_documented_arrangement(params):
    topo = build(params)
    p, a, g = params["p"], params["a"], params["g"]
    nb, ng = params["links_per_board_pair"], params["links_per_group_pair"]
    assert topo.num_chips == p * a * g
    assert table_links(topo) == expected_boardfly_links(p, a, g, nb, ng, params["arrangement"])
    counts = topo.link_counts()
    assert counts.get("local", 0) == g * a * p * (p - 1) // 2
    assert counts.get("board", 0) == g * a * (a - 1) // 2 * nb
    assert counts.get("global", 0) == g * (g - 1) // 2 * ng
    assert topo.num_links == sum(counts.values())


@FAST
@given(boardflies)
def test_boardfly_degree_stats(params):
    topo = build(params)
    p, a, g = params["p"], params["a"], params["g"]
    nb, ng = params["links_per_board_pair"], params["links_per_group_pair"]
    # ports from the docstring: board port q on chip q mod p; global port q on board
    # q mod a, chip (q // a) mod p
    board_ports = Counter(q % p for q in range((a - 1) * nb))
    global_ports = Counter((q % a) * p + (q // a) % p for q in range((g - 1) * ng))
    per_chip = [(p - 1) + board_ports[i % p] + global_ports[i] for i in range(p * a)]
    stats = topo.degree_stats()
    assert stats["min"] == min(per_chip)
    assert stats["max"] == max(per_chip)
    assert stats["mean"] == pytest.approx(sum(per_chip) / len(per_chip))
    assert stats["mean"] == pytest.approx(2 * topo.num_links / topo.num_chips)


def test_boardfly_link_bandwidths_and_latencies_by_kind():
    topo = boardfly(
        3,
        4,
        5,
        board_link_bandwidth_Bps=50e9,
        global_link_bandwidth_Bps=25e9,
        global_hop_latency_s=5e-6,
        links_per_board_pair=2,
        links_per_group_pair=2,
    )
    expected = {"local": (BW, LAT), "board": (50e9, LAT), "global": (25e9, 5e-6)}
    names = topo.links.kind_names
    assert set(names) == set(expected)
    for row in range(len(topo.links)):
        bw, lat = expected[names[topo.links.kind[row]]]
        assert topo.links.bandwidth_Bps[row] == bw
        assert topo.links.latency_s[row] == lat


def test_boardfly_defaults_use_link_bandwidth_and_latency_everywhere():
    topo = boardfly(2, 3, 4)
    assert np.all(topo.links.bandwidth_Bps == BW)
    assert np.all(topo.links.latency_s == LAT)


@pytest.mark.parametrize("args", [(0, 2, 2), (2, 0, 2), (2, 2, 0)])
def test_boardfly_rejects_zero_counts(args):
    with pytest.raises(ValueError, match=">= 1"):
        boardfly(*args)
    with pytest.raises(ValueError, match=">= 1"):
        boardfly(2, 2, 2, links_per_group_pair=0)


# -- Boardfly: hierarchical routing ----------------------------------------------------------


@FAST
@given(boardflies)
def test_boardfly_hops_match_layered_bfs(params):
    topo = build(params)
    n = topo.num_chips
    adj = kind_adjacency(topo)
    routed = [layered_bfs(adj, s, n) for s in range(n)]
    assert all(math.isfinite(d) for row in routed for d in row)
    for s in range(n):
        assert topo.hops_from(s).tolist() == routed[s]
    hist = topo.hop_histogram()
    assert hist.sum() == n * (n - 1)
    assert trim(hist) == histogram(routed)
    expected_diameter = max((d for row in routed for d in row), default=0)
    assert topo.diameter_hops == expected_diameter <= 7
    pairs = n * (n - 1)
    mean = sum(map(sum, routed)) / pairs if pairs else 0.0
    assert topo.mean_hops == pytest.approx(mean, rel=1e-12)
    # hierarchical routing is never shorter than the graph's shortest path
    for s in range(n):
        graph = bfs(adj, s)
        assert all(gd <= rd for gd, rd in zip(graph, routed[s], strict=True))


@FAST
@given(boardflies, st.data())
def test_boardfly_routes_have_hierarchical_shape(params, data):
    topo = build(params)
    n = topo.num_chips
    adj = kind_adjacency(topo)
    cpg = params["p"] * params["a"]
    for src in data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=3)):
        routed = layered_bfs(adj, src, n)
        for dst in range(n):
            path = topo.route(src, dst)
            assert path[0] == src and path[-1] == dst
            assert topo.route(src, dst) == path
            assert topo.hops(src, dst) == len(path) - 1 == routed[dst]
            kinds = route_kinds(topo, path)
            assert kinds.count("global") == (0 if src // cpg == dst // cpg else 1)
            cut = kinds.index("global") if "global" in kinds else len(kinds)
            assert kinds[:cut].count("board") <= 1
            assert kinds[cut + 1 :].count("board") <= 1
            assert len(set(path)) == len(path)
            assert len(path) - 1 <= 7


def test_boardfly_route_tie_takes_lowest_link_index():
    # two parallel board links: board port q = l * (a - 1) sits on chip q mod p, so link 0
    # joins chips 0-2 and link 1 joins chips 1-3
    topo = boardfly(2, 2, 1, links_per_board_pair=2)
    assert topo.route(0, 2) == [0, 2]
    assert topo.route(1, 3) == [1, 3]
    assert topo.route(0, 3) == [0, 2, 3]  # link 0 ties link 1 ([0, 1, 3]) at 2 hops
    assert topo.route(3, 0) == [3, 2, 0]  # the same tie from the other side: link 0 again


def test_boardfly_graph_shortest_can_beat_hierarchical_route():
    # the graph may take two board links in one group or two global links, which the
    # hierarchical route never does: some pair must be strictly shorter in the graph
    topo = boardfly(2, 4, 6)
    adj = kind_adjacency(topo)
    gap = False
    for s in range(topo.num_chips):
        graph, routed = bfs(adj, s), topo.hops_from(s).tolist()
        assert all(x <= y for x, y in zip(graph, routed, strict=True))
        gap |= any(x < y for x, y in zip(graph, routed, strict=True))
    assert gap


# -- Boardfly: Google's figures and bisection --------------------------------------------------


@pytest.mark.parametrize("groups, chips", [(32, 1024), (36, 1152)])
def test_google_boardfly_diameter_is_seven(groups, chips):
    topo = boardfly(4, 8, groups)
    assert topo.num_chips == chips
    assert topo.diameter_hops == 7
    assert topo.hop_histogram().sum() == chips * (chips - 1)
    adj = kind_adjacency(topo)
    for src in (0, 9, chips - 1):
        routed = layered_bfs(adj, src, chips)
        assert topo.hops_from(src).tolist() == routed
        assert max(routed) <= 7
    # a pair at 7 hops (found from chip 0), confirmed by the oracle
    far = int(np.flatnonzero(topo.hops_from(0) == 7)[0])
    assert layered_bfs(adj, 0, chips)[far] == 7
    assert topo.hops(0, far) == 7
    # Google: 16 -> 7 hops against the 8x8x16 torus is a 56% reduction
    assert round(100 * (16 - 7) / 16) == 56


def crossing(topo, side):
    """Bandwidth of links from side to not-side, counted link by link."""
    total = 0.0
    for s, d, bw in zip(
        topo.links.src.tolist(),
        topo.links.dst.tolist(),
        topo.links.bandwidth_Bps.tolist(),
        strict=True,
    ):
        if side(s) and not side(d):
            total += bw
    return total


@pytest.mark.parametrize("global_bw", [BW, 0.5 * BW, 4 * BW])
def test_boardfly_4_8_36_bisection(global_bw):
    topo = boardfly(4, 8, 36, global_link_bandwidth_Bps=global_bw)
    cpg = 32
    half_groups = crossing(topo, lambda c: c // cpg < 18)
    assert half_groups == pytest.approx(18 * 18 * global_bw)
    half_every_group = crossing(topo, lambda c: c % cpg < 16)
    # board links between the first four and last four boards of every group: 16 * 36
    global_across = sum(
        1
        for i in range(36)
        for j in range(i + 1, 36)
        if (topo.global_port_chip(i, j, 0) < 16) != (topo.global_port_chip(j, i, 0) < 16)
    )
    assert half_every_group == pytest.approx(16 * 36 * BW + global_across * global_bw)
    assert topo.bisection_bandwidth_Bps == pytest.approx(min(half_groups, half_every_group))
    if global_bw <= BW:
        assert topo.bisection_bandwidth_Bps == pytest.approx(18 * 18 * global_bw)


# -- ClosFabric --------------------------------------------------------------------------------

FABRIC_BW = 12.5e9
FABRIC_LAT = 5e-6


def small_pod():
    return Torus((2, 3), (True, True), link_bandwidth_Bps=BW, hop_latency_s=LAT)


def fabric(pod=None, pods=3, cpl=4, name="dcn"):
    return ClosFabric(
        pod or small_pod(),
        pods,
        bandwidth_per_chip_Bps=FABRIC_BW,
        hop_latency_s=FABRIC_LAT,
        chips_per_leaf=cpl,
        name=name,
    )


def expected_leaf(n_chips, pod_chips, cpl, chip):
    leaves_per_pod = -(-pod_chips // cpl)
    pod, local = divmod(chip, pod_chips)
    return n_chips + pod * leaves_per_pod + local // cpl


PODS = [
    ("torus 2x3", small_pod),
    ("ring of 8 (mesh)", lambda: Torus((8,), (False,), link_bandwidth_Bps=BW, hop_latency_s=LAT)),
    ("boardfly 2x2x2", lambda: boardfly(2, 2, 2)),
]


@pytest.mark.parametrize("pods", [1, 2, 3])
@pytest.mark.parametrize("cpl", [1, 4, 6, 64])
@pytest.mark.parametrize("label, make_pod", PODS)
def test_clos_routes(label, make_pod, cpl, pods):
    pod = make_pod()
    topo = fabric(pod, pods, cpl)
    m = pod.num_chips
    n = m * pods
    assert topo.num_chips == n
    leaves = pods * -(-m // cpl)
    assert topo.num_nodes == n + leaves + 1
    spine = n + leaves
    adj = kind_adjacency(topo)
    pod_kinds = set(pod.links.kind_names)
    for src in range(n):
        inside = bfs(adj, src, allowed=pod_kinds)
        for dst in range(n):
            path = topo.route(src, dst)
            kinds = route_kinds(topo, path)
            if src // m == dst // m:
                shift = src // m * m
                assert path == [x + shift for x in pod.route(src % m, dst % m)]
                assert len(path) - 1 == inside[dst]
                assert "dcn" not in kinds
            else:
                assert path == [
                    src,
                    expected_leaf(n, m, cpl, src),
                    spine,
                    expected_leaf(n, m, cpl, dst),
                    dst,
                ]
                assert kinds == ["dcn"] * 4
            assert topo.hops(src, dst) == len(path) - 1


@pytest.mark.parametrize("label, make_pod", PODS)
def test_clos_hops_match_routing_oracle(label, make_pod):
    pod = make_pod()
    topo = fabric(pod, pods=3, cpl=4)
    m, n = pod.num_chips, topo.num_chips
    adj = kind_adjacency(topo)
    pod_kinds = set(pod.links.kind_names)
    rows = []
    for src in range(n):
        inside = bfs(adj, src, allowed=pod_kinds)
        through_fabric = bfs(adj, src, allowed={"dcn"})
        row = [inside[d] if d // m == src // m else through_fabric[d] for d in range(n)]
        assert all(row[d] == 4 for d in range(n) if d // m != src // m)
        assert topo.hops_from(src).tolist() == row
        graph = bfs(adj, src)[:n]
        assert all(gd <= rd for gd, rd in zip(graph, row, strict=True))
        rows.append(row)
    hist = topo.hop_histogram()
    assert hist.sum() == n * (n - 1)
    assert trim(hist) == histogram(rows)
    assert topo.diameter_hops == max(max(r) for r in rows)


def test_clos_histogram_equals_plain_bfs_through_switches():
    # the 2x3 torus pod has diameter 2, so no route through a leaf is ever shorter than
    # the pod route: plain BFS over the whole link table (switches included) is the oracle
    topo = fabric()
    n = topo.num_chips
    adj = kind_adjacency(topo)
    rows = [bfs(adj, s)[:n] for s in range(n)]
    assert trim(topo.hop_histogram()) == histogram(rows)
    for s in range(n):
        assert topo.hops_from(s).tolist() == rows[s]


@pytest.mark.parametrize("pods", [1, 2, 3, 5])
@pytest.mark.parametrize("label, make_pod", PODS)
def test_clos_mean_hops_closed_form(label, make_pod, pods):
    pod = make_pod()
    topo = fabric(pod, pods)
    m = pod.num_chips
    n = m * pods
    pod_pairs = m * (m - 1)
    cross_pairs = n * (n - m)
    expected = (pods * pod_pairs * pod.mean_hops + cross_pairs * 4) / (n * (n - 1))
    assert topo.mean_hops == pytest.approx(expected, rel=1e-12)
    assert topo.hop_histogram().sum() == n * (n - 1)


@pytest.mark.parametrize("pods", [2, 4, 6])
@pytest.mark.parametrize("cpl", [1, 4, 5, 64])
def test_clos_bisection_even_pods(pods, cpl):
    topo = fabric(pods=pods, cpl=cpl)
    n = topo.num_chips
    assert topo.bisection_bandwidth_Bps == pytest.approx(n / 2 * FABRIC_BW)
    half_pods = pods // 2

    def side(node):
        if node < n:
            return node // 6 < half_pods
        if node < topo.spine:
            return (node - n) // topo.leaves_per_pod < half_pods
        return False

    assert crossing(topo, side) == pytest.approx(n / 2 * FABRIC_BW)


@pytest.mark.parametrize("cpl", [1, 4, 5, 6, 64])
def test_clos_link_bandwidths(cpl):
    pods = 3
    topo = fabric(pods=pods, cpl=cpl)
    n, m = topo.num_chips, 6
    spine = topo.spine
    under = Counter(expected_leaf(n, m, cpl, c) for c in range(n))
    names = topo.links.kind_names
    seen_leaf_links = 0
    rows = zip(
        topo.links.src.tolist(),
        topo.links.dst.tolist(),
        topo.links.bandwidth_Bps.tolist(),
        topo.links.latency_s.tolist(),
        topo.links.kind.tolist(),
        strict=True,
    )
    for s, d, bw, lat, k in rows:
        if names[k] == "dcn":
            assert lat == FABRIC_LAT
            if spine in (s, d):
                leaf = s if d == spine else d
                assert bw == pytest.approx(under[leaf] * FABRIC_BW)
                seen_leaf_links += 1
            else:
                chip, leaf = (s, d) if s < n else (d, s)
                assert leaf == expected_leaf(n, m, cpl, chip)
                assert bw == FABRIC_BW
        else:
            assert names[k] == "ici"
            assert (bw, lat) == (BW, LAT)
            assert s < n and d < n and s // m == d // m
    assert seen_leaf_links == 2 * len(under)
    assert topo.link_counts() == {"ici": pods * small_pod().num_links, "dcn": n + len(under)}
    assert table_links(topo)  # every row has its reverse


def test_clos_custom_fabric_name_and_invalid_arguments():
    topo = fabric(name="virgo")
    assert topo.links.kind_names[-1] == "virgo"
    assert topo.route(0, 7)[2] == topo.spine
    with pytest.raises(ValueError, match=">= 1"):
        fabric(pods=0)
    with pytest.raises(ValueError, match=">= 1"):
        fabric(cpl=0)


# -- capabilities the collectives and the plots use ----------------------------------------


def test_boardfly_axis_structure_and_plot_layout():
    topo = boardfly(2, 3, 4)
    chips, axes = topo.axis_structure()
    assert chips.shape == (4, 3, 2)
    assert chips[2, 1, 0] == (2 * 3 + 1) * 2  # group-major ids
    assert [(a.name, a.size, a.kind) for a in axes] == [
        ("group", 4, "full"),
        ("board", 3, "full"),
        ("chip", 2, "full"),
    ]
    layout = topo.plot_layout()
    assert layout.shape == (4, 6)
    values = np.arange(topo.num_chips, dtype=float)
    assert layout.grid(values).tolist() == values.reshape(4, 6).tolist()
    assert layout.title == "Boardfly p=2 a=3 g=4"
    assert topo.vectorised_routes and not topo.has_port_routes


def test_clos_axis_structure_puts_pods_first():
    pod = Torus((2, 3), (False, True), link_bandwidth_Bps=BW, hop_latency_s=LAT)
    topo = fabric(pod, pods=3)
    chips, axes = topo.axis_structure()
    pod_chips, pod_axes = pod.axis_structure()
    assert chips.shape == (3, 2, 3)
    for i in range(3):
        assert (chips[i] == pod_chips + 6 * i).all()
    assert [(a.name, a.size, a.kind) for a in axes] == [
        ("pod", 3, "any"),
        ("x", 2, "line"),
        ("y", 3, "ring"),
    ]
    assert axes[1:] == pod_axes
    assert topo.vectorised_routes  # its pod's routes are, and the fabric legs are a lookup
