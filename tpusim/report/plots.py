"""Figures of simulator results (matplotlib, imported lazily so this module stays cheap).

Every function returns the matplotlib ``Figure``; with ``path`` it also writes
``path.png`` and ``path.svg`` (see :func:`save`). Every figure has a title, axis
labels with units, and a legend when it shows more than one series.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tpusim.units import format_bytes

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from tpusim.results.simulation import OpRecord
    from tpusim.topology.base import Topology


#: Markers cycled over the lines of a plot, so lines that coincide stay visible.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def pyplot() -> Any:
    """``matplotlib.pyplot`` with the Agg backend (a notebook keeps its own)."""
    import sys

    import matplotlib

    if "ipykernel" not in sys.modules:  # a notebook keeps its inline backend
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Figure, path: str | Path) -> tuple[Path, Path]:
    """Write ``fig`` as ``path.png`` and ``path.svg`` (creating the folder); return both.
    Each is written to a temporary file and renamed into place
    (:func:`tpusim.results.files.atomic_write`)."""
    from tpusim.results.files import atomic_write

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    png, svg = path.with_suffix(".png"), path.with_suffix(".svg")
    atomic_write(png, lambda f: fig.savefig(f, format="png", dpi=150, bbox_inches="tight"), True)
    atomic_write(svg, lambda f: fig.savefig(f, format="svg", bbox_inches="tight"), True)
    return png, svg


def finish(fig: Figure, path: str | Path | None) -> Figure:
    """Lay ``fig`` out tightly and, with ``path``, :func:`save` it; returns it."""
    fig.tight_layout()
    if path is not None:
        save(fig, path)
    return fig


# -- 1. bus bandwidth vs message size ---------------------------------------------------
def busbw_vs_size(frame: pd.DataFrame, path: str | Path | None = None) -> Figure:
    """Bus bandwidth (GB/s) against message size on log-log axes, one line per
    (system, op) with a marker at every size measured; sizes ticked at powers of two."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    series, ops = 0, frame["op"].nunique()
    for (system, op), part in frame.groupby(["system", "op"], sort=True):
        part = part[part["busbw_Bps"].notna() & (part["busbw_Bps"] > 0)].sort_values("bytes")
        label = f"{system} {op}" if ops > 1 else str(system)
        marker = MARKERS[series % len(MARKERS)]
        ax.plot(
            part["bytes"],
            part["busbw_Bps"] / 1e9,
            marker=marker,
            markersize=5,
            markerfacecolor="none",
            label=label,
        )
        series += 1
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    _size_ticks(ax, frame["bytes"].to_numpy(dtype=float))
    ax.set_xlabel("message size (bytes, log scale)")
    ax.set_ylabel("bus bandwidth (GB/s, log scale)")
    ax.set_title("Collective bus bandwidth vs message size")
    ax.grid(True, which="major", alpha=0.3)
    ax.grid(True, which="minor", axis="y", alpha=0.1)
    if series > 1:
        title = "system / op" if ops > 1 else "system"
        ax.legend(title=title, fontsize="small")
    return finish(fig, path)


