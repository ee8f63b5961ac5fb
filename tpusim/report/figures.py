"""The figures of a scenario run (the ``plots`` output writer), PNG and SVG, from one
registry: :data:`FIGURES` holds each figure by name (:class:`RunFigure`: ``draw(out,
run) -> PNG paths``), the one every run has (the systems side by side) registered here
first, then each workload kind's own (:data:`tpusim.report.kind_figures.KIND_FIGURES`).
Adding a figure is a function and one ``FIGURES.register(name, RunFigure(draw, files))``
call; it is drawn after the shipped ones (``tests/test_extend_figure.py``)."""

from __future__ import annotations

from pathlib import Path

from tpusim.registry import Registry
from tpusim.report import compare_plots as plots_compare
from tpusim.report.drawing import RunFigure, saved
from tpusim.report.kind_figures import KIND_FIGURES
from tpusim.results.comparison import comparison_frame
from tpusim.results.run import ScenarioRun
from tpusim.results.writers import Outputs

__all__ = ["FIGURES", "RunFigure", "write_plots", "write_scenario_plots"]


def summary_plot(out: Path, run: ScenarioRun) -> list[Path]:
    """``summary.png``: the systems side by side on the comparison table's key figures."""

    table = comparison_frame(run.records, run.chips)
    if not plots_compare.summary_rows(table):
        return []
    return [saved(plots_compare.systems_side_by_side(table), out / "summary")]


#: The figures of a scenario run by name, drawn in registration order; raises
#: UnknownEntryError / DuplicateEntryError (:mod:`tpusim.registry`).
FIGURES: Registry[RunFigure] = Registry("figure")
FIGURES.register_all((("summary", RunFigure(summary_plot, "summary.png")), *KIND_FIGURES))


def write_scenario_plots(out: str | Path, run: ScenarioRun) -> list[Path]:
    """Every registered figure of a scenario run (:data:`FIGURES`: the shipped ones are
    listed in :mod:`tpusim.report.kind_figures`), PNG and SVG, into ``out``; returns the
    PNG paths. A figure is written when the run has something it shows."""
    folder = Path(out)
    return [png for _, figure in FIGURES.items() for png in figure.draw(folder, run)]


def write_plots(out: Path, outputs: Outputs) -> list[Path]:
    """The ``plots`` output writer: :func:`write_scenario_plots` if the scenario asks
    for plots; returns the PNG and SVG paths."""
    if not outputs.with_plots:
        return []
    pngs = write_scenario_plots(out, outputs.run)
    return [path for png in pngs for path in (png, png.with_suffix(".svg"))]
