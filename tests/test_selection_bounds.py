"""Issue 23: ``auto`` by cost bounds on Boardfly, permutes of any size, the bounds
never above what an algorithm does.

The oracle for the choice is brute force: every registered algorithm that can run the
collective, simulated one by one at the same fidelity; auto must be within 2% of the
fastest. The full Boardfly 1,024 / 1,152 grid is slow (each direct exchange routes a
million flows): the default run covers a 256-chip Boardfly and the 1 KiB all-reduce
bar on tpu8i-1024 is in the slow set.
"""

from __future__ import annotations

import itertools

import pytest
import simpy

from tests.helpers import forced_times
from tpusim.collectives import (
    ALGORITHMS,
    Predictor,
    make_group,
)
from tpusim.collectives.offload import MESSAGE_S, OnChipModel
from tpusim.config import load_chip
from tpusim.config.loader import load_system
from tpusim.engine import CollectiveOptions, run_collective
from tpusim.network import AnalyticNetwork, NetworkSettings
from tpusim.network.routes import RouteCache
from tpusim.topology import Boardfly, Torus, build_topology

KiB, MiB = 2**10, 2**20
CAE = OnChipModel.for_chip(load_chip("tpu8i"))
OPS4 = ("all-reduce", "all-gather", "all-to-all", "collective-permute")


def routing_network(topo):
    """The analytic network a Predictor routes on (the engine builds one per run)."""
    return AnalyticNetwork(simpy.Environment(), topo)


def check_auto(topo, op, size, onchip, fidelity="flow"):
    auto, _ = run_collective(
        topo, op, size, CollectiveOptions(network=NetworkSettings.of(fidelity)), onchip=onchip
    )
    times = forced_times(topo, op, size, onchip, fidelity)
    assert auto.algorithm in times
    assert auto.time_s <= 1.02 * min(times.values()), (auto.algorithm, auto.time_s, times)
    return auto, times


@pytest.fixture(scope="module")
def fly256():
    return Boardfly(4, 8, 8, link_bandwidth_Bps=200e9, hop_latency_s=1e-6)


@pytest.mark.parametrize("op", OPS4)
def test_auto_within_2_percent_on_a_256_chip_boardfly(fly256, op):
    for size in (KiB, MiB):
        check_auto(fly256, op, size, CAE, fidelity="analytic")


@pytest.mark.slow
@pytest.mark.parametrize(
    "system,op,size",
    list(itertools.product(("tpu8i-1024", "tpu8i-pod"), OPS4, (KiB, MiB, 64 * MiB))),
)
def test_auto_within_2_percent_on_tpu8i_boardflies(system, op, size):
    topo = build_topology(load_system(system))
    check_auto(topo, op, size, CAE)


@pytest.mark.slow
def test_small_all_reduce_on_tpu8i_1024_at_most_16_us():
    """One-shot (one all-pairs step of the whole 1 KiB, reduced on arrival by the CAE)
    beats the two steps of ``direct``: launch + sync + 7 hops of 1 us + the messages
    and the global links' load."""
    topo = build_topology(load_system("tpu8i-1024"))
    auto, _ = run_collective(topo, "all-reduce", KiB, onchip=CAE)
    assert auto.time_s <= 16e-6
    floor_s = CAE.launch_s + 7 * 1e-6 + CAE.step_sync_s  # one step across the diameter
    assert auto.time_s >= floor_s


def batches_of(topo):
    routes = RouteCache(topo)
    return lambda step: routes.batch(step.src, step.dst, step.bytes)


def test_closed_form_bounds_never_exceed_the_simulated_time():
    """For every algorithm, op and size on small tori and a Boardfly, the bound ``auto``
    prunes by (nothing built) is at most the algorithm's simulated time."""
    topos = [
        Torus((4, 4), (True, True), link_bandwidth_Bps=100e9, hop_latency_s=1e-6),
        Torus((8,), (False,), link_bandwidth_Bps=100e9, hop_latency_s=1e-6),
        Boardfly(2, 3, 4, link_bandwidth_Bps=100e9, hop_latency_s=1e-6),
    ]
    ops = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast")
    for topo, op, size in itertools.product(topos, ops, (KiB, 64 * MiB)):
        group = make_group(topo)
        predictor = Predictor(routing_network(topo), CAE, batches_of(topo))
        for name, time_s in forced_times(topo, op, size, CAE).items():
            bound_s = predictor.closed_bound_s(ALGORITHMS.get(name).cost, op, group, size)
            assert bound_s <= time_s * (1 + 1e-9), (topo.kind, op, size, name)


