"""Link utilisation figures (matplotlib, imported lazily): per chip, the mean
utilisation of its links as a heatmap on the topology's plot layout, and one such
heatmap per port group (torus axis and direction, Boardfly link kind).

Like :mod:`tpusim.report.plots`: every function returns the ``Figure``; with ``path``
it also writes ``path.png`` and ``path.svg``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tpusim.report.plots import finish, pyplot
from tpusim.results.files import save_figure

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.image import AxesImage

    from tpusim.topology.base import Topology


def chip_link_utilization(topology: Topology, link_bytes: np.ndarray, time_s: float) -> np.ndarray:
    """Per chip, the mean utilisation (0..1) of its outgoing links."""
    links = topology.links
    util = (
        np.asarray(link_bytes, dtype=float) / (links.bandwidth_Bps * time_s)
        if time_s > 0
        else np.zeros(len(links))
    )
    n = topology.num_chips
    mask = links.src < n
    total = np.bincount(links.src[mask], weights=util[mask], minlength=n)[:n]
    count = np.bincount(links.src[mask], minlength=n)[:n]
    return np.divide(total, count, out=np.zeros(n), where=count > 0)


def topology_title(topology: Topology) -> str:
    """The topology's shape in words: ``Boardfly, 36 groups x 8 boards x 4 chips`` or
    ``16x24x24 torus``, from :meth:`~tpusim.topology.base.Topology.describe` (the plot
    layout's title for other kinds)."""
    shape = topology.describe()
    if {"groups", "boards_per_group", "chips_per_board"} <= shape.keys():
        return (
            f"Boardfly, {shape['groups']} groups x {shape['boards_per_group']} boards"
            f" x {shape['chips_per_board']} chips"
        )
    if "dims" in shape:
        return f"{'x'.join(str(d) for d in shape['dims'])} torus"
    return str(topology.plot_layout().title)


def link_utilization_heatmap(
    topology: Topology,
    link_bytes: np.ndarray,
    time_s: float,
    path: str | Path | None = None,
) -> Figure:
    """Mean outgoing-link utilisation per chip on a fixed 0-100% colour scale, laid out
    by the topology's :meth:`~tpusim.topology.base.Topology.plot_layout` (a torus as an
    x-by-y grid, mean over z; a Boardfly as groups (rows) by chips within the group
    (columns))."""
    plt = pyplot()
    per_chip = 100.0 * chip_link_utilization(topology, link_bytes, time_s)
    layout = topology.plot_layout()
    grid = layout.grid(per_chip)
    rows, cols = grid.shape
    fig, ax = plt.subplots(figsize=(min(12, 2.5 + 0.45 * cols), min(9, 1.8 + 0.45 * rows)))
    image = _heat(ax, grid)
    bar = fig.colorbar(image, ax=ax)
    bar.set_label("mean link utilisation (%)")
    ax.set_xlabel(layout.xlabel)
    ax.set_ylabel(layout.ylabel)
    ax.set_title(f"Mean outgoing link utilisation per chip: {topology_title(topology)}")
    return finish(fig, path)


def _heat(ax: Axes, grid: np.ndarray) -> AxesImage:
    """``grid`` (percent) as an image on the fixed 0-100% scale, cells labelled when few."""
    image = ax.imshow(grid, origin="lower", cmap="viridis", aspect="auto", vmin=0, vmax=100)
    rows, cols = grid.shape
    if cols <= 32:
        ax.set_xticks(range(0, cols, 1 if cols <= 16 else 2))
    if rows <= 32:
        ax.set_yticks(range(0, rows, 1 if rows <= 16 else 2))
    if rows * cols <= 64:
        for (r, c), value in np.ndenumerate(grid):
            colour = "black" if value > 50 else "white"  # readable on viridis
            ax.text(c, r, f"{value:.0f}", ha="center", va="center", fontsize=8, color=colour)
    return image


def port_groups(topology: Topology) -> dict[str, np.ndarray]:
    """The topology's directed chip links grouped by the port they leave from: per
    axis and direction on a torus (``ICI x+``, ``ICI x-``...), per link kind elsewhere
    (``board``, ``global``...); name -> link indices."""
    links = topology.links
    names = [
        topology.port_name(i).split(" port to ", 1)[0] if links.src[i] < topology.num_chips else ""
        for i in range(len(links))
    ]
    groups: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        if name:
            groups.setdefault(name, []).append(i)
    return {name: np.asarray(ids) for name, ids in sorted(groups.items())}


def port_utilization_heatmaps(
    topology: Topology,
    link_bytes: np.ndarray,
    time_s: float,
    path: str | Path | None = None,
) -> Figure:
    """One heatmap per port group (:func:`port_groups`: a torus axis and direction, or a
    Boardfly link kind), each chip's utilisation of its links of that group (%) on one
    fixed 0-100% scale, laid out as :func:`link_utilization_heatmap`."""
    plt = pyplot()
    groups = port_groups(topology)
    layout = topology.plot_layout()
    links, n = topology.links, topology.num_chips
    util = 100.0 * np.asarray(link_bytes, dtype=float) / (links.bandwidth_Bps * max(time_s, 1e-300))
    directed = len(groups) > 1 and all(name[-1] in "+-" for name in groups)
    # a torus: one column per axis, its + links above its - links
    nrows, ncols = (2, -(-len(groups) // 2)) if directed else (1, len(groups))
    rows, cols = layout.shape
    size = (min(16, 1.5 + ncols * (1.2 + 0.2 * cols)), min(10, 1.2 + nrows * (1.0 + 0.14 * rows)))
    fig, axes = plt.subplots(nrows, ncols, figsize=size, squeeze=False)
    fig.subplots_adjust(left=0.06, right=0.86, bottom=0.08, top=0.86, wspace=0.3, hspace=0.45)
    image = None
    for k, (name, ids) in enumerate(groups.items()):
        ax = axes[k % 2, k // 2] if directed else axes[0, k]
        total = np.bincount(links.src[ids], weights=util[ids], minlength=n)[:n]
        count = np.bincount(links.src[ids], minlength=n)[:n]
        per_chip = np.divide(total, count, out=np.zeros(n), where=count > 0)
        image = _heat(ax, layout.grid(per_chip))
        ax.set_title(f"{name} links", fontsize="medium")
        row, col = (k % 2, k // 2) if directed else (0, k)
        if row == nrows - 1:  # axis labels once per row and column: fewer texts to lay out
            ax.set_xlabel(layout.xlabel, fontsize="small")
        if col == 0:
            ax.set_ylabel(layout.ylabel, fontsize="small")
    for ax in axes.flat[len(groups) :]:
        ax.set_visible(False)
    if image is not None:
        bar_ax = fig.add_axes((0.89, 0.08, 0.02, 0.78))  # fixed layout: one draw per save
        fig.colorbar(image, cax=bar_ax, label="link utilisation (%)")
    fig.suptitle(f"Link utilisation per chip by port: {topology_title(topology)}")
    if path is not None:
        save_figure(fig, path)
    return fig
