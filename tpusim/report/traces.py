"""The serving trace of a scenario run (the ``serving_trace`` output writer), from the
serving records' iterations (:func:`tpusim.results.trace.serving_trace_events`)."""

from __future__ import annotations

from pathlib import Path

from tpusim.results.files import atomic_write_text, json_text
from tpusim.results.trace import SERVING_TRACE_FILE, serving_trace_events
from tpusim.results.writers import Outputs
from tpusim.serving.service import IterationRecord
from tpusim.workloads.serving import ServingRecord

__all__ = ["write_serving_trace"]


def write_serving_trace(out: Path, outputs: Outputs) -> list[Path]:
    """``serving_trace.json`` in the folder ``out``: the iterations of every serving
    record of the run that has them, one process per replica
    (:func:`~tpusim.results.trace.serving_trace_events`); nothing when none has."""
    replicas: dict[str, list[IterationRecord]] = {}
    for record in outputs.run.records:
        if not isinstance(record, ServingRecord):
            continue
        for r, iterations in enumerate(record.iterations):
            replicas[f"{record.system} {record.workload} replica {r}"] = list(iterations)
    if not replicas:
        return []
    path = out / SERVING_TRACE_FILE
    trace = {"traceEvents": serving_trace_events(replicas), "displayTimeUnit": "ms"}
    atomic_write_text(path, json_text(trace, indent=None))
    return [path]
