"""The figures of a scenario run (the ``plots`` output writer), PNG and SVG."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from tpusim.results.records import (
    CollectiveRecord,
    DecodeRecord,
    ProgramRecord,
    TopologyRecord,
)
from tpusim.results.run import ScenarioRun
from tpusim.results.tables import comparison_frame
from tpusim.results.writers import Outputs
from tpusim.units import format_bytes

__all__ = ["write_plots", "write_scenario_plots"]


def write_scenario_plots(out: str | Path, run: ScenarioRun) -> list[Path]:
    """The figures of a scenario run (see :mod:`tpusim.report.plots` and
    :mod:`tpusim.report.compare_plots`), PNG and SVG, into ``out``; returns the PNG paths.
    Written when there is something to show:

    * ``summary.png``: the systems side by side on the comparison table's key figures;
    * ``busbw-<op>.png``: bus bandwidth against message size per system (log-log), for
      each collective op swept over ``bytes``;
    * ``hops.png``: hop-count histograms of the systems with a topology workload;
    * ``links-<system>.png``: link utilisation per chip (0-100%) by port (torus axis
      and direction, Boardfly link kind) during the largest all-reduce (else the
      largest collective) on that system;
    * ``steps.png``: compute, exposed and hidden communication per program run
      (decode steps left out: see ``decode.png``);
    * ``decode.png``: latency per generated token of each decode step, per system;
    * ``timeline.png``: the first training step (else the first program) simulated;
      ``timeline-<system>.png``: the same workload on every system that ran it.
    * ``memory.png``: HBM per chip over the first training step, by part;
    * ``serving-<workload>.png``: p99 TTFT and TPOT against request rate, a line per
      system, from each serving workload's capacity search.
    """
    folder = Path(out)
    return [
        *_summary_plot(folder, run),
        *_busbw_plots(folder, run),
        *_hops_plot(folder, run),
        *_link_plots(folder, run),
        *_steps_plot(folder, run),
        *_decode_plot(folder, run),
        *_timeline_plots(folder, run),
        *_memory_plot(folder, run),
        *_serving_plots(folder, run),
    ]


def _named(out: Path, name: str) -> Path:
    """``out / name`` with a system variant's name (``v6e[link_bandwidth=20 GB/s]``)
    made file-name safe as trace names are (a ``/`` would make a folder, a ``.`` a
    suffix)."""
    return out / name.replace("/", "_").replace(",", "_").replace("=", "-").replace(".", "_")


def _saved(fig: Any, path: Path) -> Path:
    """Save ``fig`` as ``path``.png and .svg, close it; returns the PNG path."""
    from tpusim.report import plots

    plots.save(fig, path)
    _close(fig)
    return path.with_suffix(".png")


def _busbw_plots(out: Path, run: ScenarioRun) -> list[Path]:
    import pandas as pd

    from tpusim.report import plots

    rows = [r.row() for r in run.records if isinstance(r, CollectiveRecord)]
    curves = pd.DataFrame(rows)
    written = []
    if not curves.empty:
        for op, part in curves.groupby("op", sort=False):
            if part["bytes"].nunique() > 1:
                fig = plots.busbw_vs_size(part)
                fig.axes[0].set_title(f"{op}: bus bandwidth vs message size")
                written.append(_saved(fig, out / f"busbw-{op}"))
    return written


def _hops_plot(out: Path, run: ScenarioRun) -> list[Path]:
    from tpusim.report import plots

    measured = [r.system for r in run.records if isinstance(r, TopologyRecord)]
    if not measured:
        return []
    fig = plots.hop_histograms({s: run.topologies[s] for s in measured}, out / "hops")
    _close(fig)
    return [out / "hops.png"]


def _link_plots(out: Path, run: ScenarioRun) -> list[Path]:
    from tpusim.report import link_plots

    chosen: dict[str, Any] = {}
    for entry in run.collectives:
        best = chosen.get(entry.system)
        rank = (entry.op == "all-reduce", entry.bytes)
        if best is None or rank > (best.op == "all-reduce", best.bytes):
            chosen[entry.system] = entry
    written = []
    for system, entry in chosen.items():
        topology = run.topologies[system]
        fig = link_plots.port_utilization_heatmaps(topology, entry.link_bytes, entry.time_s)
        fig.suptitle(
            f"{system} ({link_plots.topology_title(topology)}): link utilisation per chip by port"
            f"\nduring a {format_bytes(entry.bytes)} {entry.op}"
        )
        written.append(_saved(fig, _named(out, f"links-{system}")))
    return written


def _summary_plot(out: Path, run: ScenarioRun) -> list[Path]:
    from tpusim.report import compare_plots as plots_compare

    table = comparison_frame(run.records)
    if not plots_compare.summary_rows(table):
        return []
    return [_saved(plots_compare.systems_side_by_side(table), out / "summary")]


def _decode_plot(out: Path, run: ScenarioRun) -> list[Path]:
    from tpusim.report import compare_plots as plots_compare

    rows = [r.row() for r in run.records if isinstance(r, DecodeRecord)]
    if not rows:
        return []
    return [_saved(plots_compare.decode_latency(rows), out / "decode")]


def _serving_plots(out: Path, run: ScenarioRun) -> list[Path]:
    """The serving curve of each serving workload that searched for its capacity."""
    import pandas as pd

    from tpusim.report import compare_plots as plots_compare

    points: dict[str, list[dict[str, Any]]] = {}
    for record in run.records:
        for rate, ttft, tpot in getattr(record, "curve", ()):
            point = {"system": record.system, "rate_per_s": rate}
            points.setdefault(record.workload, []).append(
                point | {"ttft_p99_s": ttft, "tpot_p99_s": tpot}
            )
    written = []
    for workload, rows in points.items():
        fig = plots_compare.serving_latency_vs_rate(pd.DataFrame(rows))
        for ax in fig.axes[:2]:  # the workload in words on each panel
            ax.set_title(f"{workload}: {ax.get_title().lower()}", fontsize="medium")
        written.append(_saved(fig, _named(out, f"serving-{workload}")))
    return written


def _steps_plot(out: Path, run: ScenarioRun) -> list[Path]:
    from tpusim.report import plots

    programs = [
        r.row()
        for r in run.records
        if isinstance(r, ProgramRecord) and not isinstance(r, DecodeRecord)
    ]
    if not programs:
        return []
    fig = plots.step_breakdown(programs, out / "steps")
    _close(fig)
    return [out / "steps.png"]


def _timeline_title(label: str, system: str, results: Any) -> str:
    """The timeline's title; a step extrapolated from a shorter simulated loop (its
    ops end before the step does) says how much of it is drawn."""
    drawn_s = max((op.end_at for op in results.ops), default=0.0)
    if drawn_s < 0.999 * results.step_time_s:
        return (
            f"Timeline: {label} on {system}, the simulated {drawn_s:.3g} s of a "
            f"{results.step_time_s:.3g} s step (identical iterations repeat it)"
        )
    return f"Timeline of one step: {label} on {system}"


def _timeline_plots(out: Path, run: ScenarioRun) -> list[Path]:
    """``timeline.png`` (the first training step, else the first program) and
    ``timeline-<system>.png`` for that workload on every system that ran it."""
    from tpusim.report import timeline_plots

    if not run.details:
        return []
    trained = {(r.system, r.workload) for r in run.records if r.kind == "training_step"}
    first = next((d for d in run.details if (d.system, d.label) in trained), run.details[0])
    written = []
    for detail in run.details:
        system, label, results = detail.system, detail.label, detail.results
        if label != first.label:
            continue
        fig = timeline_plots.timeline(results.ops)
        fig.axes[0].set_title(_timeline_title(label, system, results))
        png = _saved(fig, _named(out, f"timeline-{system}"))
        written.append(png)
        if (system, label) == (first.system, first.label):  # the same figure, not drawn again
            for suffix in (".png", ".svg"):
                shutil.copyfile(png.with_suffix(suffix), (out / "timeline").with_suffix(suffix))
            written.append(out / "timeline.png")
    return written


def _memory_plot(out: Path, run: ScenarioRun) -> list[Path]:
    """HBM per chip over the first training step that reports its memory."""
    from tpusim.report import workload_plots as plots_workloads

    for detail in run.details:
        system, label, results = detail.system, detail.label, detail.results
        points = getattr(results, "memory_points", None)
        if points:
            stage = getattr(results, "memory_stage", 0)
            capacity = getattr(results, "hbm_capacity_bytes", None)
            title = f"HBM per chip over the step: {label} on {system}, stage {stage}"
            fig = plots_workloads.memory_timeline(points, capacity, title=title)
            return [_saved(fig, out / "memory")]
    return []


def write_plots(out: Path, outputs: Outputs) -> list[Path]:
    """The ``plots`` output writer: :func:`write_scenario_plots` if the scenario asks
    for plots; returns the PNG and SVG paths."""
    if not outputs.with_plots:
        return []
    pngs = write_scenario_plots(out, outputs.run)
    return [path for png in pngs for path in (png, png.with_suffix(".svg"))]


def _close(fig: Any) -> None:
    import matplotlib.pyplot as plt

    plt.close(fig)
