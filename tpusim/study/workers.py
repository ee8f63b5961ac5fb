"""Scenario systems in local worker processes (``tpusim run --jobs N``), each point
sent back as it finishes so that a killed worker loses only the point it was on.

One process per system at a time, at most ``workers`` at once (largest systems
first, so the pool ends evenly). A worker runs its system's points in order (sharing
the topology and route cache) and puts each :class:`~tpusim.study.points.PointResult` on a
:class:`multiprocessing.Queue` as soon as it is done. When a worker dies (killed, out
of memory) the point it was running becomes a failure naming that cause, and the
system's remaining points go on in a fresh worker. Workers ignore Ctrl-C: the
KeyboardInterrupt reaches the parent, which terminates them and lets it propagate.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tpusim.errors import InputError, SimulationError, TpusimError
from tpusim.study.points import PointResult

__all__ = ["WORKER_DIED", "run_in_workers"]

#: The failure of the point a worker was running when it died.
WORKER_DIED = "its worker process died (killed, or out of memory) while simulating it"

#: Seconds between checks that the workers are alive while none reports (assumption:
#: short against a point, long against a queue read).
POLL_S = 0.2


@dataclass
class _Task:
    """One system's points still to run in a worker: ``runs`` in order."""

    system: int
    runs: list[int]
    process: Any = None
    reader: Any = None
    done: set[int] = field(default_factory=set)


def run_in_workers(
    scenario: Any, report: Callable[[PointResult], None], workers: int
) -> list[PointResult]:
    """Every point of ``scenario`` in at most ``workers`` processes; ``report`` is
    called in this process with each result as it arrives. Returns the results in the
    scenario's order (a point whose worker died is a failure, exit code 1). Raises
    InputError or SimulationError when the scenario does not load in a worker."""
    import multiprocessing

    context = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
    load = (type(scenario), scenario.file, scenario.max_points, scenario.fault_flags)
    order = sorted(range(len(scenario.systems)), key=lambda i: -scenario.systems[i].num_chips)
    waiting = [task for i in order if (task := _Task(i, _runs_of(scenario, i))).runs]
    running: list[_Task] = []
    found: dict[tuple[int, int], PointResult] = {}
    try:
        while waiting or running:
            while waiting and len(running) < workers:
                running.append(_start(context, load, waiting.pop(0)))
            for task in _wait(running):
                if _receive(task, found, report):
                    continue
                running.remove(task)
                rest = _after_death(scenario, task, found, report)
                if rest is not None:
                    waiting.insert(0, rest)
    except BaseException:
        for task in running:
            task.process.terminate()
        raise
    return [found[key] for key in sorted(found)]


def _runs_of(scenario: Any, system: int) -> list[int]:
    return [r for r in range(len(scenario.runs)) if scenario.runs_on(r, system)]


def _start(context: Any, load: tuple[Any, ...], task: _Task) -> _Task:
    """Fork ``task``'s worker with its own pipe (no lock shared between workers, so a
    worker killed mid-write cannot block the others)."""
    reader, writer = context.Pipe(duplex=False)
    task.process = context.Process(
        target=_worker, args=(load, task.system, task.runs, writer), daemon=True
    )
    task.process.start()
    writer.close()  # the worker holds the only write end: its exit is the reader's EOF
    task.reader = reader
    return task


def _wait(running: list[_Task]) -> list[_Task]:
    """The tasks whose pipe has something (a result, or the EOF of their exit)."""
    from multiprocessing.connection import wait

    ready = set(wait([t.reader for t in running], timeout=POLL_S))
    return [t for t in running if t.reader in ready]


def _receive(task: _Task, found: dict[tuple[int, int], PointResult], report: Callable) -> bool:
    """Take one message from ``task``'s pipe; False at its end (the worker exited)."""
    try:
        message = task.reader.recv()
    except (EOFError, OSError):
        task.reader.close()
        task.process.join()
        return False
    if isinstance(message, tuple):  # (exit code, problem) from loading the scenario
        code, problem = message
        raise (InputError if code == 2 else SimulationError)(problem)
    found[(message.system_index, message.run_index)] = message
    task.done.add(message.run_index)
    report(message)
    return True


def _after_death(scenario: Any, task: _Task, found: dict, report: Callable) -> _Task | None:
    """After ``task``'s process ended: None when every point came back; else the
    point it was on becomes a failure and the task of its remaining points is
    returned."""
    left = [r for r in task.runs if r not in task.done]
    if not left:
        return None
    lost = left[0]
    _, (_, label) = scenario.runs[lost]
    code = task.process.exitcode
    cause = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
    name = scenario.systems[task.system].name
    failure = PointResult(task.system, lost, name, label, None, f"{WORKER_DIED} ({cause})", 1, 0)
    found[(task.system, lost)] = failure
    report(failure)
    return _Task(task.system, left[1:]) if left[1:] else None


def _worker(load: tuple[Any, ...], system: int, runs: list[int], results: Any) -> None:
    """A worker process: load the scenario again, run points ``runs`` of ``system``
    in order and send each result down the ``results`` pipe as it is done (or a
    loading error as (exit code, message), which always pickles)."""
    from tpusim.network.routes import RouteCache
    from tpusim.study.points import run_point
    from tpusim.topology import build_topology

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    scenario_class, file, max_points, fault_flags = load
    try:
        scenario = scenario_class(file, max_points, fault_flags)
    except TpusimError as exc:
        results.send((exc.exit_code, str(exc)))
        return
    topology = build_topology(scenario.systems[system])
    routes = RouteCache(topology)
    for position, run in enumerate(runs):
        result = run_point(scenario, system, run, topology, routes)
        result.topology = topology if position == 0 else None
        results.send(result)
