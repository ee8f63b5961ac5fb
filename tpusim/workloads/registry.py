"""Workload kinds by name (:data:`WORKLOADS`, a :class:`~tpusim.registry.Registry`):
each a :class:`WorkloadKind` with its spec class (what ``kind: NAME`` takes in a
scenario), its ``run``, its record type and its optional ``check``.

``run(spec, context) -> Outcome`` runs one workload point on one system and returns
its record (plus the simulation's :class:`~tpusim.results.simulation.Results` for
traces, ops and links, or a collective's per-link bytes for plots). An optional
``check(spec, context)`` raises what ``run`` would raise about the input (a mesh or a
group that does not fit, a program that does not fit in memory) without simulating:
``tpusim check`` and ``tpusim run`` call it on every point before running any. The
shipped kinds are registered in one list (:mod:`tpusim.workloads`); adding a kind is a
module with its spec and run, and one ``WORKLOADS.register(name, WorkloadKind(...))``
call. The scenario schema (:data:`Workload`) validates each workload through this
registry, so a kind registered at runtime is accepted by the next scenario loaded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Annotated

from pydantic import PlainValidator, SerializeAsAny, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from tpusim.config.faults import FaultKeys, FaultSet, Routing
from tpusim.config.yamlio import PathKey, format_path, line_of
from tpusim.engine.faults import FaultState
from tpusim.engine.settings import RunSettings
from tpusim.errors import ConfigError
from tpusim.registry import Registry
from tpusim.results.records import ProgramRecord, Record, Row
from tpusim.results.run import CollectiveLinks
from tpusim.results.simulation import Results
from tpusim.workloads.spec import WorkloadSpec

if TYPE_CHECKING:
    from tpusim.config.loader import System
    from tpusim.network import NetworkSettings
    from tpusim.network.routes import RouteCache
    from tpusim.topology import Topology


@dataclass(frozen=True)
class WorkloadContext:
    """Where one workload point runs: the system (its topology and route cache), the
    scenario's network settings (fidelity and its options), the system's all-in power
    per chip (W) and price per chip-hour (USD) when known, and where the workload is
    written (scenario file, YAML lines, path) for error messages; ``label`` names the
    sweep point; ``faults``, ``routing`` and ``seed`` are the point's (a workload with
    :class:`~tpusim.config.faults.FaultKeys`, :meth:`with_faults_of`): every
    simulation of the point runs with them."""

    system: System
    topology: Topology
    routes: RouteCache
    network: NetworkSettings
    power_per_chip_W: float | None
    price_per_chip_hour_usd: float | None
    file: str
    lines: dict[PathKey, int]
    path: PathKey
    label: str
    faults: FaultSet | None = None
    routing: Routing = "minimal"
    seed: int = 0

    def with_faults_of(self, spec: WorkloadSpec) -> WorkloadContext:
        """This context with ``spec``'s faults, routing and seed (unchanged for a kind
        without fault keys: it refuses faults when its scenario is loaded)."""
        if not isinstance(spec, FaultKeys):
            return self
        return replace(self, faults=spec.fault_set(), routing=spec.routing, seed=spec.seed)

    @property
    def faulty(self) -> bool:
        """Whether the point runs with faults or non-minimal routing."""
        return self.faults is not None or self.routing != "minimal"

    def check_faults(self) -> None:
        """Raise what the point's first simulation would about its faults and routing
        (a link or chip the topology lacks, a fidelity that cannot take them:
        InputError), without simulating."""
        if not self.faulty:
            return
        FaultState(self.topology, self.faults, self.routing, self.network, self.seed)

    @property
    def fidelity(self) -> str:
        """The network fidelity's name (what records show)."""
        return self.network.fidelity

    @property
    def settings(self) -> RunSettings:
        """The settings a simulation of this point runs with."""
        return RunSettings(self.network, self.seed, self.faults, self.routing)

    def error(self, problem: str) -> ConfigError:
        """A ConfigError naming the scenario file, the workload's YAML path and line."""
        line = line_of(self.lines, self.path)
        return ConfigError(problem, file=self.file, path=format_path(self.path), line=line)


@dataclass
class Outcome:
    """What running one workload point gave: its record, the simulated program's
    results (traces, ops and links tables) and a collective's per-link bytes."""

    record: Record
    results: Results | None = None
    links: CollectiveLinks | None = None


@dataclass(frozen=True)
class WorkloadKind:
    """A workload kind's properties: its spec class, run function, record type (the
    type a ``summary.csv`` row of this kind reads back as; default a simulated
    program's) and check (None: nothing to check beyond the spec). ``run`` and
    ``check`` take a spec of the kind's own class and the point's
    :class:`WorkloadContext` (each kind's module types them with its spec class)."""

    spec: type[WorkloadSpec]
    run: Callable[..., Outcome]
    record: type[Record] = ProgramRecord
    check: Callable[..., None] | None = None


#: The workload kinds by name (``kind:`` in a scenario), in registration order: the
#: order of the choices in error messages.
WORKLOADS: Registry[WorkloadKind] = Registry("workload kind")


def record_from_row(row: Row) -> Record | None:
    """A ``summary.csv`` / JSON row back as its record; None for an unregistered kind."""
    kind = row.get("kind", "")
    return WORKLOADS.get(kind).record.from_row(row) if kind in WORKLOADS else None


def _kind_error(value: object, error_type: str, message: str) -> ValidationError:
    """A validation error on the workload's ``kind`` key, so it names that key's line."""
    detail = InitErrorDetails(
        type=PydanticCustomError(error_type, message), loc=("kind",), input=value
    )
    return ValidationError.from_exception_data("workload", [detail])


def validate_workload(value: object) -> WorkloadSpec:
    """A workload mapping validated by the spec class of its ``kind``."""
    if isinstance(value, WorkloadSpec):
        return value
    if not isinstance(value, dict):
        raise ValueError("expected a mapping of keys to values")
    if "kind" not in value:
        raise _kind_error(value, "missing", "required key is missing")
    kind = value["kind"]
    if not isinstance(kind, str) or kind not in WORKLOADS:
        choices = ", ".join(WORKLOADS.names())
        raise _kind_error(kind, "unknown_kind", f"unknown kind '{kind}' (choose from {choices})")
    return WORKLOADS.get(kind).spec.model_validate(value)


#: A scenario's workload: validated by its kind's spec class, dumped with its fields.
Workload = Annotated[SerializeAsAny[WorkloadSpec], PlainValidator(validate_workload)]
