"""Workload kinds by name: a spec class (what ``kind: NAME`` takes in a scenario) and a
``run`` function, registered once.

``run(spec, context) -> Outcome`` runs one workload point on one system and returns
its record (plus the simulation's :class:`~tpusim.engine.Results` for traces, ops
and links, or a collective's per-link bytes for plots). An optional ``check(spec,
context)`` raises what ``run`` would raise about the input (a mesh or a group that
does not fit, a program that does not fit in memory) without simulating: ``tpusim
check`` and ``tpusim run`` call it on every point before running any. Adding a kind is a module
with its spec and run, and one :func:`register_workload` call; the scenario schema
(:data:`Workload`) validates each workload through this registry, so a kind
registered at runtime is accepted by the next scenario loaded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import PlainValidator, SerializeAsAny, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from tpusim.config.yamlio import PathKey, format_path, line_of
from tpusim.errors import ConfigError
from tpusim.results.records import CollectiveLinks, ProgramRecord, Record
from tpusim.vocabulary import Fidelity
from tpusim.workloads.spec import WorkloadSpec

if TYPE_CHECKING:
    from tpusim.config.loader import System
    from tpusim.network.routes import RouteCache
    from tpusim.topology import Topology


@dataclass(frozen=True)
class WorkloadContext:
    """Where one workload point runs: the system (its topology and route cache), the
    scenario's fidelity and flow tolerance, the system's all-in power per chip (W) and
    price per chip-hour (USD) when known, and where the workload is written (scenario
    file, YAML lines, path) for error messages; ``label`` names the sweep point."""

    system: System
    topology: Topology
    routes: RouteCache
    fidelity: Fidelity
    flow_tolerance: float | None
    power_per_chip_W: float | None
    price_per_chip_hour_usd: float | None
    file: str
    lines: dict[PathKey, int]
    path: PathKey
    label: str

    def error(self, problem: str) -> ConfigError:
        """A ConfigError naming the scenario file, the workload's YAML path and line."""
        line = line_of(self.lines, self.path)
        return ConfigError(problem, file=self.file, path=format_path(self.path), line=line)


@dataclass
class Outcome:
    """What running one workload point gave: its record, the simulated program's
    results (traces, ops and links tables) and a collective's per-link bytes."""

    record: Record
    results: Any = None
    links: CollectiveLinks | None = None


Run = Callable[[Any, WorkloadContext], Outcome]
Check = Callable[[Any, WorkloadContext], None]


@dataclass(frozen=True)
class WorkloadKind:
    """A registered kind: its spec class, run function, record type (the type a
    ``summary.csv`` row of this kind reads back as) and check (None: nothing to check
    beyond the spec)."""

    kind: str
    spec: type[WorkloadSpec]
    run: Run
    record: type[Record]
    check: Check | None = None


_KINDS: dict[str, WorkloadKind] = {}


def register_workload(
    kind: str,
    spec_class: type[WorkloadSpec],
    run: Run,
    *,
    record: type[Record] = ProgramRecord,
    check: Check | None = None,
) -> None:
    """Make ``kind: KIND`` a scenario workload validated by ``spec_class`` and run by
    ``run``; ``record`` is the type its run returns (default: a simulated program's);
    ``check`` checks a point without simulating it.

    Raises ValueError when the kind is taken by another spec or run (registering the
    same ones again is a no-op).
    """
    entry = WorkloadKind(kind, spec_class, run, record, check)
    known = _KINDS.get(kind)
    if known is not None and known != entry:
        raise ValueError(f"workload kind '{kind}' is already registered")
    _KINDS[kind] = entry


def unregister_workload(kind: str) -> None:
    """Forget ``kind`` (a no-op when it is not registered)."""
    _KINDS.pop(kind, None)


def workload_kinds() -> tuple[str, ...]:
    """Registered kinds, in registration order."""
    return tuple(_KINDS)


def workload_kind(kind: str) -> WorkloadKind:
    """The registration of ``kind``; raises KeyError naming the choices."""
    try:
        return _KINDS[kind]
    except KeyError:
        raise KeyError(f"unknown kind '{kind}' (choose from {', '.join(_KINDS)})") from None


def record_from_row(row: dict[str, Any]) -> Record | None:
    """A ``summary.csv`` / JSON row back as its record; None for an unregistered kind."""
    entry = _KINDS.get(row.get("kind", ""))
    return entry.record.from_row(row) if entry is not None else None


def _kind_error(value: Any, error_type: str, message: str) -> ValidationError:
    """A validation error on the workload's ``kind`` key, so it names that key's line."""
    detail = InitErrorDetails(
        type=PydanticCustomError(error_type, message), loc=("kind",), input=value
    )
    return ValidationError.from_exception_data("workload", [detail])


def validate_workload(value: Any) -> WorkloadSpec:
    """A workload mapping validated by the spec class of its ``kind``."""
    if isinstance(value, WorkloadSpec):
        return value
    if not isinstance(value, dict):
        raise ValueError("expected a mapping of keys to values")
    if "kind" not in value:
        raise _kind_error(value, "missing", "required key is missing")
    kind = value["kind"]
    if not isinstance(kind, str) or kind not in _KINDS:
        choices = ", ".join(_KINDS)
        raise _kind_error(kind, "unknown_kind", f"unknown kind '{kind}' (choose from {choices})")
    return _KINDS[kind].spec.model_validate(value)


#: A scenario's workload: validated by its kind's spec class, dumped with its fields.
Workload = Annotated[SerializeAsAny[WorkloadSpec], PlainValidator(validate_workload)]
