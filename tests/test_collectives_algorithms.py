"""Size-aware collective algorithms against closed forms written here: bidirectional
rings in ceil((k-1)/2) steps, the bidirectional all-to-all without double relaying,
recursive doubling (and the non-power-of-two fold), binomial trees, direct exchange
per axis, and the AlgorithmError contract.

W is the one-direction link bandwidth (bytes/s), A the per-hop latency (s), V the
nccl-tests size. The on-chip model is off (``OnChipModel.none()``): only the network
is measured. Uncontended patterns: analytic = flow = packet = closed form within 1%;
contended ones: flow against the busiest link's load, computed from routes here.
"""

from __future__ import annotations

import numpy as np
import pytest
import simpy
from helpers import collective

from tpusim.collectives import (
    ALGORITHMS,
    AlgorithmError,
    Schedule,
    build_schedule,
    make_group,
)
from tpusim.collectives import tree as tree_module
from tpusim.collectives.offload import OnChipModel
from tpusim.engine import CollectiveOptions, run_collective
from tpusim.engine.schedule import FlowBatches, execute_schedule
from tpusim.network import NETWORKS, NetworkSettings, make_network
from tpusim.network.routes import RouteCache
from tpusim.topology import Boardfly, Torus
from tpusim.vocabulary import OPS

W = 45e9  # bytes/s, one direction
A = 1e-6  # s per hop
KiB, MiB = 2**10, 2**20
SIZES = [1 * KiB, 1 * MiB, 64 * MiB]
REL = 0.01
NONE = OnChipModel.none()


def torus(dims: tuple[int, ...], wrap: bool | tuple[bool, ...] = True) -> Torus:
    wraps = wrap if isinstance(wrap, tuple) else (wrap,) * len(dims)
    return Torus(dims, wraps, link_bandwidth_Bps=W, hop_latency_s=A)


def board(chips: int = 4) -> Boardfly:
    """One Boardfly board: ``chips`` chips, all directly linked."""
    return Boardfly(chips, 1, 1, link_bandwidth_Bps=W, hop_latency_s=A)


def packet_bytes(size: float) -> float:
    """Packets small next to the message (cut-through error (hops-1) x packet / W stays
    well under 1%) but few enough to be fast."""
    return float(min(64 * KiB, max(64, size / 512)))


def run(topo, op, size, fidelity, algorithm, **kw):
    if fidelity == "packet":
        kw.setdefault("packet_bytes", packet_bytes(size))
    result, _ = collective(
        topo, op, size, fidelity=fidelity, onchip=NONE, algorithm=algorithm, **kw
    )
    return result


def run_schedule(topo, schedule: Schedule, fidelity: str) -> float:
    """Seconds to run ``schedule`` on ``topo`` at ``fidelity`` with no on-chip cost
    (the engine's own executor, without build_schedule in between)."""
    env = simpy.Environment()
    kwargs = {"packet_bytes": packet_bytes(schedule.bytes)} if fidelity == "packet" else {}
    network = make_network(NetworkSettings.of(fidelity, **kwargs), env, topo)
    done = execute_schedule(env, network, schedule, NONE, FlowBatches(RouteCache(topo), ()))
    env.run(done)
    return float(env.now)


def ceil_half(k: int) -> int:
    """ceil((k-1)/2): latency steps of a bidirectional ring phase on k chips."""
    return k // 2


# -- ring routes (dimension order, a tie goes +) for contended hand computations ----------------


def ring_route(src: int, dst: int, n: int, wrap: bool = True) -> list[tuple[int, int]]:
    """Directed links of the minimal route on a ring (or a line when not ``wrap``)."""
    fwd = (dst - src) % n
    shorter = fwd if fwd <= n - fwd else fwd - n
    steps = shorter if wrap else dst - src
    sign = 1 if steps > 0 else -1
    out, here = [], src
    for _ in range(abs(steps)):
        nxt = (here + sign) % n
        out.append((here, nxt))
        here = nxt
    return out


