"""Running a loaded scenario: every (system, workload point), in this process, in
worker processes (one system each) or on Dask (one task each, :mod:`tpusim.study.executors`).

A point that fails (a simulation error, an out-of-memory program) is recorded as a
failure and the other points go on: the caller writes what ran and lists the
failures. Each finished point is reported to a :class:`~tpusim.study.progress.Progress`.

This module never imports :mod:`tpusim.study.scenario` (which re-exports
:func:`run_scenario`): it reads the scenario it is given (``systems``, ``runs``,
``for_system``, ``context``), and a worker loads the scenario file again through the
scenario's own class.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from tpusim.results.records import CollectiveLinks, ScenarioRun
from tpusim.study.points import PointResult, run_point, run_workload, workload_errors
from tpusim.study.progress import Finished, Progress

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
#: ``dask`` (a Dask cluster, :mod:`tpusim.study.executors`).
EXECUTORS = ("local", "dask")


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
    on_result: Callable[[PointResult], None] | None = None,
) -> ScenarioRun:
    """Every system x workload point; returns a :class:`ScenarioRun` (unpacks as rows,
    details; failed points are in its ``failures``).

    ``progress``: an overall bar and a line per finished point on stderr. ``executor``
    ``local``: ``jobs`` > 1 runs that many systems at once in worker processes (each
    system's points in order in one process, so its route cache is shared,
    :mod:`tpusim.study.workers`: a worker that dies loses only the point it was on);
    ``dask``: one task per (system, point) on the Dask scheduler at ``scheduler``
    (default: a local cluster of two worker processes). ``on_result`` is called in
    this process with each point's result as soon as it is back (``tpusim run``
    writes it to disk then). The rows come back in the scenario's order and are the
    same numbers either way. Local workers are forked on Linux, so workload kinds
    registered at runtime reach them there.
    """
    began = time.perf_counter()
    count = len(scenario.systems)
    kinds = [point_kind(scenario, s, r) for s, r in scenario.points()]
    with Progress(len(kinds), scenario.spec.name, progress, kinds=kinds) as bar:

        def report(result: PointResult) -> None:
            if on_result is not None:
                on_result(result)
            kind = point_kind(scenario, result.system_index, result.run_index)
            bar.finished(result.finished(), kind)

        if executor == "dask":
            from tpusim.study.executors import run_on_dask

            results = run_on_dask(scenario, bar, scheduler, report)
        elif jobs > 1 and count > 1:
            from tpusim.study.workers import run_in_workers

            results = run_in_workers(scenario, report, min(jobs, count))
        else:
            results = []
            for i in range(count):
                for result in run_system(scenario, i, None):
                    report(result)
                    results.append(result)
    out = assemble(results)
    out.wall_s = time.perf_counter() - began
    return out


def point_kind(scenario: Any, system_index: int, run_index: int) -> tuple[Any, ...]:
    """What the progress ETA expects to cost alike (:class:`~tpusim.study.progress.Progress`):
    points of one workload point on systems of one topology and chip count (the
    variants of a swept system differ in link figures, not in the work simulated)."""
    system = scenario.systems[system_index]
    return (system.topology_kind, system.num_chips, run_index)
