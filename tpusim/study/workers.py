"""Scenario systems in local worker processes (``tpusim run --jobs N``), each point
sent back as it finishes so that a killed worker loses only the point it was on.

One process per system at a time, at most ``workers`` at once (largest systems
first). A worker runs its system's points in order (sharing the topology and route
cache, the point set received as it is: the scenario is not read again) and sends each
:class:`~tpusim.study.points.PointResult` down a pipe of its own as soon as it is
done. So that the pool ends evenly, a worker left with nothing to start takes the
later half of the points a running worker has not started yet (the running one stops
before them: :func:`_split`), building that system again. The points give the same
records wherever they run. When a worker dies (killed, out of memory) the point it
was running becomes a failure naming that cause, and the system's remaining points go
on in a fresh worker.
Workers ignore Ctrl-C: the KeyboardInterrupt reaches the parent, which terminates them
and lets it propagate.
"""

from __future__ import annotations

import signal
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tpusim.study.points import PointResult, Report, run_points
from tpusim.study.pointset import Point, PointSet
from tpusim.study.progress import Progress

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.context import BaseContext
    from multiprocessing.process import BaseProcess
    from multiprocessing.sharedctypes import SynchronizedArray

__all__ = ["WORKER_DIED", "WorkerProcesses"]

#: The failure of the point a worker was running when it died.
WORKER_DIED = "its worker process died (killed, or out of memory) while simulating it"

#: Seconds between checks that the workers are alive while none reports (assumption:
#: short against a point, long against a queue read).
POLL_S = 0.2

#: What a worker sends down its pipe: a point's result.
Message = PointResult


@dataclass
class _Task:
    """One system's points still to run in a worker, in order."""

    system: int
    points: list[Point]


#: Points a running worker must have left unstarted for an idle one to take the later
#: half (assumption: one or two points near the end are not worth a new process that
#: builds the system again, with its routes not yet cached).
MIN_POINTS_TO_SPLIT = 4


@dataclass
class _Running:
    """A task's worker process, the read end of its pipe, the points back so far and
    ``progress``: shared with the worker, [points it may run, point it is on] (the
    position in the task's points; -1 before the first)."""

    task: _Task
    process: BaseProcess
    reader: Connection
    progress: SynchronizedArray[int]
    done: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class WorkerProcesses:
    """The ``local`` executor with ``--jobs N`` (N > 1): at most ``workers`` systems at
    once, each in a process of its own (see the module docstring)."""

    workers: int

    def run(self, point_set: PointSet, progress: Progress, report: Report) -> list[PointResult]:
        """Every point of ``point_set``; ``report`` is called in this process with each
        result as it arrives. Returns the results in the point set's order (a point whose
        worker died is a failure, exit code 1)."""
        import multiprocessing

        context = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
        order = sorted(range(len(point_set.systems)), key=lambda i: -point_set.systems[i].num_chips)
        waiting = [task for i in order if (task := _Task(i, point_set.on_system(i))).points]
        running: list[_Running] = []
        found: dict[tuple[int, int], PointResult] = {}
        try:
            while waiting or running:
                while waiting and len(running) < self.workers:
                    running.append(_start(context, point_set, waiting.pop(0)))
                while len(running) < self.workers and (rest := _split(running)) is not None:
                    running.append(_start(context, point_set, rest))
                for worker in _wait(running):
                    if _receive(worker, found, report):
                        continue
                    running.remove(worker)
                    rest = _after_death(worker, found, report)
                    if rest is not None:
                        waiting.insert(0, rest)
        except BaseException:
            for worker in running:
                worker.process.terminate()
            raise
        return [found[key] for key in sorted(found)]


def _start(context: BaseContext, point_set: PointSet, task: _Task) -> _Running:
    """Fork ``task``'s worker with its own pipe (no lock shared between workers, so a
    worker killed mid-write cannot block the others) and its progress array; the worker
    receives ``point_set`` itself (inherited when forked, pickled when spawned)."""
    reader, writer = context.Pipe(duplex=False)
    runs = [p.run_index for p in task.points]
    progress = context.Array("q", [len(runs), -1])  # type: ignore[attr-defined]
    process = context.Process(  # type: ignore[attr-defined]
        target=_worker, args=(point_set, task.system, runs, writer, progress), daemon=True
    )
    process.start()
    writer.close()  # the worker holds the only write end: its exit is the reader's EOF
    return _Running(task, process, reader, progress)


def _split(running: list[_Running]) -> _Task | None:
    """The later half of the unstarted points of the running worker with the most
    (at least MIN_POINTS_TO_SPLIT), which stops before them; None if none has that
    many. The worker reads its limit under the same lock before starting each point."""
    for worker in sorted(running, key=_unstarted, reverse=True):
        with worker.progress.get_lock():
            limit, current = worker.progress[0], worker.progress[1]
            unstarted = limit - current - 1
            if unstarted < MIN_POINTS_TO_SPLIT:
                return None
            keep = current + 1 + (unstarted + 1) // 2
            worker.progress[0] = keep
        task = worker.task
        worker.task = _Task(task.system, task.points[:keep])
        return _Task(task.system, task.points[keep:limit])
    return None


def _unstarted(worker: _Running) -> int:
    """Points ``worker`` may still run but has not started."""
    with worker.progress.get_lock():
        return int(worker.progress[0] - worker.progress[1] - 1)


def _wait(running: list[_Running]) -> list[_Running]:
    """The workers whose pipe has something (a result, or the EOF of their exit)."""
    from multiprocessing.connection import wait

    ready = set(wait([w.reader for w in running], timeout=POLL_S))
    return [w for w in running if w.reader in ready]


def _receive(worker: _Running, found: dict[tuple[int, int], PointResult], report: Report) -> bool:
    """Take one message from ``worker``'s pipe; False at its end (the worker exited)."""
    try:
        message: Message = worker.reader.recv()
    except (EOFError, OSError):
        worker.reader.close()
        worker.process.join()
        return False
    found[(message.system_index, message.run_index)] = message
    worker.done.add(message.run_index)
    report(message)
    return True


def _after_death(
    worker: _Running, found: dict[tuple[int, int], PointResult], report: Report
) -> _Task | None:
    """After ``worker``'s process ended: None when every point came back; else the
    point it was on becomes a failure and the task of its remaining points is
    returned."""
    left = [p for p in worker.task.points if p.run_index not in worker.done]
    if not left:
        return None
    code = worker.process.exitcode
    cause = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
    failure = PointResult.lost(left[0], f"{WORKER_DIED} ({cause})")
    found[(failure.system_index, failure.run_index)] = failure
    report(failure)
    return _Task(worker.task.system, left[1:]) if left[1:] else None


def _worker(
    point_set: PointSet,
    system: int,
    runs: list[int],
    results: Connection,
    progress: SynchronizedArray[int],
) -> None:
    """A worker process: run points ``runs`` of ``system`` of ``point_set`` (received, not
    read again) in order and send each result down the ``results`` pipe as it is done.
    Before each point it marks it started in ``progress``, unless the parent lowered its
    limit below it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    wanted = set(runs)
    points = [p for p in point_set.on_system(system) if p.run_index in wanted]
    ran = run_points(point_set, points)
    for position in range(len(points)):
        with progress.get_lock():
            if position >= progress[0]:
                return
            progress[1] = position
        results.send(next(ran))
