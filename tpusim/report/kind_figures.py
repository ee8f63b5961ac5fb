"""Each workload kind's own figures of a scenario run, drawn from its typed records and
results (:data:`KIND_FIGURES`, registered in :data:`tpusim.report.figures.FIGURES`
after the figures every run has). A kind picks its records by type, never by a kind
string or an attribute it hopes for; a new kind registers its figure the same way
(``tests/test_extend_figure.py``)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from tpusim.later import LaterModule
from tpusim.report import compare_plots as plots_compare
from tpusim.report import link_plots as links
from tpusim.report import plots
from tpusim.report import timeline_plots as timelines
from tpusim.report import workload_plots as plots_workloads
from tpusim.report.drawing import RunFigure, close, named, saved
from tpusim.report.serving_plots import serving_at_slo
from tpusim.results.records import CollectiveRecord, DecodeRecord, ProgramRecord, TopologyRecord
from tpusim.results.run import CollectiveLinks, ScenarioRun
from tpusim.results.simulation import Results
from tpusim.units import format_bytes
from tpusim.workloads.serving import ServingRecord
from tpusim.workloads.training_reuse import TrainingResults

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = LaterModule("pandas")

__all__ = ["KIND_FIGURES"]


# -- collective ------------------------------------------------------------------------
def busbw_plots(out: Path, run: ScenarioRun) -> list[Path]:
    """``busbw-<op>.png``: bus bandwidth against message size per system (log-log) with
    its 80% interval as a band, for each collective op swept over ``bytes``."""
    rows = [r.interval_row() for r in run.records if isinstance(r, CollectiveRecord)]
    curves = pd.DataFrame(rows)
    written = []
    if not curves.empty:
        for op, part in curves.groupby("op", sort=False):
            if part["bytes"].nunique() > 1:
                fig = plots.busbw_vs_size(part)
                fig.axes[0].set_title(f"{op}: bus bandwidth vs message size")
                written.append(saved(fig, out / f"busbw-{op}"))
    return written


def link_plots(out: Path, run: ScenarioRun) -> list[Path]:
    """``links-<system>.png``: link utilisation per chip (0-100%) by port (torus axis and
    direction, Boardfly link kind) during the largest all-reduce (else the largest
    collective) on that system."""

    chosen: dict[str, CollectiveLinks] = {}
    for entry in run.collectives:
        best = chosen.get(entry.system)
        rank = (entry.op == "all-reduce", entry.bytes)
        if best is None or rank > (best.op == "all-reduce", best.bytes):
            chosen[entry.system] = entry
    written = []
    for system, entry in chosen.items():
        topology = run.topologies[system]
        fig = links.port_utilization_heatmaps(topology, entry.link_bytes, entry.time_s)
        fig.suptitle(
            f"{system} ({links.topology_title(topology)}): link utilisation per chip by port"
            f"\nduring a {format_bytes(entry.bytes)} {entry.op}"
        )
        written.append(saved(fig, named(out, f"links-{system}")))
    return written


# -- topology --------------------------------------------------------------------------
def hops_plot(out: Path, run: ScenarioRun) -> list[Path]:
    """``hops.png``: hop-count histograms of the systems with a topology workload."""

    measured = [r.system for r in run.records if isinstance(r, TopologyRecord)]
    if not measured:
        return []
    fig = plots.hop_histograms({s: run.topologies[s] for s in measured}, out / "hops")
    close(fig)
    return [out / "hops.png"]


# -- programs: training and decode steps ---------------------------------------------------
def steps_plot(out: Path, run: ScenarioRun) -> list[Path]:
    """``steps.png``: compute, exposed and hidden communication per program run (decode
    steps left out: see ``decode.png``)."""

    programs = [
        r.row()
        for r in run.records
        if isinstance(r, ProgramRecord) and not isinstance(r, DecodeRecord)
    ]
    if not programs:
        return []
    fig = plots.step_breakdown(programs, out / "steps")
    close(fig)
    return [out / "steps.png"]


def decode_plot(out: Path, run: ScenarioRun) -> list[Path]:
    """``decode.png``: latency per generated token of each decode step, per system."""

    rows = [r.row() for r in run.records if isinstance(r, DecodeRecord)]
    if not rows:
        return []
    return [saved(plots_compare.decode_latency(rows), out / "decode")]


def _timeline_title(label: str, system: str, results: Results) -> str:
    """The timeline's title; a step extrapolated from a shorter simulated loop (its
    ops end before the step does) says how much of it is drawn."""
    drawn_s = max((op.end_at for op in results.ops), default=0.0)
    if drawn_s < 0.999 * results.step_time_s:
        return (
            f"Timeline: {label} on {system}, the simulated {drawn_s:.3g} s of a "
            f"{results.step_time_s:.3g} s step (identical iterations repeat it)"
        )
    return f"Timeline of one step: {label} on {system}"


def timeline_plots(out: Path, run: ScenarioRun) -> list[Path]:
    """``timeline.png`` (the first training step, else the first program) and
    ``timeline-<system>.png`` for that workload on every system that ran it."""

    if not run.details:
        return []
    trained = [d for d in run.details if isinstance(d.results, TrainingResults)]
    first = (trained or run.details)[0]
    written = []
    for detail in run.details:
        system, label, results = detail.system, detail.label, detail.results
        if label != first.label:
            continue
        fig = timelines.timeline(results.ops)
        fig.axes[0].set_title(_timeline_title(label, system, results))
        png = saved(fig, named(out, f"timeline-{system}"))
        written.append(png)
        if (system, label) == (first.system, first.label):  # the same figure, not redrawn
            for suffix in (".png", ".svg"):
                shutil.copyfile(png.with_suffix(suffix), (out / "timeline").with_suffix(suffix))
            written.append(out / "timeline.png")
    return written


def memory_plot(out: Path, run: ScenarioRun) -> list[Path]:
    """``memory.png``: HBM per chip over the first training step that reports its
    memory, by part."""

    for detail in run.details:
        results = detail.results
        if isinstance(results, TrainingResults) and results.memory_points:
            title = (
                f"HBM per chip over the step: {detail.label} on {detail.system}, "
                f"stage {results.memory_stage}"
            )
            fig = plots_workloads.memory_timeline(
                results.memory_points, results.hbm_capacity_bytes or None, title=title
            )
            return [saved(fig, out / "memory")]
    return []


# -- serving ---------------------------------------------------------------------------
def serving_plots(out: Path, run: ScenarioRun) -> list[Path]:
    """``serving-<workload>.png``: TTFT and TPOT (p50, p99) against offered load per
    system with the SLO and each capacity marked, and tokens/s per chip at the SLO
    (:func:`tpusim.report.serving_plots.serving_at_slo`), for each serving workload
    whose capacity was searched."""

    by_workload: dict[str, list[ServingRecord]] = {}
    for record in run.records:
        if isinstance(record, ServingRecord) and record.curve:
            by_workload.setdefault(record.workload, []).append(record)
    return [
        saved(serving_at_slo(records, f"Serving {workload}"), named(out, f"serving-{workload}"))
        for workload, records in by_workload.items()
    ]


#: The kinds' figures, in the order a run writes them.
KIND_FIGURES: tuple[tuple[str, RunFigure], ...] = (
    ("busbw", RunFigure(busbw_plots, "busbw-<op>.png")),
    ("hops", RunFigure(hops_plot, "hops.png")),
    ("links", RunFigure(link_plots, "links-<system>.png")),
    ("steps", RunFigure(steps_plot, "steps.png")),
    ("decode", RunFigure(decode_plot, "decode.png")),
    ("timeline", RunFigure(timeline_plots, "timeline.png, timeline-<system>.png")),
    ("memory", RunFigure(memory_plot, "memory.png")),
    ("serving", RunFigure(serving_plots, "serving-<workload>.png")),
)
