from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("matplotlib")

from tpusim.engine import Simulation, run_collective
from tpusim.program import Op, Program
from tpusim.report import link_plots, plots, timeline_plots
from tpusim.results.files import save_figure
from tpusim.topology.boardfly import Boardfly
from tpusim.topology.torus import Torus

UNIT = re.compile(r"\(.+\)")


def torus() -> Torus:
    return Torus((4, 4), (True, True), link_bandwidth_Bps=1e9, hop_latency_s=1e-6)


def boardfly() -> Boardfly:
    return Boardfly(2, 2, 3, link_bandwidth_Bps=1e9, hop_latency_s=1e-6)


def check(fig, tmp_path, legend: bool) -> None:
    save_figure(fig, tmp_path / "x")
    for suffix in (".png", ".svg"):
        out = tmp_path / f"x{suffix}"
        assert out.exists() and out.stat().st_size > 0
    ax = fig.axes[0]
    assert ax.get_title().strip()
    assert UNIT.search(ax.get_xlabel()), ax.get_xlabel()
    assert UNIT.search(ax.get_ylabel()), ax.get_ylabel()
    if legend:
        assert ax.get_legend() is not None
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_import_is_cheap():
    """Importing tpusim.report.plots must not pull in matplotlib (imported inside functions)."""
    code = "import sys, tpusim.report.plots; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_busbw_vs_size(tmp_path):
    sizes = [2.0**e for e in range(10, 31, 2)]
    frame = pd.DataFrame(
        [
            {"system": s, "op": op, "bytes": b, "busbw_Bps": scale * f * 1e9 * b / (b + 2**20)}
            for s, scale in (("v5e-pod", 45.0), ("v5p-pod", 90.0))
            for op, f in (("all-reduce", 1.0), ("all-gather", 0.8))
            for b in sizes
        ]
    )
    fig = plots.busbw_vs_size(frame, path=tmp_path / "x")
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert "1 KiB" in labels and "1 MiB" in labels and "1 GiB" in labels
    assert len(ax.get_legend().get_texts()) == 4
    check(fig, tmp_path, legend=True)


def test_hop_histograms(tmp_path):
    fig = plots.hop_histograms({"4x4 torus": torus(), "boardfly 2x2x3": boardfly()}, tmp_path / "x")
    heights = [p.get_height() for p in fig.axes[0].patches]
    assert sum(heights) == pytest.approx(2.0)
    check(fig, tmp_path, legend=True)


def test_link_utilization_heatmap_torus(tmp_path):
    topo = torus()
    result, network = run_collective(topo, "all-reduce", 2**20)
    fig = link_plots.link_utilization_heatmap(
        topo, network.link_bytes, result.time_s, tmp_path / "x"
    )
    assert "torus" in fig.axes[0].get_title()
    assert fig.axes[1].get_ylabel() == "mean link utilisation (%)"
    per_chip = link_plots.chip_link_utilization(topo, network.link_bytes, result.time_s)
    assert per_chip.shape == (16,) and np.all((per_chip >= 0) & (per_chip <= 1 + 1e-9))
    check(fig, tmp_path, legend=False)


def test_link_utilization_heatmap_boardfly(tmp_path):
    topo = boardfly()
    result, network = run_collective(topo, "all-to-all", 2**20)
    fig = link_plots.link_utilization_heatmap(
        topo, network.link_bytes, result.time_s, tmp_path / "x"
    )
    assert "Boardfly" in fig.axes[0].get_title()
    assert fig.axes[0].get_images()[0].get_array().shape == (3, 4)
    check(fig, tmp_path, legend=False)


def run_step():
    ops = (
        Op("mm", "matmul", m=2048, n=2048, k=2048),
        Op("ar", "collective", collective="all-reduce", size_bytes=2**22, overlap=True),
        Op("mm2", "matmul", m=2048, n=2048, k=2048, after=("mm",)),
        Op("ag", "collective", collective="all-gather", size_bytes=2**22, after=("mm2",)),
    )
    return Simulation("v5e-pod", Program("p", ops)).run()


def test_step_breakdown(tmp_path):
    r = run_step()
    rows = [
        r.summary(),
        {
            "system": "v5p-pod",
            "program": "made-up",
            "compute_time_s": 2e-3,
            "communication_time_s": 1e-3,
            "exposed_communication_time_s": 4e-4,
        },
    ]
    fig = plots.step_breakdown(rows, tmp_path / "x")
    assert fig.axes[0].get_ylabel() == "time (ms)"
    check(fig, tmp_path, legend=True)


def test_timeline(tmp_path):
    r = run_step()
    assert r.ops
    fig = timeline_plots.timeline(r.ops, tmp_path / "x")
    assert fig.axes[0].get_xlabel() == "time since the step began (us)"
    kinds = {op.kind for op in r.ops}
    assert {t.get_text() for t in fig.axes[0].get_legend().get_texts()} == kinds
    check(fig, tmp_path, legend=True)
