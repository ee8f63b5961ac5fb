"""Scenarios: systems x workloads (x sweeps), checked, run and written to a folder.

::

    name: demo
    network: {fidelity: flow, tolerance: 0.05}
    systems: [v5e-pod, ironwood-256]
    workloads:
      - {name: ar, kind: collective, op: all-reduce, bytes: 64 MiB,
         sweep: {bytes: [1 MiB, 64 MiB]}}
      - {name: train, kind: training_step, layers: 2, d_model: 4096, d_ff: 16384,
         heads: 32, head_dim: 128, seq: 2048, batch: 256, mesh: {data: 16, model: 16},
         tensor_axis: model}
      - {name: decode, kind: decode_step, layers: 2, d_model: 4096, d_ff: 16384,
         heads: 32, head_dim: 128, batch: 64, context: 8192, mesh: {data: 16, model: 16},
         tensor_axis: model}
      - {name: prog, kind: program, ops: [{name: mm, kind: matmul, m: 8192, n: 8192, k: 8192}]}
      - {name: jax, kind: hlo, path: ../tests/fixtures/hlo/transformer_8.hlo.txt}

``sweep`` maps any field of a workload to a list of values, or to a geometric range
``{from: 1 KiB, to: 1 GiB, factor: 4}``; a workload with several swept fields runs
their cross product. ``per_system`` overrides fields for named systems (a mesh that
fits that topology); ``systems: [NAME, ...]`` runs a workload on those systems only.
A mesh axis of size ``auto`` takes the chips the other axes leave;
``batch_per_shard`` (training) sets the global batch from the batch-sharding axes.
A ``systems`` entry may also derive systems with ICI overrides and sweeps
(:mod:`tpusim.study.systems`).

Top level, besides ``systems`` and ``workloads``: ``network`` (the fidelity and its
own options as a tree, ``network: {fidelity: flow, tolerance: 0.05}``:
:mod:`tpusim.network.tree`; the old flat ``fidelity:`` and ``flow_tolerance:`` still
read, with a deprecation warning), ``calibration`` (an overlay written by ``tpusim
calibrate``, relative to the scenario file: :mod:`tpusim.config.calibration`),
``assumptions`` (all-in power per chip and price per chip-hour, keyed by chip name,
for energy and cost columns), ``plots`` (figures, on by default) and ``claims`` (the
vendor-claims table), and the fault keys ``faults``, ``fail_links``, ``seed``,
``on_chip_failure`` and ``routing`` (:mod:`tpusim.config.faults`: defaults for every
workload kind that takes them; ``tpusim run --faults ...`` sets them on top). Errors
name the file, the YAML path and the line; ``Scenario(file, problems=[])`` collects
them all (:mod:`tpusim.study.check`).

The run path goes one way: a :class:`Scenario` (the validated file) -> its point set
(:mod:`tpusim.study.pointset`: every (system, workload point) as a frozen ``Point``) -> an
executor (:mod:`tpusim.study.executors`: in this process, in worker processes or on
Dask) -> the records of a :class:`~tpusim.results.run.ScenarioRun`
(:func:`tpusim.study.runner.run_scenario`). Each module imports only those before it.

Each workload's ``kind`` names a registered kind (:mod:`tpusim.workloads`): its spec
class validates it and its ``run`` produces one record per system and sweep point
(:mod:`tpusim.results.records`); :meth:`Scenario.outputs` and
:func:`tpusim.study.outputs.write_outputs` write the files.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

from tpusim.config.calibration import Calibration, calibrated_system, load_calibration
from tpusim.config.faults import (
    NO_FAULT_FLAGS,
    FaultFlags,
    unapplied_fault,
    with_fault_defaults,
)
from tpusim.config.limits import points_problem
from tpusim.config.loader import System, load_system, validate
from tpusim.config.yamlio import PathKey, format_path, line_of, load_yaml
from tpusim.errors import ConfigError
from tpusim.network import NetworkSettings
from tpusim.network.tree import read_flat
from tpusim.results.run import ScenarioRun
from tpusim.results.writers import Outputs
from tpusim.study.schema import (
    Assumptions,
    OneWorkload,
    ScenarioSpec,
    models_beside,
)
from tpusim.study.systems import SystemVariants, locate_scenario, variants
from tpusim.units import format_bytes
from tpusim.workloads import WorkloadSpec
from tpusim.workloads.spec import VARIANT_KEYS, SweepRange

__all__ = [
    "Assumptions",
    "FaultFlags",
    "Scenario",
    "ScenarioSpec",
    "SweepRange",
    "SystemVariants",
    "WorkloadPoint",
    "locate_scenario",
]


@dataclass(frozen=True)
class WorkloadPoint:
    """One point of a workload's sweep: spec workload ``index`` (its place in the
    spec's list), the workload with the point's values set (validated), its label
    (``name[field=value,...]``, or the name without a sweep) and the swept fields'
    values, in the sweep's order (as written, or a range's numbers)."""

    index: int
    workload: WorkloadSpec
    label: str
    sweep: tuple[tuple[str, object], ...] = ()


class Scenario:
    """A validated scenario file: its systems loaded, its workloads expanded by sweeps.

    ``max_points`` (the CLI's ``--max-points``) overrides the file's ``max_points``:
    the most workload points (sweep points summed over workloads) it may have;
    ``fault_flags`` (the CLI's fault flags, :class:`~tpusim.config.faults.FaultFlags`)
    set the fault keys of every workload that takes them; ``network`` (the CLI's
    network flags) replaces the file's ``network:``.
    ``problems``: given a list, every problem found is appended to it (each a
    ConfigError naming file:line and path) and loading goes on without the broken
    workload or system (``tpusim check``); without one, the first problem is raised.
    A file that does not read or validate at the top level is raised either way.
    """

    def __init__(
        self,
        file: str | Path,
        max_points: int | None = None,
        fault_flags: FaultFlags | None = None,
        problems: list[ConfigError] | None = None,
        warn_deprecated: bool = True,
        network: NetworkSettings | None = None,
    ):
        self.file = str(file)
        self.fault_flags = fault_flags or NO_FAULT_FLAGS
        self.problems = problems
        data, self.lines = load_yaml(file)
        data = read_flat(data, self.file, self.lines, warn_deprecated)
        self.raw = models_beside(data, Path(self.file).parent)
        self.spec, self.indices = self._validated()
        if network is not None:  # the command line's network flags win over the file's
            self.spec = self.spec.model_copy(update={"network": network})
        self.network_override = network
        #: The file's top-level mapping (it validated, so it is one).
        self.data: dict[str, object] = self.raw if isinstance(self.raw, dict) else {}
        self.max_points = max_points or self.spec.max_points
        self._check_workload_names()
        self._check_points()
        self.calibration = self._calibration()
        self.system_entries: list[int] = []  # the systems: entry of each system
        self.systems = [s for i, e in enumerate(self.spec.systems) for s in self._system(i, e)]
        self.runs = [run for i, w in enumerate(self.spec.workloads) for run in self._expand(i, w)]
        self._check_names()
        self._check_network_work()

    def _problem(self, error: ConfigError) -> None:
        """Raise ``error``, or keep it when collecting problems."""
        if self.problems is None:
            raise error
        self.problems.append(error)

    def _validated(self) -> tuple[ScenarioSpec, list[int]]:
        """The spec, and the index in the file of each of its workloads. Collecting
        problems, each workload is validated alone first and broken ones left out."""
        data = self.raw
        workloads = data.get("workloads") if isinstance(data, dict) else None
        if self.problems is None or not isinstance(workloads, list):
            return validate(ScenarioSpec, data, self.file, self.lines), list(
                range(len(workloads or []))
            )
        good = []
        for i, raw in enumerate(workloads):
            try:
                validate(OneWorkload, {"workloads": {i: raw}}, self.file, self.lines)
                good.append(i)
            except ConfigError as exc:
                self._problem(exc)
        assert isinstance(data, dict)  # it has a workloads list
        kept = {**data, "workloads": [workloads[i] for i in good] or workloads}
        return validate(ScenarioSpec, kept, self.file, self.lines), good

    def at(self, index: int, *rest: str | int) -> PathKey:
        """The YAML path of spec workload ``index`` (its place in the file) and below."""
        return ("workloads", self.indices[index], *rest)

    def _check_network_work(self) -> None:
        """No system and collective over the fidelity's work limits (packet: no system
        over MAX_PACKET_CHIPS, no collective over MAX_PACKET_HOPS), checked before running."""
        if not self.runs:
            return
        from tpusim.collectives import fewest_sends_per_chip

        network = self.spec.network
        sizes = [float(getattr(run.workload, "bytes", 1)) for run in self.runs]
        named = [(getattr(run.workload, "op", None), run.workload) for run in self.runs]
        ops = {(op, getattr(w, "algorithm", None)) for op, w in named if isinstance(op, str)}
        for system, entry in zip(self.systems, self.system_entries, strict=True):
            n = system.num_chips
            sends = max((fewest_sends_per_chip(op, n, alg) for op, alg in ops), default=0)
            problem = network.work_problem(n, max(sizes), sends)
            if problem is not None:
                self._problem(self._error(f"{system.name}: {problem}", ("systems", entry)))

    def _check_workload_names(self) -> None:
        """Two workloads of one name would write colliding rows and trace files."""
        first: dict[str, int] = {}
        for i, workload in enumerate(self.spec.workloads):
            path = self.at(i, "name")
            line = line_of(self.lines, path) or 0
            if workload.name in first:
                problem = f"workload name '{workload.name}' is also on line {first[workload.name]}"
                self._problem(self._error(problem, path))
            first.setdefault(workload.name, line)

    def _sweep_count(self, index: int, name: str, values: list[object] | SweepRange) -> int:
        """Values of one swept field, counted without listing a range; none is an error."""
        path = self.at(index, "sweep", name)
        try:
            count = values.count() if isinstance(values, SweepRange) else len(values)
        except Exception as exc:  # bad units or bounds
            raise self._error(str(exc), path) from None
        if count == 0:
            raise self._error("an empty sweep runs nothing; give at least one value", path)
        return count

    def _check_points(self) -> None:
        """At most ``max_points`` workload points in all, counted before any is listed;
        past it (collecting problems) no workload is expanded."""
        total, self.expandable = 0, True
        for index, workload in enumerate(self.spec.workloads):
            sweep = workload.sweep
            try:
                total += math.prod(self._sweep_count(index, f, sweep[f]) for f in sweep)
            except ConfigError as exc:
                self._problem(exc)
                self.expandable = False
                continue
            how = "raise it with max_points: in the scenario or --max-points"
            problem = points_problem(total, self.max_points, how)
            if problem is not None:
                where = self.at(index, "sweep") if sweep else self.at(index)
                self.expandable = False
                return self._problem(self._error(problem, where))

    def _refuse_faults(self, index: int, workload: WorkloadSpec, fields: Collection[str]) -> None:
        """A fault key the workload's kind would drop (it simulates no network) is an
        error naming the kind, at the top-level key or the workload."""
        dropped = unapplied_fault(fields, self.data, self.fault_flags)
        if dropped is None:
            return
        key, from_flags = dropped
        where = "--" + key.replace("_", "-") if from_flags else f"'{key}'"
        problem = (
            f"{where} cannot apply to workload '{workload.name}': a {workload.kind} "
            "workload simulates no network under faults (give faults to the workloads "
            "that take them)"
        )
        raise self._error(problem, self.at(index) if from_flags else (key,))

    def _error(self, problem: str, path: PathKey) -> ConfigError:
        return ConfigError(
            problem, file=self.file, path=format_path(path), line=line_of(self.lines, path)
        )

    def _calibration(self) -> Calibration | None:
        """The ``calibration:`` overlay (a path relative to the scenario file), if any."""
        if self.spec.calibration is None:
            return None
        path = Path(self.file).parent / self.spec.calibration
        try:
            if not path.is_file():
                raise self._error(f"calibration file '{path}' does not exist", ("calibration",))
            return load_calibration(path)
        except ConfigError as exc:
            self._problem(exc)
            return None

    def _system(self, index: int, entry: str | SystemVariants) -> list[System]:
        """The system(s) of ``systems[index]`` (a problem, collected, gives none)."""
        name = entry if isinstance(entry, str) else entry.system
        try:
            system = calibrated_system(self._load(index, name), self.calibration)
            if isinstance(entry, str):
                found = [system]
            else:
                found = variants(entry, system, self.file, self.lines, ("systems", index))
        except ConfigError as exc:
            self._problem(exc)
            return []
        self.system_entries += [index] * len(found)
        return found

    def _load(self, index: int, name: str) -> System:
        """System ``name`` of ``systems[index]`` (a name, or an entry's ``system``)."""
        entry = self.spec.systems[index]
        path: PathKey = (
            ("systems", index) if isinstance(entry, str) else ("systems", index, "system")
        )
        try:
            return load_system(name, base=Path(self.file).parent)
        except ConfigError as exc:
            if exc.file and exc.path:  # the system file itself is broken: it says where
                raise
            raise self._error(exc.problem, path) from None

    def _check_names(self) -> None:
        """System names are distinct; ``per_system`` keys name systems of the scenario
        (by their ``name``); assumptions name its chips."""
        names = [s.name for s in self.systems]
        seen: dict[str, int] = {}
        for name, entry in zip(names, self.system_entries, strict=True):
            if name in seen:
                problem = f"system '{name}' is also systems[{seen[name]}] (give one a name)"
                self._problem(self._error(problem, ("systems", entry)))
            seen.setdefault(name, entry)
        for i, workload in enumerate(self.spec.workloads):
            named: list[tuple[PathKey, str]] = [(("per_system", n), n) for n in workload.per_system]
            named += [(("systems", k), n) for k, n in enumerate(workload.systems or [])]
            for where, name in named:
                if name not in names:
                    problem = f"'{name}' is not one of the scenario's systems ({', '.join(names)})"
                    self._problem(self._error(problem, self.at(i, *where)))
        chips = sorted({s.chip.name for s in self.systems})
        assumed = self.spec.assumptions
        keyed = {"power_per_chip": assumed.power_per_chip_W}
        keyed["price_per_chip_hour_usd"] = assumed.price_per_chip_hour_usd
        for key, figures in keyed.items():
            for name in figures:
                if name not in chips:
                    known = ", ".join(chips)
                    problem = f"'{name}' is not a chip of the scenario's systems ({known})"
                    self._problem(self._error(problem, ("assumptions", key, name)))

    def _sweep_values(
        self, index: int, name: str, values: list[object] | SweepRange
    ) -> list[tuple[object, str]]:
        """(value, label) pairs of one swept field."""
        if isinstance(values, SweepRange):
            expanded = values.values()  # bounds and count checked by _check_points
            return [(v, format_bytes(v) if values.in_bytes else str(v)) for v in expanded]
        return [(v, str(v)) for v in values]

    def _expand(self, index: int, workload: WorkloadSpec) -> list[WorkloadPoint]:
        """The workload once per point of its sweep's cross product (validated again);
        collecting problems, a broken workload gives no point."""
        if not self.expandable:
            return []
        try:
            return list(self._points(index, workload))
        except ConfigError as exc:
            self._problem(exc)
            return []

    def raw_workload(self, index: int) -> dict[str, object]:
        """Spec workload ``index`` as written in the file (a mapping: it validated)."""
        workloads = self.data["workloads"]
        assert isinstance(workloads, list)
        raw = workloads[self.indices[index]]
        assert isinstance(raw, dict)
        return raw

    def _points(self, index: int, workload: WorkloadSpec) -> Iterator[WorkloadPoint]:
        raw = self.raw_workload(index)
        fields = list(workload.sweep)
        for name in fields:
            if name in VARIANT_KEYS or name not in type(workload).field_names():
                raise self._error(
                    f"sweep over '{name}', which is not a field of a {workload.kind} workload",
                    self.at(index, "sweep", name),
                )
        axes = [self._sweep_values(index, f, workload.sweep[f]) for f in fields]
        for point in itertools.product(*axes):
            values = tuple((f, value) for f, (value, _) in zip(fields, point, strict=True))
            data = {k: v for k, v in raw.items() if k != "sweep"} | dict(values)
            kind_fields = type(workload).model_fields
            self._refuse_faults(index, workload, kind_fields)
            data = with_fault_defaults(data, kind_fields, self.data, self.fault_flags)
            label = ",".join(f"{f}={text}" for f, (_, text) in zip(fields, point, strict=True))
            expanded = validate(type(workload), data, self.file, self.lines, self.at(index))
            name = f"{workload.name}[{label}]" if label else workload.name
            yield WorkloadPoint(index, expanded, name, values)

    def outputs(self, run: ScenarioRun) -> Outputs:
        """What the writers of :mod:`tpusim.results.writers` write for ``run``: the
        scenario as validated (``resolved.yaml``), and plots and claims if it asks."""
        from tpusim.study.claims import vendor_claims

        resolved = self.spec.model_dump(mode="json", by_alias=True)
        return Outputs(
            run,
            resolved,
            with_plots=self.spec.plots,
            with_claims=self.spec.claims,
            claims_of=vendor_claims,
            systems=self.systems,
        )
