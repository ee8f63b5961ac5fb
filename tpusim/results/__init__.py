"""Records as pandas DataFrames with documented columns (``*_s`` times, ``*_Bps``
bandwidths, ``num_*`` counts). pandas is imported only when a table is asked for.

:mod:`tpusim.results.records` holds the typed record of each workload kind of a
scenario run (a program's ends with its :mod:`tpusim.results.economics`),
:mod:`tpusim.results.run` what a run produced (records, simulated programs, failures);
:mod:`tpusim.results.writers` writes a run's files, one writer each.

The names below are imported from their modules on first use (PEP 562), so that a
command importing one module of the package (``tpusim collective`` its record and its
file helpers) does not load the others (the comparison tables, the run's files)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_HOMES = {
    "comparison_frame": "tpusim.results.comparison",
    "Economics": "tpusim.results.economics",
    "CollectiveRecord": "tpusim.results.records",
    "DecodeRecord": "tpusim.results.records",
    "ProgramRecord": "tpusim.results.records",
    "Record": "tpusim.results.records",
    "TopologyRecord": "tpusim.results.records",
    "CollectiveLinks": "tpusim.results.run",
    "PointFailure": "tpusim.results.run",
    "ProgramDetail": "tpusim.results.run",
    "ScenarioRun": "tpusim.results.run",
    "COLLECTIVE_COLUMNS": "tpusim.results.tables",
    "LINK_COLUMNS": "tpusim.results.tables",
    "collectives_frame": "tpusim.results.tables",
    "link_utilization": "tpusim.results.tables",
    "links_frame": "tpusim.results.tables",
}

__all__ = [
    "COLLECTIVE_COLUMNS",
    "LINK_COLUMNS",
    "CollectiveLinks",
    "CollectiveRecord",
    "DecodeRecord",
    "Economics",
    "PointFailure",
    "ProgramDetail",
    "ProgramRecord",
    "Record",
    "ScenarioRun",
    "TopologyRecord",
    "collectives_frame",
    "comparison_frame",
    "link_utilization",
    "links_frame",
]

if TYPE_CHECKING:  # what the lazy names are, for type checkers and editors
    from tpusim.results.comparison import comparison_frame
    from tpusim.results.economics import Economics
    from tpusim.results.records import (
        CollectiveRecord,
        DecodeRecord,
        ProgramRecord,
        Record,
        TopologyRecord,
    )
    from tpusim.results.run import CollectiveLinks, PointFailure, ProgramDetail, ScenarioRun
    from tpusim.results.tables import (
        COLLECTIVE_COLUMNS,
        LINK_COLUMNS,
        collectives_frame,
        link_utilization,
        links_frame,
    )


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'tpusim.results' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])
