"""Running points of a point set (:mod:`tpusim.study.pointset`): each one's outcome or its
failure, and its wall time.

The unit of work of every executor (:mod:`tpusim.study.executors`: in this process, in
worker processes, on Dask); :func:`workload_errors` is also what the check
(:mod:`tpusim.study.check`) resolves each point under before running.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tpusim.errors import ConfigError, InputError, TpusimError
from tpusim.network.routes import RouteCache
from tpusim.study.pointset import Point, PointSet
from tpusim.study.progress import Finished
from tpusim.topology import build_topology
from tpusim.workloads import WORKLOADS, Outcome, WorkloadContext

if TYPE_CHECKING:
    from tpusim.network.routes import RouteCache
    from tpusim.topology import Topology

__all__ = [
    "PointResult",
    "Report",
    "check_point",
    "run_point",
    "run_points",
    "run_workload",
    "workload_errors",
]

#: A point that ran this long (s) is followed by a full garbage collection. A
#: simulation leaves reference cycles (its SimPy environment, processes and flow
#: batches) that hold its numpy arrays; Python's full cyclic pass runs only once the
#: long-lived objects have grown by a quarter, so a sweep kept dead points' arrays:
#: design-space at ``--jobs 1`` peaked at 7 GB, 1.6 GiB per point by its 130th (620 MiB
#: with the collection). A full pass costs tens of ms, hence not after quick points
#: (assumption: 0.1 s, where it is at most a few tenths of the point's time).
COLLECT_AFTER_S = 0.1


@dataclass
class PointResult:
    """One workload point run on one system: its outcome, or its failure (the one-line
    message and exit code), and its wall time (s). ``topology`` rides along with the
    first point of each system run on a worker (for plots)."""

    system_index: int
    run_index: int
    system: str
    label: str
    outcome: Outcome | None
    failure: str | None
    exit_code: int
    wall_s: float
    topology: Topology | None = None
    peak_memory_bytes: int | None = None

    @classmethod
    def lost(cls, point: Point, failure: str) -> PointResult:
        """A point that never came back (its worker died): a failure, exit code 1."""
        name, label = point.system.name, point.label
        return cls(point.system_index, point.run_index, name, label, None, failure, 1, 0.0)

    def finished(self) -> Finished:
        """The progress report of this point."""
        name = f"{self.system} {self.label}"
        return Finished(name, self.wall_s, self.failure, self.peak_memory_bytes)


#: Called with each point's result in the process that runs the point set, as it is back.
Report = Callable[[PointResult], None]


def run_point(
    point_set: PointSet, point: Point, topology: Topology, routes: RouteCache
) -> PointResult:
    """``point`` of ``point_set`` on its system's built topology and route cache; a tpusim
    error becomes the point's failure (its one-line message and exit code)."""
    reset_peak_memory()
    began = time.perf_counter()
    outcome, failure, code = None, None, 0
    try:
        outcome = run_workload(point_set, point, point_set.context(point, topology, routes))
    except TpusimError as exc:
        failure, code = str(exc), exc.exit_code
    wall_s = time.perf_counter() - began
    if wall_s >= COLLECT_AFTER_S:
        gc.collect()
    system, label = point.system.name, point.label
    result = PointResult(
        point.system_index, point.run_index, system, label, outcome, failure, code, wall_s
    )
    result.peak_memory_bytes = peak_memory_bytes()
    return result


def run_points(point_set: PointSet, points: list[Point]) -> Iterator[PointResult]:
    """``points`` (all on one system) in order, sharing that system's topology and
    route cache, built once; the first result carries the topology (for plots)."""

    if not points:
        return
    topology = build_topology(points[0].system)
    routes = RouteCache(topology)
    for position, point in enumerate(points):
        result = run_point(point_set, point, topology, routes)
        result.topology = topology if position == 0 else None
        yield result


def reset_peak_memory() -> None:
    """Reset this process's peak resident memory (Linux: ``5`` to
    ``/proc/self/clear_refs``), so :func:`peak_memory_bytes` measures the next point
    alone; elsewhere (or where refused) the peak stays the process's so far."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
            handle.write("5")
    except OSError:
        pass


def peak_memory_bytes() -> int | None:
    """This process's peak resident memory since :func:`reset_peak_memory` (bytes):
    ``VmHWM`` of ``/proc/self/status``, else ``ru_maxrss``; None if neither reads."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
    except (ImportError, OSError):
        return None


def run_workload(point_set: PointSet, point: Point, context: WorkloadContext) -> Outcome:
    """``point`` on the context's system (its workload resolved for the system,
    :meth:`PointSet.resolved`), through its kind's ``run``; errors as :func:`workload_errors`."""
    with workload_errors(context):
        workload = point_set.resolved(point)
        return WORKLOADS.get(workload.kind).run(workload, context.with_faults_of(workload))


def check_point(point_set: PointSet, point: Point, context: WorkloadContext) -> None:
    """Raise what running ``point`` would raise about its input (its workload resolved
    for the system, its faults, its kind's ``check``), without simulating; errors as
    :func:`workload_errors`."""
    with workload_errors(context):
        resolved = point_set.resolved(point)
        context = context.with_faults_of(resolved)
        context.check_faults()
        check = WORKLOADS.get(resolved.kind).check
        if check is not None:
            check(resolved, context)


@contextmanager
def workload_errors(context: WorkloadContext) -> Iterator[None]:
    """Inside the block, a ValueError or an InputError that names no file becomes a
    ConfigError at the context's workload, prefixed with the system's name."""
    try:
        yield
    except ConfigError:
        raise
    except (ValueError, InputError) as exc:
        raise context.error(f"{context.system.name}: {exc}") from None
