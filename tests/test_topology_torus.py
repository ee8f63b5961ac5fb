"""Tests for tpusim.topology.torus (n-D torus / mesh and the twisted torus).

Every metric is checked against an oracle written here: a breadth-first search over
the link table, a second adjacency built from coordinates (so the link table itself
is checked), closed forms from reference/formulas.md section 3.1 and the published
twisted-torus table of section 3.2.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from fractions import Fraction

import numpy as np
import pytest
from helpers import histogram, trim
from hypothesis import given, settings
from hypothesis import strategies as st

from tpusim.topology import Torus, twist_axes

BW = 45e9
LAT = 1e-6


def make(dims, wrap=None, twisted=False):
    wrap = [True] * len(dims) if wrap is None else wrap
    return Torus(dims, wrap, link_bandwidth_Bps=BW, hop_latency_s=LAT, twisted=twisted)


# -- oracles -----------------------------------------------------------------------------


def table_adjacency(topo):
    """Neighbour sets from the link table (directed rows)."""
    adj = [set() for _ in range(topo.num_nodes)]
    for s, d in zip(topo.links.src.tolist(), topo.links.dst.tolist(), strict=True):
        adj[s].add(d)
    return adj


def coord_ids(dims):
    """Chip id of coordinates, first axis fastest."""

    def cid(c):
        out, stride = 0, 1
        for x, k in zip(c, dims, strict=True):
            out += x * stride
            stride *= k
        return out

    return cid


def coord_adjacency(dims, wrap, twisted=False):
    """Neighbour sets written from the definition: +-1 per axis, wrapping (mod k) only on
    wrapped axes; in the twisted torus wrapping a short axis (size k) also shifts by k
    along the long axis (size 2k)."""
    cid = coord_ids(dims)
    long_axis = dims.index(2 * min(dims)) if twisted else None
    adj = {}
    for c in itertools.product(*(range(k) for k in dims)):
        nbrs = set()
        for axis, k in enumerate(dims):
            for step in (1, -1):
                n = list(c)
                n[axis] += step
                if 0 <= n[axis] < k:
                    pass
                elif not wrap[axis]:
                    continue
                else:
                    n[axis] %= k
                    if twisted and axis != long_axis:
                        n[long_axis] = (n[long_axis] + step * k) % dims[long_axis]
                if tuple(n) != c:
                    nbrs.add(cid(n))
        adj[cid(c)] = nbrs
    return [adj[i] for i in range(len(adj))]


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


def all_pairs(adj):
    return [bfs(adj, s) for s in range(len(adj))]


def closed_diameter(dims, wrap):
    return sum(k // 2 if w else k - 1 for k, w in zip(dims, wrap, strict=True))


def axis_mean(k, w):
    """Mean |distance| along one axis over all (including equal) coordinate pairs."""
    if w:
        return Fraction(k, 4) if k % 2 == 0 else Fraction(k, 4) - Fraction(1, 4 * k)
    return Fraction(k * k - 1, 3 * k)


def closed_mean(dims, wrap):
    n = math.prod(dims)
    if n == 1:
        return Fraction(0)
    total = sum(axis_mean(k, w) for k, w in zip(dims, wrap, strict=True))
    return total * n / (n - 1)


def closed_links(dims, wrap):
    n = math.prod(dims)
    return sum(n if (w and k >= 3) else (k - 1) * n // k for k, w in zip(dims, wrap, strict=True))


def closed_bisection(dims, wrap):
    n = math.prod(dims)
    cuts = [
        n // k * (2 if (w and k > 2) else 1) * BW for k, w in zip(dims, wrap, strict=True) if k >= 2
    ]
    return min(cuts, default=0.0)


shapes = (
    st.integers(1, 3)
    .flatmap(
        lambda n: st.tuples(
            st.lists(st.integers(1, 7), min_size=n, max_size=n),
            st.lists(st.booleans(), min_size=n, max_size=n),
        )
    )
    .filter(lambda s: math.prod(s[0]) <= 400)
)

FAST = settings(max_examples=40, deadline=None)


# -- link table --------------------------------------------------------------------------


@FAST
@given(shapes)
def test_link_table_matches_coordinate_definition(shape):
    dims, wrap = shape
    topo = make(dims, wrap)
    assert topo.num_chips == math.prod(dims)
    assert table_adjacency(topo) == coord_adjacency(dims, wrap)
    pairs = list(zip(topo.links.src.tolist(), topo.links.dst.tolist(), strict=True))
    assert len(set(pairs)) == len(pairs), "no duplicated directed link"
    assert set(pairs) == {(d, s) for s, d in pairs}, "every link exists in both directions"
    assert topo.num_links == closed_links(dims, wrap)
    assert topo.link_counts() == {"ici": closed_links(dims, wrap)}


@FAST
@given(shapes)
def test_every_link_has_constructor_bandwidth_and_latency(shape):
    dims, wrap = shape
    topo = make(dims, wrap)
    assert np.all(topo.links.bandwidth_Bps == BW)
    assert np.all(topo.links.latency_s == LAT)
    assert set(topo.links.kind_names) <= {"ici"}


@pytest.mark.parametrize("dims", [(8, 4), (4, 8), (4, 4, 8), (4, 8, 4), (8, 4, 4), (3, 6)])
def test_twisted_link_table_matches_definition(dims):
    topo = make(dims, twisted=True)
    assert table_adjacency(topo) == coord_adjacency(dims, [True] * len(dims), twisted=True)
    assert topo.num_links == len(dims) * topo.num_chips  # the twist does not change the count
    assert np.all(topo.links.bandwidth_Bps == BW) and np.all(topo.links.latency_s == LAT)


def test_degree_stats_of_mixed_shape():
    topo = make((4, 3, 2), (True, False, True))
    # x wraps (2 links each), y is a mesh of 3 (1 or 2), z of size 2 gives 1
    assert topo.degree_stats() == {"min": 4, "mean": pytest.approx(2 + 4 / 3 + 1), "max": 5}


# -- metrics against closed forms and BFS ------------------------------------------------


@FAST
@given(shapes)
def test_metrics_match_closed_forms(shape):
    dims, wrap = shape
    topo = make(dims, wrap)
    n = topo.num_chips
    hist = topo.hop_histogram()
    assert hist.sum() == n * (n - 1)
    assert topo.diameter_hops == closed_diameter(dims, wrap)
    assert topo.mean_hops == pytest.approx(float(closed_mean(dims, wrap)), rel=1e-12, abs=1e-12)


@FAST
@given(shapes.filter(lambda s: math.prod(s[0]) <= 160))
def test_metrics_match_bfs(shape):
    dims, wrap = shape
    topo = make(dims, wrap)
    dist = all_pairs(coord_adjacency(dims, wrap))
    assert trim(topo.hop_histogram()) == histogram(dist)
    for src in {0, topo.num_chips // 2, topo.num_chips - 1}:
        assert topo.hops_from(src).tolist() == dist[src]
        for dst in range(0, topo.num_chips, max(1, topo.num_chips // 7)):
            assert topo.hops(src, dst) == dist[src][dst]


@FAST
@given(shapes.filter(lambda s: all(k % 2 == 0 or k == 1 for k in s[0])))
def test_bisection_matches_closed_form_for_even_sizes(shape):
    dims, wrap = shape
    topo = make(dims, wrap)
    assert topo.bisection_bandwidth_Bps == pytest.approx(closed_bisection(dims, wrap))


def brute_force_bisection_links(adj):
    """Fewest links crossing any balanced split of the nodes (exhaustive, tiny graphs)."""
    n = len(adj)
    edges = {(min(u, v), max(u, v)) for u in range(n) for v in adj[u]}
    best = None
    for side in itertools.combinations(range(1, n), n // 2 - 1):
        left = {0, *side}
        cut = sum((u in left) != (v in left) for u, v in edges)
        best = cut if best is None else min(best, cut)
    return best


@pytest.mark.parametrize(
    "dims, wrap",
    [
        ((4, 4), (True, True)),
        ((4, 4), (False, False)),
        ((6, 2), (True, True)),
        ((2, 2, 2), (True, True, True)),
        ((4, 2), (True, False)),
        ((2, 6), (False, True)),
    ],
)
def test_bisection_is_the_true_minimum_balanced_cut(dims, wrap):
    topo = make(dims, wrap)
    links = brute_force_bisection_links(coord_adjacency(dims, wrap))
    assert topo.bisection_bandwidth_Bps == pytest.approx(links * BW)


ODD_SHAPES = [
    ((3, 2), (False, False)),
    ((5, 2), (False, False)),
    ((3, 4), (True, True)),
    ((5, 4), (True, True)),
]


@pytest.mark.parametrize("dims, wrap", ODD_SHAPES)
def test_bisection_cuts_are_balanced(dims, wrap):
    """base.Topology.bisection_cuts promises balanced cuts: each side holds half the chips
    (within one chip for an odd count)."""
    topo = make(dims, wrap)
    n = topo.num_chips
    for name, mask in topo.bisection_cuts():
        assert int(mask[:n].sum()) in (n // 2, (n + 1) // 2), name


@pytest.mark.parametrize("dims, wrap", ODD_SHAPES)
def test_bisection_with_odd_axis_is_not_below_true_minimum(dims, wrap):
    """A bisection bandwidth over balanced cuts can never undercut the true minimum
    balanced cut (computed exhaustively)."""
    topo = make(dims, wrap)
    links = brute_force_bisection_links(coord_adjacency(dims, wrap))
    assert topo.bisection_bandwidth_Bps >= links * BW - 1e-6


def test_google_8x8x16_pod():
    topo = make((8, 8, 16))
    assert topo.num_chips == 1024
    assert topo.diameter_hops == 16
    assert topo.num_links == 3072
    assert topo.bisection_bandwidth_Bps == pytest.approx(2 * 1024 / 16 * BW)


# -- routes --------------------------------------------------------------------------------


def check_route(topo, src, dst, dist):
    path = topo.route(src, dst)
    assert path[0] == src and path[-1] == dst
    ids = topo.link_ids(path)  # raises if a step is not a link
    assert np.array_equal(topo.links.src[ids], path[:-1])
    assert np.array_equal(topo.links.dst[ids], path[1:])
    assert len(path) - 1 == dist
    assert topo.hops(src, dst) == dist
    assert topo.route(src, dst) == path
    assert len(set(path)) == len(path), "a minimal route never revisits a chip"
    return path


def changed_axes(topo, path):
    coords = topo.coords(np.array(path))
    return [int(np.flatnonzero(b != a)[0]) for a, b in itertools.pairwise(coords)]


@FAST
@given(shapes.filter(lambda s: math.prod(s[0]) <= 400), st.data())
def test_routes_are_minimal_dimension_order_paths(shape, data):
    dims, wrap = shape
    topo = make(dims, wrap)
    adj = table_adjacency(topo)
    sources = data.draw(st.lists(st.integers(0, topo.num_chips - 1), min_size=1, max_size=3))
    for src in sources:
        dist = bfs(adj, src)
        for dst in range(topo.num_chips):
            path = check_route(topo, src, dst, dist[dst])
            axes = changed_axes(topo, path)
            assert axes == sorted(axes), f"route {path} is not in dimension order"
            coords = topo.coords(np.array(path))
            assert all(np.sum(a != b) == 1 for a, b in itertools.pairwise(coords))


def test_route_tie_goes_in_plus_direction():
    topo = make((6, 4))
    # x: 1 -> 4 is 3 either way; the + direction visits 2 then 3
    assert topo.route(1, 4) == [1, 2, 3, 4]
    # y: 0 -> 2 (stride 6) is 2 either way: + direction goes through y=1
    assert topo.route(0, 12) == [0, 6, 12]
    # no tie: 0 -> 5 on x goes the short way round
    assert topo.route(0, 5) == [0, 5]


def test_route_rejects_unknown_chip():
    topo = make((4, 4))
    with pytest.raises(ValueError, match="chip 16"):
        topo.route(0, 16)
    with pytest.raises(ValueError, match="chip -1"):
        topo.hops_from(-1)


def test_link_ids_rejects_non_links():
    topo = make((4, 4), (False, False))
    with pytest.raises(ValueError, match="does not exist"):
        topo.link_ids([0, 3])
    with pytest.raises(ValueError, match="does not exist"):
        topo.link_ids([0, 5])


# -- twisted tori ----------------------------------------------------------------------------

# (dims, twisted, diameter, average hops including self-pairs, links): formulas.md 3.2
PUBLISHED = [
    ((8, 4), False, 6, Fraction(3), 64),
    ((8, 4), True, 4, Fraction(2625, 1000), 64),
    ((16, 8), False, 12, Fraction(6), 256),
    ((16, 8), True, 8, Fraction(53125, 10000), 256),
    ((4, 4, 8), False, 8, Fraction(4), 384),
    ((4, 4, 8), True, 6, Fraction(34375, 10000), 384),
    ((8, 8, 16), False, 16, Fraction(8), 3072),
    ((8, 8, 16), True, 12, Fraction(696875, 100000), 3072),
]


def permutations_of(dims):
    return sorted(set(itertools.permutations(dims)))


@pytest.mark.parametrize(
    "dims, twisted, diameter, avg_with_self, links",
    [
        (perm, tw, diam, avg, links)
        for dims, tw, diam, avg, links in PUBLISHED
        for perm in permutations_of(dims)
    ],
)
def test_published_table(dims, twisted, diameter, avg_with_self, links):
    topo = make(dims, twisted=twisted)
    n = topo.num_chips
    assert topo.diameter_hops == diameter
    assert topo.num_links == links
    assert topo.mean_hops == pytest.approx(float(avg_with_self * n / (n - 1)), rel=1e-12)
    assert topo.hop_histogram().sum() == n * (n - 1)


@pytest.mark.parametrize(
    "dims", [(8, 4), (4, 8), (4, 4, 8), (4, 8, 4), (8, 4, 4), (3, 6), (6, 3), (3, 3, 6), (16, 8)]
)
def test_twisted_metrics_and_routes_match_bfs(dims):
    topo = make(dims, twisted=True)
    adj = coord_adjacency(dims, [True] * len(dims), twisted=True)
    dist = all_pairs(adj)
    assert trim(topo.hop_histogram()) == histogram(dist)
    assert topo.diameter_hops == max(max(row) for row in dist)
    n = topo.num_chips
    assert topo.mean_hops == pytest.approx(sum(map(sum, dist)) / (n * (n - 1)), rel=1e-12)
    step = max(1, n // 12)
    for src in range(0, n, step):
        assert topo.hops_from(src).tolist() == dist[src]
        for dst in range(n):
            check_route(topo, src, dst, dist[src][dst])


def test_twisted_8x8x16_routes_minimal_from_a_few_sources():
    dims = (8, 8, 16)
    topo = make(dims, twisted=True)
    adj = coord_adjacency(dims, [True] * 3, twisted=True)
    for src in (0, 7, 515, 1023):
        dist = bfs(adj, src)
        assert topo.hops_from(src).tolist() == dist
        for dst in range(0, 1024, 37):
            check_route(topo, src, dst, dist[dst])


def test_twist_shortens_diameter_of_rectangular_twisted_torus():
    # known RTT result: diameter a instead of 3a/2 for 2a x a
    for a in (4, 6, 8):
        assert make((2 * a, a), twisted=True).diameter_hops == a
        assert make((2 * a, a)).diameter_hops == 3 * a // 2


def test_twist_axes():
    assert twist_axes((8, 4)) == (0, [1])
    assert twist_axes((4, 8)) == (1, [0])
    assert twist_axes((4, 4, 8)) == (2, [0, 1])
    assert twist_axes((4, 8, 4)) == (1, [0, 2])
    assert twist_axes((8, 4, 4)) == (0, [1, 2])
    for dims in [
        (4, 4, 4),
        (8, 8, 8),
        (4, 8, 8),
        (16, 16, 24),
        (4, 2),
        (2, 2, 4),
        (8,),
        (4, 4, 4, 8),
        (4, 12),
        (4, 4, 16),
    ]:
        assert twist_axes(dims) is None, dims


@pytest.mark.parametrize(
    "dims, wrap",
    [
        ((4, 4, 4), (True, True, True)),
        ((4, 8, 8), (True, True, True)),
        ((4, 2), (True, True)),
        ((2, 2, 4), (True, True, True)),
        ((8,), (True,)),
        ((4, 4, 8), (True, True, False)),
        ((8, 4), (False, True)),
    ],
)
def test_twisting_needs_a_valid_shape_and_full_wraparound(dims, wrap):
    with pytest.raises(ValueError, match="twisted tori need"):
        Torus(dims, wrap, link_bandwidth_Bps=BW, hop_latency_s=LAT, twisted=True)


@pytest.mark.parametrize("dims, wrap", [((4, 0), (True, True)), ((4, 4), (True,))])
def test_invalid_dims_raise(dims, wrap):
    with pytest.raises(ValueError, match="dims must be >= 1"):
        Torus(dims, wrap, link_bandwidth_Bps=BW, hop_latency_s=LAT)


def test_twisted_bisection_cuts_long_axis_links():
    # k x k x 2k twisted: every cut is across the links of one axis; the twisted wrap of
    # a short axis still crosses the half-cut along the long axis, so compute it here.
    dims = (4, 4, 8)
    topo = make(dims, twisted=True)
    adj = coord_adjacency(dims, [True] * 3, twisted=True)
    cid = coord_ids(dims)
    best = math.inf
    for axis, k in enumerate(dims):
        left = {cid(c) for c in itertools.product(*(range(d) for d in dims)) if c[axis] < k // 2}
        crossing = sum(1 for u in left for v in adj[u] if v not in left)
        best = min(best, crossing)
    assert topo.bisection_bandwidth_Bps == pytest.approx(best * BW)


def test_twisting_messages_name_the_allowed_shapes_and_wraparound():
    with pytest.raises(ValueError, match=r"k x k x 2k or 2k x k shape with k >= 3 \(got 4x4x4\)"):
        make((4, 4, 4), twisted=True)
    with pytest.raises(ValueError, match="twisted tori need wraparound on every axis"):
        make((4, 4, 8), (True, False, True), twisted=True)


# -- capabilities the collectives, the network and the plots use --------------------------


@pytest.mark.parametrize(
    "dims, wrap, kinds",
    [
        ((4, 3, 2), (True, True, True), ["ring", "ring", "line"]),  # a size-2 axis gains no link
        ((5, 4), (False, True), ["line", "ring"]),
        ((6,), (True,), ["ring"]),
    ],
)
def test_axis_structure_is_chips_by_coordinates(dims, wrap, kinds):
    topo = make(dims, wrap)
    chips, axes = topo.axis_structure()
    assert chips.shape == dims
    for coord in itertools.product(*(range(d) for d in dims)):
        assert chips[coord] == coord_ids(dims)(coord)
    assert [(a.name, a.size, a.kind) for a in axes] == [
        ("xyz"[i], d, k) for i, (d, k) in enumerate(zip(dims, kinds, strict=True))
    ]


def test_plot_layout_is_x_by_y_mean_over_z():
    topo = make((3, 2, 4))
    layout = topo.plot_layout()
    assert layout.shape == (2, 3)
    assert "mean over z" in layout.title and "3x2x4 torus" in layout.title
    c = topo.coords(np.arange(topo.num_chips))
    grid = layout.grid(c[:, 2].astype(float))  # each cell averages z = 0..3
    assert grid.tolist() == [[1.5] * 3] * 2
    assert layout.grid(np.arange(24.0))[1, 2] == np.mean([2 + 3 + 6 * z for z in range(4)])
    line = make((5,)).plot_layout()
    assert line.shape == (1, 5) and line.row.tolist() == [0] * 5


@pytest.mark.parametrize(
    "dims, src, dst, first_axes",
    [
        ((4, 5, 3), (0, 0, 0), (2, 3, 1), [0, 1, 2]),
        ((4, 5, 3), (1, 0, 2), (1, 2, 0), [1, 2]),
        ((4, 5), (1, 1), (3, 1), [0]),
        ((4, 5), (1, 1), (1, 1), [None]),
    ],
)
def test_port_routes_leave_by_one_moving_axis_each(dims, src, dst, first_axes):
    topo = make(dims, [False] * len(dims))
    s, d = (int(topo.chip_at(np.array(c))) for c in (src, dst))
    routes = topo.port_routes(s, d)
    assert topo.has_port_routes and len(routes) == len(first_axes)
    for route, axis in zip(routes, first_axes, strict=True):
        assert route[0] == s and route[-1] == d
        assert len(route) - 1 == topo.hops(s, d)  # every one is minimal
        if axis is not None:
            moved = topo.coords(route[1]) - topo.coords(s)
            assert np.flatnonzero(moved).tolist() == [axis]
    assert routes[0] == topo.route(s, d)


def test_twisted_port_routes_repeat_the_one_minimal_route():
    topo = make((3, 3, 6), twisted=True)
    routes = topo.port_routes(0, 40)
    assert len(routes) == len(topo.moving_axes(0, 40)) >= 2
    assert all(r == topo.route(0, 40) for r in routes)
