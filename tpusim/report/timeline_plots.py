"""The timeline of one simulated step (matplotlib, imported lazily): a Gantt chart
with a row per (chip class, unit), bars coloured by op kind.

Like :mod:`tpusim.report.plots`: the function returns the ``Figure``; with ``path`` it
also writes ``path.png`` and ``path.svg``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tpusim.report.plots import finish, pyplot

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from tpusim.results.ops import OpRecord


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
    ax: Axes,
    lane: int,
    ops: Sequence[OpRecord],
    colours: Mapping[str, tuple[float, float, float, float]],
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
    merged: dict[tuple[str, tuple[object, ...]], list[str]] = {}
    members: dict[tuple[str, tuple[object, ...]], list[OpRecord]] = {}
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
