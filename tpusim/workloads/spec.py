"""What every workload spec takes besides its own fields (a ``sweep`` of some of them,
``per_system`` overrides), and the model fields training and decode steps share (the
fault keys a kind that simulates a network takes are
:class:`~tpusim.config.faults.FaultKeys`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from tpusim.config.faults import FAULT_FIELDS
from tpusim.config.model import NEUTRAL_SHAPE, PositiveInt
from tpusim.config.types import Frozen
from tpusim.errors import ConfigError
from tpusim.program.builders.fields import StepFields
from tpusim.units import parse_bytes

#: Slack on the log-ratio when counting range points, so ``to`` itself is included
#: despite rounding (a relative error of 1e-9 on the number of factors).
RANGE_COUNT_SLACK = 1e-9


class SweepRange(Frozen):
    """Geometric values ``from``, ``from * factor``, ... up to ``to`` (sizes with units
    or plain numbers)."""

    start: float | int | str = Field(alias="from")
    stop: float | int | str = Field(alias="to")
    factor: float = Field(gt=1)

    @property
    def in_bytes(self) -> bool:
        """Whether the bounds are sizes with units (values are then whole bytes)."""
        return isinstance(self.start, str) or isinstance(self.stop, str)

    def bounds(self) -> tuple[float, float]:
        """(from, to) as numbers (bytes when in_bytes); raises ValueError unless
        0 < from <= to, both finite (or on a bad unit)."""
        as_bytes = self.in_bytes
        lo = parse_bytes(self.start) if as_bytes else float(self.start)
        hi = parse_bytes(self.stop) if as_bytes else float(self.stop)
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise ValueError("a range needs finite from and to")
        if not 0 < lo <= hi:
            raise ValueError("a range needs 0 < from <= to")
        return lo, hi

    def count(self) -> int:
        """How many values the range has, without listing them (ValueError as bounds)."""
        lo, hi = self.bounds()
        return math.floor(math.log(hi / lo) / math.log(self.factor) + RANGE_COUNT_SLACK) + 1

    def values(self) -> list[float | int]:
        """The range's values (ValueError as :meth:`bounds`); check :meth:`count` first."""
        as_bytes = self.in_bytes
        lo, _ = self.bounds()
        out = [lo * self.factor**k for k in range(self.count())]
        integral = not as_bytes and all(float(v).is_integer() for v in out)
        return [round(v) for v in out] if integral or as_bytes else out


def _sweep_value(value: object) -> object:
    """A mapping is a range: validated here so its error names the range's key."""
    if isinstance(value, dict):
        try:
            return SweepRange.model_validate(value)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(p) for p in error["loc"])
            raise ValueError(
                f"a range takes from, to and factor ({where}: {error['msg']})"
            ) from None
    return value


Sweep = dict[str, Annotated[list[object] | SweepRange, BeforeValidator(_sweep_value)]]

#: Keys of a workload that are not fields of the work itself.
VARIANT_KEYS = ("sweep", "per_system", "systems")

#: A device mesh as a workload gives it: axis name -> size, one size may be ``auto``.
Mesh = dict[str, PositiveInt | Literal["auto"]]


@dataclass(frozen=True)
class NetworkDemand:
    """The collective a workload asks of the network, known before it runs (``bytes``
    per the nccl-tests convention; ``algorithm`` None: the fastest): what a scenario
    checks against its fidelity's work limits before simulating anything."""

    op: str
    bytes: float
    algorithm: str | None = None


class WorkloadSpec(Frozen):
    """Base of every workload kind's spec: the kind's own fields, plus a ``sweep`` of
    some of them, ``per_system`` overrides and the ``systems`` it runs on (default:
    every system of the scenario). A subclass declares ``kind:
    Literal["its-kind"]`` and ``name: str`` (a program's name has a default)."""

    sweep: Sweep = Field(default_factory=dict)
    per_system: dict[str, dict[str, object]] = Field(default_factory=dict)
    #: The scenario's systems this workload runs on (None: every one).
    systems: list[str] | None = Field(None, min_length=1)

    if TYPE_CHECKING:  # declared by each subclass, where its place in resolved.yaml is
        kind: str
        name: str

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """Every field the kind takes (a role's axis field too, where the kind has
        :class:`~tpusim.program.builders.fields.RoleAxes`)."""
        return tuple(cls.model_fields)

    def fields_for_mesh(self, mesh: dict[str, int]) -> dict[str, object]:
        """Fields that follow from the mesh resolved for a system (none by default)."""
        return {}

    def device_mesh(self) -> Mesh | None:
        """The device mesh to resolve on each system (an ``auto`` axis, then
        :meth:`fields_for_mesh`); None (the default): the kind lays out no mesh."""
        return None

    def network_demand(self) -> NetworkDemand | None:
        """The collective this workload asks of the network up front (None, the
        default: none known before it runs)."""
        return None


class ModelWorkload(StepFields, WorkloadSpec):
    """A transformer's shape, its role axes and dtype (the fields of
    :class:`~tpusim.program.builders.fields.StepFields`) and its device mesh; a mesh
    axis of size ``auto`` takes the chips the other axes leave on each system.

    ``model: NAME`` (a preset of ``configs/models/`` or a YAML path) fills every shape
    field the workload does not give; fields given explicitly override the preset's
    (``layers: 2`` runs a two-layer fragment of it). A preset feature the workload
    kind does not model (a field it lacks, at a value other than the builders'
    neutral default) is an error, never silently dropped."""

    model_config = ConfigDict(extra="allow")

    name: str
    model: str | None = None
    mesh: Mesh

    @model_validator(mode="before")
    @classmethod
    def _expand_model(cls, data: object) -> object:
        if not isinstance(data, dict) or data.get("model") is None:
            return data
        return expand_preset(cls, data)

    @model_validator(mode="after")
    def _one_auto(self) -> ModelWorkload:
        if sum(v == "auto" for v in self.mesh.values()) > 1:
            raise ValueError("at most one mesh axis can be 'auto'")
        return self

    def device_mesh(self) -> Mesh:
        """The workload's ``mesh``."""
        return self.mesh

    def fragment(self) -> str | None:
        """``fragment: L of N layers`` when the workload runs fewer layers than its
        ``model`` preset has (its per-token figures are the fragment's); else None."""
        if self.model is None:
            return None
        from tpusim.config.loader import load_model

        whole = load_model(self.model).layers
        return f"fragment: {self.layers} of {whole} layers" if self.layers < whole else None

    def builder_fields(self) -> dict[str, object]:
        """The fields the program builder takes (everything but kind, name, variants)."""
        return self.model_dump(exclude={"kind", "name", "model", *VARIANT_KEYS, *FAULT_FIELDS})


def expand_preset(cls: type[ModelWorkload], data: dict[str, object]) -> dict[str, object]:
    """``data`` with the shape fields of its ``model`` preset filled in where absent;
    raises ValueError for an unknown model or a preset feature ``cls`` lacks."""
    from tpusim.config.loader import load_model

    try:
        preset = load_model(str(data["model"]))
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    out = dict(data)
    kind = data.get("kind", "this")
    for key, value in preset.builder_fields().items():
        if key in out:
            continue
        if key in cls.model_fields:
            out[key] = value
        elif value != NEUTRAL_SHAPE[key]:
            raise ValueError(
                f"model {preset.name} has {key}={value}, which a {kind} workload does not model"
            )
    return out