def busiest_link_time(transfers: list[tuple[int, int, float]], n: int, wrap: bool = True) -> float:
    """Max-min time of one batch of EQUAL transfers on a ring or line: the flows on the
    most shared link drain last at count x size / W; the longest of them then pays its
    path latency."""
    sizes = {b for _, _, b in transfers}
    assert len(sizes) == 1, "the hand formula holds for equal transfers"
    routes = [ring_route(s, d, n, wrap) for s, d, _ in transfers]
    count: dict[tuple[int, int], int] = {}
    for r in routes:
        for link in r:
            count[link] = count.get(link, 0) + 1
    worst = max(count.values())
    hot = {link for link, c in count.items() if c == worst}
    return worst * sizes.pop() / W + max(len(r) for r in routes if hot & set(r)) * A


# -- 1. bidirectional rings in ceil((k-1)/2) steps ----------------------------------------------


@pytest.mark.parametrize("fidelity", NETWORKS.names())
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("k", [5, 8])
@pytest.mark.parametrize("op", ["all-gather", "reduce-scatter", "all-reduce"])
def test_bidir_ring_closed_form(fidelity, size, k, op):
    result = run(torus((k,)), op, size, fidelity, "bidir-ring")
    phases = 2 if op == "all-reduce" else 1
    expected = phases * (ceil_half(k) * A + (k - 1) / k * size / (2 * W))
    assert result.time_s == pytest.approx(expected, rel=REL)
    assert result.num_steps == phases * ceil_half(k)
    assert result.max_hops == 1


@pytest.mark.parametrize("fidelity", NETWORKS.names())
@pytest.mark.parametrize("size", SIZES)
def test_bidir_ring_on_a_snake(fidelity, size):
    """bidir-ring over all chips of a wrapped 4x4 torus: the snake order is a
    Hamiltonian cycle of one-hop links (it closes over the wraparound), so n = 16
    chips take ceil(15/2) = 8 steps, each direction of a link carrying 15/16 V/2."""
    n = 16
    result = run(torus((4, 4)), "all-gather", size, fidelity, "bidir-ring")
    assert result.time_s == pytest.approx(8 * A + (n - 1) / n * size / (2 * W), rel=REL)
    assert result.num_steps == 8
    assert result.max_hops == 1


@pytest.mark.parametrize("k,steps", [(2, 1), (3, 1), (4, 2), (5, 2), (8, 4), (9, 4), (16, 8)])
def test_bidir_ring_step_counts(k, steps):
    group = make_group(torus((k,)))
    assert build_schedule("all-gather", MiB, group, "bidir-ring").num_steps == steps
    assert build_schedule("reduce-scatter", MiB, group, "bidir-ring").num_steps == steps
    assert build_schedule("all-reduce", MiB, group, "bidir-ring").num_steps == 2 * steps
    # the per-axis phases of torus and hierarchical take the same steps on a wrapped axis
    assert build_schedule("all-gather", MiB, group, "torus").num_steps == steps
    assert build_schedule("all-gather", MiB, group, "hierarchical").num_steps == steps


def test_bidir_ring_link_bytes_are_the_bandwidth_term():
    """Every direction of every link carries (k-1)/2 shards: (k-1)/k V/2 bytes."""
    k, V = 8, 8 * MiB
    _, net = run_collective(
        torus((k,)), "all-gather", V, CollectiveOptions(algorithm="bidir-ring"), onchip=NONE
    )
    np.testing.assert_allclose(net.link_bytes, (k - 1) / k * V / 2, rtol=1e-12)


@pytest.mark.parametrize("k,steps", [(4, 3), (5, 4), (8, 7)])
def test_line_axes_keep_the_folded_ring(k, steps):
    group = make_group(torus((k,), wrap=False))
    assert build_schedule("all-gather", MiB, group, "torus").num_steps == steps


