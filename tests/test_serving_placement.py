"""Serving replicas sit on compact torus blocks (tpusim.serving.placement)."""

from __future__ import annotations

import numpy as np
import pytest

from tpusim.config.loader import load_system
from tpusim.serving.placement import replica_chip_order
from tpusim.topology import build_topology


@pytest.mark.parametrize("system", ["ironwood-pod", "ironwood-256", "tpu8t-superpod"])
@pytest.mark.parametrize("chips", [2, 4, 8])
def test_replica_blocks_are_rings_of_single_hops(system, chips):
    topology = build_topology(load_system(system))
    replicas = 3
    order = replica_chip_order(topology, chips, replicas)
    assert len(order) == chips * replicas and len(set(order)) == len(order)
    coords = topology.coords(np.array(order))
    for r in range(replicas):
        block = coords[r * chips : (r + 1) * chips]
        assert (block.max(axis=0) - block.min(axis=0) <= 1).all()  # a 2 x 2 x 2 block at most
        for i in range(chips):  # consecutive chips and the last and the first: one hop
            hops = np.abs(block[i] - block[(i + 1) % chips]).sum()
            assert hops == 1


def test_other_sizes_and_topologies_keep_index_order():
    torus = build_topology(load_system("ironwood-pod"))
    assert replica_chip_order(torus, 6, 1) == ()
    assert replica_chip_order(torus, 16, 1) == ()
    assert replica_chip_order(build_topology(load_system("tpu8i-1024")), 8, 1) == ()


def test_a_replica_in_a_pod_runs_as_on_its_own_2x2x2_slice():
    """The same chip, model and stream on Ironwood's pod and on a 256-chip slice: both
    place the replica on a 2x2x2 block, so every figure is the same."""
    from tpusim.serving import Deployment, Service

    rows = []
    for system in ("ironwood-pod", "ironwood-256"):
        service = Service(Deployment(system=system, model="llama-3.1-8b", tp=8, dtype="fp8"))
        rows.append(service.costs.layer_times_s(256))
    assert rows[0] == pytest.approx(rows[1], rel=1e-9)
