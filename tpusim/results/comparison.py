"""The ``comparison`` table of a scenario run.
``comparison`` (one column per system, one row per figure, the figure's unit in its
name): each record's :meth:`~tpusim.results.records.Record.figures` in record order,
then each record type's :meth:`~tpusim.results.records.Record.sweep_figures`. Rows
whose values are all integers (chips, diameter in hops) are listed in the frame's
``attrs["integer_rows"]`` and written as integers (:func:`comparison_for_csv`).

Figures from a cost model (:func:`~tpusim.results.intervals.figure_kind`) carry
an 80% interval per system (``attrs["intervals"]``: figure -> system -> (lo, hi)) and,
against the first system (the baseline), a ratio with its interval from paired
residuals (``attrs["ratios"]``: figure -> system -> (ratio, lo, hi)); the CSV gets
them as columns ``SYSTEM_lo``, ``SYSTEM_hi``, ``SYSTEM/BASELINE``,
``SYSTEM/BASELINE_lo``, ``SYSTEM/BASELINE_hi`` (:func:`comparison_for_csv`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from tpusim.config.uncertainty import Kind, figure_interval, ratio_interval
from tpusim.later import LaterModule
from tpusim.results.intervals import chip_of, figure_kind
from tpusim.results.records import Record

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = LaterModule("pandas")

__all__ = ["comparison_for_csv", "comparison_frame"]


def comparison_frame(
    records: Sequence[Record], chips: Mapping[str, str] | None = None
) -> pd.DataFrame:
    """The comparison table of a scenario run's records (see above); a figure a
    system lacks is NaN; ``chips``: system name -> chip (default: the shipped
    system's, :func:`~tpusim.results.intervals.chip_of`)."""
    table: dict[str, dict[str, float]] = {}
    whole: dict[str, bool] = {}
    kinds: dict[str, tuple[Kind, bool]] = {}

    def put(figure: str, system: str, value: float | None, kind: type[Record]) -> None:
        if value is not None:
            table.setdefault(figure, {})[system] = float(value)
            counted = isinstance(value, int | np.integer) and not isinstance(value, bool)
            whole[figure] = whole.get(figure, True) and counted
            found = figure_kind(figure, kind.figure_columns, kind.interval_columns)
            if found is not None:
                kinds[figure] = found

    for record in records:
        for figure, value in record.figures():
            put(figure, record.system, value, type(record))
    for kind in dict.fromkeys(type(r) for r in records):
        for figure, system, value in kind.sweep_figures([r for r in records if type(r) is kind]):
            put(figure, system, value, kind)
    systems = list(dict.fromkeys(r.system for r in records))
    frame = pd.DataFrame.from_dict(table, orient="index").reindex(columns=systems)
    frame.attrs["integer_rows"] = [figure for figure, counted in whole.items() if counted]
    frame.attrs["intervals"] = _intervals(table, kinds, chips or {})
    frame.attrs["ratios"] = _ratios(table, kinds, systems[0] if systems else "")
    return frame


def _intervals(
    table: dict[str, dict[str, float]],
    kinds: dict[str, tuple[Kind, bool]],
    chips: Mapping[str, str],
) -> dict[str, dict[str, tuple[float, float]]]:
    """figure -> system -> (lo, hi) of every cost-model figure with a residual model."""
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for figure, (kind, rate) in kinds.items():
        for system, value in table[figure].items():
            chip = chips.get(system) or chip_of(system)
            interval = figure_interval(value, kind, chip, rate)
            if interval is not None:
                out.setdefault(figure, {})[system] = (interval.lo, interval.hi)
    return out


def _ratios(
    table: dict[str, dict[str, float]], kinds: dict[str, tuple[Kind, bool]], baseline: str
) -> dict[str, dict[str, tuple[float, float, float]]]:
    """figure -> system -> (system / baseline, lo, hi) of every cost-model figure the
    baseline has, the interval from paired residuals (none without pairs)."""
    out: dict[str, dict[str, tuple[float, float, float]]] = {}
    for figure, (kind, rate) in kinds.items():
        base = table[figure].get(baseline)
        if not base:
            continue
        for system, value in table[figure].items():
            interval = ratio_interval(value / base, kind, rate)
            if system != baseline and interval is not None:
                out.setdefault(figure, {})[system] = (value / base, interval.lo, interval.hi)
    return out


def comparison_for_csv(frame: pd.DataFrame) -> pd.DataFrame:
    """A comparison table with the rows :func:`comparison_frame` marks as counts
    (``attrs["integer_rows"]``: every value an integer) holding Python ints, so a CSV
    writes ``1024``, not ``1024.0``; then the interval and ratio columns (module
    docstring; blank where a figure has none)."""
    out = frame.astype(object)
    for figure in frame.attrs.get("integer_rows", []):
        if figure in out.index:
            out.loc[figure] = [int(v) if v == v else None for v in frame.loc[figure]]
    intervals, ratios = frame.attrs.get("intervals", {}), frame.attrs.get("ratios", {})
    systems = list(frame.columns)
    for system in systems:
        for i, end in enumerate(("lo", "hi")):
            out[f"{system}_{end}"] = [
                intervals.get(f, {}).get(system, (None, None))[i] for f in frame.index
            ]
    for system in systems[1:]:
        name = f"{system}/{systems[0]}"
        for i, suffix in enumerate(("", "_lo", "_hi")):
            out[name + suffix] = [
                ratios.get(f, {}).get(system, (None, None, None))[i] for f in frame.index
            ]
    return out
