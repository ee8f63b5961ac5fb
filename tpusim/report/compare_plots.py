"""Figures that set systems side by side: decode latency per token, serving latency
against request rate, and one summary figure of a comparison table's key rows.

Like :mod:`tpusim.report.plots` (whose :func:`~tpusim.report.plots.pyplot`,
:func:`~tpusim.report.plots.finish` and :func:`~tpusim.results.files.save_figure` these use),
every function returns the matplotlib
``Figure`` and, with ``path``, also writes ``path.png`` and ``path.svg``; matplotlib
is imported only when a figure is drawn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tpusim.report.plots import finish, pyplot

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

#: Words that pick a comparison-table row for :func:`systems_side_by_side`, in the
#: order the panels are drawn.
SUMMARY_KEYS = (
    "diameter (hops)",
    "busbw (GB/s)",
    "step time (ms)",
    "per-token latency (us)",
    "energy per token",
    "MFU (%)",
)
#: Most panels in one summary figure, and most rows one key may take.
MAX_SUMMARY_PANELS = 12
MAX_ROWS_PER_KEY = 3


def decode_latency(rows: Sequence[Mapping[str, Any]], path: str | Path | None = None) -> Figure:
    """Latency per generated token (us) of decode steps: a group of bars per system,
    one bar per decode workload point (e.g. KV cache in HBM and in SRAM).

    Each row needs ``system``, ``workload`` and ``per_token_latency_s``."""
    plt = pyplot()
    systems = list(dict.fromkeys(str(r["system"]) for r in rows))
    labels = list(dict.fromkeys(str(r["workload"]) for r in rows))
    value = {
        (str(r["system"]), str(r["workload"])): 1e6 * float(r["per_token_latency_s"]) for r in rows
    }
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(systems) + 3), 4.5))
    width = 0.8 / max(1, len(labels))
    x = np.arange(len(systems))
    for i, label in enumerate(labels):
        heights = [value.get((s, label), np.nan) for s in systems]
        bars = ax.bar(x + (i - (len(labels) - 1) / 2) * width, heights, width, label=label)
        ax.bar_label(bars, fmt="%.0f", fontsize=7, padding=1)
    ax.set_xticks(x)
    ax.set_xticklabels(systems, fontsize="small")
    ax.set_xlabel("system (name)")
    ax.set_ylabel("latency per generated token (us)")
    ax.set_title("Decode: time per generated token (one decode step)")
    ax.grid(True, axis="y", alpha=0.3)
    if len(labels) > 1:
        ax.legend(title="workload", fontsize="small")
    return finish(fig, path)


def serving_latency_vs_rate(frame: pd.DataFrame, path: str | Path | None = None) -> Figure:
    """Tail latency of an inference service against request rate, a line per system:
    time to first token (p99, ms) on the left, time per output token (p99, ms) on the
    right, both on log axes.

    ``frame`` has columns ``system``, ``rate_per_s`` (requests/s), ``ttft_p99_s`` and
    ``tpot_p99_s`` (seconds)."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    panels = (
        ("ttft_p99_s", "time to first token, p99 (ms)"),
        ("tpot_p99_s", "time per output token, p99 (ms)"),
    )
    for ax, (column, ylabel) in zip(axes, panels, strict=True):
        for system, part in frame.groupby("system", sort=False):
            part = part.sort_values("rate_per_s")
            ax.plot(
                part["rate_per_s"], 1e3 * part[column], marker="o", markersize=3.5, label=system
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("request rate (requests/s, log scale)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.2)
        ax.legend(title="system", fontsize="small")
    axes[0].set_title("Time to first token vs request rate")
    axes[1].set_title("Time per output token vs request rate")
    return finish(fig, path)


def summary_rows(comparison: pd.DataFrame, keys: Sequence[str] = SUMMARY_KEYS) -> list[str]:
    """The comparison-table rows :func:`systems_side_by_side` draws: those naming one
    of ``keys``, in the order of ``keys`` (then table order), at most
    :data:`MAX_ROWS_PER_KEY` per key and :data:`MAX_SUMMARY_PANELS` in all, leaving
    out rows with no value."""
    chosen: list[str] = []
    for key in keys:
        chosen += [
            str(name)
            for name, row in comparison.iterrows()
            if key in str(name) and str(name) not in chosen and row.notna().any()
        ][:MAX_ROWS_PER_KEY]
    return chosen[:MAX_SUMMARY_PANELS]


def systems_side_by_side(comparison: pd.DataFrame, path: str | Path | None = None) -> Figure:
    """The systems side by side: one small bar chart per key figure of a comparison
    table (:func:`summary_rows`; rows are figures with their unit, columns systems),
    every panel with the systems in the same order and colours. Raises ValueError when
    no row of the table is a key figure."""
    plt = pyplot()
    names = summary_rows(comparison)
    if not names:
        raise ValueError("the comparison table has none of the summary figures")
    systems = [str(c) for c in comparison.columns]
    cols = min(3, len(names))
    rows = -(-len(names) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 0.6 + 2.9 * rows), squeeze=False)
    colours = [plt.get_cmap("tab10")(i % 10) for i in range(len(systems))]
    for ax, name in zip(axes.flat, names, strict=False):
        values = comparison.loc[name].to_numpy(dtype=float)
        errors = _error_bars(comparison, name, values)
        bars = ax.bar(range(len(systems)), values, color=colours, yerr=errors, capsize=3)
        ax.bar_label(bars, labels=[_short(v) for v in values], fontsize=7, padding=1)
        ax.set_title(name, fontsize="small")
        ax.set_xticks(range(len(systems)))
        ax.set_xticklabels(systems, rotation=30, ha="right", fontsize=7)
        ax.set_ylabel(name.rsplit("(", 1)[-1].rstrip(")") if "(" in name else "value", fontsize=7)
        ax.margins(y=0.15)
    for ax in axes.flat[len(names) :]:
        ax.set_visible(False)
    fig.suptitle("Systems side by side: key figures of the run (error bars: 80% intervals)")
    return finish(fig, path)


def _error_bars(comparison: pd.DataFrame, name: str, values: np.ndarray) -> np.ndarray | None:
    """(2, systems) distances below and above each bar to its 80% interval
    (``attrs["intervals"]``; zero where a system's figure has none), or None."""
    intervals = comparison.attrs.get("intervals", {}).get(name)
    if not intervals:
        return None
    pairs = [intervals.get(str(s)) for s in comparison.columns]
    low = [v - p[0] if p else 0.0 for v, p in zip(values, pairs, strict=True)]
    high = [p[1] - v if p else 0.0 for v, p in zip(values, pairs, strict=True)]
    return np.nan_to_num(np.array([low, high]))


def _short(value: float) -> str:
    """A bar label: blank for a missing value, 3 significant digits otherwise."""
    if np.isnan(value):
        return "n/a"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


__all__ = [
    "MAX_ROWS_PER_KEY",
    "MAX_SUMMARY_PANELS",
    "SUMMARY_KEYS",
    "decode_latency",
    "serving_latency_vs_rate",
    "summary_rows",
    "systems_side_by_side",
]
