"""Input limits (issue 16) checked in-process: units, whole bytes, sweep counts, YAML
limits, and the flow network's clock-resolution drain (the 1e30 GB/s hang)."""

from __future__ import annotations

import math

import pytest

from tpusim import units
from tpusim.config.limits import (
    MAX_PACKET_CHIPS,
    MAX_YAML_NODES,
    packet_work_problem,
    whole_bytes_problem,
)
from tpusim.config.yamlio import load_yaml
from tpusim.engine import CollectiveOptions, run_collective
from tpusim.errors import ConfigError
from tpusim.topology.torus import Torus
from tpusim.workloads.spec import SweepRange


@pytest.mark.parametrize("text", ["1e400", "1e400 GB/s", "-1e400 B/s", "1e300 PB/s"])
def test_non_finite_quantities_are_refused(text):
    with pytest.raises(units.UnitError, match="not a finite number"):
        units.parse_bandwidth(text)


@pytest.mark.parametrize("value", [math.inf, math.nan])
def test_non_finite_numbers_are_refused(value):
    with pytest.raises(units.UnitError, match="not a finite number"):
        units.parse_time(value)


@pytest.mark.parametrize(
    ("value", "problem"),
    [(0.5, "0.5 is not a whole number"), (0.0, "> 0"), (math.inf, "not a finite"), (1.0, None)],
)
def test_whole_bytes(value, problem):
    found = whole_bytes_problem(value)
    assert found is None if problem is None else problem in found


def test_range_count_matches_values_without_listing_them():
    """The closed-form count agrees with the listed values, and a 10^9-point range is
    counted without being listed."""
    small = SweepRange.model_validate({"from": "1 KiB", "to": "1 GiB", "factor": 4})
    assert small.count() == len(small.values()) == 11  # 4^0 .. 4^10
    huge = SweepRange.model_validate({"from": 1, "to": 1e9, "factor": 1.00000002})
    assert huge.count() == math.floor(math.log(1e9) / math.log(1.00000002) + 1e-9) + 1


def test_packet_estimate_is_a_ring_all_reduce_count():
    """chips x 2 x packets per buffer, and the chip limit first."""
    assert packet_work_problem(256, 64 * 1024 * 1000, 64 * 1024) is None  # 512,000
    assert "5,120,000 packet-hops" in packet_work_problem(256, 64 * 1024 * 10_000, 64 * 1024)
    assert "chips" in packet_work_problem(MAX_PACKET_CHIPS + 1, 1, 1)


def test_packet_estimate_counts_a_packet_per_transfer():
    """Packets larger than the message still cost one per transfer: a ring all-reduce
    on n chips sends 2 (n - 1) messages per chip (hand count), so 1,152 chips x 2,302 =
    2,651,904 packet-hops whatever the packet size, and auto counts its worst candidate
    (direct: 2 n (n - 1) transfers over n chips, also 2 (n - 1) per chip)."""
    from tpusim.collectives import fewest_sends_per_chip

    assert fewest_sends_per_chip("all-reduce", 1152, "ring") == 2 * 1151
    assert fewest_sends_per_chip("all-reduce", 1152, "direct") == 2 * 1151
    assert fewest_sends_per_chip("all-reduce", 1152) == 2 * 1151
    assert fewest_sends_per_chip("all-gather", 16, "ring") == 15
    assert fewest_sends_per_chip("all-reduce", 16, "no-such-algorithm") == 0
    problem = packet_work_problem(1152, 2**20, 2**30, fewest_sends_per_chip("all-reduce", 1152))
    assert "2,651,904 packet-hops" in problem and "fewer transfers" in problem
    assert packet_work_problem(16, 1024, 2**20, fewest_sends_per_chip("all-reduce", 16)) is None


def test_alias_shared_nodes_counted_once_when_under_the_limit(tmp_path):
    """Aliases within the limit load, and their paths fall back to the alias's line."""
    file = tmp_path / "a.yaml"
    file.write_text("base: &b {x: 1, y: [1, 2]}\nother: *b\n")
    data, lines = load_yaml(file)
    assert data["other"] == {"x": 1, "y": [1, 2]}
    assert lines[("base", "y")] == 1 and lines[("other",)] == 2


def test_node_limit_counts_expanded_aliases(tmp_path):
    """Ten aliases of a list of MAX_YAML_NODES / 10 scalars expand past the limit."""
    file = tmp_path / "a.yaml"
    items = ", ".join("0" for _ in range(MAX_YAML_NODES // 10))
    file.write_text(f"a: &a [{items}]\nb: [{', '.join(['*a'] * 10)}]\n")
    with pytest.raises(ConfigError, match=r"a\.yaml:2 b: expands to more than 100,000"):
        load_yaml(file)


def test_duplicate_key_inside_a_list(tmp_path):
    file = tmp_path / "a.yaml"
    file.write_text("cases:\n  - id: a\n    op: x\n    op: y\n")
    with pytest.raises(ConfigError, match=r"a\.yaml:4 cases\[0\]\.op: duplicate key"):
        load_yaml(file)


def test_flow_drains_below_the_clock_resolution():
    """A byte at 1e30 B/s drains in 1e-30 s, below the float resolution of a clock at
    over 100 s (1 s hops): it used to loop forever at one instant. The ring all-reduce
    of 64 chips takes 2 x 63 steps of one hop: 126 s plus negligible transfer time."""
    ring = Torus((64,), (True,), link_bandwidth_Bps=1e30, hop_latency_s=1.0)
    result, _ = run_collective(
        ring, "all-reduce", 64, CollectiveOptions(algorithm="ring", engine="none")
    )
    assert result.time_s == pytest.approx(2 * 63 * 1.0, rel=1e-9)
