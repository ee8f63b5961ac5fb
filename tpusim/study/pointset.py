"""The point set of a scenario: every (system, workload point) it runs, in order, each a
frozen :class:`Point`, and what running one needs (its workload resolved for its
system, its :class:`~tpusim.workloads.WorkloadContext`).

The second step of the run path: a :class:`~tpusim.study.scenario.Scenario` (the
validated file) -> :func:`point_set_of` -> an executor (:mod:`tpusim.study.executors`) ->
records (:mod:`tpusim.study.runner`). The scenario is read once, in this process: a
worker (a local process, a Dask task) receives the typed point set itself, never the file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tpusim.config.loader import System, validate
from tpusim.config.yamlio import PathKey, format_path, line_of
from tpusim.errors import ConfigError
from tpusim.study.scenario import Scenario
from tpusim.study.schema import ScenarioSpec
from tpusim.workloads import WorkloadContext, WorkloadSpec
from tpusim.workloads.spec import VARIANT_KEYS

if TYPE_CHECKING:
    from tpusim.network.routes import RouteCache
    from tpusim.topology import Topology

__all__ = ["Point", "PointSet", "point_set_of"]


@dataclass(frozen=True)
class Point:
    """One workload point on one system: the system (``system_index`` in the point set's
    systems), workload point ``run_index`` of the scenario (``workload``, with its sweep
    values set, before its ``per_system`` override), its label, the YAML path of its
    workload (``path``, for error messages) and its swept fields' values (``sweep``)."""

    system_index: int
    run_index: int
    system: System
    workload: WorkloadSpec
    label: str
    path: PathKey
    sweep: tuple[tuple[str, object], ...] = ()

    @property
    def name(self) -> str:
        """``SYSTEM LABEL``, as progress and failures name the point."""
        return f"{self.system.name} {self.label}"

    @property
    def cost_class(self) -> tuple[str, int, int]:
        """What the progress ETA expects to cost alike
        (:class:`~tpusim.study.progress.Progress`): points of one workload point on
        systems of one topology and chip count (the variants of a swept system differ
        in link figures, not in the work simulated)."""
        return (self.system.topology_kind, self.system.num_chips, self.run_index)


@dataclass(frozen=True)
class PointSet:
    """Every point of a scenario, systems in order and each system's points in the
    scenario's order; ``file`` is the scenario file (as given: errors name it so), ``spec``
    the validated scenario (network, assumptions) and ``lines`` its YAML lines (for
    errors). It pickles: worker processes and Dask tasks receive it as it is."""

    file: str
    spec: ScenarioSpec
    lines: dict[PathKey, int]
    systems: tuple[System, ...]
    points: tuple[Point, ...]

    @property
    def name(self) -> str:
        """The scenario's name."""
        return self.spec.name

    def on_system(self, system_index: int) -> list[Point]:
        """The points of system ``system_index``, in order."""
        return [p for p in self.points if p.system_index == system_index]

    def error(self, problem: str, path: PathKey) -> ConfigError:
        """A ConfigError naming the scenario file, ``path`` and its line."""
        line = line_of(self.lines, path)
        return ConfigError(problem, file=self.file, path=format_path(path), line=line)

    def resolved(self, point: Point) -> WorkloadSpec:
        """The point's workload with its ``per_system`` override for its system and its
        mesh's ``auto`` axis and ``batch_per_shard`` resolved for the system's chip
        count; raises ConfigError (naming the override or the mesh axis)."""
        workload, system = point.workload, point.system
        override = workload.per_system.get(system.name)
        if override:
            # the keys as given (not every default): a check that a key was given
            # explicitly (recompute against remat_policy) sees the file's keys again
            given = workload.model_dump(
                by_alias=True, exclude=set(VARIANT_KEYS), exclude_unset=True
            )
            data = given | override
            prefix = (*point.path, "per_system", system.name)
            workload = validate(type(workload), data, self.file, self.lines, prefix)
        mesh = workload.device_mesh()
        if not mesh:
            return workload
        fixed = math.prod(v for v in mesh.values() if v != "auto")
        resolved: dict[str, int] = {}
        for name, size in mesh.items():
            if size != "auto":
                resolved[name] = size
                continue
            if system.num_chips % fixed:
                raise self.error(
                    f"{system.name}: {system.num_chips} chips do not divide by the "
                    f"other mesh axes ({fixed} chips)",
                    (*point.path, "mesh", name),
                )
            resolved[name] = system.num_chips // fixed
        update = {"mesh": resolved} | workload.fields_for_mesh(resolved)
        return workload.model_copy(update=update)

    def context(self, point: Point, topology: Topology, routes: RouteCache) -> WorkloadContext:
        """Where the point runs: its system (built topology and route cache)."""
        spec, system = self.spec, point.system
        chip = system.chip
        return WorkloadContext(
            system=system,
            topology=topology,
            routes=routes,
            network=spec.network,
            power_per_chip_W=spec.assumptions.power_W(chip),
            price_per_chip_hour_usd=spec.assumptions.price_usd(chip),
            file=self.file,
            lines=self.lines,
            path=point.path,
            label=point.label,
        )


def point_set_of(scenario: Scenario) -> PointSet:
    """Every (system, workload point) of ``scenario``, systems in order: a point runs
    on a system unless its workload's ``systems`` leave the system out."""
    points = tuple(
        Point(s, r, system, run.workload, run.label, scenario.at(run.index), run.sweep)
        for s, system in enumerate(scenario.systems)
        for r, run in enumerate(scenario.runs)
        if run.workload.systems is None or system.name in run.workload.systems
    )
    return PointSet(scenario.file, scenario.spec, scenario.lines, tuple(scenario.systems), points)
