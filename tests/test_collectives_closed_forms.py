"""Collectives on uncontended (or exactly predictable) patterns against alpha-beta
closed forms written here, for every network fidelity.

W is the one-direction link bandwidth (bytes/s), a the per-hop latency (s), V the
nccl-tests size of the collective, n the chips taking part. The on-chip model is
switched off (``OnChipModel.none()``) so only the network is measured.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import collective

from tpusim.collectives.base import ring_order
from tpusim.collectives.offload import OnChipModel
from tpusim.engine import CollectiveOptions, Placement, RunSettings, Simulation
from tpusim.network import NETWORKS, NetworkSettings
from tpusim.program import Op, Program
from tpusim.topology import Torus

W = 45e9  # bytes/s, one direction
A = 1e-6  # s per hop
MiB = 2**20
REL = 0.01
# Multi-hop flows in the packet model pay (hops - 1) * packet / W on top of the
# cut-through time; small packets keep that well under the 1% budget.
SMALL_PACKET = 4096


def ring(n: int, wrap: bool = True) -> Torus:
    return Torus((n,), (wrap,), link_bandwidth_Bps=W, hop_latency_s=A)


def run(topo, op, size, fidelity, **kw):
    kw.setdefault("onchip", OnChipModel.none())
    result, network = collective(topo, op, size, fidelity=fidelity, **kw)
    return result, network


def ring_distance(i: int, j: int, n: int) -> int:
    d = (j - i) % n
    return min(d, n - d)


# -- ring and bidirectional ring on a wrapped ring ---------------------------------------------


@pytest.mark.parametrize("fidelity", NETWORKS.names())
@pytest.mark.parametrize("n", [4, 5, 8])
@pytest.mark.parametrize("op", ["all-gather", "reduce-scatter", "all-reduce"])
def test_unidirectional_ring_on_wrapped_ring(fidelity, n, op):
    V = 8 * MiB
    result, _ = run(ring(n), op, V, fidelity, algorithm="ring")
    phases = 2 if op == "all-reduce" else 1
    expected = phases * (n - 1) * (A + V / (n * W))
    assert result.algorithm == "ring"
    assert result.time_s == pytest.approx(expected, rel=REL)
    assert result.num_steps == phases * (n - 1)
    assert result.max_hops == 1


@pytest.mark.parametrize("fidelity", NETWORKS.names())
@pytest.mark.parametrize("n", [4, 5, 8])
@pytest.mark.parametrize("op", ["all-gather", "reduce-scatter", "all-reduce"])
def test_bidirectional_ring_on_wrapped_ring(fidelity, n, op):
    V = 16 * MiB
    result, _ = run(ring(n), op, V, fidelity, algorithm="bidir-ring")
    phases = 2 if op == "all-reduce" else 1
    # ceil((n-1)/2) steps: each shard goes the shorter way round (antipodal: half each way)
    steps = (n - 1 + 1) // 2
    expected = phases * (steps * A + (n - 1) * V / (2 * n * W))
    assert result.time_s == pytest.approx(expected, rel=REL)
    assert result.num_steps == phases * steps


@pytest.mark.parametrize("fidelity", NETWORKS.names())
def test_bidirectional_ring_is_faster_than_unidirectional_on_bandwidth(fidelity):
    V, n = 16 * MiB, 8
    uni, _ = run(ring(n), "all-reduce", V, fidelity, algorithm="ring")
    bi, _ = run(ring(n), "all-reduce", V, fidelity, algorithm="bidir-ring")
    # bandwidth term halves; the latency steps drop from n - 1 to ceil((n-1)/2) per phase
    assert bi.time_s - 2 * 4 * A == pytest.approx((uni.time_s - 2 * (n - 1) * A) / 2, rel=REL)


# -- ring on a line: the folded ring order -----------------------------------------------------


def folded_step_hops(n: int) -> int:
    """Worst hop count of one ring step in the folded order, derived from ring_order."""
    order = ring_order(n, "line")
    assert sorted(order.tolist()) == list(range(n))
    return int(np.abs(order - np.roll(order, -1)).max())


def folded_links_are_disjoint(n: int) -> bool:
    """Every directed line link used by at most one flow of a ring step."""
    order = ring_order(n, "line").tolist()
    used = []
    for s, d in zip(order, order[1:] + order[:1], strict=True):
        step = 1 if d > s else -1
        used += [(p, p + step) for p in range(s, d, step)]
    return len(used) == len(set(used))


@pytest.mark.parametrize("n", [4, 5, 8])
def test_folded_ring_order_has_two_hop_steps_and_disjoint_links(n):
    assert folded_step_hops(n) == 2
    assert folded_links_are_disjoint(n)


@pytest.mark.parametrize("fidelity", NETWORKS.names())
@pytest.mark.parametrize("n", [4, 5, 8])
@pytest.mark.parametrize("op", ["all-gather", "reduce-scatter", "all-reduce"])
def test_ring_on_line_uses_folded_order(fidelity, n, op):
    V = 8 * MiB
    result, _ = run(
        ring(n, wrap=False), op, V, fidelity, algorithm="ring", packet_bytes=SMALL_PACKET
    )
    phases = 2 if op == "all-reduce" else 1
    expected = phases * (n - 1) * (folded_step_hops(n) * A + V / (n * W))
    assert result.time_s == pytest.approx(expected, rel=REL)
    assert result.max_hops == 2


# -- all-to-all on a wrapped ring --------------------------------------------------------------


def dor_ring_route(src: int, dst: int, n: int) -> list[tuple[int, int]]:
    """Directed links of the shorter way round a wrapped ring (a tie goes +)."""
    fwd = (dst - src) % n
    steps = fwd if fwd <= n - fwd else fwd - n
    sign = 1 if steps > 0 else -1
    out, here = [], src
    for _ in range(abs(steps)):
        nxt = (here + sign) % n
        out.append((here, nxt))
        here = nxt
    return out


def direct_alltoall_expectation(n: int, V: float) -> tuple[float, float]:
    """(flow time, analytic time) of a direct all-to-all on a wrapped ring of n."""
    chunk = V / n
    load: dict[tuple[int, int], float] = {}
    routes = {}
    for s in range(n):
        for d in range(n):
            if s != d:
                routes[s, d] = dor_ring_route(s, d, n)
                for link in routes[s, d]:
                    load[link] = load.get(link, 0.0) + chunk
    max_load = max(load.values())
    # equal-size flows: those crossing a busiest link drain last, at max_load / W;
    # of those, the longest route arrives last
    hot = {link for link, b in load.items() if b == max_load}
    last_hops = max(len(r) for r in routes.values() if hot & set(r))
    flow = max_load / W + last_hops * A
    # analytic: the larger of the longest flow alone and the busiest link plus the
    # shortest route through a busiest link
    alone = chunk / W + max(len(r) for r in routes.values()) * A
    analytic = max(alone, max_load / W + last_hops * A)
    return flow, analytic


@pytest.mark.parametrize("n", [4, 5, 8])
def test_direct_alltoall_on_wrapped_ring_flow_is_max_link_load(n):
    V = 8 * MiB
    flow_expected, analytic_expected = direct_alltoall_expectation(n, V)
    flow, net = run(ring(n), "all-to-all", V, "flow", algorithm="direct")
    assert flow.time_s == pytest.approx(flow_expected, rel=REL)
    # the busiest link carried exactly the load derived from the routes
    assert net.link_bytes.max() == pytest.approx(
        max(
            sum(
                V / n
                for s in range(n)
                for d in range(n)
                if s != d and link in dor_ring_route(s, d, n)
            )
            for link in [(i, (i + 1) % n) for i in range(n)]
        ),
        rel=1e-12,
    )
    analytic, _ = run(ring(n), "all-to-all", V, "analytic", algorithm="direct")
    assert analytic.time_s == pytest.approx(analytic_expected, rel=REL)
    # the analytic bound sees the busiest link: a lower bound within 10% of flow
    assert 0.9 * flow.time_s <= analytic.time_s <= flow.time_s * (1 + 1e-12)


def test_direct_alltoall_hand_values_on_ring_of_8():
    """Spelled out: on 8 chips the + links carry 1+2+3+4 = 10 chunks (ties go +)."""
    V, n = 8 * MiB, 8
    flow, _ = run(ring(n), "all-to-all", V, "flow", algorithm="direct")
    assert flow.time_s == pytest.approx(10 * V / (n * W) + 4 * A, rel=REL)


@pytest.mark.parametrize("n", [4, 8])
def test_direct_alltoall_packet_matches_flow(n):
    V = 8 * MiB
    flow, _ = run(ring(n), "all-to-all", V, "flow", algorithm="direct")
    packet, _ = run(ring(n), "all-to-all", V, "packet", algorithm="direct", packet_bytes=16384)
    assert packet.time_s == pytest.approx(flow.time_s, rel=REL)


@pytest.mark.parametrize("fidelity", NETWORKS.names())
@pytest.mark.parametrize("n", [4, 5, 8])
def test_relay_alltoall_on_wrapped_ring(fidelity, n):
    V = 8 * MiB
    result, _ = run(ring(n), "all-to-all", V, fidelity, algorithm="ring")
    expected = sum(A + (n - k) * V / (n * W) for k in range(1, n))
    assert result.time_s == pytest.approx(expected, rel=REL)


# -- point to point across a mesh --------------------------------------------------------------


@pytest.mark.parametrize("fidelity", NETWORKS.names())
@pytest.mark.parametrize(
    "dims,src_coord,dst_coord",
    [
        ((4, 5), (0, 0), (3, 4)),
        ((4, 5), (1, 2), (1, 4)),  # one moving axis: one port
        ((3, 4, 5), (0, 0, 0), (2, 3, 4)),
        ((3, 4, 5), (2, 0, 1), (0, 3, 1)),  # two moving axes out of three
    ],
)
def test_point_to_point_splits_over_moving_axes(fidelity, dims, src_coord, dst_coord):
    V = 16 * MiB
    topo = Torus(dims, (False,) * len(dims), link_bandwidth_Bps=W, hop_latency_s=A)
    src, dst = (int(topo.chip_at(np.array(c))) for c in (src_coord, dst_coord))
    hops = sum(abs(s - d) for s, d in zip(src_coord, dst_coord, strict=True))
    m = sum(s != d for s, d in zip(src_coord, dst_coord, strict=True))
    result, net = run(
        topo,
        "collective-permute",
        V,
        fidelity,
        algorithm="direct",
        pairs=[(src, dst)],
        packet_bytes=SMALL_PACKET,
    )
    assert result.time_s == pytest.approx(hops * A + V / (m * W), rel=REL)
    assert result.max_hops == hops
    # m disjoint routes of V/m: hops * V bytes cross links in all
    assert net.link_bytes.sum() == pytest.approx(hops * V, rel=1e-12)
    assert net.link_bytes.max() == pytest.approx(V / m, rel=1e-12)


# -- multi-axis torus algorithm ----------------------------------------------------------------


def torus_split_allgather(k: int, V: float) -> float:
    """2-D k x k wrapped torus, all-gather split in 2 parts of V/2: each part gathers
    along one axis (a bidirectional ring: ceil((k-1)/2) steps, each direction of a
    link carrying (k-1)/2 shards) then the other, the two parts on different axes at
    every moment."""
    N = k * k
    part = V / 2
    shard = part / N  # what each chip holds of its part at the start
    steps = k // 2  # ceil((k-1)/2)
    first = steps * A + (k - 1) * shard / 2 / W
    second = steps * A + (k - 1) * k * shard / 2 / W
    return first + second


@pytest.mark.parametrize("fidelity", NETWORKS.names())
def test_torus_allgather_on_2d_torus_uses_both_axes(fidelity):
    k, V = 4, 16 * MiB
    topo = Torus((k, k), (True, True), link_bandwidth_Bps=W, hop_latency_s=A)
    result, _ = run(topo, "all-gather", V, fidelity, algorithm="torus")
    expected = torus_split_allgather(k, V)
    assert result.time_s == pytest.approx(expected, rel=REL)
    # bandwidth term = (N-1)/N * V / (2W * n_axes) (formulas.md 1.4 with the exact factor)
    N = k * k
    assert expected - 2 * (k // 2) * A == pytest.approx((N - 1) / N * V / (2 * W * 2), rel=1e-12)


@pytest.mark.parametrize("fidelity", NETWORKS.names())
def test_torus_allreduce_on_2d_torus(fidelity):
    """All-reduce = reduce-scatter (same cost as the all-gather) + all-gather."""
    k, V = 4, 16 * MiB
    topo = Torus((k, k), (True, True), link_bandwidth_Bps=W, hop_latency_s=A)
    result, _ = run(topo, "all-reduce", V, fidelity, algorithm="torus")
    assert result.time_s == pytest.approx(2 * torus_split_allgather(k, V), rel=REL)


@pytest.mark.parametrize("fidelity", NETWORKS.names())
def test_explicit_groups_of_whole_axes_run_the_torus_algorithm(fidelity):
    """Replica groups that list every chip of a 4 x 4 torus (column-major, as a device
    mesh may order them; an HLO module's groups) are the torus's two axes: the split
    all-gather over both, as XLA's TPU emitters run it, not a ring over a flat list."""
    k, V = 4, 16 * MiB
    topo = Torus((k, k), (True, True), link_bandwidth_Bps=W, hop_latency_s=A)
    chips = tuple(int(c) for c in np.arange(k * k).reshape(k, k).T.ravel())
    op = Op("ag", "collective", collective="all-gather", size_bytes=V, groups=(chips,))
    settings = RunSettings(NetworkSettings.of(fidelity))
    placement = Placement(topo, None, whole_axes=True)  # as a compiled module's replay asks
    sim = Simulation(
        None,
        Program("p", (op,)),
        settings,
        onchip=OnChipModel.none(),
        topology=topo,
        placement=placement,
    )
    result = sim.run()
    assert result.step_time_s == pytest.approx(torus_split_allgather(k, V), rel=REL)
    rows = tuple(tuple(range(r * k, (r + 1) * k)) for r in range(k))  # one axis: 4 groups
    assert sim.placement.axes_group(np.array(rows)) is not None
    assert sim.placement.axes_group(np.array([[0, 1], [2, 3]])) is None  # no whole axis
    flat = Simulation(None, Program("p", (op,)), settings, onchip=OnChipModel.none(), topology=topo)
    assert flat.run().step_time_s > 1.5 * result.step_time_s  # by default: a ring of 16


# -- halving-doubling on a wrapped ring of 8 (analytic: no contention) -------------------------


@pytest.mark.parametrize(
    "op,phases", [("all-reduce", ("halving", "doubling")), ("reduce-scatter", ("halving",))]
)
def test_halving_doubling_analytic_sum_over_steps(op, phases):
    n, V = 8, 8 * MiB
    levels = 3
    total = 0.0
    if "halving" in phases:
        for k in range(levels):
            pairs = [(i, i ^ (n >> (k + 1))) for i in range(n)]
            total += analytic_step_time(pairs, n, V / 2 ** (k + 1))
    if "doubling" in phases:
        for k in range(levels):
            pairs = [(i, i ^ (1 << k)) for i in range(n)]
            total += analytic_step_time(pairs, n, V * (1 << k) / n)
    result, _ = run(ring(n), op, V, "analytic", algorithm="halving-doubling")
    assert result.time_s == pytest.approx(total, rel=REL)
    assert result.max_hops == 4


def analytic_step_time(pairs: list[tuple[int, int]], n: int, chunk: float) -> float:
    """The analytic fidelity's step on a wrapped ring: the longest flow alone, or the
    busiest link's flows one after the other plus the longest route through it."""
    routes = [dor_ring_route(s, d, n) for s, d in pairs]
    count: dict[tuple[int, int], int] = {}
    for r in routes:
        for link in r:
            count[link] = count.get(link, 0) + 1
    worst = max(count.values())
    hot = {link for link, c in count.items() if c == worst}
    alone = chunk / W + max(len(r) for r in routes) * A
    return max(alone, worst * chunk / W + max(len(r) for r in routes if hot & set(r)) * A)


def test_halving_doubling_allgather_analytic():
    n, V = 8, 8 * MiB
    total = sum(
        analytic_step_time([(i, i ^ (1 << k)) for i in range(n)], n, V * (1 << k) / n)
        for k in range(3)
    )
    result, _ = run(ring(n), "all-gather", V, "analytic", algorithm="halving-doubling")
    assert result.time_s == pytest.approx(total, rel=REL)


def equal_flows_step_time(pairs: list[tuple[int, int]], n: int, chunk: float) -> float:
    """Max-min time of equal flows on a wrapped ring: the busiest link's flows drain
    last, at load / W; the longest of them then pays its path latency."""
    routes = [dor_ring_route(s, d, n) for s, d in pairs]
    count: dict[tuple[int, int], int] = {}
    for r in routes:
        for link in r:
            count[link] = count.get(link, 0) + 1
    worst = max(count.values())
    hot = {link for link, c in count.items() if c == worst}
    return worst * chunk / W + max(len(r) for r in routes if hot & set(r)) * A


def test_halving_doubling_flow_sees_partner_contention():
    """Far partners share ring links: with the exchanges at distance 4 every + link
    carries 4 flows. The flow fidelity gives the exact max-min sum over steps."""
    n, V = 8, 8 * MiB
    total = 0.0
    for k in range(3):  # halving: distance n/2, n/4, ... with V/2, V/4, ...
        pairs = [(i, i ^ (n >> (k + 1))) for i in range(n)]
        total += equal_flows_step_time(pairs, n, V / 2 ** (k + 1))
    for k in range(3):  # doubling: distance 1, 2, 4 with V/8, V/4, V/2
        pairs = [(i, i ^ (1 << k)) for i in range(n)]
        total += equal_flows_step_time(pairs, n, V * (1 << k) / n)
    flow, _ = run(ring(n), "all-reduce", V, "flow", algorithm="halving-doubling")
    analytic, _ = run(ring(n), "all-reduce", V, "analytic", algorithm="halving-doubling")
    assert flow.time_s == pytest.approx(total, rel=REL)
    # partners at one distance have equal routes: the busiest-link bound is exact here
    assert analytic.time_s == pytest.approx(total, rel=REL)


def test_one_boardfly_level_defaults_to_direct_exchange():
    """An all-reduce over the ``group`` axis of a 1,024-chip Boardfly (32 groups, one
    global link per group pair): the 32 chips of a group run 32 parallel all-reduces
    that all cross the same global links. Direct reduce-scatter + all-gather puts
    32 x V/32 = V bytes on each global link per phase: 2 V / W in all. (A ring would
    put all 32 chips' steps on one link: ~15x that.)"""
    from tpusim.collectives import default_algorithm, make_group
    from tpusim.config import load_system
    from tpusim.engine import simulate_collective
    from tpusim.topology import build_topology

    system = load_system("tpu8i-1024")
    group = make_group(build_topology(system), ["group"])
    assert default_algorithm("all-reduce", group) == "hierarchical"
    V, W = 352e6, system.link_bandwidth_Bps
    result, _ = simulate_collective(
        system, "all-reduce", V, CollectiveOptions(axes=["group"], engine="none")
    )
    assert 2 * V / W <= result.time_s <= 1.1 * 2 * V / W
    hierarchical, _ = simulate_collective(
        system,
        "all-reduce",
        V,
        CollectiveOptions(axes=["group"], engine="none", algorithm="hierarchical"),
    )
    assert result.time_s <= hierarchical.time_s * (1 + 1e-9)  # auto is at least as fast
