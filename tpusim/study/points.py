"""One workload point on one system: its outcome or its failure, and its wall time.

The unit of work of every executor (:mod:`tpusim.study.runner` in this process or in worker
processes, :mod:`tpusim.study.executors` on Dask) and what the check resolves before running
(:mod:`tpusim.study.check`). The scenario is read through what it offers (``systems``,
``runs``, ``for_system``, ``context``), so this module does not import it.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tpusim.errors import ConfigError, InputError, TpusimError
from tpusim.study.progress import Finished
from tpusim.workloads import Outcome, WorkloadContext, WorkloadSpec, workload_kind

__all__ = ["PointResult", "run_point", "run_workload", "workload_errors"]

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
    topology: Any = None
    peak_memory_bytes: int | None = None

    def finished(self) -> Finished:
        """The progress report of this point."""
        name = f"{self.system} {self.label}"
        return Finished(name, self.wall_s, self.failure, self.peak_memory_bytes)


def run_point(
    scenario: Any, system_index: int, run_index: int, topology: Any, routes: Any
) -> PointResult:
    """Workload point ``run_index`` of ``scenario.runs`` on system ``system_index``
    (its built topology and route cache); a tpusim error becomes the point's failure."""
    system = scenario.systems[system_index]
    index, (workload, label) = scenario.runs[run_index]
    reset_peak_memory()
    began = time.perf_counter()
    outcome, failure, code = None, None, 0
    try:
        context = scenario.context(index, label, system, topology, routes)
        outcome = run_workload(scenario, index, workload, context)
    except TpusimError as exc:
        failure, code = str(exc), exc.exit_code
    wall_s = time.perf_counter() - began
    if wall_s >= COLLECT_AFTER_S:
        gc.collect()
    result = PointResult(
        system_index, run_index, system.name, label, outcome, failure, code, wall_s
    )
    result.peak_memory_bytes = peak_memory_bytes()
    return result


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


def run_workload(
    scenario: Any, index: int, workload: WorkloadSpec, context: WorkloadContext
) -> Outcome:
    """One workload point on the context's system (resolved for it by the scenario's
    ``for_system``), through its kind's ``run``; errors as :func:`workload_errors`."""
    with workload_errors(context):
        workload = scenario.for_system(index, workload, context.system)
        return workload_kind(workload.kind).run(workload, context)


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
