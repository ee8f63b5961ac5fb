"""``tpusim check SCENARIO``: every problem of a scenario, found without simulating.

Loads every system and expands every workload point (names, sweeps, point limits,
``per_system`` keys, assumptions), then resolves each point for each system and runs
its kind's ``check`` (:mod:`tpusim.workloads.registry`): meshes and groups that do not
fit the topology, programs whose resident bytes do not fit a chip's memory. Every
problem is listed, each one line naming file:line, YAML path and problem; ``tpusim
run`` runs the same check before simulating anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tpusim.errors import ConfigError, InputError, TpusimError
from tpusim.network.routes import RouteCache
from tpusim.study.options import CheckOptions
from tpusim.study.points import check_point
from tpusim.study.pointset import PointSet, point_set_of
from tpusim.study.scenario import Scenario
from tpusim.topology import build_topology

__all__ = ["CheckFailed", "ScenarioCheck", "check_scenario"]


class CheckFailed(InputError):
    """A scenario with problems (exit code 2, or ``exit_code``): one line per problem;
    ``reported``: the problems are already printed (``--json``), the command line
    prints nothing more."""

    def __init__(self, problems: list[ConfigError], reported: bool = False, exit_code: int = 2):
        self.problems, self.reported = problems, reported
        self.exit_code = exit_code
        super().__init__("\n".join(str(p) for p in problems))


@dataclass
class ScenarioCheck:
    """The outcome of :func:`check_scenario`: the scenario (None when the file does not
    read or validate at the top level), its problems in file order, and how many
    (system, workload point) pairs were checked."""

    file: str
    scenario: Scenario | None
    problems: list[ConfigError] = field(default_factory=list)
    num_checked: int = 0

    def record(self) -> dict[str, object]:
        """The ``tpusim check --json`` object."""
        spec = self.scenario.spec if self.scenario is not None else None
        return {
            "scenario": spec.name if spec is not None else None,
            "file": self.file,
            "systems": [s.name for s in self.scenario.systems] if self.scenario else [],
            "points": len(self.scenario.runs) if self.scenario else 0,
            "checked": self.num_checked,
            "problems": [
                {"file": p.file, "line": p.line, "path": p.path, "problem": p.problem}
                for p in self.problems
            ],
        }

    def raise_problems(self, before_run: bool = False) -> None:
        """Raise :class:`CheckFailed` when there is any problem (exit code 2; before
        ``tpusim run``, exit 1 when every problem is a program that does not fit in
        memory, as the run itself would have ended)."""
        if self.problems:
            simulation = all(p.exit_code == 1 for p in self.problems)
            raise CheckFailed(self.problems, exit_code=1 if before_run and simulation else 2)


def check_scenario(file: str | Path, options: CheckOptions | None = None) -> ScenarioCheck:
    """Every problem of the scenario in ``file`` (see the module docstring), loaded
    with ``options``' point limit and fault flags (:class:`~tpusim.study.scenario.Scenario`)."""
    options = options or CheckOptions()
    problems: list[ConfigError] = []
    try:
        scenario = Scenario(
            file,
            options.max_points,
            options.fault_flags,
            problems=problems,
            network=options.network,
        )
    except ConfigError as exc:  # does not read or validate at the top level
        return ScenarioCheck(str(file), None, _distinct([*problems, exc], str(file)))
    point_set = point_set_of(scenario)
    for system_index in range(len(point_set.systems)):
        problems += _check_system(point_set, system_index)
    checked = len(point_set.points)
    return ScenarioCheck(str(file), scenario, _distinct(problems, scenario.file), checked)


def _check_system(point_set: PointSet, system_index: int) -> list[ConfigError]:
    """The problems of every workload point on one system."""

    topology = build_topology(point_set.systems[system_index])
    routes = RouteCache(topology)
    found = []
    for point in point_set.on_system(system_index):
        context = point_set.context(point, topology, routes)
        try:
            check_point(point_set, point, context)
        except ConfigError as exc:
            found.append(exc)
        except TpusimError as exc:  # out of memory: keeps its exit code (1)
            problem = context.error(f"{point.name}: {exc}")
            problem.exit_code = exc.exit_code
            found.append(problem)
    return found


def _distinct(problems: list[ConfigError], file: str) -> list[ConfigError]:
    """Each problem once (sweep points often share one): the scenario file's in line
    order, then those of other files (a broken system file) as found."""
    seen: dict[str, ConfigError] = {}
    for problem in problems:
        seen.setdefault(str(problem), problem)
    ours = [p for p in seen.values() if p.file == file]
    return sorted(ours, key=lambda p: p.line or 0) + [p for p in seen.values() if p.file != file]
