"""Chrome / Perfetto trace JSON of a simulated step (the trace event format).

Following xprof's converter: one process per chip class (pid; named after the
chips it stands for), one thread per unit (tid: TensorCore, SparseCore, CAE, host
DMA, the collective as a whole, then each ICI port it uses, e.g. ``ICI x+``),
named and sorted with metadata events; every op a complete event (``ph: "X"``) with
``ts``/``dur`` in microseconds and its kind and FLOPs in ``args``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tpusim.results.files import atomic_write_text, json_text

UNITS = ("tensorcore", "sparsecore", "cae", "host", "ici")  # then one thread per ICI port


def trace_events(ops: list[Any]) -> list[dict[str, Any]]:
    """Events for op records (``name, kind, chips, unit, start_at, end_at, flops``)."""
    classes = list(dict.fromkeys(r.chips for r in ops))
    ports = sorted({r.unit for r in ops} - set(UNITS))
    threads = [*UNITS, *ports]
    events: list[dict[str, Any]] = []
    for pid, cls in enumerate(classes):
        events.append({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": cls}})
        events.append(
            {"ph": "M", "pid": pid, "name": "process_sort_index", "args": {"sort_index": pid}}
        )
        for tid, unit in enumerate(threads):
            events.append(
                {"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": unit}}
            )
            events.append(
                {
                    "ph": "M",
                    "pid": pid,
                    "tid": tid,
                    "name": "thread_sort_index",
                    "args": {"sort_index": tid},
                }
            )
    for r in ops:
        events.append(
            {
                "ph": "X",
                "name": r.name,
                "cat": r.kind,
                "pid": classes.index(r.chips),
                "tid": threads.index(r.unit),
                "ts": r.start_at * 1e6,
                "dur": (r.end_at - r.start_at) * 1e6,
                "args": {"kind": r.kind, "flops": r.flops},
            }
        )
    return events


def write_trace(path: str | Path, ops: list[Any]) -> None:
    """Write ``{"traceEvents": [...], "displayTimeUnit": "ns"}`` to ``path`` (strict
    JSON, written atomically: :mod:`tpusim.results.files`)."""
    trace = {"traceEvents": trace_events(ops), "displayTimeUnit": "ns"}
    atomic_write_text(path, json_text(trace, indent=None))
