"""Records as pandas DataFrames with documented columns (``*_s`` times, ``*_Bps``
bandwidths, ``num_*`` counts). pandas is imported only when a table is asked for."""

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
    "collectives_frame",
    "link_utilization",
    "links_frame",
]
