"""The serving figure of a scenario run (matplotlib, imported lazily): what a serving
engineer reads off a capacity search, per serving workload.

Three panels share the systems' colours: TTFT and TPOT (p99 solid, p50 dotted)
against the offered load in requests/s per chip (so replicas of different sizes
compare; linear axes, the latencies in ms), with the SLO as a dashed line and each
system's capacity (the highest rate meeting the SLO) as a vertical line; then the
output tokens/s per chip at that capacity, a bar per system with its value written
on it and its 80% interval as an error bar (:mod:`tpusim.config.uncertainty`: the
serving throughput's held-out residuals). The points are the capacity search's trials
(:mod:`tpusim.serving.capacity`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tpusim.workloads.serving import ServingRecord

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Milliseconds per second (display).
MS_PER_S = 1e3
#: The latency axes stop at this multiple of the SLO (a design choice: the knee and
#: the SLO stay readable; trials further up are past capacity anyway).
MAX_SLO_MULTIPLE = 3.0


def _series(record: ServingRecord, column: int) -> tuple[list[float], list[float]]:
    """(load per chip, latency ms) of the trials that measured ``column`` of the curve
    (1: p99 TTFT, 2: p99 TPOT, 3: p50 TTFT, 4: p50 TPOT)."""
    points = sorted(p for p in record.curve if len(p) > column and p[column] is not None)
    x = [float(p[0] or 0.0) / record.chips for p in points]
    return x, [float(p[column] or 0.0) * MS_PER_S for p in points]


def serving_at_slo(records: Sequence[ServingRecord], title: str) -> Figure:
    """The figure (see the module docstring) of one workload's records, a system each."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(15, 4.4), layout="constrained")
    ttft, tpot, bars = fig.subplots(1, 3, gridspec_kw={"width_ratios": [1.2, 1.2, 0.8]})
    colours = [f"C{i % 10}" for i in range(len(records))]
    for record, colour in zip(records, colours, strict=True):
        for ax, p99, p50 in ((ttft, 1, 3), (tpot, 2, 4)):
            ax.plot(*_series(record, p99), marker="o", ms=3.5, color=colour, label=record.system)
            ax.plot(*_series(record, p50), ls=":", marker=".", color=colour)
            if record.capacity_rate_per_s_per_chip:
                ax.axvline(record.capacity_rate_per_s_per_chip, color=colour, lw=0.9, alpha=0.6)
    for ax, slo, what, column in (
        (ttft, records[0].slo_ttft_s, "TTFT", 1),
        (tpot, records[0].slo_tpot_s, "TPOT", 2),
    ):
        if slo is not None:
            ax.axhline(slo * MS_PER_S, ls="--", color="grey", label=f"SLO ({what} p99)")
        ax.set(xlabel="offered load (requests/s per chip)", ylabel=f"{what} (ms)")
        ax.set_title(
            f"{what}: p99 solid, p50 dotted; capacity at the vertical line", fontsize="medium"
        )
        ax.set_ylim(0, _top(records, column, None if slo is None else slo * MS_PER_S))
        ax.set_xlim(left=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    _capacity_bars(bars, records, colours)
    fig.suptitle(title)
    return fig


def _top(records: Sequence[ServingRecord], column: int, slo_ms: float | None) -> float | None:
    """The latency axis' top: three times the SLO when the trials past the knee go
    further (a queue past capacity grows without bound and would flatten the rest),
    else matplotlib's choice. ``column`` as :func:`_series`'s (the p99s)."""
    highest = max((max(_series(r, column)[1], default=0.0) for r in records), default=0.0)
    if slo_ms is None or highest <= MAX_SLO_MULTIPLE * slo_ms:
        return None
    return MAX_SLO_MULTIPLE * slo_ms


def _capacity_bars(ax: object, records: Sequence[ServingRecord], colours: list[str]) -> None:
    """Output tokens/s per chip at each system's capacity, values written on the bars."""
    from matplotlib.axes import Axes

    assert isinstance(ax, Axes)
    values = [r.tokens_per_s_per_chip if r.capacity_rate_per_s else 0.0 for r in records]
    heights = [v or 0.0 for v in values]
    names = [r.system for r in records]
    drawn = ax.bar(range(len(records)), heights, color=colours)
    below, above = _error_bars(records, heights)
    if any(below) or any(above):
        ax.errorbar(
            range(len(records)),
            heights,
            yerr=[below, above],
            fmt="none",
            ecolor="black",
            elinewidth=1,
            capsize=4,
        )
    ax.bar_label(
        drawn,
        labels=[f"{h:,.0f}" for h in heights],
        fontsize="small",
        label_type="center",
        color="white",
    )
    ax.set_xticks(range(len(records)), names, rotation=15, ha="right", fontsize="small")
    ax.set(ylabel="output tokens/s per chip at the SLO")
    ax.set_title("Throughput per chip at capacity (80% interval)", fontsize="medium")
    ax.grid(True, axis="y", alpha=0.3)


def _error_bars(
    records: Sequence[ServingRecord], heights: list[float]
) -> tuple[list[float], list[float]]:
    """How far each bar's 80% interval reaches below and above it (0 without one)."""
    from tpusim.config.uncertainty import figure_interval
    from tpusim.results.intervals import chip_of

    kind, rate = ServingRecord.interval_columns["tokens_per_s_per_chip"]
    below, above = [], []
    for record, height in zip(records, heights, strict=True):
        interval = figure_interval(height, kind, chip_of(record.system), rate) if height else None
        below.append(height - interval.lo if interval else 0.0)
        above.append(interval.hi - height if interval else 0.0)
    return below, above
