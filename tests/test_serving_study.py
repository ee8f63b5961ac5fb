"""Serving in scenarios and the generations study (issue 14): the ``serving`` workload
kind and its record, the performance-per-dollar claim against its closed form, and
the latency curve's plot."""

from __future__ import annotations

import json

import pytest

from tests.helpers import run
from tpusim.config.uncertainty import load_uncertainty
from tpusim.results.intervals import json_row
from tpusim.serving.perf_per_dollar import inference_perf_per_dollar
from tpusim.study.claims import claim_rows
from tpusim.workloads import record_from_row
from tpusim.workloads.serving import ServingRecord

SCENARIO = """name: s
systems: [tpu8i-pod]
assumptions:
  power_per_chip: {tpu8i: 1000 W}
  price_per_chip_hour_usd: {tpu8i: 3.6}
workloads:
  - {name: sv, kind: serving, model: llama-3.1-8b, tp: 2, rate: 4, requests: 40,
     prompt_tokens: 128, output_tokens: {uniform: [4, 12]}}
"""


def test_serving_workload_in_a_scenario(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    code, out, _ = run(capsys, "run", str(path), "--out", str(tmp_path / "o"), "--json", "--quiet")
    assert code == 0
    (row,) = json.loads(out)["results"]
    assert row["kind"] == "serving" and row["completed"] + row["rejected"] == 40
    assert row["chips"] == 2 and row["rate_per_s"] == 4.0
    # energy and cost per million output tokens: power x chips / (tokens/s), price x chip-hours
    seconds = 1e6 / row["output_tokens_per_s"]
    assert row["energy_per_million_tokens_J"] == pytest.approx(1000 * 2 * seconds)
    assert row["cost_per_million_tokens_usd"] == pytest.approx(3.6 * 2 * seconds / 3600)
    record = record_from_row(row)
    assert isinstance(record, ServingRecord) and json_row(record.interval_row()) == row
    assert row["ttft_p99_s_interval"] is None or "serving_ttft" in load_uncertainty().kinds
    assert "serving_ttft" in row["interval_basis"]


def test_perf_per_dollar_closed_form():
    """1.5x the capacity per chip at 8i $3-4 vs Ironwood $4-5 per chip-hour."""
    claim = {"claimed_ratio": 1.8}  # up to 80% better
    p = inference_perf_per_dollar(15.0, 10.0, (3.0, 4.0), (4.0, 5.0), **claim)
    assert p.perf_ratio == pytest.approx(1.5)
    assert p.breakeven_price_ratio == pytest.approx(1.5 / 1.8)
    assert p.price_ratio_best == pytest.approx(3 / 5)
    assert p.advantage_best == pytest.approx(1.5 / 0.6 - 1)  # +150%
    assert p.advantage_mid == pytest.approx(1.5 / (3.5 / 4.5) - 1)
    assert p.advantage_worst == pytest.approx(1.5 / 1.0 - 1)
    assert p.price_ratio_worst == pytest.approx(4 / 4)
    with pytest.raises(ValueError, match="positive"):
        inference_perf_per_dollar(0.0, 1.0, (4.0, 6.0), (4.0, 6.0), **claim)


@pytest.mark.parametrize(
    ("ratio", "interval", "verdict"),
    [
        # 1.5x perf over price ratios 0.6 (cheapest) .. 1.0 (dearest), threshold 1.62
        (1.5, None, "cannot tell"),  # 2.5x at the cheapest, 1.5x at the dearest
        (1.7, None, "holds"),  # 1.7x even at the dearest
        (0.9, None, "does not hold"),  # 1.5x even at the cheapest
        (1.7, (1.5, 1.9), "holds within the interval"),  # 1.5-1.9 at the dearest
        (2.0, (1.7, 2.3), "holds"),  # 1.7-2.3 at the dearest
        (0.9, (0.8, 1.0), "cannot tell"),  # 1.33-1.67 at the cheapest: hi 1.67 >= 1.62
        (0.8, (0.7, 0.9), "does not hold"),  # 1.17-1.5 at the cheapest
    ],
)
def test_perf_per_dollar_verdict_over_the_price_range(ratio, interval, verdict):
    """The claim holds when it holds at the dearest price ratio the ranges allow,
    fails when it fails at the cheapest (interval's high end included), and the
    unknown price decides otherwise: "cannot tell"."""
    from tpusim.config.uncertainty import Interval
    from tpusim.study.claim_verdicts import price_range_verdict

    given = None if interval is None else Interval(*interval, basis="by hand")
    assert price_range_verdict(ratio, given, (0.6, 1.0), 0.9 * 1.8) == verdict


def test_claim_row_reads_capacities_from_scenario_rows():
    """12 over 10 req/s per chip: 1.2x; price ratios 3.5 / 6 .. 6 / 4 (the claims
    file's 8i and Ironwood ranges): 2.06x at the cheapest, 0.8x at the dearest, so the
    unknown price decides (without a serving ratio interval); the deciding price ratio
    1.2 / (0.9 x 1.8) at Ironwood's $4-6."""
    serving = {"kind": "serving", "workload": "w"}
    rows = [
        {"system": "tpu8i-pod", "capacity_rate_per_s_per_chip": 12.0, **serving},
        {"system": "ironwood-256", "capacity_rate_per_s_per_chip": 10.0, **serving},
    ]
    (row,) = claim_rows(rows, checks={"perf_per_dollar"})
    assert "1.20x" in row["tpusim"] and "8i at 0.58x-1.50x Ironwood's price" in row["reading"]
    deciding = 1.2 / (0.9 * 1.8)
    assert f"up to {deciding:.2f}x" in row["reading"]
    assert f"${4 * deciding:.2f}-${6 * deciding:.2f} per chip-hour" in row["reading"]
    if load_uncertainty().kinds.get("serving_throughput") is None:
        assert row["verdict"] == "cannot tell"
        assert "no interval (no residual model for serving_throughput" in row["interval"]
    assert claim_rows(rows[:1], checks={"perf_per_dollar"}) == []


def test_latency_curve_plot_is_written(tmp_path, capsys):
    plot = tmp_path / "curve"
    code, out, _ = run(capsys, "serve", "tpu8i-pod", "--model", "llama-3.1-8b", "--tp", "2",
                       "--requests", "40", "--output-tokens", "8", "--rates", "2,8",
                       "--plot", str(plot), "--json")  # fmt: skip
    assert code == 0
    curve = json.loads(out)["curve"]
    assert [p["rate_per_s"] for p in curve] == [2.0, 8.0]
    assert (tmp_path / "curve.png").stat().st_size > 10_000


def test_shipped_serving_scenario_validates():
    from pathlib import Path

    from tpusim.study.scenario import Scenario

    path = Path(__file__).resolve().parent.parent / "scenarios" / "serving.yaml"
    scenario = Scenario(path)
    kinds = {w.kind for w in (p.workload for p in scenario.runs)}
    assert kinds == {"serving"} and len(scenario.runs) == 3  # per system
    assert all(w.find_capacity for w in (p.workload for p in scenario.runs))
    assert [s.name for s in scenario.systems] == ["tpu8i-pod", "ironwood-256", "tpu8t-superpod"]


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ("slo_ttft: 2 parsecs, slo_tpot: 1 ms", r"slo_ttft: '2 parsecs'"),
        ("find_capacity: true, slo_tpot: 1 ms", "find_capacity needs slo_ttft and slo_tpot"),
        ("tp: 16", r"kv_heads \(8\) is not divisible"),
    ],
)
def test_bad_serving_workload_is_one_line(tmp_path, capsys, fields, match):
    import re

    from tests.helpers import assert_one_error_line

    path = tmp_path / "s.yaml"
    path.write_text(
        "name: s\nsystems: [tpu8i-pod]\nworkloads:\n"
        f"  - {{name: sv, kind: serving, model: llama-3.1-8b, {fields}}}\n"
    )
    out = str(tmp_path / "o")
    line = assert_one_error_line(*run(capsys, "run", str(path), "--out", out, "--quiet"))
    assert re.search(match, line) and "s.yaml:4" in line