def _size_ticks(ax: Any, sizes: np.ndarray) -> None:
    """Tick a log2 size axis at powers of two (every 2**k, k spaced so at most 12
    ticks, keeping 1 KiB, 1 MiB, 1 GiB), or at the sizes measured when few."""
    from matplotlib.ticker import FixedLocator, NullLocator

    if not sizes.size:
        return
    lo, hi = int(np.floor(np.log2(sizes.min()))), int(np.ceil(np.log2(sizes.max())))
    step = next((s for s in (1, 2, 5, 10) if (hi - lo) / s <= 12), 10 * ((hi - lo) // 120 + 1))
    ticks = [2.0**e for e in range(lo, hi + 1) if e % step == 0]
    measured = np.unique(sizes)
    if measured.size <= 12:  # few sizes: tick exactly the sizes measured
        ticks = [float(x) for x in measured]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([format_bytes(t) for t in ticks], rotation=45, ha="right")


# -- 2. hop histograms ------------------------------------------------------------------
def hop_histograms(topologies: Mapping[str, Topology], path: str | Path | None = None) -> Figure:
    """Fraction of ordered chip pairs at each hop count, bars side by side per topology."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    hists = {name: np.asarray(t.hop_histogram(), dtype=float) for name, t in topologies.items()}
    longest = max((h.size for h in hists.values()), default=1)
    width = 0.8 / max(1, len(hists))
    for i, (name, hist) in enumerate(hists.items()):
        total = hist.sum()
        frac = hist / total if total > 0 else hist
        hops = np.arange(hist.size)
        keep = hops >= 1  # h[0] is always 0 (pairs of distinct chips)
        offset = (i - (len(hists) - 1) / 2) * width
        ax.bar(hops[keep] + offset, frac[keep], width=width, label=name)
    every = 1 if longest <= 17 else (2 if longest <= 33 else 5)  # labels must not touch
    ax.set_xticks([1, *range(every, longest, every)] if every > 1 else range(1, longest))
    ax.set_xlabel("hops (links on the route)")
    ax.set_ylabel("fraction of chip pairs (ordered pairs)")
    ax.set_title("Hop-count distribution over chip pairs")
    ax.grid(True, axis="y", alpha=0.3)
    if len(hists) > 1:
        ax.legend(title="topology", fontsize="small")
    return finish(fig, path)


# -- 3. link utilisation heatmap --------------------------------------------------------
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


def _heat(ax: Any, grid: np.ndarray) -> Any:
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
        save(fig, path)
    return fig


# -- 4. step breakdown ------------------------------------------------------------------
def step_breakdown(rows: Sequence[Mapping[str, Any]], path: str | Path | None = None) -> Figure:
    """Stacked bars per system/workload (ms): compute, then exposed communication on top,
    so a bar is as tall as the step; hatched inside the compute bar, the communication
    hidden under compute.

    Each row needs ``compute_time_s`` and ``exposed_communication_time_s``, and
    ``communication_busy_time_s`` (time with a collective in flight) or else
    ``communication_time_s``; it is labelled by ``system`` and ``program`` (or
    ``workload``).
    """
    plt = pyplot()
    labels: list[str] = []
    compute: list[float] = []
    exposed: list[float] = []
    hidden: list[float] = []
    for row in rows:
        parts = [str(row[k]) for k in ("system", "program", "workload") if row.get(k)]
        labels.append("\n".join(parts) or f"#{len(labels)}")
        busy = row.get("communication_busy_time_s", row.get("communication_time_s", 0.0))
        exp, comp = float(row["exposed_communication_time_s"]), float(row["compute_time_s"])
        compute.append(1e3 * comp)
        exposed.append(1e3 * exp)
        hidden.append(1e3 * min(comp, max(0.0, float(busy) - exp)))
    fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(labels) + 2) + 3, 4.5))
    x = np.arange(len(labels))
    ax.bar(x, compute, 0.6, label="compute", color="tab:blue")
    ax.bar(x, exposed, 0.6, bottom=compute, label="exposed communication", color="tab:red")
    ax.bar(
        x,
        hidden,
        0.6,
        bottom=np.asarray(compute) - np.asarray(hidden),
        label="communication hidden under compute",
        fill=False,
        hatch="//",
        edgecolor="tab:orange",
        linewidth=0,
    )
    ax.set_xticks(x)
    ax.set_xticklabels(labels, fontsize="small")
    ax.set_xlabel("system / workload (name)")
    ax.set_ylabel("time (ms)")
    ax.set_title("Step time breakdown: compute and communication (bar height = step time)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return finish(fig, path)


# -- 5. timeline ------------------------------------------------------------------------
#: Longest list of merged units written in a timeline row's label (characters).
MAX_LANE_LABEL_CHARS = 40
#: Op names that fit across a timeline's time axis (characters): a name is written on
#: its bar when the bar spans that share of the axis.
TIMELINE_CHARS_ACROSS = 60.0


def timeline(ops: Sequence[OpRecord], path: str | Path | None = None) -> Figure:
    """Gantt chart of one step: a row per (chip class, unit), bars coloured by op kind.
    Units of one chip class that ran exactly the same ops at the same times (the six
    ICI ports of an all-reduce on a torus) share one row, named by all of them; an op's
    name is written on its bar only where it fits."""
    plt = pyplot()
    from matplotlib.patches import Patch

    lanes = timeline_lanes(ops)
    kinds = list(dict.fromkeys(op.kind for op in ops))
    cmap = plt.get_cmap("tab10")
    colours = {kind: cmap(i % 10) for i, kind in enumerate(kinds)}
    fig, ax = plt.subplots(figsize=(10, max(2.5, 1.4 + 0.45 * len(lanes))))
    end = max((op.end_at for op in ops), default=0.0) * 1e6
    # characters of 7-pt text across the axis, kept low: long lane labels narrow it
    chars_per_us = TIMELINE_CHARS_ACROSS / end if end > 0 else 0.0
    for lane, (_, members) in enumerate(lanes):
        _lane_bars(ax, lane, members, colours, chars_per_us)
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels([label for label, _ in lanes], fontsize="small")
    ax.invert_yaxis()
    ax.set_xlim(0, end * 1.02 if end > 0 else 1)
    ax.set_xlabel("time since the step began (us)")
    ax.set_ylabel("chips / unit (lane)")
    ax.set_title("Timeline of one step")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(
        handles=[Patch(color=colours[k], label=k) for k in kinds],
        title="op kind",
        fontsize="small",
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
    )
    return finish(fig, path)


def _lane_bars(
    ax: Any,
    lane: int,
    ops: Sequence[OpRecord],
    colours: Mapping[str, Any],
    chars_per_us: float,
) -> None:
    """One timeline row: a bar collection per op kind (one artist, not one per op, so
    a step of thousands of ops draws fast) and the names that fit on their bars."""
    by_kind: dict[str, list[tuple[float, float]]] = {}
    for op in ops:
        start, width = op.start_at * 1e6, (op.end_at - op.start_at) * 1e6
        by_kind.setdefault(op.kind, []).append((start, width))
        if width * chars_per_us >= len(op.name) + 1:
            ax.text(start + width / 2, lane, op.name, ha="center", va="center", fontsize=7)
    for kind, spans in by_kind.items():
        ax.broken_barh(
            spans, (lane - 0.3, 0.6), facecolors=colours[kind], edgecolor="white", lw=0.3
        )


def timeline_lanes(ops: Sequence[OpRecord]) -> list[tuple[str, list[OpRecord]]]:
    """The rows of :func:`timeline`: (label, ops) per (chip class, unit) in first-seen
    order, units of one chip class with identical schedules merged into one row."""
    by_lane: dict[tuple[str, str], list[OpRecord]] = {}
    for op in ops:
        by_lane.setdefault((op.chips, op.unit), []).append(op)
    merged: dict[tuple[str, tuple[Any, ...]], list[str]] = {}
    members: dict[tuple[str, tuple[Any, ...]], list[OpRecord]] = {}
    for (chips, unit), lane_ops in by_lane.items():
        key = (chips, tuple((o.name, o.start_at, o.end_at) for o in lane_ops))
        merged.setdefault(key, []).append(unit)
        members.setdefault(key, lane_ops)
    return [(f"{key[0]}: {_join_units(units)}", members[key]) for key, units in merged.items()]


def _join_units(units: list[str]) -> str:
    """``ici, ICI x+, x-, y+`` (a repeated leading word written once), or ``ici and 6
    more units`` when that would be longer than :data:`MAX_LANE_LABEL_CHARS`; marked
    as a merged row when there are several."""
    if len(units) == 1:
        return units[0]
    parts, last = [], ""
    for unit in units:
        word, _, rest = unit.partition(" ")
        parts.append(rest if rest and word == last else unit)
        last = word if rest else ""
    joined = ", ".join(parts)
    if len(joined) > MAX_LANE_LABEL_CHARS:
        joined = f"{units[0]} and {len(units) - 1} more units"
    return f"{joined} (same ops)"
