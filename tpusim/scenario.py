"""Scenarios: systems x workloads (x sweeps), run in-process, written to a folder.

::

    name: demo
    fidelity: flow
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
fits that topology). A mesh axis of size ``auto`` takes the chips the other axes leave;
``batch_per_shard`` (training) sets the global batch from the batch-sharding axes.

Top level, besides ``systems`` and ``workloads``: ``flow_tolerance`` (see
:func:`tpusim.network.make_network`), ``calibration`` (an overlay written by ``tpusim
calibrate``, relative to the scenario file: :mod:`tpusim.config.calibration`),
``assumptions`` (all-in power per chip and price per chip-hour, keyed by chip name,
for energy and cost columns), ``plots`` and ``claims`` (write figures and the
vendor-claims table), and the fault keys ``faults``, ``fail_links``, ``seed``,
``on_chip_failure`` and ``routing`` (:mod:`tpusim.config.faults`: defaults for every
workload kind that takes them; ``tpusim run --faults ...`` sets them on top). Errors
name the file, the YAML path and the line.

Each workload's ``kind`` names a registered kind (:mod:`tpusim.workloads`): its spec
class validates it and its ``run`` produces one record per system and sweep point
(:mod:`tpusim.results.records`); :meth:`Scenario.outputs` and
:func:`tpusim.results.writers.write_outputs` write the files.
"""

from __future__ import annotations

import itertools
import math
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import Field, NonNegativeInt, PositiveFloat, PositiveInt

import tpusim.report  # noqa: F401  (registers the "plots" output writer)
from tpusim.config.calibration import Calibration, calibrated_system, load_calibration
from tpusim.config.chip import ChipSpec
from tpusim.config.faults import ChipFailurePolicy, FaultSpec, Routing, with_fault_defaults
from tpusim.config.limits import MAX_SWEEP_POINTS, packet_work_problem, points_problem
from tpusim.config.loader import System, load_system, validate
from tpusim.config.types import Frozen, Power, Source
from tpusim.config.yamlio import PathKey, format_path, line_of, load_yaml
from tpusim.errors import ConfigError, InputError, SimulationError, TpusimError
from tpusim.results.records import CollectiveLinks, ScenarioRun
from tpusim.results.writers import Outputs
from tpusim.units import format_bytes
from tpusim.vocabulary import Dtype, Fidelity
from tpusim.workloads import Outcome, Workload, WorkloadContext, WorkloadSpec, workload_kind
from tpusim.workloads.spec import VARIANT_KEYS, SweepRange

__all__ = [
    "Assumptions",
    "CollectiveLinks",
    "Scenario",
    "ScenarioRun",
    "ScenarioSpec",
    "SweepRange",
    "run_scenario",
]


class Assumptions(Frozen):
    """Figures nothing publishes, keyed by chip name: all-in power per chip at full load
    (energy columns, :mod:`tpusim.results.energy`) and price per chip-hour in US dollars
    (cost columns). A chip missing here falls back to its file's ``power.typical``;
    without a price there is no cost. ``power_basis``: the dtype whose peak the power
    figures were derived at (shown beside the energy figures); ``sources``: the source
    and grade of each figure, keyed by its path (``power_per_chip.tpu8t``)."""

    power_per_chip_W: dict[str, Power] = Field(default_factory=dict, alias="power_per_chip")
    price_per_chip_hour_usd: dict[str, PositiveFloat] = Field(
        default_factory=dict, alias="price_per_chip_hour_usd"
    )
    power_basis: Dtype | None = None
    sources: dict[str, Source] = Field(default_factory=dict)

    def power_W(self, chip: ChipSpec) -> float | None:
        """All-in power per chip (W): the assumption, else the chip file's typical power."""
        power = self.power_per_chip_W.get(chip.name)
        if power is None and chip.power is not None:
            power = chip.power.typical_W
        return power

    def price_usd(self, chip: ChipSpec) -> float | None:
        """Price per chip-hour (USD), if assumed."""
        return self.price_per_chip_hour_usd.get(chip.name)


class ScenarioSpec(Frozen):
    """A scenario file: systems x workloads (each validated by its kind's spec class,
    see :mod:`tpusim.workloads`), the network fidelity and what to write."""

    name: str
    description: str = ""
    fidelity: Fidelity = "flow"
    flow_tolerance: float | None = Field(None, ge=0, lt=1)
    calibration: str | None = None
    systems: list[str] = Field(min_length=1)
    workloads: list[Workload] = Field(min_length=1)
    assumptions: Assumptions = Field(default_factory=Assumptions)
    plots: bool = False
    claims: bool = False
    max_points: PositiveInt = MAX_SWEEP_POINTS
    faults: list[FaultSpec] = Field(default_factory=list)
    fail_links: NonNegativeInt | None = None
    seed: NonNegativeInt | None = None
    on_chip_failure: ChipFailurePolicy | None = None
    routing: Routing | None = None


