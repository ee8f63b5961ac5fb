"""What a run shows: tables (the comparison table, ``tpusim topo``'s text, text
tables), figures (matplotlib, imported lazily), the HTML report and ``sources.csv``.

Reads :mod:`tpusim.results` records; imports nothing above them.
"""

from tpusim.report.tables import (
    TABLE_WIDTH,
    comparison_table,
    format_table,
    integer_bytes,
    text_table,
    topology_lines,
)
from tpusim.results.records import pod_totals, topology_summary

__all__ = [
    "TABLE_WIDTH",
    "comparison_table",
    "format_table",
    "integer_bytes",
    "pod_totals",
    "text_table",
    "topology_lines",
    "topology_summary",
]
