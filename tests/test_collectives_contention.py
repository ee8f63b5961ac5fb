"""Contended patterns: flow fidelity against packet fidelity and hand-computed
max-min answers, exact event times of the flow network, and properties over
random small tori (conservation, capacity, ordering, determinism)."""

from __future__ import annotations

import numpy as np
import pytest
import simpy
from helpers import collective
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tpusim.collectives import AlgorithmError, build_schedule, make_group
from tpusim.collectives.offload import OnChipModel
from tpusim.engine import CollectiveOptions, run_collective
from tpusim.network import NETWORKS, FlowNetwork, NetworkSettings, make_network, max_min_rates
from tpusim.network.base import FlowBatch
from tpusim.network.routes import RouteCache
from tpusim.topology import Boardfly, Torus

W = 45e9
A = 1e-6
MiB = 2**20
NONE = OnChipModel.none()


def line(n: int = 4) -> Torus:
    return Torus((n,), (False,), link_bandwidth_Bps=W, hop_latency_s=A)


def finish_times(
    fidelity: str,
    topo,
    sends: list[tuple[float, FlowBatch]],
    packet_bytes: float = 4096,
    check_capacity: bool = False,
):
    """Send each batch at its start time (from inside SimPy processes, as collectives
    do); return (finish time of each batch, network)."""
    env = simpy.Environment()
    kwargs = {"packet_bytes": packet_bytes} if fidelity == "packet" else {}
    if fidelity == "flow":
        kwargs = {"check_capacity": check_capacity}
    net = make_network(NetworkSettings.of(fidelity, **kwargs), env, topo)
    done: dict[int, float] = {}

    def sender(i: int, start: float, batch: FlowBatch):
        if start > 0:
            yield env.timeout(start)
        else:
            yield env.timeout(0)
        yield net.send(batch)
        done[i] = env.now

    for i, (start, batch) in enumerate(sends):
        env.process(sender(i, start, batch))
    env.run()
    return [done[i] for i in range(len(sends))], net


def batch(topo, pairs, sizes) -> FlowBatch:
    src, dst = zip(*pairs, strict=True)
    return RouteCache(topo).batch(np.array(src), np.array(dst), np.array(sizes, dtype=float))


# -- tier 1: exact event times of the flow network ----------------------------------------------


def test_one_flow_on_one_link():
    (t,), _ = finish_times("flow", line(), [(0.0, batch(line(), [(0, 1)], [1e6]))])
    assert t == pytest.approx(A + 1e6 / W, rel=1e-12)


def test_two_equal_flows_share_one_link_in_one_batch():
    topo = line()
    (t,), _ = finish_times("flow", topo, [(0.0, batch(topo, [(0, 1), (0, 1)], [1e6, 1e6]))])
    assert t == pytest.approx(A + 2e6 / W, rel=1e-12)


def test_two_equal_flows_share_one_link_in_two_batches():
    topo = line()
    sends = [(0.0, batch(topo, [(0, 1)], [1e6])), (0.0, batch(topo, [(0, 1)], [1e6]))]
    times, _ = finish_times("flow", topo, sends)
    assert times == pytest.approx([A + 2e6 / W] * 2, rel=1e-12)


def test_small_and_large_flow_share_one_link():
    """1 MB and 3 MB at W/2 each: the small one drains at 2 MB / W, then the large
    one has 2 MB left at full rate."""
    topo = line()
    sends = [(0.0, batch(topo, [(0, 1)], [1e6])), (0.0, batch(topo, [(0, 1)], [3e6]))]
    times, _ = finish_times("flow", topo, sends)
    assert times[0] == pytest.approx(A + 2e6 / W, rel=1e-12)
    assert times[1] == pytest.approx(A + 4e6 / W, rel=1e-12)


