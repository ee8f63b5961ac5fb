"""What the command line and notebooks show of a run: topology metrics and pod totals
(re-exported from :mod:`tpusim.results.records`), the comparison table of a scenario
run as a frame and as text, and its figures (the ``plots`` output writer)."""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tpusim import units
from tpusim.html_report import write_html_report
from tpusim.results.records import (
    CollectiveRecord,
    DecodeRecord,
    ProgramRecord,
    Record,
    ScenarioRun,
    TopologyRecord,
    pod_totals,
    topology_summary,
)
from tpusim.results.tables import comparison_frame
from tpusim.results.writers import Outputs, register_writer
from tpusim.sources import write_sources
from tpusim.units import format_bytes
from tpusim.workloads import record_from_row

__all__ = [
    "comparison_table",
    "format_table",
    "pod_totals",
    "topology_summary",
    "write_plots",
    "write_scenario_plots",
]


def comparison_table(rows: Iterable[Record | Mapping[str, Any]]) -> Any:
    """Key figures of a scenario run (its records, or their rows as ``run.rows`` gives):
    one column per system, one row per figure (the figure's unit in its name).
    Collectives give their time at the smallest size and bus bandwidth at the largest;
    programs their step time, MFU, exposed communication, throughput per chip and,
    where configured, energy and cost per token; decode steps their latency per token.
    A row of an unregistered kind gives no figure."""
    records = [r if isinstance(r, Record) else record_from_row(dict(r)) for r in rows]
    return comparison_frame([r for r in records if r is not None])


def integer_bytes(tree: Any) -> Any:
    """``tree`` (a JSON record) with every byte count a whole number: a float under a
    key ``bytes`` or ``*_bytes`` (or in a list there) that is whole becomes an int, so
    ``--json`` prints ``1048576``, not ``1048576.0``. Other values are kept."""
    if isinstance(tree, dict):
        return {k: _whole(v) if _is_bytes_key(k) else integer_bytes(v) for k, v in tree.items()}
    if isinstance(tree, list | tuple):
        return [integer_bytes(v) for v in tree]
    return tree


def _is_bytes_key(key: Any) -> bool:
    return isinstance(key, str) and (key == "bytes" or key.endswith("_bytes"))


