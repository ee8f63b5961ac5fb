"""Draw the package's layers, the README's architecture picture (``docs/layers.png``).

The layers are read from ``LAYERS`` in ``tests/test_code_shape.py`` (the list the
code-shape test enforces: a unit imports only units of lower layers), so the picture
cannot drift from the rule. Each layer is a horizontal band, the lowest at the bottom,
holding its units: a subpackage drawn as ``name/``, a top-level module as ``name.py``.

Usage (from the repository root)::

    python tools/layers_figure.py             # writes docs/layers.png and docs/layers.svg
    python tools/layers_figure.py --out DIR   # writes DIR/layers.png and DIR/layers.svg
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tpusim"
CODE_SHAPE = ROOT / "tests" / "test_code_shape.py"

BAND_HEIGHT = 0.8
"""Height of one layer's band, in layer units (the gap between bands is the rest)."""

BAND_WIDTH = 10.0
"""Width of a band, in data units (the units of one layer share it)."""

BAND_INCHES = 0.42
"""Height of one layer in the figure, in inches."""


def layers() -> list[tuple[str, ...]]:
    """``LAYERS`` of ``tests/test_code_shape.py``, lowest layer first (a copy)."""
    spec = importlib.util.spec_from_file_location("_code_shape_layers", CODE_SHAPE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [tuple(layer) for layer in module.LAYERS]


def unit_label(unit: str) -> str:
    """How a unit is shown: ``name/`` for a subpackage, ``name.py`` for a module."""
    return f"{unit}/" if (PACKAGE / unit).is_dir() else f"{unit}.py"


def draw(drawn: list[tuple[str, ...]] | None = None) -> Figure:
    """The figure of ``drawn`` (default: :func:`layers`), one band per layer, the
    lowest at the bottom; each unit's label is a text artist with its unit's name
    as its ``gid`` (so a test can read back what was drawn)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    drawn = layers() if drawn is None else drawn
    fig = Figure(figsize=(7.0, BAND_INCHES * len(drawn) + 1.2))
    ax = fig.add_axes((0.05, 0.02, 0.9, 0.86))
    cmap = matplotlib.colormaps["YlGnBu"]
    for rank, units in enumerate(drawn):
        _draw_band(ax, rank, units, cmap(0.15 + 0.6 * rank / max(len(drawn) - 1, 1)))
    _draw_import_arrow(ax, len(drawn))
    ax.set_xlim(-0.8, BAND_WIDTH + 0.9)
    ax.set_ylim(-0.3, len(drawn) - 0.1)
    ax.axis("off")
    fig.suptitle(
        "tpusim's layers, the lowest at the bottom:\na unit imports only the units below it",
        fontsize=11,
    )
    return fig


def _draw_band(ax, rank: int, units: tuple[str, ...], color) -> None:
    """Layer ``rank``'s band with its rank on the left and one box per unit."""
    from matplotlib.patches import FancyBboxPatch

    y = rank + (1.0 - BAND_HEIGHT) / 2
    band = FancyBboxPatch(
        (0.0, y), BAND_WIDTH, BAND_HEIGHT, boxstyle="round,pad=0,rounding_size=0.12"
    )
    band.set(facecolor=color, edgecolor="#33415c", linewidth=0.8)
    ax.add_patch(band)
    ax.text(-0.25, rank + 0.5, str(rank), ha="right", va="center", fontsize=9, color="#555")
    slot = BAND_WIDTH / len(units)
    for i, unit in enumerate(units):
        ax.text(
            slot * (i + 0.5),
            rank + 0.5,
            unit_label(unit),
            ha="center",
            va="center",
            fontsize=10,
            family="monospace",
            gid=unit,
            bbox={"boxstyle": "round,pad=0.25", "facecolor": "white", "edgecolor": "#33415c"},
        )


def _draw_import_arrow(ax, num_layers: int) -> None:
    """An arrow down the right side: the direction every import points."""
    x = BAND_WIDTH + 0.45
    ax.annotate(
        "",
        xy=(x, 0.1),
        xytext=(x, num_layers - 0.3),
        arrowprops={"arrowstyle": "-|>", "color": "#33415c", "linewidth": 1.2},
    )
    ax.text(
        x + 0.15,
        num_layers / 2,
        "imports",
        rotation=270,
        ha="left",
        va="center",
        fontsize=9,
        color="#33415c",
    )


def write(out_dir: Path) -> list[Path]:
    """Write ``layers.png`` and ``layers.svg`` under ``out_dir``; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    fig = draw()
    paths = [out_dir / "layers.png", out_dir / "layers.svg"]
    fig.savefig(paths[0], dpi=110, metadata={"Software": None})
    import matplotlib

    with matplotlib.rc_context({"svg.hashsalt": "tpusim-layers"}):  # the same bytes each run
        fig.savefig(paths[1], metadata={"Date": None, "Creator": None})
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="output folder")
    args = parser.parse_args(argv)
    for path in write(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
