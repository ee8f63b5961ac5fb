"""Multi-slice Ironwood (issue 12, item 7): four 256-chip slices joined by the
data-centre network, and the hierarchical ICI + DCN all-reduce against its closed form.

Closed form (formulas.md 2.4, hierarchical): T = T_RS(ICI, V) + T_AR(DCN, V / p1) +
T_AG(ICI), with p1 the chips of one slice. Inside a slice (a wrapped 4x8x8 torus) each
axis of k chips runs a bidirectional ring: ceil((k-1)/2) a + (k-1)/k D / (2W) for its
reduce-scatter of D (and the mirror all-gather). Across the p2 slices the shard V / p1
runs a one-way ring over the fabric: 2 (p2 - 1) steps of 4 fabric hops (chip, leaf,
spine, leaf, chip) and (V / p1) / p2 bytes at the per-chip DCN bandwidth.
"""

from __future__ import annotations

import math

import pytest

from tpusim.collectives.offload import OnChipModel
from tpusim.config.loader import load_system
from tpusim.engine import CollectiveOptions, run_collective
from tpusim.topology import build_topology

MiB = 2**20
FABRIC_HOPS = 4  # chip -> leaf -> spine -> leaf -> chip


def ici_scatter_s(dims: list[int], data: float, bandwidth_Bps: float, hop_s: float) -> float:
    """Reduce-scatter of ``data`` bytes per chip over a wrapped torus, innermost axis
    first (bidirectional rings), as the hierarchical algorithm orders it."""
    total = 0.0
    for k in reversed(dims):
        total += math.ceil((k - 1) / 2) * hop_s + (k - 1) / k * data / (2 * bandwidth_Bps)
        data /= k
    return total


def hierarchical_all_reduce_s(system, size: float) -> float:
    slice_ = system.pod
    dims = list(slice_.spec.topology.dims)
    p1, p2 = slice_.num_chips, system.spec.pods
    fabric = system.fabric
    ici = ici_scatter_s(dims, size, slice_.link_bandwidth_Bps, slice_.hop_latency_s)
    shard = size / p1
    dcn_step = FABRIC_HOPS * fabric.hop_latency_s + shard / p2 / fabric.bandwidth_per_chip_Bps
    return 2 * ici + 2 * (p2 - 1) * dcn_step


def test_shipped_multislice_has_four_wrapped_slices_and_sourced_dcn():
    system = load_system("ironwood-multislice")
    assert system.num_chips == 4 * 256
    assert system.pod.name == "ironwood-256"
    assert system.pod.wraparound == (True, True, True)  # whole 4x4x4 cubes wrap
    assert system.fabric_bandwidth_per_chip_Bps == pytest.approx(100e9 / 8)  # D-7x: 100 Gb/s
    assert system.fabric_bandwidth_per_chip_Bps == system.chip.dcn.bandwidth_Bps
    for key in ("fabric.bandwidth_per_chip", "fabric.hop_latency", "pods"):
        assert system.spec.sources[key].grade


@pytest.mark.parametrize("size", [1 * MiB, 256 * MiB])
def test_hierarchical_all_reduce_matches_ici_scatter_dcn_reduce_ici_gather(size):
    system = load_system("ironwood-multislice")
    topology = build_topology(system)
    result, _ = run_collective(
        topology,
        "all-reduce",
        size,
        CollectiveOptions(algorithm="hierarchical"),
        onchip=OnChipModel.none(),
    )
    assert result.time_s == pytest.approx(hierarchical_all_reduce_s(system, size), rel=0.01)
    assert result.max_hops == FABRIC_HOPS


def test_slices_add_only_the_dcn_phase_to_one_slice_all_reduce():
    """The same algorithm on one slice alone takes the ICI phases only: the difference
    is the DCN all-reduce of the V / 256 shard over 4 slices (figures of the system file:
    100 Gb/s per chip, 5 us per fabric link)."""
    system = load_system("ironwood-multislice")
    topology = build_topology(system)
    size = 256 * MiB
    whole, _ = run_collective(
        topology,
        "all-reduce",
        size,
        CollectiveOptions(algorithm="hierarchical"),
        onchip=OnChipModel.none(),
    )
    one_slice, _ = run_collective(
        build_topology(system.pod),
        "all-reduce",
        size,
        CollectiveOptions(algorithm="hierarchical"),
        onchip=OnChipModel.none(),
    )
    dcn_s = whole.time_s - one_slice.time_s
    p2, shard = 4, size / 256
    expected = 2 * (p2 - 1) * (4 * 5e-6 + shard / p2 / (100e9 / 8))
    assert dcn_s == pytest.approx(expected, rel=0.02)
