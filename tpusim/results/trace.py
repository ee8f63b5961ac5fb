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


#: Threads of a serving replica: an iteration with prefill chunks (possibly mixed
#: with decode sequences, as chunked prefill batches them) on ``prefill``, a decode-only
#: one on ``decode``.
SERVING_THREADS = ("prefill", "decode")
#: The serving trace's file in a run's folder.
SERVING_TRACE_FILE = "serving_trace.json"


def _serving_metadata(pid: int, name: str) -> list[dict[str, Any]]:
    """Process name and sort index of replica ``pid``, and its two named threads."""
    events: list[dict[str, Any]] = [
        {"ph": "M", "pid": pid, "name": "process_name", "args": {"name": name}},
        {"ph": "M", "pid": pid, "name": "process_sort_index", "args": {"sort_index": pid}},
    ]
    for tid, thread in enumerate(SERVING_THREADS):
        events.append(
            {"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": thread}}
        )
        sort = {"sort_index": tid}
        events.append(
            {"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index", "args": sort}
        )
    return events


def serving_trace_events(replicas: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Events of serving iterations: ``replicas`` maps a process name (``SYSTEM
    WORKLOAD replica R``) to its iterations in order (records with ``start_at``,
    ``duration_s``, ``decode``, ``chunks``, ``prefill_tokens``, ``sequences``,
    ``tokens``: :class:`~tpusim.serving.service.IterationRecord`). One process per
    replica, one complete event per iteration (``ts``/``dur`` in microseconds) with
    its batch size and tokens in ``args``."""
    events: list[dict[str, Any]] = []
    for pid, (name, iterations) in enumerate(replicas.items()):
        events += _serving_metadata(pid, name)
        for i, it in enumerate(iterations):
            thread = "prefill" if it.chunks else "decode"
            events.append(
                {
                    "ph": "X",
                    "name": f"{thread} {i}",
                    "cat": thread,
                    "pid": pid,
                    "tid": SERVING_THREADS.index(thread),
                    "ts": it.start_at * 1e6,
                    "dur": it.duration_s * 1e6,
                    "args": {
                        "batch_size": it.sequences,
                        "tokens": it.tokens,
                        "decode_sequences": it.decode,
                        "prefill_chunks": it.chunks,
                        "prefill_tokens": it.prefill_tokens,
                    },
                }
            )
    return events


def write_serving_trace(out: Path, outputs: Any) -> list[Path]:
    """``serving_trace.json`` in the folder ``out``: the iterations of every serving
    record of the run (:class:`~tpusim.results.writers.Outputs`) that has them, one
    process per replica (:func:`serving_trace_events`); nothing when none has."""
    replicas: dict[str, list[Any]] = {}
    for record in outputs.run.records:
        for r, iterations in enumerate(getattr(record, "iterations", ())):
            replicas[f"{record.system} {record.workload} replica {r}"] = list(iterations)
    if not replicas:
        return []
    path = out / SERVING_TRACE_FILE
    trace = {"traceEvents": serving_trace_events(replicas), "displayTimeUnit": "ms"}
    atomic_write_text(path, json_text(trace, indent=None))
    return [path]
