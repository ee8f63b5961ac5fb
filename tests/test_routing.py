"""Routing choices: UGAL on Boardfly's group-to-group exchange against the injection
bound, Valiant against minimal on random permutations, reproducibility."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import collective

from tpusim.config.loader import load_system
from tpusim.engine import CollectiveOptions, run_collective
from tpusim.network.routing import concat_routes
from tpusim.topology import build_topology

MIB = 2**20


@pytest.fixture(scope="module")
def tpu8i():
    return build_topology(load_system("tpu8i-pod"))


def _exchange(topo, routing: str, seed: int = 0):
    """32 chips of group 0 each send 64 MiB to the chip at the same place in group 1."""
    pairs = [(i, 32 + i) for i in range(32)]
    return run_collective(
        topo,
        "collective-permute",
        64 * MIB,
        CollectiveOptions(pairs=pairs, algorithm="direct", routing=routing, seed=seed),
    )


def test_ugal_group_exchange_within_1_5x_of_the_injection_bound(tpu8i):
    bound_s = 64 * MIB / tpu8i.links.bandwidth_Bps.max()  # one port's worth per chip
    minimal, _ = _exchange(tpu8i, "minimal")
    ugal, net = _exchange(tpu8i, "ugal")
    assert minimal.time_s > 25 * bound_s  # the one global link between the groups
    assert ugal.time_s <= 1.5 * bound_s
    assert net.fault_report["routing"] == "ugal"
    assert net.fault_report["nonminimal_flows"] > 0


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_valiant_never_worse_than_twice_minimal_on_random_permutations(tpu8i, seed):
    rng = np.random.default_rng(seed)
    perm = rng.permutation(tpu8i.num_chips)
    pairs = [(i, int(p)) for i, p in enumerate(perm) if i != p]
    options = {"pairs": pairs, "algorithm": "direct", "seed": seed}
    minimal, _ = collective(tpu8i, "collective-permute", 16 * MIB, **options)
    valiant, net = collective(tpu8i, "collective-permute", 16 * MIB, routing="valiant", **options)
    assert valiant.time_s <= 2 * minimal.time_s
    assert net.fault_report["nonminimal_flows"] > len(pairs) // 2  # most cross groups


def test_same_seed_same_routes(tpu8i):
    (a, na), (b, nb), (_, nc) = (_exchange(tpu8i, "valiant", seed=s) for s in (4, 4, 5))
    assert a.time_s == b.time_s
    assert np.array_equal(na.link_bytes, nb.link_bytes)
    assert not np.array_equal(na.link_bytes, nc.link_bytes)


def test_boardfly_valiant_goes_through_a_third_group(tpu8i):
    src, dst = np.arange(32), np.arange(32) + 32
    mid = tpu8i.valiant_intermediates(src, dst, np.random.default_rng(0))
    groups = mid // 32
    assert np.all((groups != 0) & (groups != 1))
    same = tpu8i.valiant_intermediates(src, (src + 1) % 32, np.random.default_rng(0))
    assert np.array_equal(same, src)  # inside one group: minimal


def test_concat_routes_joins_each_pair():
    first = (np.array([0, 2, 2, 3]), np.array([10, 11, 12]))
    second = (np.array([0, 1, 3, 3]), np.array([20, 21, 22]))
    ptr, links = concat_routes(first, second)
    assert ptr.tolist() == [0, 3, 5, 6]
    assert links.tolist() == [10, 11, 20, 21, 22, 12]


def test_packet_fidelity_takes_non_minimal_routes(tpu8i):
    """Valiant at packet fidelity: packets follow the detours (longer routes than the
    7-hop diameter) and the time agrees with the flow fidelity on the same routes (same
    seed, same draws) within the packet-size error (64 KiB packets of 4 MiB flows)."""
    pairs = [(i, 32 + i) for i in range(4)]
    options = dict(pairs=pairs, algorithm="direct", routing="valiant", seed=3)
    packet, net = collective(tpu8i, "collective-permute", 4 * MIB, fidelity="packet", **options)
    flow, _ = collective(tpu8i, "collective-permute", 4 * MIB, fidelity="flow", **options)
    assert net.fault_report["routed_max_hops"] > 7
    assert packet.time_s == pytest.approx(flow.time_s, rel=0.05)


def test_routed_hops_count_the_paths_taken(tpu8i):
    _, ugal = _exchange(tpu8i, "ugal")
    _, valiant = _exchange(tpu8i, "valiant")
    # minimal group-to-group routes are at most 7 hops (local-board-local-global-...);
    # through a third group they cross two global links
    assert valiant.fault_report["routed_max_hops"] > 7
    assert valiant.fault_report["routed_mean_hops"] > ugal.fault_report["routed_mean_hops"] > 1