def test_max_min_rates_hand_example():
    """Links L0 (10), L1 (9), L2 (2); flows f0: L0, f1: L0+L1, f2: L1, f3: L1+L2.

    Progressive filling: level 2 saturates L2 (f3 = 2); L1 then has 9 - 6 = 3 left for
    f1, f2: +1.5 each saturates it (f1 = f2 = 3.5); L0 has 10 - 7 = 3 left for f0: 6.5.
    """
    inc_flow = np.array([0, 1, 1, 2, 3, 3])
    inc_link = np.array([0, 0, 1, 1, 1, 2])
    capacity = np.array([10.0, 9.0, 2.0])
    rates = max_min_rates(inc_flow, inc_link, capacity, 4)
    assert rates == pytest.approx([6.5, 3.5, 3.5, 2.0], rel=1e-12)
    load = np.bincount(inc_link, weights=rates[inc_flow], minlength=3)
    assert load == pytest.approx(capacity, rel=1e-12)


def test_max_min_rates_unequal_capacities_single_bottleneck():
    """Two flows on a 4-unit link, one of them also on a 1-unit link: 1 and 3."""
    rates = max_min_rates(np.array([0, 0, 1]), np.array([0, 1, 0]), np.array([4.0, 1.0]), 2)
    assert rates == pytest.approx([1.0, 3.0], rel=1e-12)


def _random_incidence(rnd: np.random.Generator):
    num_links, num_flows = int(rnd.integers(2, 30)), int(rnd.integers(1, 150))
    capacity = rnd.uniform(1.0, 10.0, num_links)
    inc_flow, inc_link = [], []
    for f in range(num_flows):
        route = rnd.choice(num_links, int(rnd.integers(1, min(num_links, 6) + 1)), replace=False)
        inc_flow += [f] * route.size
        inc_link += list(route)
    return np.array(inc_flow), np.array(inc_link), capacity, num_flows


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_max_min_rates_have_a_bottleneck_certificate(seed):
    """The defining property of max-min fairness, checked without the algorithm: no
    link is over capacity, and every flow crosses a full link on which no flow is
    faster. With a tolerance, every flow crosses a link at least (1 - tol) full."""
    inc_flow, inc_link, capacity, n = _random_incidence(np.random.default_rng(seed))
    for tol in (0.0, 0.01):
        rates = max_min_rates(inc_flow, inc_link, capacity, n, tol)
        load = np.bincount(inc_link, weights=rates[inc_flow], minlength=capacity.size)
        assert (load <= capacity * (1 + 1e-9)).all()
        fastest = np.zeros(capacity.size)
        np.maximum.at(fastest, inc_link, rates[inc_flow])
        full = load >= capacity * (1 - tol - 1e-9)
        on_full = full[inc_link]
        if tol == 0.0:
            on_full &= rates[inc_flow] >= fastest[inc_link] * (1 - 1e-9)
        assert np.bincount(inc_flow, weights=on_full, minlength=n).min() >= 1


def test_rate_tolerance_on_boardfly_alltoall_matches_exact():
    """Direct all-to-all on a 128-chip Boardfly has many distinct max-min rates; solved
    to 1% (the default) it finishes within 1% of the exact solve, in fewer events."""
    topo = Boardfly(4, 8, 4, link_bandwidth_Bps=W, hop_latency_s=A)
    chips = np.arange(topo.num_chips)
    src, dst = (a.ravel() for a in np.meshgrid(chips, chips, indexing="ij"))
    keep = src != dst
    work = RouteCache(topo).batch(src[keep], dst[keep], np.full(keep.sum(), 1.0 * MiB))
    times, events = {}, {}
    for tol in (0.0, 0.01):
        env = simpy.Environment()
        net = FlowNetwork(env, topo, rate_tolerance=tol, merge_tolerance=0.0)
        done = net.send(work)
        env.run(until=done)
        times[tol], events[tol] = env.now, net.num_events
    assert times[0.01] == pytest.approx(times[0.0], rel=0.01)
    assert events[0.01] < events[0.0]


