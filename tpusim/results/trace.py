"""Chrome / Perfetto trace JSON of a simulated step (the trace event format).

Following xprof's converter: one process per chip class (pid; named after the
chips it stands for), one thread per unit (tid: TensorCore, SparseCore, CAE, host
DMA, the collective as a whole, then each ICI port it uses, e.g. ``ICI x+``),
named and sorted with metadata events; every op a complete event (``ph: "X"``) with
``ts``/``dur`` in microseconds and its kind and FLOPs in ``args``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from tpusim.results.files import atomic_write_text, json_text
from tpusim.results.ops import OpRecord

#: One trace event (the trace event format's JSON object).
TraceEvent = dict[str, object]


class ServingIteration(Protocol):
    """One iteration of a serving replica, as the trace draws it
    (:class:`~tpusim.serving.service.IterationRecord` is one): its start (s), duration
    (s), decode sequences, prefill chunks and tokens, batch size and tokens."""

    @property
    def start_at(self) -> float: ...
    @property
    def duration_s(self) -> float: ...
    @property
    def decode(self) -> int: ...
    @property
    def chunks(self) -> int: ...
    @property
    def prefill_tokens(self) -> int: ...
    @property
    def sequences(self) -> int: ...
    @property
    def tokens(self) -> int: ...


UNITS = ("tensorcore", "sparsecore", "cae", "host", "ici")  # then one thread per ICI port


def trace_events(ops: Sequence[OpRecord]) -> list[TraceEvent]:
    """Events for op records (``name, kind, chips, unit, start_at, end_at, flops``)."""
    classes = list(dict.fromkeys(r.chips for r in ops))
    ports = sorted({r.unit for r in ops} - set(UNITS))
    threads = [*UNITS, *ports]
    events: list[TraceEvent] = []
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


def write_trace(path: str | Path, ops: Sequence[OpRecord]) -> None:
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


def _serving_metadata(pid: int, name: str) -> list[TraceEvent]:
    """Process name and sort index of replica ``pid``, and its two named threads."""
    events: list[TraceEvent] = [
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


def serving_trace_events(
    replicas: Mapping[str, Sequence[ServingIteration]],
) -> list[TraceEvent]:
    """Events of serving iterations: ``replicas`` maps a process name (``SYSTEM
    WORKLOAD replica R``) to its iterations in order (records with ``start_at``,
    ``duration_s``, ``decode``, ``chunks``, ``prefill_tokens``, ``sequences``,
    ``tokens``: :class:`~tpusim.serving.service.IterationRecord`). One process per
    replica, one complete event per iteration (``ts``/``dur`` in microseconds) with
    its batch size and tokens in ``args``."""
    events: list[TraceEvent] = []
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