class Scenario:
    """A validated scenario file: its systems loaded, its workloads expanded by sweeps.

    ``max_points`` (the CLI's ``--max-points``) overrides the file's ``max_points``:
    the most workload points (sweep points summed over workloads) it may have;
    ``fault_flags`` (the CLI's fault flags, :func:`~tpusim.config.faults.plan_flags`)
    set the fault keys of every workload that takes them.
    """

    def __init__(
        self,
        file: str | Path,
        max_points: int | None = None,
        fault_flags: dict[str, Any] | None = None,
    ):
        self.file = str(file)
        self.fault_flags = fault_flags or {}
        self.data, self.lines = load_yaml(file)
        self.spec = validate(ScenarioSpec, self.data, self.file, self.lines)
        self.max_points = max_points or self.spec.max_points
        self._check_workload_names()
        self._check_points()
        self.calibration = self._calibration()
        self.systems = [self._system(i, name) for i, name in enumerate(self.spec.systems)]
        self.runs = [run for i, w in enumerate(self.spec.workloads) for run in self._expand(i, w)]
        self._check_names()
        self._check_packet_work()

    def _check_packet_work(self) -> None:
        """At packet fidelity, no system over MAX_PACKET_CHIPS and no collective whose
        estimated packet-hops exceed MAX_PACKET_HOPS (checked before running)."""
        from tpusim.network.packet import DEFAULT_PACKET_BYTES

        if self.spec.fidelity != "packet":
            return
        sizes = [float(getattr(w, "bytes", 1)) for _, (w, _) in self.runs]
        for i, system in enumerate(self.systems):
            problem = packet_work_problem(system.num_chips, max(sizes), DEFAULT_PACKET_BYTES)
            if problem is not None:
                raise self._error(f"{system.name}: {problem}", ("systems", i))

    def _check_workload_names(self) -> None:
        """Two workloads of one name would write colliding rows and trace files."""
        first: dict[str, int] = {}
        for i, workload in enumerate(self.spec.workloads):
            path: PathKey = ("workloads", i, "name")
            line = line_of(self.lines, path) or 0
            if workload.name in first:
                raise self._error(
                    f"workload name '{workload.name}' is also on line {first[workload.name]}", path
                )
            first[workload.name] = line

    def _sweep_count(self, index: int, name: str, values: Any) -> int:
        """Values of one swept field, counted without listing a range; none is an error."""
        path: PathKey = ("workloads", index, "sweep", name)
        try:
            count = values.count() if isinstance(values, SweepRange) else len(values)
        except Exception as exc:  # bad units or bounds
            raise self._error(str(exc), path) from None
        if count == 0:
            raise self._error("an empty sweep runs nothing; give at least one value", path)
        return count

    def _check_points(self) -> None:
        """At most ``max_points`` workload points in all, counted before any is listed."""
        total = 0
        for index, workload in enumerate(self.spec.workloads):
            sweep = workload.sweep
            total += math.prod(self._sweep_count(index, f, sweep[f]) for f in sweep)
            how = "raise it with max_points: in the scenario or --max-points"
            problem = points_problem(total, self.max_points, how)
            if problem is not None:
                where: PathKey = ("workloads", index, "sweep") if sweep else ("workloads", index)
                raise self._error(problem, where)

    def _error(self, problem: str, path: PathKey) -> ConfigError:
        return ConfigError(
            problem, file=self.file, path=format_path(path), line=line_of(self.lines, path)
        )

    def _calibration(self) -> Calibration | None:
        """The ``calibration:`` overlay (a path relative to the scenario file), if any."""
        if self.spec.calibration is None:
            return None
        path = Path(self.file).parent / self.spec.calibration
        if not path.is_file():
            raise self._error(f"calibration file '{path}' does not exist", ("calibration",))
        return load_calibration(path)

    def _system(self, index: int, name: str) -> System:
        try:
            system = load_system(name, base=Path(self.file).parent)
            return calibrated_system(system, self.calibration)
        except ConfigError as exc:
            if exc.file and exc.path:  # the system file itself is broken: it says where
                raise
            raise self._error(exc.problem, ("systems", index)) from None

    def _check_names(self) -> None:
        """``per_system`` keys name systems of the scenario (by their ``name``);
        assumptions name its chips."""
        names = [s.name for s in self.systems]
        for i, workload in enumerate(self.spec.workloads):
            for name in workload.per_system:
                if name not in names:
                    raise self._error(
                        f"'{name}' is not one of the scenario's systems ({', '.join(names)})",
                        ("workloads", i, "per_system", name),
                    )
        chips = sorted({s.chip.name for s in self.systems})
        for key in ("power_per_chip", "price_per_chip_hour_usd"):
            for name in (self.data.get("assumptions") or {}).get(key) or {}:
                if name not in chips:
                    raise self._error(
                        f"'{name}' is not a chip of the scenario's systems ({', '.join(chips)})",
                        ("assumptions", key, name),
                    )

    def _sweep_values(self, index: int, name: str, values: Any) -> list[tuple[Any, str]]:
        """(value, label) pairs of one swept field."""
        if isinstance(values, SweepRange):
            expanded = values.values()  # bounds and count checked by _check_points
            return [(v, format_bytes(v) if values.in_bytes else str(v)) for v in expanded]
        return [(v, str(v)) for v in values]

    def _expand(
        self, index: int, workload: WorkloadSpec
    ) -> Iterator[tuple[int, tuple[WorkloadSpec, str]]]:
        """The workload once per point of its sweep's cross product (validated again)."""
        raw = self.data["workloads"][index]
        fields = list(workload.sweep)
        for name in fields:
            if name in VARIANT_KEYS or name not in type(workload).model_fields:
                raise self._error(
                    f"sweep over '{name}', which is not a field of a {workload.kind} workload",
                    ("workloads", index, "sweep", name),
                )
        axes = [self._sweep_values(index, f, workload.sweep[f]) for f in fields]
        for point in itertools.product(*axes):
            data = {k: v for k, v in raw.items() if k != "sweep"} | {
                f: value for f, (value, _) in zip(fields, point, strict=True)
            }
            kind_fields = type(workload).model_fields
            data = with_fault_defaults(data, kind_fields, self.data, self.fault_flags)
            label = ",".join(f"{f}={text}" for f, (_, text) in zip(fields, point, strict=True))
            expanded = validate(type(workload), data, self.file, self.lines, ("workloads", index))
            yield index, (expanded, f"{workload.name}[{label}]" if label else workload.name)

    def for_system(self, index: int, workload: WorkloadSpec, system: System) -> WorkloadSpec:
        """``workload`` with its ``per_system`` override for ``system`` and its mesh's
        ``auto`` axis and ``batch_per_shard`` resolved for the system's chip count."""
        override = workload.per_system.get(system.name)
        if override:
            data = workload.model_dump(by_alias=True, exclude=set(VARIANT_KEYS)) | override
            prefix: PathKey = ("workloads", index, "per_system", system.name)
            workload = validate(type(workload), data, self.file, self.lines, prefix)
        mesh = getattr(workload, "mesh", None)
        if not mesh:
            return workload
        fixed = math.prod(v for v in mesh.values() if v != "auto")
        resolved = dict(mesh)
        for name, size in mesh.items():
            if size == "auto":
                if system.num_chips % fixed:
                    raise self._error(
                        f"{system.name}: {system.num_chips} chips do not divide by the "
                        f"other mesh axes ({fixed} chips)",
                        ("workloads", index, "mesh", name),
                    )
                resolved[name] = system.num_chips // fixed
        update = {"mesh": resolved} | workload.fields_for_mesh(resolved)
        return workload.model_copy(update=update)

    def context(
        self, index: int, label: str, system: System, topology: Any, routes: Any
    ) -> WorkloadContext:
        """Where workload ``index`` (sweep point ``label``) runs on ``system``."""
        spec, chip = self.spec, system.chip
        return WorkloadContext(
            system=system,
            topology=topology,
            routes=routes,
            fidelity=spec.fidelity,
            flow_tolerance=spec.flow_tolerance,
            power_per_chip_W=spec.assumptions.power_W(chip),
            price_per_chip_hour_usd=spec.assumptions.price_usd(chip),
            file=self.file,
            lines=self.lines,
            path=("workloads", index),
            label=label,
        )

    def outputs(self, run: ScenarioRun) -> Outputs:
        """What the writers of :mod:`tpusim.results.writers` write for ``run``: the
        scenario as validated (``resolved.yaml``), and plots and claims if it asks."""
        from tpusim.claims import vendor_claims

        resolved = self.spec.model_dump(mode="json", by_alias=True)
        return Outputs(
            run,
            resolved,
            with_plots=self.spec.plots,
            with_claims=self.spec.claims,
            claims_of=vendor_claims,
            systems=self.systems,
        )