def test_direct_is_pruned_unbuilt_by_its_cut_bound_on_a_big_torus():
    """1 GiB all-reduce over an 8x8x16 torus: direct's cut bound (the half z < 8 sends
    the other 512 x 512 x 2 V/n over the 2 x 8 x 8 links leaving it, both wraps of the
    z rings: the narrowest of the three halving cuts) is far above the torus algorithm's
    time, so auto never builds its million transfers."""
    topo = Torus((8, 8, 16), (True,) * 3, link_bandwidth_Bps=100e9, hop_latency_s=1e-6)
    group, n, size = make_group(topo), 1024, 2**30
    predictor = Predictor(routing_network(topo), OnChipModel.none(), lambda s: None)  # type: ignore[arg-type]
    bound_s = predictor.closed_bound_s(ALGORITHMS.get("direct").cost, "all-reduce", group, size)
    cut_s = 512 * 512 * 2 * size / n / (2 * 8 * 8 * 100e9)
    assert bound_s == pytest.approx(2 * 1e-6 + cut_s, rel=1e-9)  # two steps of one hop
    torus_s = 2 * size / (6 * 100e9)  # every chip's 2V over its 6 links, at best
    assert bound_s > 10 * torus_s


def test_message_cost_is_charged_beyond_one_message_per_port():
    """A direct all-gather on 64 chips of a 256-chip Boardfly (7 ports): each chip sends
    63 messages, ceil(63 / 7) - 1 = 8 of them past one per port."""
    topo = Boardfly(4, 8, 8, link_bandwidth_Bps=200e9, hop_latency_s=1e-6)
    res, _ = run_collective(
        topo, "all-gather", KiB, CollectiveOptions(algorithm="direct", chips=64), onchip=CAE
    )
    none = OnChipModel("cae", CAE.launch_s, CAE.step_sync_s, CAE.reduce_bandwidth_Bps,
                       CAE.link_efficiency, CAE.ports, 0.0)  # fmt: skip
    free, _ = run_collective(
        topo, "all-gather", KiB, CollectiveOptions(algorithm="direct", chips=64), onchip=none
    )
    assert res.time_s - free.time_s == pytest.approx(8 * MESSAGE_S, rel=1e-6)


def test_permute_with_pairs_runs_on_the_1152_chip_pod():
    """Any --pairs permute on any size: 64 MiB from chips 0..3 to 32..35 (the next
    group): auto runs direct, split over the ports of the routes, and takes at least
    the bytes over one chip's links."""
    system = load_system("tpu8i-pod")
    topo = build_topology(system)
    pairs = [(i, 32 + i) for i in range(4)]
    res, _ = run_collective(
        topo,
        "collective-permute",
        64 * MiB,
        CollectiveOptions(pairs=pairs, network=NetworkSettings.of("analytic")),
        chip=system.chip,
    )
    assert res.algorithm == "direct"
    out_Bps = 7 * float(topo.links.bandwidth_Bps.max())
    assert res.time_s >= 64 * MiB / out_Bps


def test_all_pairs_candidates_are_tried_only_within_the_memory_budget():
    """Direct's declared transfers: 2 n (n - 1) for an all-reduce. On the 1,152-chip pod
    2.65 M fit the 4 M budget; on a 9,216-chip torus 170 M do not, and auto still runs
    (the axis-by-axis algorithms) without building them."""
    from tpusim.collectives.select import MAX_BUILD_TRANSFERS, affordable

    direct = ALGORITHMS.get("direct").cost
    pod = make_group(build_topology(load_system("tpu8i-pod")))
    big = Torus((16, 24, 24), (True,) * 3, link_bandwidth_Bps=100e9, hop_latency_s=1e-6)
    assert direct.transfers("all-reduce", 1152) == 2 * 1152 * 1151 <= MAX_BUILD_TRANSFERS
    assert affordable(direct, "all-reduce", pod)
    assert not affordable(direct, "all-reduce", make_group(big))
    assert affordable(direct, "collective-permute", make_group(big))
