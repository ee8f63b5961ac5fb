"""What ``tpusim run`` keeps while it runs: each finished point written to
``OUT/points.jsonl`` as soon as it is back (so a run killed later, or whose worker
dies, keeps every point that finished), and the default number of worker processes,
bounded by the free memory.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import IO

from tpusim.report import integer_bytes
from tpusim.results.files import json_text, output_error
from tpusim.study.points import PointResult

__all__ = ["POINTS_FILE", "WORKER_MEMORY_BYTES", "PointLog", "default_jobs", "free_memory_bytes"]

#: The file, in the output folder, of the points written as they finish.
POINTS_FILE = "points.jsonl"

#: Memory set aside per worker process when choosing the default ``--jobs`` (bytes).
#: Grade: assumption, from the peak resident memory per point that ``tpusim run``
#: reports on the shipped scenarios (design-space, 1,024 chips: under 1 GiB a point;
#: whole-models' largest, a 9,600-chip superpod: about 3 GiB): 2 GiB lets the common
#: case run one worker per core and keeps a 24 GiB machine's workers within memory.
WORKER_MEMORY_BYTES = 2 * 2**30


def free_memory_bytes() -> int | None:
    """Memory the kernel can give without swapping (``MemAvailable`` of
    ``/proc/meminfo``, bytes), or None where that is not readable (not Linux)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def default_jobs(num_systems: int, free_bytes: int | None = None) -> int:
    """The default ``--jobs``: one worker per CPU core and per system, but no more
    than the free memory holds at WORKER_MEMORY_BYTES each (at least 1).
    ``free_bytes`` defaults to :func:`free_memory_bytes`."""
    free = free_memory_bytes() if free_bytes is None else free_bytes
    jobs = min(os.cpu_count() or 1, max(num_systems, 1))
    if free is not None:
        jobs = min(jobs, free // WORKER_MEMORY_BYTES)
    return max(jobs, 1)


class PointLog:
    """``OUT/points.jsonl``: one JSON object per finished point, written and flushed as
    it comes back: ``system``, ``workload``, ``wall_s``, ``peak_memory_bytes`` and
    ``row`` (the summary row) or ``error`` (the one-line failure). Created (with the
    folder) at the first point, so a run that fails before any leaves no folder; an
    OSError becomes the ``--out`` InputError. Ctrl-C (KeyboardInterrupt) is the user
    stopping the run: the file is removed, and the folder if it made it, so an
    interrupted run leaves DIR as it was; a run killed outright keeps the file."""

    def __init__(self, out: Path):
        self.path = Path(out) / POINTS_FILE
        self.handle: IO[str] | None = None
        self.count = 0
        self.made_folder = False

    def __enter__(self) -> PointLog:
        return self

    def _open(self) -> IO[str]:
        if self.handle is None:
            try:
                self.made_folder = not self.path.parent.exists()
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.handle = self.path.open("w", encoding="utf-8")
            except OSError as exc:
                raise output_error("output folder", self.path.parent, exc) from None
        return self.handle

    def write(self, result: PointResult) -> None:
        """Append one :class:`~tpusim.study.points.PointResult` and flush it to the file."""
        record: dict[str, object] = {
            "system": result.system,
            "workload": result.label,
            "wall_s": result.wall_s,
            "peak_memory_bytes": result.peak_memory_bytes,
        }
        if result.outcome is not None:
            record["row"] = integer_bytes(result.outcome.record.row())
            self.count += 1
        else:
            record["error"] = result.failure
        handle = self._open()
        try:
            handle.write(json_text(record, indent=None) + "\n")
            handle.flush()
        except OSError as exc:
            raise output_error("output folder", self.path, exc) from None

    def kept_text(self) -> str:
        """`` (N finished points kept in OUT/points.jsonl)`` for the failure line."""
        return f" ({self.count} finished points kept in {self.path})"

    def __exit__(self, kind: object, *exc: object) -> None:
        if self.handle is None:
            return
        self.handle.close()
        if kind is KeyboardInterrupt:
            self.path.unlink(missing_ok=True)
            if self.made_folder:
                with contextlib.suppress(OSError):
                    self.path.parent.rmdir()  # only when nothing else is in it
