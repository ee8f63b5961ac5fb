"""The JSON rows serving writes (``tpusim serve --json``, a ``kind: serving`` point):
a row maps field names to JSON values, nested rows and lists included."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

#: A JSON value (tuples are written as lists).
Json: TypeAlias = (
    str | int | float | bool | list["Json"] | tuple["Json", ...] | dict[str, "Json"] | None
)
#: A row of figures by field name.
Row: TypeAlias = dict[str, Json]


def required(row: Mapping[str, object], key: str) -> float:
    """``row[key]``, a number the row always has, as a float. Raises TypeError
    otherwise."""
    value = number(row, key)
    if value is None:
        raise TypeError(f"row field {key} is missing")
    return value


def number(row: Mapping[str, object], key: str) -> float | None:
    """``row[key]`` as a float (None when absent or null). Raises TypeError for a
    value that is not a number."""
    value = row.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"row field {key} is not a number: {value!r}")
    return float(value)