def run_scenario(scenario: Scenario, progress: bool = True, jobs: int = 1) -> ScenarioRun:
    """Every system x workload; returns a :class:`ScenarioRun` (unpacks as rows, details).

    ``jobs`` > 1 runs that many systems at once in worker processes (each system's
    workloads in order in one process, so its route cache is shared); the rows come
    back in the scenario's order and are the same numbers as in-process. Workers are
    forked on Linux, so workload kinds registered at runtime reach them there.
    Workers ignore Ctrl-C: the KeyboardInterrupt reaches this process, which kills
    them at once (queued systems never start) and lets it propagate.
    """
    began = time.perf_counter()
    count = len(scenario.systems)
    if jobs > 1 and count > 1:
        parts = _run_in_workers(scenario, progress, min(jobs, count))
    else:
        parts = [_run_system(scenario, i, progress) for i in range(count)]
    out = ScenarioRun()
    for part in parts:
        out.extend(part)
    out.wall_s = time.perf_counter() - began
    return out


def _run_in_workers(scenario: Scenario, progress: bool, workers: int) -> list[ScenarioRun]:
    """Each system's :func:`_run_system` in a pool of ``workers`` processes, largest
    systems first (so the pool ends evenly); the parts in the scenario's order. On any
    exception (Ctrl-C included) the queued systems are cancelled and the running
    workers terminated; a worker that dies (killed, out of memory) is a
    SimulationError."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    count = len(scenario.systems)
    order = sorted(range(count), key=lambda i: -scenario.systems[i].num_chips)
    context = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
    ours_before = set(multiprocessing.active_children())
    with ProcessPoolExecutor(workers, context, initializer=_ignore_interrupts) as pool:
        try:
            futures = {
                i: pool.submit(
                    _run_system_file,
                    scenario.file,
                    i,
                    progress,
                    scenario.max_points,
                    scenario.fault_flags,
                )
                for i in order
            }
            return [_raise_failure(futures[i].result()) for i in range(count)]
        except BrokenProcessPool:
            raise SimulationError(
                "a worker process died (killed, or out of memory); try --jobs 1"
            ) from None
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            for child in set(multiprocessing.active_children()) - ours_before:
                child.terminate()
            raise


def _ignore_interrupts() -> None:
    """Worker initializer: Ctrl-C is the parent's to handle (it terminates the pool)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run_system_file(
    file: str, index: int, progress: bool, max_points: int, fault_flags: dict[str, Any]
) -> ScenarioRun | tuple[int, str]:
    """:func:`_run_system` in a worker process (the scenario is loaded there again); a
    tpusim error comes back as (exit code, message), which always pickles."""
    try:
        return _run_system(Scenario(file, max_points, fault_flags), index, progress)
    except TpusimError as exc:
        return exc.exit_code, str(exc)


