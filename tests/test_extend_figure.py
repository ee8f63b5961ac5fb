"""How to extend: a new figure, from this file alone.

A figure registered in :data:`tpusim.report.figures.FIGURES` is drawn by the ``plots``
writer of every run after the shipped ones, picks its records by their type (here a
record type of its own, as a new workload kind would have), and lands in the run's
folder and in ``report.html``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from tpusim.registry import DuplicateEntryError, UnknownEntryError
from tpusim.report.drawing import RunFigure, saved
from tpusim.report.figures import FIGURES, write_plots, write_scenario_plots
from tpusim.report.html import write_html_report
from tpusim.results.records import Record
from tpusim.results.run import ScenarioRun
from tpusim.results.writers import Outputs


@dataclass(frozen=True, kw_only=True)
class TilesRecord(Record):
    """A toy kind's record: how many MXU tiles a system used."""

    tiles: int


def tiles_plot(out: Path, run: ScenarioRun) -> list[Path]:
    """``tiles.png``: a bar per system of its tiles records (none: no figure)."""
    import matplotlib.pyplot as plt

    records = [r for r in run.records if isinstance(r, TilesRecord)]
    if not records:
        return []
    fig, ax = plt.subplots()
    ax.bar([r.system for r in records], [r.tiles for r in records])
    ax.set(title="Tiles per system", xlabel="system", ylabel="tiles (count)")
    return [saved(fig, out / "tiles")]


@pytest.fixture
def tiles_figure():
    FIGURES.register("tiles", RunFigure(tiles_plot, "tiles.png"))
    yield
    FIGURES.unregister("tiles")


def _run(*tiles: int) -> ScenarioRun:
    systems = ("v5e-pod", "tpu8i-pod", "ironwood-pod")
    records: list[Record] = [
        TilesRecord(system=s, workload="t", kind="tiles", tiles=n)
        for s, n in zip(systems, tiles, strict=False)
    ]
    return ScenarioRun(records=records)


def test_registered_figure_is_drawn_after_the_shipped_ones(tiles_figure, tmp_path):
    pngs = write_scenario_plots(tmp_path, _run(3, 5))
    assert pngs == [tmp_path / "tiles.png"]  # no shipped figure has records to show here
    assert (tmp_path / "tiles.png").stat().st_size > 0
    assert (tmp_path / "tiles.svg").stat().st_size > 0
    names = FIGURES.names()
    assert (names[0], names[-1]) == ("summary", "tiles")


def test_the_figure_shows_its_records_values(tiles_figure, tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    drawn = []
    monkeypatch.setattr(plt, "close", drawn.append)  # keep the figure to read it back
    write_scenario_plots(tmp_path, _run(3, 5, 8))
    (fig,) = drawn
    heights = [bar.get_height() for bar in fig.axes[0].patches]
    labels = [tick.get_text() for tick in fig.axes[0].get_xticklabels()]
    assert heights == [3, 5, 8]
    assert labels == ["v5e-pod", "tpu8i-pod", "ironwood-pod"]


def test_no_records_of_its_type_no_file(tiles_figure, tmp_path):
    assert write_scenario_plots(tmp_path, _run()) == []
    assert not (tmp_path / "tiles.png").exists()


def test_the_plots_writer_and_the_page_carry_it(tiles_figure, tmp_path):
    outputs = Outputs(run=_run(4), resolved={"name": "toy"}, with_plots=True)
    written = write_plots(tmp_path, outputs)
    assert written == [tmp_path / "tiles.png", tmp_path / "tiles.svg"]
    (page,) = write_html_report(tmp_path, outputs)
    assert 'alt="tiles.png"' in page.read_text()


def test_names_are_checked():
    with pytest.raises(DuplicateEntryError):
        FIGURES.register("summary", RunFigure(tiles_plot, "tiles.png"))
    with pytest.raises(UnknownEntryError, match="summary"):
        FIGURES.get("tiels")
