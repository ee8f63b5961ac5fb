"""Typed records of a scenario run: economics from their arithmetic, columns that are
left out when unknown, rows that read back as the same records, and the comparison
figures each record gives."""

from __future__ import annotations

import pytest

from tpusim.results.comparison import comparison_frame
from tpusim.results.records import (
    CollectiveRecord,
    DecodeRecord,
    Economics,
    ProgramRecord,
    TopologyRecord,
)
from tpusim.results.simulation import CollectiveResult
from tpusim.workloads import record_from_row

SUMMARY = {
    "system": "v5e-pod",
    "workload": "program-name",
    "fidelity": "flow",
    "chips": 8,
    "step_time_s": 2.0,
    "compute_time_s": 1.5,
    "communication_time_s": 1.0,
    "communication_busy_time_s": 1.0,
    "exposed_communication_time_s": 0.5,
    "flops_per_chip": 1e12,
    "mfu": 0.25,
    "max_hops": 3,
    "mean_hops": 1.5,
    "max_link_utilization": 0.5,
    "mean_link_utilization": 0.25,
    "busiest_link_bytes": 1e6,
}


def test_economics_follow_their_arithmetic():
    """256 chips for 2 s at 500 W and 3 USD per chip-hour, 1,024 tokens per step."""
    money = Economics.of(2.0, 256, 1024.0, 500.0, 3.0)
    assert money.chip_hours_per_step == pytest.approx(256 * 2 / 3600)
    assert money.tokens_per_s == 512.0 and money.tokens_per_s_per_chip == 2.0
    assert money.energy_per_step_J == 500 * 256 * 2
    assert money.energy_per_token_J == pytest.approx(500 * 256 * 2 / 1024)
    assert money.cost_per_step_usd == pytest.approx(3 * 256 * 2 / 3600)
    assert money.cost_per_million_tokens_usd == pytest.approx(3 * 256 * 2 / 3600 / 1024 * 1e6)


def test_unknown_economics_are_left_out_of_the_row():
    assert list(Economics.of(2.0, 256).row()) == ["chip_hours_per_step"]
    assert list(Economics.of(2.0, 256, power_per_chip_W=400.0).row()) == [
        "chip_hours_per_step",
        "full_load_power_per_chip_W",
        "busy_share",
        "power_per_chip_W",
        "energy_per_step_J",
    ]
    assert "tokens_per_s" not in Economics.of(2.0, 256, 0.0, 400.0, 1.0).row()  # no tokens


def test_decode_row_puts_the_latency_before_the_economics_and_reads_back():
    money = Economics.of(2.0, 8, 64.0, 500.0)
    record = DecodeRecord.of(
        SUMMARY,
        economics=money,
        workload="decode[kv=sram]",
        kind="decode_step",
        chips=8,
        per_token_latency_s=2.0,
    )
    row = record.row()
    assert list(row)[:4] == ["system", "workload", "kind", "fidelity"]
    assert list(row)[list(row).index("busiest_link_bytes") + 1 :] == [
        "fragment",
        "per_token_latency_s",
        "chip_hours_per_step",
        "tokens_per_s",
        "tokens_per_s_per_chip",
        "full_load_power_per_chip_W",
        "busy_share",
        "power_per_chip_W",
        "energy_per_step_J",
        "energy_per_token_J",
    ]
    assert record_from_row(row) == record
    assert DecodeRecord.from_row(row) == record
    figures = dict(record.figures())
    assert figures["decode[kv=sram]: per-token latency (us)"] == 2e6
    assert "decode[kv=sram]: step time (ms)" not in figures


def test_program_figures_and_table():
    record = ProgramRecord.of(
        SUMMARY,
        economics=Economics.of(2.0, 8, 64.0, 500.0, 2.0),
        workload="train",
        kind="training_step",
        chips=8,
        fragment="fragment: 2 of 80 layers",
    )
    table = comparison_frame([record])
    assert table.loc["train: step time (ms)", "v5e-pod"] == 2000.0
    assert table.loc["train: exposed communication (ms)", "v5e-pod"] == 500.0
    assert table.loc["train: MFU (%)", "v5e-pod"] == 25.0
    assert table.loc["train: tokens/s per chip (fragment: 2 of 80 layers)", "v5e-pod"] == 4.0
    energy = "train: energy per token (fragment: 2 of 80 layers) (mJ)"
    assert table.loc[energy, "v5e-pod"] == pytest.approx(1e3 * 125.0)
    assert record_from_row(record.row()) == record


def collective(system: str, size: float, time_s: float) -> CollectiveRecord:
    result = CollectiveResult(
        system=system,
        op="all-reduce",
        bytes=size,
        chips=4,
        group_size=4,
        num_groups=1,
        algorithm="ring",
        fidelity="flow",
        engine="tensorcore",
        time_s=time_s,
        algbw_Bps=size / time_s,
        busbw_Bps=1.5 * size / time_s,
        max_hops=1,
        mean_hops=1.0,
        num_steps=6,
        num_flows=24,
        max_link_utilization=1.0,
        mean_link_utilization=1.0,
        busiest_link_bytes=size,
        num_events=6,
    )
    return CollectiveRecord(workload=f"ar[bytes={size:g}]", result=result)


def test_collective_sweep_gives_time_at_the_smallest_and_busbw_at_the_largest():
    records = [collective("a", 1024.0, 1e-5), collective("a", 2.0**20, 1e-3)]
    topology = TopologyRecord(
        system="a",
        workload="topo",
        kind="topology",
        topology="torus",
        chip="v5e",
        chips=4,
        links=4,
        diameter_hops=2,
        mean_pair_hops=1.33,
        bisection_bandwidth_Bps=2e11,
        link_bandwidth_Bps=5e10,
        hop_latency_s=1e-6,
        hbm_capacity_bytes=6.4e10,
        sram_capacity_bytes=1.3e8,
    )
    table = comparison_frame([*records, topology])
    assert list(table.index) == [
        "chips",
        "diameter (hops)",
        "mean hops",
        "bisection (TB/s, one direction)",
        "ar 1 KiB: time (us)",
        "ar 1 MiB: busbw (GB/s)",
    ]
    assert table.loc["ar 1 KiB: time (us)", "a"] == pytest.approx(10.0)
    assert table.loc["ar 1 MiB: busbw (GB/s)", "a"] == pytest.approx(1.5 * 2**20 / 1e-3 / 1e9)
    assert record_from_row(records[0].row()) == records[0]
    assert record_from_row(topology.row()) == topology
