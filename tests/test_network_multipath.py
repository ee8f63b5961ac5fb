"""Issue 23: multipath adaptive routing and per-link-class latency on Boardfly.

Oracles: the minimal-routing time of the same collective (UGAL must not lose to it on
a uniform pattern), the bandwidth of the global links leaving a group (no routing can
beat it on a group-to-group exchange), conservation of bytes when flows are split,
and per-class latencies summed by hand along the 7-hop worst route.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import collective

from tpusim.config.loader import load_system
from tpusim.engine import CollectiveOptions, run_collective
from tpusim.network import NetworkSettings
from tpusim.network.base import FlowBatch
from tpusim.network.routing import MULTIPATH_CHUNKS, split_flows
from tpusim.topology import Boardfly, build_topology

MIB = 2**20


@pytest.fixture(scope="module")
def pod():
    return build_topology(load_system("tpu8i-pod"))


def test_ugal_within_5_percent_of_minimal_on_a_uniform_all_to_all():
    """A direct all-to-all (every chip to every other, equal bytes) on a 128-chip
    Boardfly: minimal routes are what uniform traffic wants; UGAL keeps them."""
    topo = Boardfly(4, 4, 8, link_bandwidth_Bps=200e9, hop_latency_s=1e-6)
    options = dict(algorithm="direct", fidelity="flow")
    minimal, _ = collective(topo, "all-to-all", 16 * MIB, **options)
    ugal, net = collective(topo, "all-to-all", 16 * MIB, routing="ugal", **options)
    assert ugal.time_s <= 1.05 * minimal.time_s
    assert net.fault_report["routing"] == "ugal"


def test_ugal_group_exchange_within_1_5x_of_the_global_link_bound(pod):
    """The 32 chips of group 0 each send 64 MiB to their peer in group 1 of the 1,152-chip
    pod: every byte leaves group 0 on one of its 35 global links (one per other group),
    so no routing beats 32 x 64 MiB / (35 W). Minimal routing pushes it all through the
    one direct link; UGAL, with each flow split into chunks over several paths, stays
    within 1.5x of the bound (one chunk per flow: at most 32 of the 35 links)."""
    pairs = [(i, 32 + i) for i in range(32)]
    options = dict(pairs=pairs, algorithm="direct", fidelity="flow")
    global_kind = pod.links.kind_names.index("global")
    leaving = (pod.links.kind == global_kind) & (pod.links.src < 32)
    assert int(leaving.sum()) == 35
    bound_s = 32 * 64 * MIB / float(pod.links.bandwidth_Bps[leaving].sum())
    minimal, _ = collective(pod, "collective-permute", 64 * MIB, **options)
    ugal, net = collective(pod, "collective-permute", 64 * MIB, routing="ugal", **options)
    assert minimal.time_s > 30 * bound_s
    assert bound_s <= ugal.time_s <= 1.5 * bound_s
    assert net.fault_report["nonminimal_flows"] > 32  # chunks, not whole flows


def test_split_flows_conserves_bytes_and_routes():
    batch = FlowBatch(
        np.array([0, 1, 2]),
        np.array([1, 2, 2]),
        np.array([8.0, 16.0, 4.0]),
        np.array([0, 1, 3, 3]),
        np.array([10, 11, 12]),
    )
    out = split_flows(batch, 4)
    assert len(out) == 12 and out.bytes.sum() == pytest.approx(28.0)
    assert out.links.tolist() == [10] * 4 + [11, 12] * 4
    assert out.hops.tolist() == [1] * 4 + [2] * 4 + [0] * 4
    assert MULTIPATH_CHUNKS > 1


def test_per_class_hop_latency_on_the_worst_route():
    """Local 1 us, board 3 us, global 7 us: the 7-hop worst route (local, board, local,
    global, local, board, local) takes 4 x 1 + 2 x 3 + 7 = 17 us, as a 1-byte transfer
    between its ends shows."""
    topo = Boardfly(
        4, 8, 4, link_bandwidth_Bps=1e12, hop_latency_s=1e-6,
        board_hop_latency_s=3e-6, global_hop_latency_s=7e-6,
    )  # fmt: skip
    kinds = topo.links.kind_names
    lat = {kinds[k]: float(topo.links.latency_s[topo.links.kind == k][0]) for k in range(3)}
    assert lat == {"local": 1e-6, "board": 3e-6, "global": 7e-6}
    worst = max(
        ((s, d) for s in range(32) for d in range(32, 128)),
        key=lambda p: len(topo.route(*p)),
    )
    path = topo.link_ids(topo.route(*worst))
    assert len(path) == 7
    res, _ = run_collective(
        topo,
        "collective-permute",
        1.0,
        CollectiveOptions(
            pairs=[worst], algorithm="direct", network=NetworkSettings.of("analytic")
        ),
    )
    assert res.time_s == pytest.approx(17e-6, rel=1e-6)


def test_shipped_boardfly_declares_its_class_latencies():
    spec = load_system("tpu8i-pod").spec
    assert spec.topology.board_hop_latency_s == pytest.approx(1e-6)
    assert spec.topology.global_hop_latency_s == pytest.approx(1e-6)
    assert {"topology.board_hop_latency", "topology.global_hop_latency"} <= set(spec.sources)
