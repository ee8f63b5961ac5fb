"""What a run shows, on top of every layer that makes records (:mod:`tpusim.results`
and each workload kind's own record and results types):

* :mod:`.tables`: the comparison table, ``tpusim topo``'s text, aligned text tables;
* :mod:`.figures`: a scenario run's figures (the ``plots`` writer), one registry
  (``FIGURES``) of the shared figure and each kind's (:mod:`.kind_figures`, picked by
  record type), drawn by :mod:`.plots`, :mod:`.compare_plots` (systems side by side)
  and :mod:`.workload_plots` (one workload kind's, and the ``jobs`` writer);
  matplotlib is imported lazily;
* :mod:`.html`: ``report.html``; :mod:`.sources`: ``sources.csv``; :mod:`.traces`:
  ``serving_trace.json``.
"""

from tpusim.report.tables import (
    TABLE_WIDTH,
    comparison_table,
    format_table,
    integer_bytes,
    text_table,
    topology_lines,
)
from tpusim.results.topology_summary import pod_totals, topology_summary

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
