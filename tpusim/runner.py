"""Running a loaded scenario: every (system, workload point), in this process, in
worker processes (one system each) or on Dask (one task each, :mod:`tpusim.executors`).

A point that fails (a simulation error, an out-of-memory program) is recorded as a
failure and the other points go on: the caller writes what ran and lists the
failures. Each finished point is reported to a :class:`~tpusim.progress.Progress`.

This module never imports :mod:`tpusim.scenario` (which re-exports
:func:`run_scenario`): it reads the scenario it is given (``systems``, ``runs``,
``for_system``, ``context``), and a worker loads the scenario file again through the
scenario's own class.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from tpusim.errors import InputError, SimulationError, TpusimError
from tpusim.points import PointResult, run_point, run_workload, workload_errors
from tpusim.progress import Finished, Progress
from tpusim.results.records import CollectiveLinks, ScenarioRun

__all__ = [
    "EXECUTORS",
    "PointResult",
    "assemble",
    "run_point",
    "run_scenario",
    "run_system",
    "run_workload",
    "workload_errors",
]

#: Where ``tpusim run`` runs the points: ``local`` (this machine's processes) or
#: ``dask`` (a Dask cluster, :mod:`tpusim.executors`).
EXECUTORS = ("local", "dask")

#: Seconds the parent waits, after every worker has finished, for progress reports
#: still in the queue (its feeder thread flushes them after the put returns;
#: assumption: a flush takes milliseconds).
PROGRESS_FLUSH_WAIT_S = 5.0


def run_system(
    scenario: Any, system_index: int, report: Callable[[Finished], None] | None
) -> Iterator[PointResult]:
    """Every workload point on one system, in order, sharing its topology and routes;
    the first result carries the topology."""
    from tpusim.network.routes import RouteCache
    from tpusim.topology import build_topology

    topology = build_topology(scenario.systems[system_index])
    routes = RouteCache(topology)
    first = True
    for run_index in range(len(scenario.runs)):
        if not scenario.runs_on(run_index, system_index):
            continue
        result = run_point(scenario, system_index, run_index, topology, routes)
        result.topology, first = (topology if first else None), False
        if report is not None:
            report(result.finished())
        yield result


def assemble(results: list[PointResult]) -> ScenarioRun:
    """The :class:`ScenarioRun` of point results in the scenario's order: their
    records and details, each collective workload's largest size's per-link bytes per
    system, the topologies and the failures."""
    out = ScenarioRun()
    largest: dict[tuple[str, str], CollectiveLinks] = {}
    for result in results:
        if result.topology is not None:
            out.topologies[result.system] = result.topology
        if result.outcome is None:
            out.failures.append((result.system, result.label, str(result.failure)))
            continue
        outcome = result.outcome
        out.records.append(outcome.record)
        if outcome.results is not None:
            out.details.append((result.system, result.label, outcome.results))
        links = outcome.links
        if links is not None:
            seen = largest.get((links.system, links.workload))
            if seen is None or links.bytes >= seen.bytes:
                largest[(links.system, links.workload)] = links
    out.collectives.extend(largest.values())
    return out


def run_scenario(
    scenario: Any,
    progress: bool = True,
    jobs: int = 1,
    executor: str = "local",
    scheduler: str | None = None,
) -> ScenarioRun:
    """Every system x workload point; returns a :class:`ScenarioRun` (unpacks as rows,
    details; failed points are in its ``failures``).

    ``progress``: an overall bar and a line per finished point on stderr. ``executor``
    ``local``: ``jobs`` > 1 runs that many systems at once in worker processes (each
    system's points in order in one process, so its route cache is shared); ``dask``:
    one task per (system, point) on the Dask scheduler at ``scheduler`` (default: a
    local cluster of two worker processes). The rows come back in the scenario's order
    and are the same numbers either way. Local workers are forked on Linux, so
    workload kinds registered at runtime reach them there; they ignore Ctrl-C: the
    KeyboardInterrupt reaches this process, which kills them and lets it propagate.
    """
    began = time.perf_counter()
    count = len(scenario.systems)
    total = len(scenario.points())
    with Progress(total, scenario.spec.name, enabled=progress) as bar:
        if executor == "dask":
            from tpusim.executors import run_on_dask

            results = run_on_dask(scenario, bar, scheduler)
        elif jobs > 1 and count > 1:
            results = _run_in_workers(scenario, bar, min(jobs, count))
        else:
            report = bar.finished if progress else None
            results = [r for i in range(count) for r in run_system(scenario, i, report)]
    out = assemble(results)
    out.wall_s = time.perf_counter() - began
    return out


def _run_in_workers(scenario: Any, bar: Progress, workers: int) -> list[PointResult]:
    """Each system's :func:`run_system` in a pool of ``workers`` processes, largest
    systems first (so the pool ends evenly); the results in the scenario's order. On
    any exception (Ctrl-C included) the queued systems are cancelled and the running
    workers terminated; a worker that dies (killed, out of memory) is a
    SimulationError."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    count = len(scenario.systems)
    order = sorted(range(count), key=lambda i: -scenario.systems[i].num_chips)
    context = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
    events = context.Queue() if bar.enabled else None
    ours_before = set(multiprocessing.active_children())
    load = (type(scenario), scenario.file, scenario.max_points, scenario.fault_flags)
    pool_of = ProcessPoolExecutor
    with pool_of(workers, context, initializer=_start_worker, initargs=(events,)) as pool:
        try:
            futures = {i: pool.submit(_run_system_file, *load, i) for i in order}
            _wait_reporting(list(futures.values()), bar, events, len(scenario.points()))
            return [r for i in range(count) for r in _raise_failure(futures[i].result())]
        except BrokenProcessPool:
            raise SimulationError(
                "a worker process died (killed, or out of memory); try --jobs 1"
            ) from None
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            for child in set(multiprocessing.active_children()) - ours_before:
                child.terminate()
            raise


def _wait_reporting(futures: list[Any], bar: Progress, events: Any, expected: int) -> None:
    """Wait for every future, feeding the workers' reports to the bar as they come."""
    from concurrent.futures import FIRST_COMPLETED, wait

    pending = set(futures)
    while pending:
        _, pending = wait(pending, timeout=0.1, return_when=FIRST_COMPLETED)
        if events is not None:
            bar.drain(events)
    if events is None or any(f.exception() is not None for f in futures):
        return
    deadline = time.perf_counter() + PROGRESS_FLUSH_WAIT_S
    while bar.count < expected and time.perf_counter() < deadline:
        bar.drain(events, timeout_s=0.1)


#: The queue a worker process reports finished points to (set by :func:`_start_worker`
#: in the worker; None in the parent and when progress is off).
_EVENTS: Any = None


def _start_worker(events: Any) -> None:
    """Worker initializer: reports go to ``events``; Ctrl-C is the parent's to handle
    (it terminates the pool)."""
    import signal

    global _EVENTS
    _EVENTS = events
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run_system_file(
    scenario_class: Any, file: str, max_points: int, fault_flags: dict[str, Any], index: int
) -> list[PointResult] | tuple[int, str]:
    """:func:`run_system` in a worker process (the scenario is loaded there again); a
    tpusim error while loading comes back as (exit code, message), which always pickles."""
    try:
        scenario = scenario_class(file, max_points, fault_flags)
    except TpusimError as exc:
        return exc.exit_code, str(exc)
    report = _EVENTS.put if _EVENTS is not None else None
    return list(run_system(scenario, index, report))


def _raise_failure(part: list[PointResult] | tuple[int, str]) -> list[PointResult]:
    if isinstance(part, list):
        return part
    code, message = part
    raise (InputError if code == 2 else SimulationError)(message)