def test_flow_send_before_environment_runs():
    """Sending on a fresh network before env.run() is how the brief's network API is
    used. BUG: FlowNetwork._run resets ``_rates_stale`` to False when its process first
    runs, after this send has set it, so the rates stay 0 and the batch never finishes
    (``env.run(until=event)`` spins forever; here bounded to 1 s)."""
    topo = line()
    env = simpy.Environment()
    net = make_network(NetworkSettings(), env, topo)
    event = net.send(batch(topo, [(0, 1)], [1e6]))
    env.run(until=1.0)
    assert event.processed, "batch sent at t=0 before env.run never completes"


# -- two collectives sharing links: flow exact, packet close --------------------------------------


def two_batches_sharing_a_link(topo):
    """0 -> 2 and 1 -> 3 on a line of 4 both cross link 1 -> 2."""
    return batch(topo, [(0, 2)], [1e6]), batch(topo, [(1, 3)], [1e6])


@pytest.mark.parametrize("fidelity", ["flow", "packet"])
def test_two_batches_share_a_middle_link(fidelity):
    """Max-min: W/2 each on 1 -> 2, both batches finish together. Was a bug (packet):
    later links were FIFO queues, so 0 -> 2 (whose first link is free) flooded link
    1 -> 2; links now serve flows round robin."""
    topo = line()
    b1, b2 = two_batches_sharing_a_link(topo)
    times, _ = finish_times(fidelity, topo, [(0.0, b1), (0.0, b2)])
    expected = 2e6 / W + 2 * A  # each gets W/2 on link 1 -> 2, then two hops of latency
    rel = 1e-12 if fidelity == "flow" else 0.05
    assert times == pytest.approx([expected, expected], rel=rel)


@pytest.mark.parametrize("fidelity", ["flow", "packet"])
def test_flow_that_starts_later(fidelity):
    """A (1 MB) alone until B (1 MB) starts at t0 = 0.5 MB / W; they share W/2 until A
    drains at t0 + 1 MB / W; then B has 0.5 MB left at full rate."""
    topo = line()
    t0 = 0.5e6 / W
    sends = [(0.0, batch(topo, [(0, 1)], [1e6])), (t0, batch(topo, [(0, 1)], [1e6]))]
    times, _ = finish_times(fidelity, topo, sends)
    expected = [t0 + 1e6 / W + A, t0 + 1.5e6 / W + A]
    rel = 1e-12 if fidelity == "flow" else 0.05
    assert times == pytest.approx(expected, rel=rel)


@pytest.mark.parametrize("fidelity", ["flow", "packet"])
def test_bottleneck_elsewhere_frees_capacity(fidelity):
    """Max-min with a second bottleneck: on a line of 4, X = 0 -> 3 (1 MB), Y = 1 -> 2
    (1 MB), Z1, Z2 = 2 -> 3 (1 MB each). Link 2 -> 3 has X, Z1, Z2: W/3 each; link
    1 -> 2 has X and Y: Y gets 2W/3. Y drains at 1.5 MB / W; then nothing changes for
    the others, which drain at 3 MB / W. Was a bug (packet): X got about W, not W/3
    (fixed: packets now keep a credit window of one bandwidth-delay product). Flows of
    8 MB, so the packet network's start-up transient (about one bandwidth-delay
    product, ~3 us) is small next to the transfer, as it is for collectives."""
    mb = 8e6
    topo = line()
    sends = [
        (0.0, batch(topo, [(0, 3)], [mb])),
        (0.0, batch(topo, [(1, 2)], [mb])),
        (0.0, batch(topo, [(2, 3), (2, 3)], [mb, mb])),
    ]
    times, _ = finish_times(fidelity, topo, sends)
    expected = [3 * mb / W + 3 * A, 1.5 * mb / W + A, 3 * mb / W + A]
    rel = 1e-12 if fidelity == "flow" else 0.05
    assert times == pytest.approx(expected, rel=rel)


