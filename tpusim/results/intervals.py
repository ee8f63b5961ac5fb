"""80% intervals on a record's cost-model figures (:mod:`tpusim.config.uncertainty`).

A record type declares which of its columns come from a cost model and of which kind
(:attr:`~tpusim.results.records.Record.interval_columns`: column -> (kind, rate));
exact figures (hops, bisection, bytes, chips) are not declared and carry none. Each
declared column ``x`` with a value gets ``x_lo`` and ``x_hi`` after the record's
columns, and the row gets one ``interval_basis``: what the interval was made from
(held-out residuals; for a chip never measured, those of the measured chips), or why
a figure has none (no residual model for its kind yet). In JSON the pair is
``x_interval: [lo, hi]`` (:func:`json_row`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from tpusim.config.loader import load_system
from tpusim.config.uncertainty import (
    Interval,
    Kind,
    figure_interval,
    missing_reason,
    ratio_interval,
)
from tpusim.errors import InputError

__all__ = [
    "BASIS",
    "chip_of",
    "figure_kind",
    "interval_columns",
    "json_intervals",
    "json_row",
    "range_text",
    "row_intervals",
]

BASIS = "interval_basis"
"""The column naming each row's interval basis."""
SUFFIXES = ("_lo", "_hi")


@cache
def chip_of(system: str) -> str | None:
    """The chip generation of a shipped system (a swept variant ``NAME[...]`` as its
    base); None for a system not shipped (its interval's basis then names no chip)."""

    try:
        return load_system(system.split("[", 1)[0]).chip.name
    except InputError:
        return None


def row_intervals(
    row: Mapping[str, Any], columns: Mapping[str, tuple[Kind, bool]], chip: str | None
) -> dict[str, Interval | None]:
    """The interval of each declared column of ``row`` that has a value (None where
    the column's kind has no residual model)."""
    out: dict[str, Interval | None] = {}
    for column, (kind, rate) in columns.items():
        value = row.get(column)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[column] = figure_interval(float(value), kind, chip, rate)
    return out


def interval_columns(
    row: Mapping[str, Any], columns: Mapping[str, tuple[Kind, bool]], chip: str | None = None
) -> dict[str, Any]:
    """``x_lo``, ``x_hi`` per declared column with a value (None without a residual
    model) and ``interval_basis``; nothing when no column is declared. ``chip``
    defaults to the chip of the row's ``system``."""
    if not columns:
        return {}
    chip = chip or chip_of(str(row.get("system", "")))
    found = row_intervals(row, columns, chip)
    out: dict[str, Any] = {}
    for column, interval in found.items():
        out[f"{column}_lo"] = None if interval is None else interval.lo
        out[f"{column}_hi"] = None if interval is None else interval.hi
    out[BASIS] = _basis(found, columns)
    return out


def _basis(found: Mapping[str, Interval | None], columns: Mapping[str, tuple[Kind, bool]]) -> str:
    """Every distinct basis of the row, and why a kind has none."""
    parts = [i.basis if i is not None else missing_reason(columns[c][0]) for c, i in found.items()]
    return "; ".join(dict.fromkeys(parts))


def figure_kind(
    figure: str, figure_columns: Mapping[str, str], columns: Mapping[str, tuple[Kind, bool]]
) -> tuple[Kind, bool] | None:
    """The kind and rate-ness of a comparison figure named ``figure`` of a record type
    with these ``figure_columns`` and interval ``columns`` (None for an exact figure or
    one no measurement validates)."""
    for phrase, column in figure_columns.items():
        if phrase in figure:
            return columns[column]
    return None


def json_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` with each ``x_lo``/``x_hi`` pair as ``x_interval: [lo, hi]`` (None when
    the figure has no interval), placed where ``x_lo`` was."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if key.endswith("_hi") and f"{key[:-3]}_lo" in row:
            continue
        if key.endswith("_lo") and f"{key[:-3]}_hi" in row:
            high = row[f"{key[:-3]}_hi"]
            out[f"{key[:-3]}_interval"] = None if value is None else [value, high]
            continue
        out[key] = value
    return out


def json_intervals(
    row: Mapping[str, Any], columns: Mapping[str, tuple[Kind, bool]], chip: str | None = None
) -> dict[str, Any]:
    """``x_interval: [lo, hi]`` (None without a residual model) per declared column of
    ``row`` with a value, and ``interval_basis`` (the JSON of ``tpusim collective``,
    ``hlo`` and ``plan``)."""
    return json_row(interval_columns(row, columns, chip))


def range_text(row: Mapping[str, Any], column: str, shown: Callable[[float], str]) -> str:
    """`` (80%: lo-hi)`` from ``row``'s ``x_interval`` (:func:`json_intervals`), each
    end formatted by ``shown``; empty without one."""
    pair = row.get(f"{column}_interval")
    return "" if not pair else f" (80%: {shown(pair[0])}-{shown(pair[1])})"


def ratio(
    subject: float | None, baseline: float | None, kind: Kind, rate: bool
) -> tuple[float, Interval | None] | None:
    """``subject / baseline`` and its interval from paired residuals (None without
    both values or with a zero baseline)."""
    if subject is None or baseline is None or baseline == 0:
        return None
    value = subject / baseline
    return value, ratio_interval(value, kind, rate)
