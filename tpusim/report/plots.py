"""Figures of simulator results (matplotlib, imported lazily so this module stays cheap).

Every function returns the matplotlib ``Figure``; with ``path`` it also writes
``path.png`` and ``path.svg`` (see :func:`~tpusim.results.files.save_figure`). Every
figure has a title, axis labels with units, and a legend when it shows more than one
series. Here: bus bandwidth against size, hop histograms and the step breakdown, and
the helpers every figure module uses (:func:`pyplot`, :func:`finish`); the link
heatmaps are in :mod:`tpusim.report.link_plots`, the step timeline in
:mod:`tpusim.report.timeline_plots`, the comparisons across systems in
:mod:`tpusim.report.compare_plots`, the workloads' own in
:mod:`tpusim.report.workload_plots`.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from tpusim.results.files import save_figure
from tpusim.units import format_bytes

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from tpusim.topology.base import Topology


#: Markers cycled over the lines of a plot, so lines that coincide stay visible.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def pyplot() -> ModuleType:
    """``matplotlib.pyplot`` with the Agg backend (a notebook keeps its own)."""

    import matplotlib

    if "ipykernel" not in sys.modules:  # a notebook keeps its inline backend
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def finish(fig: Figure, path: str | Path | None) -> Figure:
    """Lay ``fig`` out tightly and, with ``path``, :func:`~tpusim.results.files.save_figure` it;
    returns it."""
    fig.tight_layout()
    if path is not None:
        save_figure(fig, path)
    return fig


# -- 1. bus bandwidth vs message size ---------------------------------------------------
def busbw_vs_size(frame: pd.DataFrame, path: str | Path | None = None) -> Figure:
    """Bus bandwidth (GB/s) against message size on log-log axes, one line per
    (system, op) with a marker at every size measured and, where the frame has
    ``busbw_Bps_lo``/``_hi``, its 80% interval as a band; sizes ticked at powers of
    two."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    series, ops = 0, frame["op"].nunique()
    for (system, op), part in frame.groupby(["system", "op"], sort=True):
        part = part[part["busbw_Bps"].notna() & (part["busbw_Bps"] > 0)].sort_values("bytes")
        label = f"{system} {op}" if ops > 1 else str(system)
        marker = MARKERS[series % len(MARKERS)]
        (line,) = ax.plot(
            part["bytes"],
            part["busbw_Bps"] / 1e9,
            marker=marker,
            markersize=5,
            markerfacecolor="none",
            label=label,
        )
        if {"busbw_Bps_lo", "busbw_Bps_hi"} <= set(part.columns):
            low, high = part["busbw_Bps_lo"] / 1e9, part["busbw_Bps_hi"] / 1e9
            ax.fill_between(part["bytes"], low, high, color=line.get_color(), alpha=0.12)
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


def _size_ticks(ax: Axes, sizes: np.ndarray) -> None:
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


# -- 3. step breakdown ------------------------------------------------------------------
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