def test_two_ring_allgathers_sharing_links_on_a_torus():
    """Two collectives at once on a 4x4 torus: a ring step along x in every row and a
    ring step along x in every row again (a second collective on the same axis): every
    x link carries two equal flows, so the step takes twice as long; packet agrees."""
    topo = Torus((4, 4), (True, True), link_bandwidth_Bps=W, hop_latency_s=A)
    group = make_group(topo, axes=["x"])
    step = build_schedule("all-gather", 4 * MiB, group, "ring").pipelines[0][0]
    routes = RouteCache(topo)
    b = routes.batch(step.src, step.dst, step.bytes)
    chunk = float(step.bytes[0])
    flow, _ = finish_times("flow", topo, [(0.0, b), (0.0, b)])
    assert flow == pytest.approx([2 * chunk / W + A] * 2, rel=1e-12)
    packet, _ = finish_times("packet", topo, [(0.0, b), (0.0, b)], packet_bytes=16384)
    assert packet == pytest.approx(flow, rel=0.05)


def test_link_disjoint_traffic_keeps_its_rates_when_another_component_changes():
    """Row 0 (x links of row 0) and row 2 carry independent contention: row 0 has two
    flows sharing link 0->1 (one of them starts later), row 2 one flow. Each row's
    finish times equal those of the row simulated alone (max-min splits over
    components), and a start or drain in row 0 does not change row 2's rate."""
    topo = Torus((4, 4), (False, False), link_bandwidth_Bps=W, hop_latency_s=A)
    row0 = [(0.0, batch(topo, [(0, 2)], [8 * MiB])), (1e-4, batch(topo, [(0, 1)], [2 * MiB]))]
    row2 = [(5e-5, batch(topo, [(8, 11)], [4 * MiB]))]
    together, _ = finish_times("flow", topo, row0 + row2)
    alone0, _ = finish_times("flow", topo, row0)
    alone2, _ = finish_times("flow", topo, row2)
    assert together == pytest.approx(alone0 + alone2, rel=1e-12)
    # hand values: row 2 alone at W over 3 hops; row 0: the long flow at W until the
    # short one starts at 100 us, then W/2 each on link 0->1 until the short one drains
    assert alone2[0] == pytest.approx(5e-5 + 4 * MiB / W + 3 * A, rel=1e-12)
    sent = 1e-4 - 0.0  # the long flow's head start at full rate
    short_done = 1e-4 + 2 * MiB / (W / 2)
    long_left = 8 * MiB - W * sent - (W / 2) * (short_done - 1e-4)
    assert alone0[1] == pytest.approx(short_done + A, rel=1e-12)
    assert alone0[0] == pytest.approx(short_done + long_left / W + 2 * A, rel=1e-12)


# -- collectives: flow vs packet on contended patterns --------------------------------------------


def test_alltoall_on_4x4x4_torus_flow_vs_packet():
    topo = Torus((4, 4, 4), (True, True, True), link_bandwidth_Bps=W, hop_latency_s=A)
    V = 1 * MiB
    flow, fnet = run_collective(
        topo,
        "all-to-all",
        V,
        CollectiveOptions(algorithm="direct", network=NetworkSettings.of("flow")),
        onchip=NONE,
    )
    packet, pnet = run_collective(
        topo,
        "all-to-all",
        V,
        CollectiveOptions(
            algorithm="direct", network=NetworkSettings.of("packet", packet_bytes=16384)
        ),
        onchip=NONE,
    )
    assert packet.time_s == pytest.approx(flow.time_s, rel=0.05)
    np.testing.assert_allclose(pnet.link_bytes, fnet.link_bytes, rtol=1e-12)
    # hand value: along each axis of 4 (ties go +) a + link carries (1 + 2) x 16 chunks of
    # V/64, i.e. 0.75 V; the slowest flows (3 axes x up to 2 hops) pay 6 hops
    assert fnet.link_bytes.max() == pytest.approx(0.75 * V, rel=1e-12)
    assert flow.time_s == pytest.approx(0.75 * V / W + 6 * A, rel=0.01)


