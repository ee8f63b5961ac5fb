"""Progress of a long command on stderr: one overall bar (tqdm: percentage, count, ETA)
and one line per finished run with its own wall time; stdout stays clean.

On a terminal the bar redraws in place under the finished lines; on a pipe or a file
(a log, a CI job) there is no bar to redraw, so each finished line starts with the
count, percentage and ETA instead (``[3/12 25% ETA 00:04] done v5e-pod train
(0.12 s)``). :class:`Progress` is fed in the process that prints: runs in worker
processes report through a queue (read here by :meth:`Progress.drain`); on Dask each
finished task is one report.
"""

from __future__ import annotations

import queue
import sys
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Protocol

from tpusim.later import LaterModule
from tpusim.units import format_bytes

if TYPE_CHECKING:
    import tqdm as bars
    from tqdm import tqdm
else:  # the bar only on a terminal
    bars = LaterModule("tqdm")

__all__ = ["Finished", "Progress"]


class EventQueue(Protocol):
    """A queue of :class:`Finished` events (``queue.Queue``, ``multiprocessing.Queue``)."""

    def get(self, block: bool = True, timeout: float | None = None) -> Finished: ...

    def get_nowait(self) -> Finished: ...


@dataclass(frozen=True)
class Finished:
    """One run done: what ran (``name``: system and workload point), its wall time in
    seconds and, if it failed, the one-line problem."""

    name: str
    wall_s: float
    problem: str | None = None
    peak_memory_bytes: int | None = None

    def line(self) -> str:
        """The line printed for this run (with its peak resident memory when known)."""
        spent = f"{self.wall_s:.2f} s"
        if self.peak_memory_bytes is not None:
            spent += f", peak {format_bytes(self.peak_memory_bytes)}"
        if self.problem is None:
            return f"done    {self.name} ({spent})"
        return f"failed  {self.name} ({spent}): {self.problem}"


class Progress:
    """An overall bar of ``total`` runs on ``stream`` (default stderr), labelled
    ``what``; ``enabled=False`` (``--quiet``) prints nothing at all, and
    ``terminal_only=True`` nothing unless the stream is a terminal (a command whose
    stdout already shows each result as it comes). ``count`` is the runs reported so
    far."""

    def __init__(
        self,
        total: int,
        what: str = "runs",
        enabled: bool = True,
        stream: IO[str] | None = None,
        terminal_only: bool = False,
        kinds: Sequence[Hashable] | None = None,
    ):
        self.stream = stream if stream is not None else sys.stderr
        if terminal_only and not _is_terminal(self.stream):
            enabled = False
        self.total, self.enabled, self.count = total, enabled, 0
        self.left: dict[Hashable, int] = {}  # runs still to come, per kind
        for kind in kinds if kinds is not None else [None] * total:
            self.left[kind] = self.left.get(kind, 0) + 1
        self.spent: dict[Hashable, list[float]] = {}  # wall time and runs done, per kind
        self.began = time.perf_counter()
        self.bar: tqdm[None] | None = None
        if enabled and _is_terminal(self.stream):
            self.bar = bars.tqdm(total=total, desc=what, unit="run", file=self.stream)

    def finished(self, event: Finished, kind: Hashable = None) -> None:
        """Print ``event``'s line and advance the bar by one run of ``kind`` (one of
        the ``kinds`` given: runs of a kind are expected to cost alike, :meth:`eta_s`)."""
        self.count += 1
        if self.left.get(kind, 0) > 0:
            self.left[kind] -= 1
        spent = self.spent.setdefault(kind, [0.0, 0])
        spent[0] += event.wall_s
        spent[1] += 1
        if not self.enabled:
            return
        if self.bar is None:
            self._write(f"[{self._position()}] {event.line()}")
            return
        self.bar.write(event.line(), file=self.stream)
        self.bar.update(1)
        self.bar.set_postfix_str(f"ETA {self._eta()}", refresh=True)

    def note(self, text: str) -> None:
        """A line that is not a run (``writing out/demo``)."""
        if not self.enabled:
            return
        if self.bar is None:
            self._write(text)
        else:
            self.bar.write(text, file=self.stream)

    def drain(self, events: EventQueue, timeout_s: float = 0.0) -> None:
        """Every :class:`Finished` waiting in the ``events`` queue (the first waited for
        up to ``timeout_s`` seconds)."""
        wait = timeout_s
        while True:
            try:
                event = events.get(timeout=wait) if wait > 0 else events.get_nowait()
            except (queue.Empty, OSError, ValueError):  # empty, or closed at shutdown
                return
            self.finished(event)
            wait = 0.0

    def close(self) -> None:
        """End the bar (its last state stays on the screen)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def work_left_s(self) -> float:
        """Run time still to come (s): each run left costs the mean wall time of the
        finished runs of its kind, or of all finished runs for a kind not seen yet."""
        done_s = sum(s for s, _ in self.spent.values())
        done = sum(n for _, n in self.spent.values())
        overall_s = done_s / done if done else 0.0
        return sum(
            n * (self.spent[k][0] / self.spent[k][1] if k in self.spent else overall_s)
            for k, n in self.left.items()
        )

    def eta_s(self) -> float:
        """Wall time left (s): :meth:`work_left_s` over the rate at which run time has
        been done so far (run seconds per wall second: the parallelism)."""
        elapsed_s = time.perf_counter() - self.began
        done_s = sum(s for s, _ in self.spent.values())
        if done_s <= 0 or elapsed_s <= 0:
            return 0.0
        return self.work_left_s() / max(done_s / elapsed_s, 1e-9)

    def _eta(self) -> str:
        return str(bars.tqdm.format_interval(self.eta_s()))

    def _position(self) -> str:
        """``3/12 25% ETA 00:04``: runs done, the share of the expected run time done
        and the ETA."""
        total = max(self.total, 1)
        done_s = sum(s for s, _ in self.spent.values())
        expected_s = done_s + self.work_left_s()
        percent = 100 * done_s / expected_s if expected_s > 0 else 100 * self.count / total
        width = len(str(total))
        return f"{self.count:>{width}}/{total} {percent:3.0f}% ETA {self._eta()}"

    def _write(self, line: str) -> None:
        # one write per line: a whole line even if another process shares the stream
        self.stream.write(line + "\n")
        self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or closed
        return False
