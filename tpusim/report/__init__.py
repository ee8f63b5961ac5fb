"""What a run shows, drawn from :mod:`tpusim.results` records:

* :mod:`.tables`: the comparison table, ``tpusim topo``'s text, aligned text tables;
* :mod:`.figures`: a scenario run's figures (the ``plots`` writer), drawn by
  :mod:`.plots`, :mod:`.compare_plots` (systems side by side) and
  :mod:`.workload_plots` (one workload kind's); matplotlib is imported lazily;
* :mod:`.html`: ``report.html``; :mod:`.sources`: ``sources.csv``.
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
