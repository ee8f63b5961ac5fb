"""The on-chip collective model (TensorCore / SparseCore / CAE) and the result tables."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tpusim.collectives.base import Step
from tpusim.collectives.offload import (
    CAE_LATENCY_GAIN,
    REDUCE_TRAFFIC_PER_BYTE,
    TENSORCORE_STEP_OVERHEAD_S,
    OnChipModel,
)
from tpusim.config import load_chip, load_system
from tpusim.engine import link_table, run_collective
from tpusim.results import COLLECTIVE_COLUMNS, LINK_COLUMNS, collectives_frame
from tpusim.topology import Torus, build_topology


def test_engine_chosen_by_what_the_chip_has():
    assert OnChipModel.for_chip(load_chip("tpu8i")).engine == "cae"
    assert OnChipModel.for_chip(load_chip("ironwood")).engine == "sparsecore"
    assert OnChipModel.for_chip(load_chip("v5e")).engine == "tensorcore"
    with pytest.raises(ValueError, match="no CAE"):
        OnChipModel.for_chip(load_chip("ironwood"), "cae")
    with pytest.raises(ValueError, match="no SparseCores"):
        OnChipModel.for_chip(load_chip("v5e"), "sparsecore")


def test_cae_is_five_times_lower_step_overhead_and_tensorcore_pays_reductions():
    chip = load_chip("tpu8i")
    cae, tc = OnChipModel.for_chip(chip, "cae"), OnChipModel.for_chip(chip, "tensorcore")
    step = Step.of(np.array([0]), np.array([1]), 1e6, reduce=True)
    assert cae.step_time_s(step) == pytest.approx(TENSORCORE_STEP_OVERHEAD_S / CAE_LATENCY_GAIN)
    hbm = chip.hbm.bandwidth_Bps
    assert tc.step_time_s(step) == pytest.approx(
        TENSORCORE_STEP_OVERHEAD_S + 1e6 * REDUCE_TRAFFIC_PER_BYTE / hbm
    )
    assert OnChipModel.none().step_time_s(step) == 0.0


@pytest.mark.parametrize("engine", ["cae", "tensorcore"])
def test_small_all_reduce_pays_hops_plus_on_chip_overhead(engine):
    """Latency-bound: a bidirectional-ring all-reduce of 1 KiB on a ring of 8 takes
    2 ceil((n-1)/2) = 8 steps of (hop latency + step overhead + reduction): per phase
    3 steps of a whole chunk each way and one of the antipodal half chunk."""
    chip = load_chip("tpu8i")
    n, a, w = 8, 1e-6, 200e9
    topo = Torus((n,), (True,), link_bandwidth_Bps=w, hop_latency_s=a)
    result, _ = run_collective(
        topo, "all-reduce", 1024, chip=chip, engine=engine, algorithm="bidir-ring"
    )
    model = OnChipModel.for_chip(chip, engine)
    chunk = 1024 / n
    steps = n // 2
    network = steps * a + (steps - 1 + 0.5) * chunk / w
    reduce = (
        (n - 1) * chunk / model.reduce_bandwidth_Bps
        if math.isfinite(model.reduce_bandwidth_Bps)
        else 0.0
    )
    expected = 2 * (network + steps * model.step_overhead_s) + reduce
    assert result.time_s == pytest.approx(expected, rel=1e-9)


def test_cae_claim_maps_to_lower_latency_not_bandwidth():
    system = load_system("tpu8i-pod")
    topo = build_topology(system)
    small = {
        e: run_collective(topo, "all-reduce", 1024, chip=system.chip, engine=e, chips=8)[0].time_s
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
    result, network = run_collective(topo, "all-gather", 4e6, algorithm="ring")
    table = link_table(topo, network, result.time_s)
    assert tuple(table.columns) == LINK_COLUMNS
    used = table[table["bytes"] > 0]
    assert len(used) == 4
    assert used["bytes"].tolist() == pytest.approx([3e6] * 4)
    assert used["utilization"].tolist() == pytest.approx([1.0] * 4)
    assert result.busiest_link_bytes == pytest.approx(3e6)
