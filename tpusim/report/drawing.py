"""What every figure of a scenario run shares: :class:`RunFigure`, the entry of
:data:`tpusim.report.figures.FIGURES`, and the helpers that name, save and close a
drawn figure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tpusim.results.files import file_stem, save_figure
from tpusim.results.run import ScenarioRun

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Draw", "RunFigure", "close", "named", "saved"]

#: ``draw(out, run) -> PNG paths``: draws one figure (or one per system or workload)
#: of the run into the folder ``out``, PNG and SVG, and returns the PNG paths (none
#: when the run has nothing it shows).
Draw = Callable[[Path, ScenarioRun], list[Path]]


@dataclass(frozen=True)
class RunFigure:
    """One figure of a scenario run: ``draw`` (:data:`Draw`) and ``files``, the file
    name(s) it writes (for the docs)."""

    draw: Draw
    files: str


def named(out: Path, name: str) -> Path:
    """``out / name`` with a system variant's name (``v6e[link_bandwidth=20 GB/s]``)
    made file-name safe as trace names are (a ``/`` would make a folder, a ``.`` a
    suffix)."""
    return out / file_stem(name).replace(".", "_")


def saved(fig: Figure, path: Path) -> Path:
    """Save ``fig`` as ``path``.png and .svg, close it; returns the PNG path."""
    save_figure(fig, path)
    close(fig)
    return path.with_suffix(".png")


def close(fig: Figure) -> None:
    """Release ``fig`` (pyplot keeps every open figure)."""
    import matplotlib.pyplot as plt

    plt.close(fig)