def _whole(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return [_whole(v) for v in value]
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    return integer_bytes(value)


#: Widest line of a comparison table as text (characters): wider tables (one column
#: per system: design-space has 40) wrap into blocks of columns, each block repeating
#: the figure names (a block holds at least one column).
TABLE_WIDTH = 120


def format_table(frame: Any) -> str:
    """A comparison table as text: 4 significant digits (whole numbers with thousands
    separators from 10,000), blanks for missing values, wrapped into blocks of
    columns at :data:`TABLE_WIDTH` characters."""

    def cell(value: float) -> str:
        return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"

    text = frame.to_string(float_format=cell, na_rep="", justify="right", line_width=TABLE_WIDTH)
    return "\n".join(line.rstrip(" \\") for line in text.splitlines())


def write_scenario_plots(out: str | Path, run: ScenarioRun) -> list[Path]:
    """The figures of a scenario run (see :mod:`tpusim.plots` and
    :mod:`tpusim.plots_compare`), PNG and SVG, into ``out``; returns the PNG paths.
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


def _saved(fig: Any, path: Path) -> Path:
    """Save ``fig`` as ``path``.png and .svg, close it; returns the PNG path."""
    from tpusim import plots

    plots.save(fig, path)
    _close(fig)
    return path.with_suffix(".png")


def _busbw_plots(out: Path, run: ScenarioRun) -> list[Path]:
    import pandas as pd

    from tpusim import plots

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
    from tpusim import plots

    measured = [r.system for r in run.records if isinstance(r, TopologyRecord)]
    if not measured:
        return []
    fig = plots.hop_histograms({s: run.topologies[s] for s in measured}, out / "hops")
    _close(fig)
    return [out / "hops.png"]


def _link_plots(out: Path, run: ScenarioRun) -> list[Path]:
    from tpusim import plots

    chosen: dict[str, Any] = {}
    for entry in run.collectives:
        best = chosen.get(entry.system)
        rank = (entry.op == "all-reduce", entry.bytes)
        if best is None or rank > (best.op == "all-reduce", best.bytes):
            chosen[entry.system] = entry
    written = []
    for system, entry in chosen.items():
        topology = run.topologies[system]
        fig = plots.port_utilization_heatmaps(topology, entry.link_bytes, entry.time_s)
        fig.suptitle(
            f"{system} ({plots.topology_title(topology)}): link utilisation per chip by port"
            f"\nduring a {format_bytes(entry.bytes)} {entry.op}"
        )
        written.append(_saved(fig, out / f"links-{system}"))
    return written


def _summary_plot(out: Path, run: ScenarioRun) -> list[Path]:
    from tpusim import plots_compare

    table = comparison_frame(run.records)
    if not plots_compare.summary_rows(table):
        return []
    return [_saved(plots_compare.systems_side_by_side(table), out / "summary")]


def _decode_plot(out: Path, run: ScenarioRun) -> list[Path]:
    from tpusim import plots_compare

    rows = [r.row() for r in run.records if isinstance(r, DecodeRecord)]
    if not rows:
        return []
    return [_saved(plots_compare.decode_latency(rows), out / "decode")]


def _serving_plots(out: Path, run: ScenarioRun) -> list[Path]:
    """The serving curve of each serving workload that searched for its capacity."""
    import pandas as pd

    from tpusim import plots_compare

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
        written.append(_saved(fig, out / f"serving-{workload}"))
    return written


def _steps_plot(out: Path, run: ScenarioRun) -> list[Path]:
    from tpusim import plots

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
    from tpusim import plots

    if not run.details:
        return []
    trained = {(r.system, r.workload) for r in run.records if r.kind == "training_step"}
    first = next((d for d in run.details if (d[0], d[1]) in trained), run.details[0])
    written = []
    for system, label, results in run.details:
        if label != first[1]:
            continue
        fig = plots.timeline(results.ops)
        fig.axes[0].set_title(_timeline_title(label, system, results))
        png = _saved(fig, out / f"timeline-{system}")
        written.append(png)
        if (system, label) == (first[0], first[1]):  # the same figure, not drawn again
            for suffix in (".png", ".svg"):
                shutil.copyfile(png.with_suffix(suffix), (out / "timeline").with_suffix(suffix))
            written.append(out / "timeline.png")
    return written


def _memory_plot(out: Path, run: ScenarioRun) -> list[Path]:
    """HBM per chip over the first training step that reports its memory."""
    from tpusim import plots_workloads

    for system, label, results in run.details:
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


register_writer("plots", write_plots)
# after the plots: the page inlines the figures the plots writer wrote
register_writer("sources", write_sources)
register_writer("report", write_html_report)


def topology_lines(rec: dict[str, Any]) -> list[str]:
    """The text ``tpusim topo`` prints for one :func:`topology_summary` record."""
    degree = rec["degree"]
    flops = ", ".join(f"{d} {units.format_flops(v)}" for d, v in rec["peak_flops"].items())
    kinds = ", ".join(f"{k} {n}" for k, n in rec["links_by_kind"].items())
    return [
        f"system          {rec['system']} ({rec['chip']} chips)",
        f"topology        {rec['topology']}  {_shape_text(rec['shape'])}",
        f"chips           {rec['chips']:,}",
        f"links           {rec['links']:,} bidirectional ({kinds})",
        f"degree          min {degree['min']}, mean {degree['mean']:.2f}, max {degree['max']}",
        f"diameter        {rec['diameter_hops']} hops",
        f"mean hops       {rec['mean_hops']:.3f}",
        f"bisection       {units.format_bandwidth(rec['bisection_bandwidth_Bps'])} (one direction)",
        f"ICI link        {units.format_bandwidth(rec['link_bandwidth_Bps'])} per direction, "
        f"{units.format_time(rec['hop_latency_s'])} per hop",
        f"peak compute    {flops}",
        f"HBM total       {units.format_bytes(rec['hbm_capacity_bytes'], binary=False)}",
    ]


def _shape_text(shape: dict[str, Any]) -> str:
    if "dims" in shape:
        wrap = "".join("W" if w else "-" for w in shape["wraparound"])
        return f"{'x'.join(map(str, shape['dims']))} wrap {wrap}" + (
            " twisted" if shape["twisted"] else ""
        )
    if "groups" in shape:
        return (
            f"{shape['chips_per_board']} chips/board x {shape['boards_per_group']} boards/group "
            f"x {shape['groups']} groups ({shape['arrangement']})"
        )
    return f"{shape['pods']} pods of {shape['chips_per_pod']:,} chips via {shape['fabric']}"