def test_allreduce_on_small_boardfly_flow_vs_packet():
    topo = Boardfly(2, 3, 4, link_bandwidth_Bps=W, hop_latency_s=A)
    V = 16 * MiB
    kwargs = {"onchip": NONE, "algorithm": "hierarchical"}
    flow, _ = collective(topo, "all-reduce", V, fidelity="flow", **kwargs)
    packet, _ = collective(topo, "all-reduce", V, fidelity="packet", **kwargs)
    analytic, _ = collective(topo, "all-reduce", V, fidelity="analytic", **kwargs)
    assert packet.time_s == pytest.approx(flow.time_s, rel=0.05)
    assert analytic.time_s <= flow.time_s * (1 + 1e-9)  # a lower bound that sees the
    assert analytic.time_s == pytest.approx(flow.time_s, rel=0.10)  # shared links


@pytest.mark.slow
def test_ring_allreduce_on_small_boardfly_flow_vs_packet():
    """A snake ring on Boardfly(2, 3, 4) puts 3 flows on some links mid-route."""
    topo = Boardfly(2, 3, 4, link_bandwidth_Bps=W, hop_latency_s=A)
    V = 64 * MiB
    flow, _ = run_collective(
        topo,
        "all-reduce",
        V,
        CollectiveOptions(algorithm="ring", network=NetworkSettings.of("flow")),
        onchip=NONE,
    )
    packet, _ = run_collective(
        topo,
        "all-reduce",
        V,
        CollectiveOptions(algorithm="ring", network=NetworkSettings.of("packet")),
        onchip=NONE,
    )
    assert packet.time_s == pytest.approx(flow.time_s, rel=0.05)


# -- small messages are latency-bound -------------------------------------------------------------


@pytest.mark.parametrize("fidelity", NETWORKS.names())
def test_small_allgather_is_latency_bound(fidelity):
    n = 8
    topo = Torus((n,), (True,), link_bandwidth_Bps=W, hop_latency_s=A)
    result, _ = run_collective(
        topo,
        "all-gather",
        1024,
        CollectiveOptions(algorithm="bidir-ring", network=NetworkSettings.of(fidelity)),
        onchip=NONE,
    )
    # a bidirectional ring gathers in ceil((n-1)/2) latency steps
    assert result.time_s == pytest.approx((n // 2) * A, rel=0.02)


# -- properties over random small tori ------------------------------------------------------------

PROP_OPS = ["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute"]
PROP_ALGS = [
    None,
    "ring",
    "bidir-ring",
    "torus",
    "direct",
    "halving-doubling",
    "hierarchical",
    "recursive-doubling",
    "tree",
    "direct-axes",
]


@st.composite
def torus_case(draw):
    axes = draw(st.integers(1, 3))
    dims = tuple(draw(st.integers(2, 5)) for _ in range(axes))
    wrap = tuple(draw(st.booleans()) for _ in range(axes))
    op = draw(st.sampled_from(PROP_OPS))
    alg = "direct" if op == "collective-permute" else draw(st.sampled_from(PROP_ALGS))
    size = draw(st.sampled_from([1024.0, 40_000.0, 1 * MiB, 3.5 * MiB]))
    return dims, wrap, op, alg, size


def make_torus(dims, wrap):
    return Torus(dims, wrap, link_bandwidth_Bps=W, hop_latency_s=A)


def schedule_or_reject(topo, op, alg, size):
    try:
        return build_schedule(op, size, make_group(topo), alg)
    except AlgorithmError:
        assume(False)


def schedule_batches(topo, schedule, op):
    routes = RouteCache(topo)
    return [
        routes.batch(step.src, step.dst, step.bytes, split_ports=op == "collective-permute")
        for pipeline in schedule.pipelines
        for step in pipeline
    ]


PROP_SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.filter_too_much]
)


