"""``kind: topology``: the system's topology metrics (diameter, mean hops, bisection)."""

from __future__ import annotations

from typing import Literal

from tpusim.results.records import TopologyRecord
from tpusim.workloads.registry import Outcome, WorkloadContext, WorkloadKind
from tpusim.workloads.spec import WorkloadSpec


class TopologyWorkload(WorkloadSpec):
    """The system's topology metrics (diameter, mean hops, bisection, hop histogram)."""

    kind: Literal["topology"]
    name: str


def run(spec: TopologyWorkload, context: WorkloadContext) -> Outcome:
    """The metrics of the context's topology (no simulation)."""
    return Outcome(TopologyRecord.of(context.system, context.topology, context.label))


KIND = WorkloadKind(TopologyWorkload, run, record=TopologyRecord)
