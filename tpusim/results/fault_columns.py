"""The summary columns of a collective run with faults or a routing policy, from the
network's ``fault_report`` (:mod:`tpusim.engine.faults`): absent on a healthy run."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypedDict

#: The columns, in order: links down, flows moved off a failed link, the routing
#: policy, what the collective's algorithm adapted (";"-joined notes).
FAULT_COLUMNS = ("failed_links", "rerouted_flows", "routing", "adapted")


class FaultColumns(TypedDict, total=False):
    """The columns (none on a healthy run): links down, flows moved off a failed link,
    the routing policy, the adaptations (";"-joined)."""

    failed_links: int
    rerouted_flows: int
    routing: str
    adapted: str


def fault_columns(report: Mapping[str, Any] | None) -> FaultColumns:
    """The columns of a ``fault_report`` ({} for a healthy run)."""
    if not report:
        return {}
    return {
        "failed_links": len(report["failed_links"]),
        "rerouted_flows": int(report["rerouted_flows"]),
        "routing": str(report["routing"]),
        "adapted": "; ".join(report["adapted"]),
    }


def columns_from_row(row: Mapping[str, Any]) -> FaultColumns:
    """The columns back from a summary row (CSV cells or JSON); {} when absent."""
    failed = row.get("failed_links")
    if failed is None or failed == "" or (isinstance(failed, float) and math.isnan(failed)):
        return {}
    adapted = row.get("adapted")
    return {
        "failed_links": int(float(failed)),
        "rerouted_flows": int(float(row["rerouted_flows"])),
        "routing": str(row["routing"]),
        "adapted": adapted if isinstance(adapted, str) else "",
    }