@PROP_SETTINGS
@given(torus_case())
def test_bytes_delivered_equal_bytes_sent(case):
    dims, wrap, op, alg, size = case
    topo = make_torus(dims, wrap)
    schedule_or_reject(topo, op, alg, size)
    result, net = run_collective(
        topo,
        op,
        size,
        CollectiveOptions(algorithm=alg, network=NetworkSettings.of("flow")),
        onchip=NONE,
    )
    schedule = build_schedule(op, size, make_group(topo), result.algorithm)
    expected = np.zeros(len(topo.links))
    for b in schedule_batches(topo, schedule, op):
        np.add.at(expected, b.links, np.repeat(b.bytes, b.hops))
    np.testing.assert_allclose(net.link_bytes, expected, rtol=1e-12, atol=1e-6)
    # and independently of the route cache: bytes x hop distance of every transfer
    total = sum(
        float(b) * topo.hops(int(s), int(d))
        for pipeline in schedule.pipelines
        for step in pipeline
        for s, d, b in zip(step.src, step.dst, step.bytes, strict=True)
    )
    assert net.link_bytes.sum() == pytest.approx(total, rel=1e-9, abs=1e-6)


@PROP_SETTINGS
@given(torus_case())
def test_no_link_above_its_bandwidth(case):
    dims, wrap, op, alg, size = case
    topo = make_torus(dims, wrap)
    schedule_or_reject(topo, op, alg, size)
    _, net = run_collective(
        topo,
        op,
        size,
        CollectiveOptions(algorithm=alg, network=NetworkSettings.of("flow", check_capacity=True)),
        onchip=NONE,
    )
    assert net.max_link_load <= 1 + 1e-9


@PROP_SETTINGS
@given(torus_case())
def test_flow_never_faster_than_analytic_and_runs_are_deterministic(case):
    """The analytic fidelity is a bound up to its documented slack: per step, the spread
    of route latencies (it charges the busiest link's longest route)."""
    dims, wrap, op, alg, size = case
    topo = make_torus(dims, wrap)
    schedule_or_reject(topo, op, alg, size)
    flow1, net1 = run_collective(
        topo,
        op,
        size,
        CollectiveOptions(algorithm=alg, network=NetworkSettings.of("flow")),
        onchip=NONE,
    )
    flow2, net2 = run_collective(
        topo,
        op,
        size,
        CollectiveOptions(algorithm=alg, network=NetworkSettings.of("flow")),
        onchip=NONE,
    )
    kwargs = {"algorithm": flow1.algorithm, "onchip": NONE}
    analytic, _ = collective(topo, op, size, fidelity="analytic", **kwargs)
    schedule = build_schedule(op, size, make_group(topo), flow1.algorithm)
    spread = sum(
        (b.hops.max() - b.hops[b.hops > 0].min()) * A
        for b in schedule_batches(topo, schedule, op)
        if (b.hops > 0).any()
    )
    assert flow1.time_s >= analytic.time_s * (1 - 1e-9) - spread
    assert flow1.record() == flow2.record()
    np.testing.assert_array_equal(net1.link_bytes, net2.link_bytes)


@PROP_SETTINGS
@given(torus_case(), st.randoms(use_true_random=False))
def test_results_do_not_depend_on_send_order(case, rnd):
    """The first step of every pipeline, plus a permuted copy of each batch, sent at
    the same instant in two different orders: every batch finishes at the same time."""
    dims, wrap, op, alg, size = case
    topo = make_torus(dims, wrap)
    schedule = schedule_or_reject(topo, op, alg, size)
    routes = RouteCache(topo)
    batches = []
    for pipeline in schedule.pipelines:
        if pipeline:
            step = pipeline[0]
            split = op == "collective-permute"
            batches.append(routes.batch(step.src, step.dst, step.bytes, split_ports=split))
            rev = np.arange(step.src.size)[::-1]
            batches.append(
                routes.batch(step.src[rev], step.dst[rev], step.bytes[rev] * 0.5, split_ports=split)
            )
    assume(batches)
    order = list(range(len(batches)))
    rnd.shuffle(order)
    base, _ = finish_times("flow", topo, [(0.0, b) for b in batches])
    shuffled, _ = finish_times("flow", topo, [(0.0, batches[i]) for i in order])
    by_batch = dict(zip(order, shuffled, strict=True))
    assert [by_batch[i] for i in range(len(batches))] == pytest.approx(base, rel=1e-9)
