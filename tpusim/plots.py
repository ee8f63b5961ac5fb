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


def _pyplot() -> Any:
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


def _finish(fig: Figure, path: str | Path | None) -> Figure:
    fig.tight_layout()
    if path is not None:
        save(fig, path)
    return fig


# -- 1. bus bandwidth vs message size ---------------------------------------------------
def busbw_vs_size(frame: pd.DataFrame, path: str | Path | None = None) -> Figure:
    """Bus bandwidth (GB/s) against message size, one line per (system, op)."""
    plt = _pyplot()
    from matplotlib.ticker import FixedLocator, NullLocator

    fig, ax = plt.subplots(figsize=(7, 4.5))
    series = 0
    for (system, op), part in frame.groupby(["system", "op"], sort=True):
        part = part.sort_values("bytes")
        ax.plot(
            part["bytes"],
            part["busbw_Bps"] / 1e9,
            marker="o",
            markersize=3,
            label=f"{system} {op}",
        )
        series += 1
    ax.set_xscale("log", base=2)
    sizes = frame["bytes"].to_numpy(dtype=float)
    if sizes.size:
        lo, hi = int(np.floor(np.log2(sizes.min()))), int(np.ceil(np.log2(sizes.max())))
        # steps dividing 10 keep 1 KiB, 1 MiB, 1 GiB (2**10k) among the ticks
        step = next((s for s in (1, 2, 5, 10) if (hi - lo) / s <= 12), 10 * ((hi - lo) // 120 + 1))
        ticks = [2.0**e for e in range(lo, hi + 1) if e % step == 0]
        measured = np.unique(sizes)
        if measured.size <= 12:  # few sizes: tick exactly the sizes measured
            ticks = [float(x) for x in measured]
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels([format_bytes(t) for t in ticks], rotation=45, ha="right")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_ylim(bottom=0)
    ax.set_title("Collective bus bandwidth vs message size")
    ax.grid(True, which="major", alpha=0.3)
    if series > 1:
        ax.legend(title="system / op", fontsize="small")
    return _finish(fig, path)


# -- 2. hop histograms ------------------------------------------------------------------
def hop_histograms(topologies: Mapping[str, Topology], path: str | Path | None = None) -> Figure:
    """Fraction of ordered chip pairs at each hop count, bars side by side per topology."""
    plt = _pyplot()
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
    return _finish(fig, path)


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


def link_utilization_heatmap(
    topology: Topology,
    link_bytes: np.ndarray,
    time_s: float,
    path: str | Path | None = None,
) -> Figure:
    """Mean outgoing-link utilisation per chip, laid out by the topology's
    :meth:`~tpusim.topology.base.Topology.plot_layout` (a torus as an x-by-y grid, mean
    over z; a Boardfly as groups (rows) by chips within the group (columns))."""
    plt = _pyplot()
    per_chip = 100.0 * chip_link_utilization(topology, link_bytes, time_s)
    layout = topology.plot_layout()
    grid = layout.grid(per_chip)
    rows, cols = grid.shape
    fig, ax = plt.subplots(figsize=(min(12, 2.5 + 0.45 * cols), min(9, 1.8 + 0.45 * rows)))
    image = ax.imshow(grid, origin="lower", cmap="viridis", aspect="auto", vmin=0)
    bar = fig.colorbar(image, ax=ax)
    bar.set_label("mean link utilisation (%)")
    if cols <= 32:
        ax.set_xticks(range(cols))
    if rows <= 32:
        ax.set_yticks(range(rows))
    if rows * cols <= 64:
        for (r, c), value in np.ndenumerate(grid):
            colour = "black" if image.norm(value) > 0.5 else "white"  # readable on viridis
            ax.text(c, r, f"{value:.0f}", ha="center", va="center", fontsize=8, color=colour)
    ax.set_xlabel(layout.xlabel)
    ax.set_ylabel(layout.ylabel)
    ax.set_title(f"Mean outgoing link utilisation per chip: {layout.title}")
    return _finish(fig, path)


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
    plt = _pyplot()
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
    return _finish(fig, path)


# -- 5. timeline ------------------------------------------------------------------------
def timeline(ops: Sequence[OpRecord], path: str | Path | None = None) -> Figure:
    """Gantt chart of one step: a row per (chip class, unit), bars coloured by op kind."""
    plt = _pyplot()
    from matplotlib.patches import Patch

    lanes = list(dict.fromkeys((op.chips, op.unit) for op in ops))
    kinds = list(dict.fromkeys(op.kind for op in ops))
    cmap = plt.get_cmap("tab10")
    colours = {kind: cmap(i % 10) for i, kind in enumerate(kinds)}
    fig, ax = plt.subplots(figsize=(9, max(2.5, 1.2 + 0.5 * len(lanes))))
    end = max((op.end_at for op in ops), default=0.0) * 1e6
    for op in ops:
        lane = lanes.index((op.chips, op.unit))
        start, width = op.start_at * 1e6, (op.end_at - op.start_at) * 1e6
        ax.barh(lane, width, left=start, height=0.6, color=colours[op.kind], edgecolor="black")
        if end > 0 and width > 0.06 * end:
            ax.text(start + width / 2, lane, op.name, ha="center", va="center", fontsize=7)
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels([f"{chips} / {unit}" for chips, unit in lanes])
    ax.invert_yaxis()
    ax.set_xlim(0, end * 1.02 if end > 0 else 1)
    ax.set_xlabel("time (us)")
    ax.set_ylabel("chip class / unit (lane)")
    ax.set_title("Timeline of one step")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(
        handles=[Patch(color=colours[k], label=k) for k in kinds],
        title="op kind",
        fontsize="small",
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
    )
    return _finish(fig, path)


# -- 6. training memory ---------------------------------------------------------------
def memory_timeline(
    points: Sequence[tuple[float, Mapping[str, float]]],
    capacity_bytes: float | None = None,
    path: str | Path | None = None,
    title: str = "HBM per chip over the step",
) -> Figure:
    """Stacked areas of a training step's HBM per chip by part (weights, optimizer
    state, gradients, activations, buffers) over the step's schedule (fraction done,
    after each forward or backward of a chunk-microbatch), from
    :func:`tpusim.program.builders.memory.memory_timeline`; a dashed line at the
    chip's ``capacity_bytes`` when given. Bytes shown in GB (1e9)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    x = [p[0] for p in points]
    parts = list(points[0][1]) if points else []
    stacks = [[p[1][part] / 1e9 for p in points] for part in parts]
    if points:
        ax.stackplot(x, *stacks, labels=parts, step="post", alpha=0.8)
    if capacity_bytes:
        ax.axhline(capacity_bytes / 1e9, color="black", linestyle="--", label="HBM capacity")
    ax.set_xlabel("schedule done (fraction of the stage's forwards and backwards)")
    ax.set_ylabel("HBM per chip (GB)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _finish(fig, path)
