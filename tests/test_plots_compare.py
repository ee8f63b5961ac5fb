"""The plots that inform (issue 15): log-log bus bandwidth, heatmaps on a fixed 0-100%
scale and per port, merged timeline lanes, decode, serving and summary figures. Each
checks the numbers drawn against the numbers given (or a hand-made link load)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("matplotlib")

from tpusim.report import compare_plots as plots_compare
from tpusim.report import link_plots, plots, timeline_plots
from tpusim.results.simulation import OpRecord
from tpusim.topology.boardfly import Boardfly
from tpusim.topology.torus import Torus


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def torus() -> Torus:
    return Torus((4, 4), (True, True), link_bandwidth_Bps=1e9, hop_latency_s=1e-6)


def test_busbw_axes_are_log_log_with_a_point_per_size():
    sizes = [2.0**e for e in range(10, 31)]  # every power of two, 1 KiB..1 GiB
    frame = pd.DataFrame(
        {"system": "a", "op": "all-reduce", "bytes": sizes, "busbw_Bps": [s / 1e-3 for s in sizes]}
    )
    ax = plots.busbw_vs_size(frame).axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    (line,) = ax.get_lines()
    assert list(line.get_xdata()) == sizes
    assert np.allclose(line.get_ydata(), np.asarray(sizes) / 1e-3 / 1e9)
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert {"1 KiB", "1 MiB", "1 GiB"} <= set(labels)


def test_heatmap_scale_is_fixed_at_0_to_100_percent():
    topo = torus()
    links = topo.links
    half = 0.5 * links.bandwidth_Bps * 1.0  # every link 50% busy over 1 s
    image = link_plots.link_utilization_heatmap(topo, half, 1.0).axes[0].images[0]
    assert image.get_clim() == (0, 100)
    assert np.allclose(image.get_array(), 50.0)


def test_port_heatmaps_show_one_panel_per_axis_and_direction():
    topo = torus()
    n, links = topo.num_chips, topo.links
    plus_x = np.array([topo.port_name(i) == "ICI x+" for i in range(len(links))])
    load = np.where(plus_x, 0.8 * links.bandwidth_Bps, 0.0)  # only x+ links, 80% busy
    fig = link_plots.port_utilization_heatmaps(topo, load, 1.0)
    panels = {ax.get_title(): ax.images[0] for ax in fig.axes if ax.images}
    assert set(panels) == {"ICI x+ links", "ICI x- links", "ICI y+ links", "ICI y- links"}
    assert np.allclose(panels["ICI x+ links"].get_array(), 80.0)
    for name in ("ICI x- links", "ICI y+ links", "ICI y- links"):
        assert np.allclose(panels[name].get_array(), 0.0)
        assert panels[name].get_clim() == (0, 100)
    assert int(plus_x.sum()) == n  # one x+ port per chip


def test_boardfly_ports_are_its_link_kinds_and_titles_are_words():
    fly = Boardfly(2, 2, 3, link_bandwidth_Bps=1e9, hop_latency_s=1e-6)
    assert set(link_plots.port_groups(fly)) == set(fly.links.kind_names)
    assert link_plots.topology_title(fly) == "Boardfly, 3 groups x 2 boards x 2 chips"
    assert link_plots.topology_title(torus()) == "4x4 torus"
    title = (
        link_plots.link_utilization_heatmap(fly, np.zeros(len(fly.links)), 1.0).axes[0].get_title()
    )
    assert "=" not in title


def op(name: str, unit: str, start: float, end: float) -> OpRecord:
    return OpRecord(
        name=name,
        kind="collective",
        chips="spmd (8 chips)",
        unit=unit,
        start_at=start,
        end_at=end,
        flops=0.0,
    )


def test_timeline_merges_units_with_identical_schedules():
    ops = [
        op("mm", "tensorcore", 0.0, 1e-3),
        *(op("ar", u, 1e-3, 2e-3) for u in ("ici", "ICI x+", "ICI x-")),
        op("ag", "ICI y+", 2e-3, 3e-3),
    ]
    lanes = timeline_plots.timeline_lanes(ops)
    assert [label for label, _ in lanes] == [
        "spmd (8 chips): tensorcore",
        "spmd (8 chips): ici, ICI x+, x- (same ops)",
        "spmd (8 chips): ICI y+",
    ]
    fig = timeline_plots.timeline(ops)
    assert len(fig.axes[0].get_yticklabels()) == 3


def test_decode_latency_bars_are_the_latencies_in_us():
    rows = [
        {"system": s, "workload": f"decode[kv_cache={kv}]", "per_token_latency_s": t}
        for s, kv, t in (("a", "hbm", 2e-3), ("a", "sram", 1e-3), ("b", "hbm", 4e-3))
    ]
    ax = plots_compare.decode_latency(rows).axes[0]
    heights = sorted(p.get_height() for p in ax.patches if not np.isnan(p.get_height()))
    assert heights == pytest.approx([1e3, 2e3, 4e3])
    assert ax.get_legend() is not None


def test_serving_plot_draws_each_system_against_rate():
    frame = pd.DataFrame(
        {
            "system": ["a", "a", "b", "b"],
            "rate_per_s": [1.0, 10.0, 1.0, 10.0],
            "ttft_p99_s": [0.1, 0.2, 0.3, 0.6],
            "tpot_p99_s": [0.01, 0.02, 0.03, 0.06],
        }
    )
    fig = plots_compare.serving_latency_vs_rate(frame)
    ttft, tpot = fig.axes[:2]
    assert [line.get_label() for line in ttft.get_lines()] == ["a", "b"]
    assert np.allclose(ttft.get_lines()[1].get_ydata(), [300.0, 600.0])
    assert np.allclose(tpot.get_lines()[0].get_ydata(), [10.0, 20.0])
    assert ttft.get_xscale() == "log"


def test_summary_figure_puts_each_key_row_side_by_side():
    table = pd.DataFrame(
        {"x": [7.0, 331.0, 0.5, 1.0], "y": [16.0, 234.0, 0.6, np.nan]},
        index=["diameter (hops)", "ar 1 GiB: busbw (GB/s)", "t: step time (ms)", "other"],
    )
    assert plots_compare.summary_rows(table) == list(table.index[:3])
    fig = plots_compare.systems_side_by_side(table)
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.patches]
    assert [ax.get_title() for ax in panels] == list(table.index[:3])
    assert [p.get_height() for p in panels[1].patches] == [331.0, 234.0]
    with pytest.raises(ValueError, match="none of the summary figures"):
        plots_compare.systems_side_by_side(table.loc[["other"]])
