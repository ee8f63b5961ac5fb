"""Checking a read scenario (:class:`~tpusim.study.reading.ScenarioFile`), the second
of its three steps: the file validated against :class:`~tpusim.study.schema.ScenarioSpec`,
its workload names distinct, its sweep points counted against the limit (none listed),
its calibration overlay and systems loaded, and every name it gives (systems,
``per_system`` keys, assumed chips) found. :class:`CheckedScenario` is the result;
:mod:`tpusim.study.expanding` lists its points.

Given a ``problems`` list (``tpusim check``), every problem is appended to it and
checking goes on without the broken workload or system; without one, the first is
raised. A file that does not validate at the top level is raised either way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tpusim.config.calibration import Calibration, calibrated_system, load_calibration
from tpusim.config.faults import NO_FAULT_FLAGS, FaultFlags
from tpusim.config.limits import points_problem
from tpusim.config.loader import System, load_system, validate
from tpusim.config.yamlio import PathKey, line_of
from tpusim.errors import ConfigError
from tpusim.network import NetworkSettings
from tpusim.study.reading import ScenarioFile
from tpusim.study.schema import OneWorkload, ScenarioSpec
from tpusim.study.systems import SystemVariants, variants
from tpusim.workloads.spec import SweepRange

__all__ = ["AS_WRITTEN", "CheckedScenario", "Checking", "check_read"]


@dataclass(frozen=True)
class Checking:
    """How a scenario is checked: ``max_points`` overrides the file's (None: the
    file's); ``fault_flags`` (the command line's) set the fault keys of every workload
    that takes them; ``network`` (the network flags) replaces the file's ``network:``;
    ``problems``, when given, collects every problem instead of raising the first."""

    max_points: int | None = None
    fault_flags: FaultFlags = NO_FAULT_FLAGS
    network: NetworkSettings | None = None
    problems: list[ConfigError] | None = None


#: Checking with the file's own limits and network, raising the first problem.
AS_WRITTEN = Checking()


@dataclass
class CheckedScenario:
    """A scenario that read and validated: its ``spec`` (the command line's network
    applied), the index in the file of each spec workload (``indices``), its point limit,
    calibration, and systems (``system_entries``: the ``systems:`` entry of each);
    ``expandable`` is false when the points could not be counted or are over the limit."""

    read: ScenarioFile
    checking: Checking
    spec: ScenarioSpec
    indices: list[int]
    max_points: int = 0
    expandable: bool = True
    calibration: Calibration | None = None
    systems: list[System] = field(default_factory=list)
    system_entries: list[int] = field(default_factory=list)

    def problem(self, error: ConfigError) -> None:
        """Raise ``error``, or keep it when collecting problems."""
        if self.checking.problems is None:
            raise error
        self.checking.problems.append(error)

    def at(self, index: int, *rest: str | int) -> PathKey:
        """The YAML path of spec workload ``index`` (its place in the file) and below."""
        return ("workloads", self.indices[index], *rest)

    def raw_workload(self, index: int) -> dict[str, object]:
        """Spec workload ``index`` as written in the file (a mapping: it validated)."""
        workloads = self.read.data["workloads"]
        assert isinstance(workloads, list)
        raw = workloads[self.indices[index]]
        assert isinstance(raw, dict)
        return raw


def check_read(read: ScenarioFile, checking: Checking = AS_WRITTEN) -> CheckedScenario:
    """``read`` validated and checked (see the module docstring); raises ConfigError
    naming file:line and path (the first problem, or only a top-level one when
    ``checking.problems`` collects them)."""
    spec, indices = _validated(read, checking.problems)
    if checking.network is not None:  # the command line's network flags win over the file's
        spec = spec.model_copy(update={"network": checking.network})
    checked = CheckedScenario(read, checking, spec, indices)
    checked.max_points = checking.max_points or spec.max_points
    _check_workload_names(checked)
    _check_points(checked)
    checked.calibration = _calibration(checked)
    for i, entry in enumerate(spec.systems):
        found = _system(checked, i, entry)
        checked.systems += found
        checked.system_entries += [i] * len(found)
    _check_names(checked)
    return checked


def _validated(
    read: ScenarioFile, problems: list[ConfigError] | None
) -> tuple[ScenarioSpec, list[int]]:
    """The spec, and the index in the file of each of its workloads. Collecting
    problems, each workload is validated alone first and broken ones left out."""
    data, file, lines = read.raw, read.file, read.lines
    workloads = data.get("workloads") if isinstance(data, dict) else None
    if problems is None or not isinstance(workloads, list):
        return validate(ScenarioSpec, data, file, lines), list(range(len(workloads or [])))
    good = []
    for i, raw in enumerate(workloads):
        try:
            validate(OneWorkload, {"workloads": {i: raw}}, file, lines)
            good.append(i)
        except ConfigError as exc:
            problems.append(exc)
    assert isinstance(data, dict)  # it has a workloads list
    kept = {**data, "workloads": [workloads[i] for i in good] or workloads}
    return validate(ScenarioSpec, kept, file, lines), good


def _check_workload_names(checked: CheckedScenario) -> None:
    """Two workloads of one name would write colliding rows and trace files."""
    first: dict[str, int] = {}
    for i, workload in enumerate(checked.spec.workloads):
        path = checked.at(i, "name")
        line = line_of(checked.read.lines, path) or 0
        if workload.name in first:
            problem = f"workload name '{workload.name}' is also on line {first[workload.name]}"
            checked.problem(checked.read.error(problem, path))
        first.setdefault(workload.name, line)


def _sweep_count(
    checked: CheckedScenario, index: int, name: str, values: list[object] | SweepRange
) -> int:
    """Values of one swept field, counted without listing a range; none is an error."""
    path = checked.at(index, "sweep", name)
    try:
        count = values.count() if isinstance(values, SweepRange) else len(values)
    except Exception as exc:  # bad units or bounds
        raise checked.read.error(str(exc), path) from None
    if count == 0:
        raise checked.read.error("an empty sweep runs nothing; give at least one value", path)
    return count


def _check_points(checked: CheckedScenario) -> None:
    """At most ``max_points`` workload points in all, counted before any is listed;
    past it (collecting problems) no workload is expanded."""
    total = 0
    for index, workload in enumerate(checked.spec.workloads):
        sweep = workload.sweep
        try:
            total += math.prod(_sweep_count(checked, index, f, sweep[f]) for f in sweep)
        except ConfigError as exc:
            checked.problem(exc)
            checked.expandable = False
            continue
        how = "raise it with max_points: in the scenario or --max-points"
        problem = points_problem(total, checked.max_points, how)
        if problem is not None:
            where = checked.at(index, "sweep") if sweep else checked.at(index)
            checked.expandable = False
            return checked.problem(checked.read.error(problem, where))


def _calibration(checked: CheckedScenario) -> Calibration | None:
    """The ``calibration:`` overlay (a path relative to the scenario file), if any."""
    if checked.spec.calibration is None:
        return None
    path = checked.read.folder / checked.spec.calibration
    try:
        if not path.is_file():
            raise checked.read.error(f"calibration file '{path}' does not exist", ("calibration",))
        return load_calibration(path)
    except ConfigError as exc:
        checked.problem(exc)
        return None


def _system(checked: CheckedScenario, index: int, entry: str | SystemVariants) -> list[System]:
    """The system(s) of ``systems[index]`` (a problem, collected, gives none)."""
    read = checked.read
    name = entry if isinstance(entry, str) else entry.system
    path: PathKey = ("systems", index) if isinstance(entry, str) else ("systems", index, "system")
    try:
        try:
            loaded = load_system(name, base=read.folder)
        except ConfigError as exc:
            if exc.file and exc.path:  # the system file itself is broken: it says where
                raise
            raise read.error(exc.problem, path) from None
        system = calibrated_system(loaded, checked.calibration)
        if isinstance(entry, str):
            return [system]
        return variants(entry, system, read.file, read.lines, ("systems", index))
    except ConfigError as exc:
        checked.problem(exc)
        return []


def _check_names(checked: CheckedScenario) -> None:
    """System names are distinct; ``per_system`` keys and ``systems`` lists name systems
    of the scenario (by their ``name``); assumptions name its chips."""
    error = checked.read.error
    names = [s.name for s in checked.systems]
    seen: dict[str, int] = {}
    for name, entry in zip(names, checked.system_entries, strict=True):
        if name in seen:
            problem = f"system '{name}' is also systems[{seen[name]}] (give one a name)"
            checked.problem(error(problem, ("systems", entry)))
        seen.setdefault(name, entry)
    for i, workload in enumerate(checked.spec.workloads):
        named: list[tuple[PathKey, str]] = [(("per_system", n), n) for n in workload.per_system]
        named += [(("systems", k), n) for k, n in enumerate(workload.systems or [])]
        for where, name in named:
            if name not in names:
                problem = f"'{name}' is not one of the scenario's systems ({', '.join(names)})"
                checked.problem(error(problem, checked.at(i, *where)))
    chips = sorted({s.chip.name for s in checked.systems})
    assumed = checked.spec.assumptions
    keyed = {"power_per_chip": assumed.power_per_chip_W}
    keyed["price_per_chip_hour_usd"] = assumed.price_per_chip_hour_usd
    for key, figures in keyed.items():
        for name in figures:
            if name not in chips:
                problem = f"'{name}' is not a chip of the scenario's systems ({', '.join(chips)})"
                checked.problem(error(problem, ("assumptions", key, name)))
