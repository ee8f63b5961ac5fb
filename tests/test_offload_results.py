"""The on-chip collective model (TensorCore / SparseCore / CAE) and the result tables."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tpusim.collectives.base import Step
from tpusim.collectives.offload import CAE_LATENCY_GAIN, REDUCE_TRAFFIC_PER_BYTE, OnChipModel
from tpusim.config import load_chip, load_system
from tpusim.engine import CollectiveOptions, link_table, run_collective
from tpusim.results import COLLECTIVE_COLUMNS, LINK_COLUMNS, collectives_frame
from tpusim.topology import Torus, build_topology


def test_engine_follows_the_chips_offload_default():
    """SparseCore offload is the default on Ironwood only (MaxText's flag library); v5p
    and v6e keep it opt-in; 8i has its CAE."""
    assert OnChipModel.for_chip(load_chip("tpu8i")).engine == "cae"
    assert OnChipModel.for_chip(load_chip("ironwood")).engine == "sparsecore"
    assert OnChipModel.for_chip(load_chip("v5p")).engine == "tensorcore"
    assert OnChipModel.for_chip(load_chip("v6e")).engine == "tensorcore"
    assert OnChipModel.for_chip(load_chip("v5e")).engine == "tensorcore"
    assert OnChipModel.for_chip(load_chip("v5p"), "sparsecore").engine == "sparsecore"
    assert OnChipModel.for_chip(load_chip("v5p"), "none") == OnChipModel.none()
    with pytest.raises(ValueError, match="no CAE"):
        OnChipModel.for_chip(load_chip("ironwood"), "cae")
    with pytest.raises(ValueError, match="no SparseCores"):
        OnChipModel.for_chip(load_chip("v5e"), "sparsecore")


def test_cae_divides_launch_and_step_costs_and_tensorcore_reductions_overlap():
    chip = load_chip("tpu8i")
    costs = chip.collectives
    cae, tc = OnChipModel.for_chip(chip, "cae"), OnChipModel.for_chip(chip, "tensorcore")
    assert cae.launch_s == pytest.approx(costs.launch_s / CAE_LATENCY_GAIN)
    assert cae.step_sync_s == pytest.approx(costs.step_sync_s / CAE_LATENCY_GAIN)
    assert (tc.launch_s, tc.step_sync_s) == (costs.launch_s, costs.step_sync_s)
    step = Step.of(np.array([0]), np.array([1]), 1e6, reduce=True)
    reduce_s = 1e6 * REDUCE_TRAFFIC_PER_BYTE / chip.hbm.bandwidth_Bps
    assert cae.after_transfer_s(step, 0.0) == pytest.approx(cae.step_sync_s)
    # pipelined: only the part of the reduction that outlasts the transfer costs time
    assert tc.after_transfer_s(step, 0.0) == pytest.approx(tc.step_sync_s + reduce_s)
    assert tc.after_transfer_s(step, reduce_s / 4) == pytest.approx(
        tc.step_sync_s + 0.75 * reduce_s
    )
    assert tc.after_transfer_s(step, 2 * reduce_s) == pytest.approx(tc.step_sync_s)
    assert OnChipModel.none().after_transfer_s(step, 0.0) == 0.0


@pytest.mark.parametrize("engine", ["cae", "tensorcore"])
def test_ring_all_reduce_pays_launch_steps_efficiency_and_unhidden_reductions(engine):
    """Unidirectional ring all-reduce of 1 KiB on 8 chips: launch + 2(n-1) steps of
    (hop latency + chunk / (bandwidth x efficiency) + step sync), plus, in the n-1
    reduce-scatter steps, whatever of the reduction outlasts the step's transfer."""
    chip = load_chip("tpu8i")
    n, a, w = 8, 1e-6, 200e9
    topo = Torus((n,), (True,), link_bandwidth_Bps=w, hop_latency_s=a)
    result, _ = run_collective(
        topo, "all-reduce", 1024, CollectiveOptions(engine=engine, algorithm="ring"), chip=chip
    )
    model = OnChipModel.for_chip(chip, engine)
    chunk = 1024 / n
    transfer = a + chunk / (w * model.link_efficiency)
    unhidden = max(0.0, chunk / model.reduce_bandwidth_Bps - transfer)
    expected = model.launch_s + 2 * (n - 1) * (transfer + model.step_sync_s) + (n - 1) * unhidden
    assert result.time_s == pytest.approx(expected, rel=1e-9)


def test_link_efficiency_scales_the_bandwidth_term_only():
    """A bandwidth-bound ring all-gather takes 1/efficiency as long as on the nominal
    links; the latency terms do not scale."""
    n, w = 4, 1e9
    topo = Torus((n,), (True,), link_bandwidth_Bps=w, hop_latency_s=0.0)
    for efficiency in (1.0, 0.8, 0.5):
        model = OnChipModel("tensorcore", 0.0, 0.0, math.inf, efficiency)
        result, _ = run_collective(
            topo, "all-gather", 4e6, CollectiveOptions(algorithm="ring"), onchip=model
        )
        assert result.time_s == pytest.approx((n - 1) * 1e6 / (w * efficiency), rel=1e-9)
        assert result.max_link_utilization == pytest.approx(efficiency, rel=1e-9)


def test_cae_claim_maps_to_lower_latency_not_bandwidth():
    system = load_system("tpu8i-pod")
    topo = build_topology(system)
    small = {
        e: run_collective(
            topo, "all-reduce", 1024, CollectiveOptions(engine=e, chips=8), chip=system.chip
        )[0].time_s
        for e in ("cae", "tensorcore")
    }
    assert small["cae"] < small["tensorcore"]
    assert small["tensorcore"] / small["cae"] < CAE_LATENCY_GAIN  # hops are not on chip


def test_collectives_frame_has_documented_columns():
    topo = Torus((4,), (True,), link_bandwidth_Bps=1e9, hop_latency_s=0)
    results = [run_collective(topo, "all-gather", size)[0] for size in (1e3, 1e6)]
    frame = collectives_frame(results)
    assert tuple(frame.columns) == COLLECTIVE_COLUMNS
    assert frame["bytes"].tolist() == [1e3, 1e6]
    assert frame["time_s"].tolist() == [r.time_s for r in results]


def test_link_table_bytes_and_utilization():
    """Ring all-gather of V on 4 chips: each of the 4 forward links carries 3 V/4."""
    topo = Torus((4,), (True,), link_bandwidth_Bps=1e9, hop_latency_s=0)
    result, network = run_collective(topo, "all-gather", 4e6, CollectiveOptions(algorithm="ring"))
    table = link_table(topo, network, result.time_s)
    assert tuple(table.columns) == LINK_COLUMNS
    used = table[table["bytes"] > 0]
    assert len(used) == 4
    assert used["bytes"].tolist() == pytest.approx([3e6] * 4)
    assert used["utilization"].tolist() == pytest.approx([1.0] * 4)
    assert result.busiest_link_bytes == pytest.approx(3e6)