@pytest.mark.parametrize("fidelity", NETWORKS.names())
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("k", [3, 4])
def test_torus_two_axes_closed_form(fidelity, size, k):
    """k x k wrapped torus, all-reduce: two parts of V/2, each a reduce-scatter along
    one axis then the other and the all-gather back; the parts use different axes at
    every moment. Per part and axis phase: ceil((k-1)/2) a + (k-1)/k D/(2W)."""
    part, N = size / 2, k * k
    phase_data = [part, part / k, part / k, part]  # RS on D, RS on D/k, AG to D/k, AG to D
    expected = sum(ceil_half(k) * A + (k - 1) / k * d / (2 * W) for d in phase_data)
    result = run(torus((k, k)), "all-reduce", size, fidelity, "torus")
    assert result.time_s == pytest.approx(expected, rel=REL)
    assert result.num_steps == 2 * 4 * ceil_half(k)
    # the bandwidth term is 2 (N-1)/N V / (2W x 2 axes)
    assert expected - 4 * ceil_half(k) * A == pytest.approx(
        2 * (N - 1) / N * size / (4 * W), rel=1e-12
    )


# -- 2. all-to-all on a bidirectional ring, each chunk the shorter way --------------------------


def bidir_alltoall_load(k: int, size: float) -> float:
    """Bytes on each link direction: chunks V/k for distances 1 .. floor((k-1)/2), each
    crossing d links, plus half the antipodal chunk over k/2 links when k is even."""
    chunk = size / k
    whole = sum(d * chunk for d in range(1, (k - 1) // 2 + 1))
    return whole + (k // 2 * chunk / 2 if k % 2 == 0 else 0.0)


@pytest.mark.parametrize("k", [4, 5, 8])
def test_bidir_alltoall_load_formula(k):
    """The load is formulas.md 1.6: k V / 8 for even k, (k^2 - 1) V / (8k) for odd k."""
    V = 8 * MiB
    expected = k * V / 8 if k % 2 == 0 else (k * k - 1) * V / (8 * k)
    assert bidir_alltoall_load(k, V) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("fidelity", NETWORKS.names())
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("k", [5, 8])
def test_bidir_alltoall_closed_form(fidelity, size, k):
    result = run(torus((k,)), "all-to-all", size, fidelity, "bidir-ring")
    expected = (k // 2) * A + bidir_alltoall_load(k, size) / W
    assert result.time_s == pytest.approx(expected, rel=REL)
    assert result.num_steps == k // 2


@pytest.mark.parametrize("k", [4, 5, 8, 16])
def test_bidir_alltoall_relays_once(k):
    """Every link direction carries exactly the shorter-way load (no chunk both ways),
    and the bidirectional relay beats the one-way relay ((k-1) V / 2 per link)."""
    V = 8 * MiB
    _, net = run_collective(
        torus((k,)), "all-to-all", V, CollectiveOptions(algorithm="bidir-ring"), onchip=NONE
    )
    np.testing.assert_allclose(net.link_bytes, bidir_alltoall_load(k, V), rtol=1e-12)
    one_way = run(torus((k,)), "all-to-all", V, "flow", "ring")
    bidir = run(torus((k,)), "all-to-all", V, "flow", "bidir-ring")
    assert one_way.time_s == pytest.approx((k - 1) * A + (k - 1) * V / (2 * W), rel=REL)
    # the bytes term drops 4 (k-1)/k times (>= 3 for k >= 4)
    assert bidir.time_s < one_way.time_s / 2.5


# -- 3. recursive doubling and the non-power-of-two fold ----------------------------------------


@pytest.mark.parametrize("fidelity", NETWORKS.names())
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("topo_name", ["cube", "board"])
def test_recursive_doubling_on_a_hypercube(fidelity, size, topo_name):
    """A 2x2x2 mesh (partners i XOR 2^k are one hop apart along axis k) and a board of
    4 (all linked): every exchange is one hop, no link shared."""
    topo = torus((2, 2, 2), wrap=False) if topo_name == "cube" else board(4)
    n = topo.num_chips
    lg = n.bit_length() - 1
    ar = run(topo, "all-reduce", size, fidelity, "recursive-doubling")
    assert ar.time_s == pytest.approx(lg * (A + size / W), rel=REL)
    assert ar.num_steps == lg
    ag = run(topo, "all-gather", size, fidelity, "recursive-doubling")
    assert ag.time_s == pytest.approx(lg * A + (n - 1) / n * size / W, rel=REL)
    hd = run(topo, "all-reduce", size, fidelity, "halving-doubling")
    assert hd.time_s == pytest.approx(2 * (lg * A + (n - 1) / n * size / W), rel=REL)


@pytest.mark.parametrize("fidelity", NETWORKS.names())
@pytest.mark.parametrize("size", SIZES)
def test_non_power_of_two_fold_on_a_line_of_3(fidelity, size):
    """n = 3: p = 2, r = 1. Position 0 folds into 1; survivors 1 and 2 exchange; 1 sends
    the result back to 0. Every step is one hop on its own link.

    - recursive-doubling all-reduce: 3 (a + V/W)
    - all-gather: 0 -> 1 a shard V/3; 1 <-> 2 (1 holds 2 shards: 2V/3); 1 -> 0 the
      other 2V/3: 3a + 5V/(3W)
    - halving-doubling reduce-scatter: 0 -> 1 all V; 1 <-> 2 the blocks the other
      keeps (2 sends 1 the 2V/3 of blocks 0 and 1); 1 -> 0 block 0 (V/3): 3a + 2V/W
    - halving-doubling all-reduce: fold V, halve V/2, double V/2, unfold V: 4a + 3V/W
    """
    line = torus((3,), wrap=False)
    cases = [
        ("recursive-doubling", "all-reduce", 3 * (A + size / W), 3),
        ("recursive-doubling", "all-gather", 3 * A + 5 * size / (3 * W), 3),
        ("halving-doubling", "all-gather", 3 * A + 5 * size / (3 * W), 3),
        ("halving-doubling", "reduce-scatter", 3 * A + 2 * size / W, 3),
        ("halving-doubling", "all-reduce", 4 * A + 3 * size / W, 4),
    ]
    for algorithm, op, expected, steps in cases:
        result = run(line, op, size, fidelity, algorithm)
        assert result.time_s == pytest.approx(expected, rel=REL), (algorithm, op)
        assert result.num_steps == steps


@pytest.mark.parametrize("n,steps", [(2, 1), (3, 3), (5, 4), (6, 4), (8, 3), (12, 5), (16, 4)])
def test_recursive_doubling_step_counts(n, steps):
    """lg p exchanges, plus 2 fold steps when n is not a power of two."""
    group = make_group(torus((n,)))
    assert build_schedule("all-reduce", MiB, group, "recursive-doubling").num_steps == steps
    assert build_schedule("all-gather", MiB, group, "recursive-doubling").num_steps == steps
    assert build_schedule("all-reduce", MiB, group, "halving-doubling").num_steps == (
        2 * steps if n & (n - 1) == 0 else 2 * (steps - 2) + 2
    )


@pytest.mark.parametrize("n", [5, 6, 7, 12])
@pytest.mark.parametrize("algorithm", ["halving-doubling", "recursive-doubling"])
def test_folded_allgather_delivers_each_missing_shard_once(n, algorithm):
    """Bytes conservation through the fold (survivors standing for two chips carry two
    shards): every chip receives exactly the n - 1 shards it lacks, V - V/n, once."""
    V = float(n * MiB)
    schedule = build_schedule("all-gather", V, make_group(torus((n,))), algorithm)
    received = np.zeros(n)
    for step in schedule.pipelines[0]:
        np.add.at(received, step.dst, step.bytes)
    np.testing.assert_allclose(received, V - V / n, rtol=1e-12)


@pytest.mark.parametrize("n", [5, 6, 7, 12])
def test_folded_reduce_scatter_sends_all_foreign_blocks(n):
    """The mirror: every survivor sends out every block it does not keep (V - V/n in
    all, counting the partner's unfold of the folded chip's block); a folded chip sends
    its whole vector V and gets back its own block V/n."""
    V = float(n * MiB)
    schedule = build_schedule("reduce-scatter", V, make_group(torus((n,))), "halving-doubling")
    sent, received = np.zeros(n), np.zeros(n)
    for step in schedule.pipelines[0]:
        np.add.at(sent, step.src, step.bytes)
        np.add.at(received, step.dst, step.bytes)
    r = n - (1 << (n.bit_length() - 1))
    folded = np.arange(0, 2 * r, 2)
    expected = np.full(n, V - V / n)
    expected[folded] = V
    np.testing.assert_allclose(sent, expected, rtol=1e-12)
    np.testing.assert_allclose(received[folded], V / n, rtol=1e-12)


def test_recursive_doubling_on_a_ring_of_8_is_contended():
    """Exchanges at distance 2 and 4 share ring links: with V per flow, step k's time
    is the busiest link's flow count x V / W plus the longest such route's latency."""
    n, V = 8, 4 * MiB
    expected = sum(busiest_link_time([(i, i ^ (1 << k), V) for i in range(n)], n) for k in range(3))
    # distance 4 (ties go +): 4 flows on every + link
    assert busiest_link_time([(i, i ^ 4, V) for i in range(n)], n) == pytest.approx(
        4 * V / W + 4 * A
    )
    flow = run(torus((n,)), "all-reduce", V, "flow", "recursive-doubling")
    assert flow.time_s == pytest.approx(expected, rel=REL)
    # the analytic fidelity never exceeds the contended flow time
    analytic = run(torus((n,)), "all-reduce", V, "analytic", "recursive-doubling")
    assert analytic.time_s <= flow.time_s * (1 + 1e-9)


def test_recursive_doubling_fold_on_a_line_of_6_is_contended():
    """n = 6 on a line: fold 0 -> 1, 2 -> 3; survivors 1, 3, 4, 5 exchange at distance 1
    (1 <-> 3, 4 <-> 5) and 2 (1 <-> 4, 3 <-> 5: link 3 -> 4 carries both); unfold."""
    n, V = 6, 4 * MiB
    alive = [1, 3, 4, 5]
    steps = [
        [(0, 1, V), (2, 3, V)],
        [(alive[i], alive[i ^ 1], V) for i in range(4)],
        [(alive[i], alive[i ^ 2], V) for i in range(4)],
        [(1, 0, V), (3, 2, V)],
    ]
    expected = sum(busiest_link_time(s, n, wrap=False) for s in steps)
    assert busiest_link_time(steps[2], n, wrap=False) == pytest.approx(2 * V / W + 3 * A)
    flow = run(torus((n,), wrap=False), "all-reduce", V, "flow", "recursive-doubling")
    assert flow.time_s == pytest.approx(expected, rel=REL)
    packet = run(torus((n,), wrap=False), "all-reduce", V, "packet", "recursive-doubling")
    assert packet.time_s == pytest.approx(flow.time_s, rel=REL)


# -- 4. binomial trees --------------------------------------------------------------------------


def tree_broadcast_line(n: int, size: float) -> float:
    """Binomial broadcast on a line in position order, farthest send first: the step
    with mask m sends over m hops on disjoint segments."""
    return sum(m * A + size / W for m in tree_module.masks(n))


@pytest.mark.parametrize("fidelity", NETWORKS.names())
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("n", [5, 8])
def test_tree_broadcast_on_a_line(fidelity, size, n):
    topo = torus((n,), wrap=False)
    group = make_group(topo)
    schedule = Schedule(
        "broadcast", "tree", size, group, tree_module.build("broadcast", size, group)
    )
    assert schedule.num_steps == (n - 1).bit_length()
    # on a line of 8: (4 + 2 + 1) a + 3 V / W
    if n == 8:
        assert tree_broadcast_line(n, size) == pytest.approx(7 * A + 3 * size / W)
    assert run_schedule(topo, schedule, fidelity) == pytest.approx(
        tree_broadcast_line(n, size), rel=REL
    )


@pytest.mark.parametrize("fidelity", NETWORKS.names())
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("topo_name", ["line5", "line8", "board"])
def test_tree_allreduce_is_reduce_then_broadcast(fidelity, size, topo_name):
    """All-reduce = binomial reduce (the broadcast mirrored) + broadcast: twice the
    broadcast time; on a fully linked board of 4: 2 x 2 (a + V/W)."""
    topo = board(4) if topo_name == "board" else torus((int(topo_name[4:]),), wrap=False)
    n = topo.num_chips
    expected = 2 * (2 * (A + size / W) if topo_name == "board" else tree_broadcast_line(n, size))
    result = run(topo, "all-reduce", size, fidelity, "tree")
    assert result.time_s == pytest.approx(expected, rel=REL)
    assert result.num_steps == 2 * (n - 1).bit_length()


# -- 5. direct exchange per axis ----------------------------------------------------------------


@pytest.mark.parametrize("fidelity", NETWORKS.names())
@pytest.mark.parametrize("size", SIZES)
def test_direct_axes_on_a_3x3_torus(fidelity, size):
    """Rings of 3: every pair on an axis is one hop apart on its own link, so each
    axis step costs a + (bytes per pair) / W.

    - all-gather: axis 2 from V/9 (a + V/(9W)), then axis 1 from 3V/9 (a + V/(3W))
    - reduce-scatter: axis 1 sends V/3 per pair, then axis 2 V/9
    - all-reduce: both, 4 steps
    - all-to-all: each axis sends V/3 per pair: 2 (a + V/(3W))
    """
    topo = torus((3, 3))
    one_third, one_ninth = A + size / (3 * W), A + size / (9 * W)
    expected = {
        "all-gather": one_ninth + one_third,
        "reduce-scatter": one_third + one_ninth,
        "all-reduce": 2 * (one_third + one_ninth),
        "all-to-all": 2 * one_third,
    }
    steps = {"all-gather": 2, "reduce-scatter": 2, "all-reduce": 4, "all-to-all": 2}
    for op, t in expected.items():
        result = run(topo, op, size, fidelity, "direct-axes")
        assert result.time_s == pytest.approx(t, rel=REL), op
        assert result.num_steps == steps[op]
        assert result.max_hops == 1


@pytest.mark.parametrize("fidelity", NETWORKS.names())
@pytest.mark.parametrize("size", SIZES)
def test_direct_axes_on_a_board(fidelity, size):
    """A fully linked board of 4: one all-pairs step of V/4 per pair."""
    result = run(board(4), "all-gather", size, fidelity, "direct-axes")
    assert result.time_s == pytest.approx(A + size / (4 * W), rel=REL)
    assert result.num_steps == 1


@pytest.mark.parametrize("op", ["all-gather", "all-to-all", "all-reduce"])
def test_direct_axes_on_a_ring_of_8_is_contended(op):
    """All pairs of a ring of 8 at once: + links carry 1 + 2 + 3 + 4 = 10 flows (ties
    go +), so a step with chunk c takes 10 c / W + 4 a at the flow fidelity."""
    n, V = 8, 8 * MiB
    pairs = [(i, j, V / n) for i in range(n) for j in range(n) if i != j]
    step = busiest_link_time(pairs, n)
    assert step == pytest.approx(10 * V / (n * W) + 4 * A)
    flow = run(torus((n,)), op, V, "flow", "direct-axes")
    assert flow.time_s == pytest.approx(2 * step if op == "all-reduce" else step, rel=REL)


def test_direct_axes_latency_against_rings_for_small_messages():
    """1 KiB all-reduce on 4x4x4 (bytes terms of a few ns): direct-axes takes 2 steps per
    axis, each as long as its farthest pair; the torus rings take 2 x ceil(3/2) one-hop
    steps per axis when wrapped, 2 x 3 two-hop folded steps per axis on a mesh.

    - wrapped: direct 6 x 2 a = 12 a; rings 12 x a: the same network latency (half the
      steps: a per-step cost would favour direct)
    - mesh: direct 6 x 3 a = 18 a; folded rings 18 x 2 a = 36 a
    """
    wrapped, mesh = torus((4, 4, 4)), torus((4, 4, 4), wrap=False)
    cases = [(wrapped, 12 * A, 12 * A, 12), (mesh, 18 * A, 36 * A, 18)]
    for topo, direct_s, rings_s, ring_steps in cases:
        direct = run(topo, "all-reduce", KiB, "flow", "direct-axes")
        rings = run(topo, "all-reduce", KiB, "flow", "torus")
        assert direct.num_steps == 6
        assert rings.num_steps == 3 * ring_steps  # three concurrent pipelines
        assert direct.time_s == pytest.approx(direct_s, rel=0.02)
        assert rings.time_s == pytest.approx(rings_s, rel=0.02)


# -- 6. AlgorithmError for what an algorithm cannot do ------------------------------------------


GROUPS = {
    "ring8": lambda: make_group(torus((8,))),
    "torus3x4": lambda: make_group(torus((3, 4), wrap=(True, False))),
    "board4": lambda: make_group(board(4)),
    "boardfly": lambda: make_group(Boardfly(2, 2, 3, link_bandwidth_Bps=W, hop_latency_s=A)),
    "chips6": lambda: make_group(torus((4, 4)), chips=6),
}

NATIVE = {
    "recursive-doubling": {"all-reduce", "all-gather"},
    "tree": {"all-reduce"},
    "halving-doubling": {"all-reduce", "all-gather", "reduce-scatter"},
}


@pytest.mark.parametrize("group_name", sorted(GROUPS))
@pytest.mark.parametrize("algorithm", ALGORITHMS.names())
def test_every_algorithm_builds_or_raises_algorithm_error(algorithm, group_name):
    """A caller can try every registered algorithm and keep the valid ones: each either
    builds a schedule or raises AlgorithmError with a one-line message."""
    group = GROUPS[group_name]()
    for op in OPS:
        try:
            schedule = build_schedule(op, MiB, group, algorithm)
        except AlgorithmError as exc:
            message = str(exc)
            assert message and "\n" not in message
            assert op in NATIVE.get(algorithm, set(OPS)) or op in message or algorithm in message
            continue
        assert schedule.algorithm == algorithm
        assert op in NATIVE.get(algorithm, set(OPS)) or op == "broadcast"


@pytest.mark.parametrize(
    "algorithm,op",
    [
        ("recursive-doubling", "all-to-all"),
        ("recursive-doubling", "reduce-scatter"),
        ("tree", "all-gather"),
        ("tree", "all-to-all"),
        ("halving-doubling", "all-to-all"),
        ("direct-axes", "collective-permute"),
        ("torus", "collective-permute"),
    ],
)
def test_unsupported_op_raises(algorithm, op):
    with pytest.raises(AlgorithmError):
        build_schedule(op, MiB, make_group(torus((4,))), algorithm)


def test_torus_raises_on_boardfly():
    with pytest.raises(AlgorithmError, match="torus"):
        build_schedule("all-reduce", MiB, GROUPS["boardfly"](), "torus")
