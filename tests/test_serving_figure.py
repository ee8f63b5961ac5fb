"""The generations study's serving figure (:mod:`tpusim.report.serving_plots`): what it
draws is what the records say, read back from the drawn artists."""

from __future__ import annotations

import pytest

from tpusim.report.serving_plots import serving_at_slo
from tpusim.workloads.serving import ServingRecord


def _record(system: str, chips: int, capacity: float, tokens_per_chip: float) -> ServingRecord:
    # (rate, p99 TTFT, p99 TPOT, p50 TTFT, p50 TPOT) of four trials
    curve = tuple(
        (rate, 0.5 * k, 0.02 * k, 0.2 * k, 0.01 * k)
        for k, rate in enumerate((2.0, 4.0, 8.0, 16.0), start=1)
    )
    return ServingRecord(
        system=system, workload="serve-x", kind="serving", model="m", chips=chips,
        chips_per_replica=chips, tp=chips, ep=1, curve=curve,
        capacity_rate_per_s=capacity, capacity_rate_per_s_per_chip=capacity / chips,
        tokens_per_s_per_chip=tokens_per_chip, slo_ttft_s=2.0, slo_tpot_s=0.05,
    )  # fmt: skip


def test_the_figure_draws_the_trials_the_slo_the_capacities_and_the_bars(tmp_path):
    records = [_record("a-pod", 8, 8.0, 1234.0), _record("b-pod", 4, 4.0, 987.0)]
    fig = serving_at_slo(records, "Serving serve-x")
    ttft, tpot, bars = fig.axes
    lines = {(ln.get_label(), ln.get_linestyle()): ln for ln in ttft.get_lines()}
    x, y = lines[("a-pod", "-")].get_data()
    assert list(x) == [2 / 8, 4 / 8, 8 / 8, 16 / 8]  # requests/s per chip
    assert list(y) == pytest.approx([500, 1000, 1500, 2000])  # p99 TTFT in ms
    p50 = [ln for ln in tpot.get_lines() if ln.get_linestyle() == ":"][1]  # b-pod's
    assert list(p50.get_data()[0]) == [0.5, 1.0, 2.0, 4.0]
    assert list(p50.get_data()[1]) == pytest.approx([10, 20, 30, 40])
    horizontal = [ln.get_ydata()[0] for ln in tpot.get_lines() if ln.get_linestyle() == "--"]
    assert horizontal == pytest.approx([50.0])  # the TPOT SLO in ms
    vertical = sorted(
        ln.get_xdata()[0]
        for ln in ttft.get_lines()
        if list(ln.get_xdata()) == [ln.get_xdata()[0]] * 2
    )
    assert vertical == [1.0, 1.0]  # each capacity per chip: 8/8 and 4/4
    assert [p.get_height() for p in bars.patches] == [1234.0, 987.0]
    assert [t.get_text() for t in bars.get_xticklabels()] == ["a-pod", "b-pod"]
    fig.savefig(tmp_path / "f.png")


def test_each_bar_carries_its_80pct_interval_as_an_error_bar():
    """The error bar spans the serving throughput interval of the bar's value:
    [x e^-q90, x e^-q10] of the shipped residual quantiles (a system whose chip no
    figure measured, as these, takes the leave-one-chip-out residuals)."""
    import math

    from matplotlib.collections import LineCollection

    from tpusim.config.uncertainty import load_uncertainty

    q = load_uncertainty().kinds["serving_throughput"].quantiles
    fig = serving_at_slo([_record("a-pod", 8, 8.0, 1234.0)], "Serving serve-x")
    bars = fig.axes[2]
    (segments,) = [c.get_segments() for c in bars.collections if isinstance(c, LineCollection)]
    ((x0, lo), (x1, hi)) = segments[0]
    assert x0 == x1 == 0
    assert lo == pytest.approx(1234.0 / math.exp(q.q90))
    assert hi == pytest.approx(1234.0 / math.exp(q.q10))
