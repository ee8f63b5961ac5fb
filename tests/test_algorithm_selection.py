"""``--algorithm auto``: cost-based selection (issue 10 item 2) and the analytic
fidelity's busiest-link bound (item 4).

The oracle for selection is brute force: every registered algorithm that can run the
collective, simulated at the same fidelity; auto must be within 2% of the fastest.
"""

from __future__ import annotations

import itertools

import pytest
from helpers import collective

from tests.helpers import forced_times
from tpusim.collectives.offload import OnChipModel
from tpusim.config import load_chip
from tpusim.engine import CollectiveOptions, run_collective
from tpusim.network import NetworkSettings
from tpusim.topology import Boardfly, Torus

MiB, GiB = 2**20, 2**30
W, A = 100e9, 0.5e-6  # one link direction (B/s), per-hop latency (s)

TOPOLOGIES = {
    "ring16": lambda: Torus((16,), (True,), link_bandwidth_Bps=W, hop_latency_s=A),
    "line8": lambda: Torus((8,), (False,), link_bandwidth_Bps=W, hop_latency_s=A),
    "torus4x4x4": lambda: Torus((4, 4, 4), (True,) * 3, link_bandwidth_Bps=W, hop_latency_s=A),
    "mesh2x4": lambda: Torus((2, 4), (False, False), link_bandwidth_Bps=W, hop_latency_s=A),
    "boardfly2x3x4": lambda: Boardfly(2, 3, 4, link_bandwidth_Bps=W, hop_latency_s=A),
}
OPS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast")
SIZES = (1024.0, 1 * MiB, 64 * MiB, 1 * GiB)
# the chip's cost terms (launch, step sync, efficiency, reductions) take part in the choice
MODEL = OnChipModel.for_chip(load_chip("v5p"))


def check_auto(topology, op, size, fidelity):
    topo = TOPOLOGIES[topology]()
    auto, _ = run_collective(
        topo, op, size, CollectiveOptions(network=NetworkSettings.of(fidelity)), onchip=MODEL
    )
    times = forced_times(topo, op, size, MODEL, fidelity)
    best = min(times.values())
    assert auto.algorithm in times
    assert auto.time_s == pytest.approx(times[auto.algorithm], rel=1e-9)
    assert auto.time_s <= 1.02 * best, (auto.algorithm, times)


@pytest.mark.parametrize("topology,op", list(itertools.product(TOPOLOGIES, OPS)))
def test_auto_is_within_2_percent_of_the_fastest_at_flow(topology, op):
    for size in SIZES:
        check_auto(topology, op, size, "flow")


@pytest.mark.parametrize("topology", list(TOPOLOGIES))
def test_auto_is_the_fastest_at_analytic(topology):
    """At the analytic fidelity too (where the prediction is the simulation, except that
    it also charges pipelines that share links)."""
    for op, size in itertools.product(OPS, SIZES):
        check_auto(topology, op, size, "analytic")


def test_auto_changes_algorithm_with_size():
    """Latency-bound and bandwidth-bound all-reduces want different algorithms on a ring."""
    topo = TOPOLOGIES["ring16"]()
    small, _ = run_collective(topo, "all-reduce", 1024, onchip=MODEL)
    large, _ = run_collective(topo, "all-reduce", GiB, onchip=MODEL)
    assert small.algorithm != large.algorithm


ANALYTIC_CASES = [
    ("ring16", "all-to-all", None),
    ("line8", "all-to-all", None),
    ("torus4x4x4", "all-to-all", None),
    ("mesh2x4", "all-to-all", None),
    ("ring16", "collective-permute", [(i, (i + 5) % 16) for i in range(16)]),
    ("torus4x4x4", "collective-permute", [(i, (i + 21) % 64) for i in range(64)]),
    ("mesh2x4", "collective-permute", [(i, 7 - i) for i in range(8)]),
]


@pytest.mark.parametrize("topology,op,pairs", ANALYTIC_CASES)
def test_analytic_is_within_10_percent_of_flow_on_contended_patterns(topology, op, pairs):
    """All-to-all and permutes on rings and tori share links: the analytic fidelity,
    bounded by the busiest link, stays within 10% of the max-min flow fidelity."""
    topo = TOPOLOGIES[topology]()
    none = OnChipModel.none()
    for size in (1 * MiB, 64 * MiB):
        kwargs = {"algorithm": "direct", "onchip": none, "pairs": pairs}
        analytic, _ = collective(topo, op, size, fidelity="analytic", **kwargs)
        flow, _ = collective(topo, op, size, fidelity="flow", **kwargs)
        assert analytic.time_s == pytest.approx(flow.time_s, rel=0.10)


def test_auto_on_a_group_past_the_limit_runs_the_structural_default():
    """134,400 chips: no candidate search (it would take minutes), hierarchical on pods."""
    from tpusim.collectives import AUTO_MAX_CHIPS, default_algorithm, make_group
    from tpusim.config import load_system
    from tpusim.engine import simulate_collective
    from tpusim.topology import build_topology

    system = load_system("tpu8t-virgo")
    assert system.num_chips > AUTO_MAX_CHIPS
    group = make_group(build_topology(system))
    result, _ = simulate_collective(
        system, "all-reduce", 1024, CollectiveOptions(network=NetworkSettings.of("analytic"))
    )
    assert result.algorithm == default_algorithm("all-reduce", group) == "hierarchical"
