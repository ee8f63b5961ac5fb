"""The ``comparison`` table of a scenario run.
``comparison`` (one column per system, one row per figure, the figure's unit in its
name): each record's :meth:`~tpusim.results.records.Record.figures` in record order,
then each record type's :meth:`~tpusim.results.records.Record.sweep_figures`. Rows
whose values are all integers (chips, diameter in hops) are listed in the frame's
``attrs["integer_rows"]`` and written as integers (:func:`comparison_for_csv`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from tpusim.results.records import Record

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["comparison_for_csv", "comparison_frame"]


def comparison_frame(records: Sequence[Record]) -> pd.DataFrame:
    """The comparison table of a scenario run's records (see above); a figure a
    system lacks is NaN."""
    import pandas as pd

    table: dict[str, dict[str, float]] = {}
    whole: dict[str, bool] = {}

    def put(figure: str, system: str, value: float | None) -> None:
        if value is not None:
            table.setdefault(figure, {})[system] = float(value)
            counted = isinstance(value, int | np.integer) and not isinstance(value, bool)
            whole[figure] = whole.get(figure, True) and counted

    for record in records:
        for figure, value in record.figures():
            put(figure, record.system, value)
    for kind in dict.fromkeys(type(r) for r in records):
        for figure, system, value in kind.sweep_figures([r for r in records if type(r) is kind]):
            put(figure, system, value)
    systems = list(dict.fromkeys(r.system for r in records))
    frame = pd.DataFrame.from_dict(table, orient="index").reindex(columns=systems)
    frame.attrs["integer_rows"] = [figure for figure, counted in whole.items() if counted]
    return frame


def comparison_for_csv(frame: pd.DataFrame) -> pd.DataFrame:
    """A comparison table with the rows :func:`comparison_frame` marks as counts
    (``attrs["integer_rows"]``: every value an integer) holding Python ints, so a CSV
    writes ``1024``, not ``1024.0``."""
    out = frame.astype(object)
    for figure in frame.attrs.get("integer_rows", []):
        if figure in out.index:
            out.loc[figure] = [int(v) if v == v else None for v in frame.loc[figure]]
    return out
