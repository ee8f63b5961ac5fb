"""Records as pandas DataFrames with documented columns (``*_s`` times, ``*_Bps``
bandwidths, ``num_*`` counts). pandas is imported only when a table is asked for.

:mod:`tpusim.results.records` holds the typed record of each workload kind of a
scenario run (a program's ends with its :mod:`tpusim.results.economics`),
:mod:`tpusim.results.run` what a run produced (records, simulated programs, failures);
:mod:`tpusim.results.writers` writes a run's files, one writer each."""

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
