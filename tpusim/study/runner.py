"""Running a scenario: its point set (:mod:`tpusim.study.pointset`) through an executor
(:mod:`tpusim.study.executors`: in this process, in worker processes or on Dask), the
results assembled into a :class:`~tpusim.results.run.ScenarioRun`.

A point that fails (a simulation error, an out-of-memory program) is recorded as a
failure and the other points go on: the caller writes what ran and lists the
failures. Each finished point is reported to a :class:`~tpusim.study.progress.Progress`.
The last step of the run path: nothing before it imports this module.
"""

from __future__ import annotations

import time

from tpusim.results.run import CollectiveLinks, PointFailure, ProgramDetail, ScenarioRun
from tpusim.study.executors import executor_for
from tpusim.study.options import IN_PROCESS, ScenarioRunOptions
from tpusim.study.points import PointResult, Report
from tpusim.study.pointset import PointSet, point_set_of
from tpusim.study.progress import Progress
from tpusim.study.scenario import Scenario

__all__ = ["assemble", "run_point_set", "run_scenario"]


def assemble(results: list[PointResult]) -> ScenarioRun:
    """The :class:`ScenarioRun` of point results in the point set's order: their records
    and simulated programs, each collective workload's largest size's per-link bytes
    per system, the topologies and the failures."""
    out = ScenarioRun()
    largest: dict[tuple[str, str], CollectiveLinks] = {}
    for result in results:
        if result.topology is not None:
            out.topologies[result.system] = result.topology
        if result.outcome is None:
            out.failures.append(PointFailure(result.system, result.label, str(result.failure)))
            continue
        outcome = result.outcome
        out.records.append(outcome.record)
        if outcome.results is not None:
            out.details.append(ProgramDetail(result.system, result.label, outcome.results))
        links = outcome.links
        if links is not None:
            seen = largest.get((links.system, links.workload))
            if seen is None or links.bytes >= seen.bytes:
                largest[(links.system, links.workload)] = links
    out.collectives.extend(largest.values())
    return out


def run_scenario(
    scenario: Scenario, options: ScenarioRunOptions = IN_PROCESS, on_result: Report | None = None
) -> ScenarioRun:
    """Every system x workload point of ``scenario`` (:func:`run_point_set` of its point_set);
    by default in this process, with progress on stderr."""
    return run_point_set(point_set_of(scenario), options, on_result)


def run_point_set(
    point_set: PointSet, options: ScenarioRunOptions, on_result: Report | None = None
) -> ScenarioRun:
    """Every point of ``point_set``; returns a :class:`ScenarioRun` (failed points are in
    its ``failures``).

    Progress (unless ``options.quiet``): an overall bar and a line per finished point
    on stderr. The executor (:func:`~tpusim.study.executors.executor_for`): ``local``
    with ``jobs`` > 1 runs that many systems at once in worker processes (each
    system's points in order in one process, so its route cache is shared,
    :mod:`tpusim.study.workers`: a worker that dies loses only the point it was on);
    ``dask``: one task per point on the Dask scheduler at ``options.scheduler``
    (default: a local cluster of two worker processes). ``on_result`` is called in
    this process with each point's result as soon as it is back (``tpusim run``
    writes it to disk then). The records come back in the point set's order and are the
    same numbers either way. Local workers are forked on Linux, so workload kinds
    registered at runtime reach them there. Raises InputError for options that do
    not go together or a Dask scheduler that cannot be reached.
    """
    began = time.perf_counter()
    executor = executor_for(options, len(point_set.systems))
    classes = [p.cost_class for p in point_set.points]
    kind_of = {(p.system_index, p.run_index): p.cost_class for p in point_set.points}
    with Progress(len(classes), point_set.name, not options.quiet, kinds=classes) as bar:

        def report(result: PointResult) -> None:
            if on_result is not None:
                on_result(result)
            bar.finished(result.finished(), kind_of[(result.system_index, result.run_index)])

        results = executor.run(point_set, bar, report)
    out = assemble(results)
    out.chips = {system.name: system.chip.name for system in point_set.systems}
    out.wall_s = time.perf_counter() - began
    return out
