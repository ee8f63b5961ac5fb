"""Fast paths equal the exact, slow computation they replace (issue 34).

Each fast path is checked against an independent second implementation on small
systems: a Python dict of links against the dense link table, Boardfly's table-driven
batch routes against its pair-by-pair :meth:`route`, the radix sort of link ids against
numpy's stable argsort, ``auto``'s all-pairs latency bound against hand counts, and
the memory model's per-shape counts against a layer-by-layer count.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
import simpy

from tpusim.collectives import ALGORITHMS, Predictor, make_group
from tpusim.collectives.offload import OnChipModel
from tpusim.network import AnalyticNetwork
from tpusim.network.base import SCATTER_ADD_LINKS_PER_ENTRY, FlowBatch
from tpusim.network.maxmin import stable_order
from tpusim.program.builders import prepare_training
from tpusim.program.builders.memory import (
    fsdp_buffers,
    kept_bytes,
    logits_bytes,
    stage_memory,
    transient_bytes,
)
from tpusim.topology import Boardfly, Torus

BW, LAT = 100e9, 1e-6


def _first_link_of_pair(topo) -> dict[tuple[int, int], int]:
    """(src, dst) -> the lowest link id between them, by a Python loop."""
    first: dict[tuple[int, int], int] = {}
    for i, (u, v) in enumerate(zip(topo.links.src.tolist(), topo.links.dst.tolist(), strict=True)):
        first.setdefault((u, v), i)
    return first


@pytest.mark.parametrize(
    "topo",
    [
        Torus((3, 4), (True, False), link_bandwidth_Bps=BW, hop_latency_s=LAT),
        # two board links per board pair on 2-chip boards: parallel links join one pair
        Boardfly(2, 3, 5, link_bandwidth_Bps=BW, hop_latency_s=LAT, links_per_board_pair=2),
    ],
    ids=["torus-3x4", "boardfly-parallel-links"],
)
def test_dense_link_table_finds_the_first_link_of_every_pair(topo):
    """Every (src, dst), nodes outside the topology included (-1: no link)."""
    first = _first_link_of_pair(topo)
    n = topo.num_nodes
    src, dst = (a.ravel() for a in np.meshgrid(np.arange(-1, n + 1), np.arange(-1, n + 1)))
    assert topo._dense_links is not None
    got = topo.find_links(src, dst).tolist()
    if topo.kind == "boardfly":  # the case the first-id rule is for is there
        assert len(first) < len(topo.links)
    want = [first.get((u, v), -1) for u, v in zip(src.tolist(), dst.tolist(), strict=True)]
    assert got == want


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(chips_per_board=2, boards_per_group=3, groups=4),
        dict(chips_per_board=3, boards_per_group=4, groups=5, links_per_group_pair=2),
        dict(
            chips_per_board=2,
            boards_per_group=3,
            groups=5,
            links_per_board_pair=2,
            links_per_group_pair=3,
            arrangement="relative",
        ),
        dict(chips_per_board=1, boards_per_group=1, groups=3),
    ],
    ids=["2x3x4", "3x4x5-two-global", "relative-parallel", "one-chip-groups"],
)
def test_boardfly_table_routes_equal_pair_by_pair_routes(kwargs):
    """Every ordered pair (7-hop worst cases included): the table-driven batch routes
    are the links of :meth:`route`'s node path, looked up in a Python dict."""
    p, a, g = kwargs.pop("chips_per_board"), kwargs.pop("boards_per_group"), kwargs.pop("groups")
    topo = Boardfly(p, a, g, link_bandwidth_Bps=BW, hop_latency_s=LAT, **kwargs)
    first = _first_link_of_pair(topo)
    n = topo.num_chips
    src, dst = (x.ravel() for x in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    ptr, links = topo.route_links_many(src, dst)
    assert ptr.size == src.size + 1
    longest = 0
    for k in range(src.size):
        path = topo.route(int(src[k]), int(dst[k]))
        want = [first[(u, v)] for u, v in pairwise(path)]
        assert links[ptr[k] : ptr[k + 1]].tolist() == want, (src[k], dst[k])
        longest = max(longest, len(want))
    assert longest == min(topo.diameter_hops, 7)


def test_stable_order_is_numpys_stable_argsort():
    """Small ids take the uint16 radix sort; big or negative ones the general sort."""
    rng = np.random.default_rng(7)
    for high in (5, 7000, 2**16, 2**20):
        ids = rng.integers(0, high, 50_000)
        assert np.array_equal(stable_order(ids), np.argsort(ids, kind="stable"))
    ids = rng.integers(-3, 9, 1000)
    assert np.array_equal(stable_order(ids), np.argsort(ids, kind="stable"))


def test_all_pairs_bound_pays_the_diameter_on_every_all_pairs_step():
    """Direct's all-reduce is two all-pairs steps, one-shot's one: each crosses the
    longest route of the group (counted pair by pair here), so at 1 KiB their closed
    bounds are launch + steps x sync + (all-pairs steps x diameter) x the hop latency;
    on a part of the topology the floor stays one hop a step."""
    topo = Boardfly(2, 3, 4, link_bandwidth_Bps=BW, hop_latency_s=LAT)
    n = topo.num_chips
    diameter = max(len(topo.route(s, d)) - 1 for s in range(n) for d in range(n))
    onchip = OnChipModel("test", 2e-6, 0.5e-6, 1e12, 1.0, 1, 0.0)
    predictor = Predictor(AnalyticNetwork(simpy.Environment(), topo), onchip, lambda s: None)  # type: ignore[arg-type]
    group = make_group(topo)
    for name, steps, across in (("direct", 2, 2), ("one-shot", 1, 1)):
        bound_s = predictor.closed_bound_s(ALGORITHMS.get(name).cost, "all-reduce", group, 1)
        want_s = 2e-6 + steps * 0.5e-6 + across * diameter * LAT
        assert bound_s == pytest.approx(want_s, rel=1e-9), name
    part = make_group(topo, chips=n // 2)
    bound_s = predictor.closed_bound_s(ALGORITHMS.get("direct").cost, "all-reduce", part, 1)
    assert bound_s < 2e-6 + 2 * 0.5e-6 + 2 * 2 * LAT


def _stage_memory_layer_by_layer(plan, stage: int) -> tuple[float, float]:
    """(activations, buffers) of a stage counted layer by layer, every layer
    recounted (the memory model's formulas before the per-shape memo)."""
    s = plan.schedule
    chunks = [list(s.chunk_range(c)) for c in s.stage_chunks(stage)]
    layers = [layer for chunk in chunks for layer in chunk]
    per_chunk = max(sum(kept_bytes(plan, layer) for layer in c) for c in chunks)
    layer_phase = max(transient_bytes(plan, layer) for layer in layers)
    layer_phase += fsdp_buffers(plan, layers)
    return s.in_flight(stage) * per_chunk, max(layer_phase, logits_bytes(plan))


@pytest.mark.parametrize("remat", ["none", "full"])
def test_stage_memory_counts_each_layer_shape_once_with_the_same_bytes(remat):
    """A MoE model (dense and MoE layers: two shapes) over a 2-stage pipeline with
    FSDP: every stage's activations and buffers equal the layer-by-layer count."""
    plan = prepare_training(
        layers=6,
        dense_layers=2,
        d_model=256,
        d_ff=1024,
        heads=4,
        head_dim=64,
        seq=128,
        batch=16,
        experts=4,
        top_k=2,
        expert_d_ff=512,
        remat_policy=remat,
        mesh={"fsdp": 2, "expert": 2, "pipeline": 2},
    )
    assert plan.moe is not None and plan.fsdp_group
    for stage in range(plan.schedule.stages):
        got = stage_memory(plan, stage)
        want = _stage_memory_layer_by_layer(plan, stage)
        assert (got.activations_bytes, got.buffers_bytes) == want


@pytest.mark.parametrize(
    "dims, wrap",
    [((3, 4, 5), (True, True, True)), ((4, 3), (True, False)), ((2, 2, 3), (True, False, True))],
    ids=["torus-3x4x5", "wrapped-by-mesh", "size-2-axes"],
)
def test_torus_batch_routes_equal_pair_by_pair_routes(dims, wrap):
    """Every ordered pair: the vectorised dimension-order routes are the links of
    :meth:`route`'s node path, looked up in a Python dict."""
    topo = Torus(dims, wrap, link_bandwidth_Bps=BW, hop_latency_s=LAT)
    first = _first_link_of_pair(topo)
    n = topo.num_chips
    src, dst = (x.ravel() for x in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    ptr, links = topo.route_links_many(src, dst)
    for k in range(src.size):
        path = topo.route(int(src[k]), int(dst[k]))
        want = [first[(u, v)] for u, v in pairwise(path)]
        assert links[ptr[k] : ptr[k + 1]].tolist() == want, (src[k], dst[k])


def test_link_bytes_of_repeated_batches_equal_a_per_send_dense_sum():
    """A large batch's loads are kept and added on the links it touches: the same
    numbers, to the bit, as adding every send's per-link sums (a Python loop, entries
    in order) to every link."""
    topo = Torus((4, 4), (True, True), link_bandwidth_Bps=BW, hop_latency_s=LAT)
    network = AnalyticNetwork(simpy.Environment(), topo)
    rng = np.random.default_rng(3)
    pairs = [(s, d) for s in range(16) for d in range(16) if s != d]
    src, dst = (np.array(side) for side in zip(*pairs, strict=True))
    ptr, links = topo.route_links_many(src, dst)
    ring = FlowBatch(src, dst, rng.uniform(1, 1e9, src.size), ptr, links)
    other = FlowBatch(src, dst, rng.uniform(1, 1e9, src.size), ptr, links)
    expected = [0.0] * len(topo.links)
    for batch in (ring, other, ring, ring, other):
        network.send(batch)
        per_link: dict[int, float] = {}
        for flow in range(len(batch)):
            for link in batch.links[batch.ptr[flow] : batch.ptr[flow + 1]].tolist():
                per_link[link] = per_link.get(link, 0.0) + float(batch.bytes[flow])
        for link, nbytes in per_link.items():
            expected[link] += nbytes
    assert links.size >= len(topo.links) // SCATTER_ADD_LINKS_PER_ENTRY  # the kept path
    assert network.link_bytes.tolist() == expected