def _raise_failure(part: ScenarioRun | tuple[int, str]) -> ScenarioRun:
    if isinstance(part, ScenarioRun):
        return part
    code, message = part
    raise (InputError if code == 2 else SimulationError)(message)


def _run_system(scenario: Scenario, system_index: int, progress: bool) -> ScenarioRun:
    """Every workload of the scenario on one of its systems; keeps the per-link bytes
    of each collective workload's largest size."""
    from tpusim.network.routes import RouteCache
    from tpusim.topology import build_topology

    system = scenario.systems[system_index]
    topology = build_topology(system)
    routes = RouteCache(topology)
    out = ScenarioRun(topologies={system.name: topology})
    largest: dict[str, CollectiveLinks] = {}
    began, total = time.perf_counter(), len(scenario.runs)
    for n, (index, (workload, label)) in enumerate(scenario.runs, start=1):
        if progress:
            elapsed = time.perf_counter() - began
            # one write per line: workers share stderr, and print() writes the
            # newline separately, which interleaves their lines
            sys.stderr.write(f"[{system.name} {n}/{total}] {label} ({elapsed:.1f} s)\n")
            sys.stderr.flush()
        context = scenario.context(index, label, system, topology, routes)
        outcome = _run_workload(scenario, index, workload, context)
        out.records.append(outcome.record)
        if outcome.results is not None:
            out.details.append((system.name, label, outcome.results))
        links = outcome.links
        if links is not None:
            seen = largest.get(links.workload)
            if seen is None or links.bytes >= seen.bytes:
                largest[links.workload] = links
    out.collectives.extend(largest.values())
    return out


def _run_workload(
    scenario: Scenario, index: int, workload: WorkloadSpec, context: WorkloadContext
) -> Outcome:
    """One workload point on the context's system, through its kind's ``run``. A bad
    value (ValueError, or an InputError that names no file) becomes a ConfigError at
    the workload, prefixed with the system's name."""
    try:
        workload = scenario.for_system(index, workload, context.system)
        return workload_kind(workload.kind).run(workload, context)
    except ValueError as exc:
        raise context.error(f"{context.system.name}: {exc}") from None
    except InputError as exc:
        if isinstance(exc, ConfigError):
            raise
        raise context.error(f"{context.system.name}: {exc}") from None
