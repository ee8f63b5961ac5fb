"""Load the shipped (or a user's) tables of public measured collective timings.

One YAML file per source under ``configs/measurements/``: a ``source`` block (where
the numbers come from) and a list of ``cases`` (one measured point each). Sizes follow
tpusim's (nccl-tests') convention; a case gives exactly one of ``measured_time``,
``measured_algbw`` (bytes / time) or ``measured_busbw`` (algbw x nccl-tests' bus
factor for the op on the group's chip count), and :class:`Measurement` carries the
time in seconds whichever was given.

Every problem is a :class:`~tpusim.errors.ConfigError` (an ``InputError``, exit 2)
naming ``file:line path``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, Protocol, TypeVar

from pydantic import AfterValidator, BeforeValidator, Field, field_validator, model_validator

from tpusim import units
from tpusim.collectives import bus_factor
from tpusim.config import configs_dir, shipped
from tpusim.config.limits import MAX_AXIS_CHIPS, MAX_CHIPS, whole_bytes_problem
from tpusim.config.loader import validate
from tpusim.config.types import Frozen
from tpusim.config.yamlio import PathKey, format_path, line_of, load_yaml
from tpusim.errors import ConfigError
from tpusim.vocabulary import Op

Split = Literal["fit", "holdout"]
AxisName = Literal["x", "y", "z"]
AXIS_NAMES: tuple[AxisName, ...] = ("x", "y", "z")


def _quantity(kind: units.Kind) -> BeforeValidator:
    """Parse ``"8 us"`` / ``"92.3 GB/s"`` / ``"128 KiB"`` (or a bare SI number) and
    require a finite value above zero."""

    def check(value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ValueError(f"{value!r}: expected a {kind} quantity with a unit")
        parsed = units.parse(value, kind)
        if not math.isfinite(parsed) or parsed <= 0:
            raise ValueError(f"{value!r}: must be a finite {kind} above zero")
        return parsed

    return BeforeValidator(check)


def _whole_bytes(value: float) -> float:
    """The size limits ``tpusim collective --bytes`` applies (whole, at most MAX_BYTES)."""
    if value != math.floor(value):
        raise ValueError(f"{value!r} bytes: must be a whole number of bytes")
    problem = whole_bytes_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


PositiveTime = Annotated[float, _quantity("time")]
PositiveBandwidth = Annotated[float, _quantity("bandwidth")]
WholeBytes = Annotated[float, _quantity("bytes"), AfterValidator(_whole_bytes)]


def shipped_name(kind: Literal["chips", "models"], name: str) -> str:
    """``name`` when ``configs/<kind>/`` ships it; ValueError listing the shipped ones."""
    known = shipped(kind)
    if name not in known:
        raise ValueError(f"unknown {kind[:-1]} '{name}' (shipped: {', '.join(known)})")
    return name


class SourceInfo(Frozen):
    """Where a file's numbers come from (every measurement table's ``source`` block)."""

    key: str = Field(min_length=1)
    title: str = Field(min_length=1)
    url: str = Field(min_length=1)
    revision: str = Field(min_length=1)
    measured: str = Field(min_length=1)


class SourceSpec(SourceInfo):
    """A collective table's source: also how its sizes map to tpusim's convention."""

    size_convention: str = Field(min_length=1)


class CaseSpec(Frozen):
    """One measured point as written in the YAML file (sizes in tpusim's convention)."""

    id: str = Field(min_length=1)
    chip: str
    slice: tuple[Annotated[int, Field(ge=1)], ...] = Field(min_length=1, max_length=3)
    axes: tuple[AxisName, ...] | None = None
    op: Op
    bytes: WholeBytes
    measured_time: PositiveTime | None = None
    measured_algbw: PositiveBandwidth | None = None
    measured_busbw: PositiveBandwidth | None = None
    split: Split
    where: str = Field(min_length=1)
    note: str = ""

    @field_validator("chip")
    @classmethod
    def _known_chip(cls, chip: str) -> str:
        return shipped_name("chips", chip)

    @model_validator(mode="after")
    def _one_measurement_and_known_axes(self) -> CaseSpec:
        given = [
            f
            for f in ("measured_time", "measured_algbw", "measured_busbw")
            if getattr(self, f) is not None
        ]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of measured_time, measured_algbw, measured_busbw"
                f" (got {', '.join(given) or 'none'})"
            )
        _check_slice(self.slice)
        names = AXIS_NAMES[: len(self.slice)]
        if self.axes is not None:
            bad = [a for a in self.axes if a not in names]
            if bad or len(set(self.axes)) != len(self.axes) or not self.axes:
                raise ValueError(
                    f"axes {list(self.axes)} must be distinct names of the"
                    f" slice's axes {list(names)}"
                )
        axes = self.axes or names
        group = math.prod(
            size for size, name in zip(self.slice, names, strict=True) if name in axes
        )
        if group < 2 and self.measured_busbw is None:  # busbw: its own error, at its key
            raise ValueError(
                "a collective on a group of one chip moves nothing (it would simulate 0 s): "
                "give a slice and axes of two or more chips"
            )
        return self


def _check_slice(dims: tuple[int, ...]) -> None:
    """A slice within the torus limits (:mod:`tpusim.config.limits`); raises ValueError."""
    for axis, size in enumerate(dims):
        if size > MAX_AXIS_CHIPS:
            raise ValueError(
                f"slice axis {axis} has {size:,} chips, over the limit of "
                f"{MAX_AXIS_CHIPS:,} chips per torus axis"
            )
    if math.prod(dims) > MAX_CHIPS:
        raise ValueError(
            f"slice of {math.prod(dims):,} chips is over the limit of {MAX_CHIPS:,} chips"
        )


class MeasurementFile(Frozen):
    """A whole file: the source block and its cases."""

    source: SourceSpec
    cases: tuple[CaseSpec, ...] = Field(min_length=1)


@dataclass(frozen=True)
class Measurement:
    """One public measured collective timing, converted to tpusim's units.

    ``bytes`` is in tpusim's (nccl-tests') size convention for ``op``; ``measured_s``
    is the measured time in seconds (converted from an algbw or busbw when the
    source gave a bandwidth). ``slice`` is the torus dims the source ran on and
    ``axes`` the axis names the collective spans (``None``: every chip of the slice).
    ``file`` and ``line`` locate the case in its YAML file.
    """

    id: str
    source: str
    url: str
    chip: str
    slice: tuple[int, ...]
    axes: tuple[str, ...] | None
    op: Op
    bytes: float
    measured_s: float
    split: Split
    where: str
    note: str
    file: str
    line: int | None

    @property
    def num_chips(self) -> int:
        """Chips in the collective's group (the slice's chips along ``axes``)."""
        return group_size(self.slice, self.axes)


def group_size(slice_dims: Sequence[int], axes: Sequence[str] | None) -> int:
    """Chips in a group spanning ``axes`` (names x, y, z) of a slice; all chips if None."""
    if axes is None:
        return math.prod(slice_dims)
    return math.prod(slice_dims[AXIS_NAMES.index(a)] for a in axes)  # type: ignore[arg-type]


def measured_seconds(case: CaseSpec) -> float:
    """The case's time in seconds: as given, ``bytes / algbw`` or
    ``bytes * bus_factor(op, n) / busbw`` with n the group's chip count.

    Raises ValueError when a busbw is given for a group whose bus factor is zero
    (a single chip).
    """
    if case.measured_time is not None:
        return float(case.measured_time)
    if case.measured_algbw is not None:
        return float(case.bytes) / float(case.measured_algbw)
    factor = bus_factor(case.op, group_size(case.slice, case.axes))
    if factor <= 0:
        raise ValueError("measured_busbw needs a group of more than one chip")
    busbw_Bps = float(case.measured_busbw)  # type: ignore[arg-type]  # one of three is set
    return float(case.bytes) * factor / busbw_Bps


def shipped_measurement_files() -> list[Path]:
    """The shipped measurement files (``configs/measurements/*.yaml``), sorted by name."""
    return sorted((configs_dir() / "measurements").glob("*.yaml"))


def _case_to_measurement(
    spec: MeasurementFile, index: int, file: str, lines: dict[PathKey, int]
) -> Measurement:
    case = spec.cases[index]
    try:
        seconds = measured_seconds(case)
    except ValueError as exc:
        path: PathKey = ("cases", index, "measured_busbw")
        raise ConfigError(
            str(exc), file=file, path=format_path(path), line=line_of(lines, path)
        ) from None
    return Measurement(
        id=case.id,
        source=spec.source.key,
        url=spec.source.url,
        chip=case.chip,
        slice=tuple(case.slice),
        axes=None if case.axes is None else tuple(case.axes),
        op=case.op,
        bytes=float(case.bytes),
        measured_s=seconds,
        split=case.split,
        where=case.where,
        note=case.note,
        file=file,
        line=line_of(lines, ("cases", index)),
    )


def load_measurement_file(file: Path) -> list[Measurement]:
    """Every case of one measurement file, validated and converted.

    Raises ConfigError (``file:line path: problem``) on any bad value, a missing
    ``source`` block or ``source.url``, an unknown key or a duplicate key.
    """
    data, lines = load_yaml(file)  # refuses a duplicate key, naming its line
    spec = validate(MeasurementFile, data, str(file), lines)
    return [_case_to_measurement(spec, i, str(file), lines) for i in range(len(spec.cases))]


class Placed(Protocol):
    """A case that says where it is: its file and line (None: unknown)."""

    @property
    def file(self) -> str: ...

    @property
    def line(self) -> int | None: ...


P = TypeVar("P", bound=Placed)


def claim_case_id(seen: dict[str, P], case: P, case_id: str, path: str) -> None:
    """Record ``case`` (which has ``file`` and ``line``) under ``case_id`` in ``seen``;
    ConfigError at ``path`` when another case of the tables already took that id."""
    if case_id in seen:
        first = seen[case_id]
        raise ConfigError(
            f"duplicate case id '{case_id}' (first in {first.file}:{first.line})",
            file=case.file,
            path=path,
            line=case.line,
        )
    seen[case_id] = case


def load_measurements(paths: Sequence[Path] | None = None) -> list[Measurement]:
    """All measurements of ``paths`` (default: every shipped file), in file order.

    Raises ConfigError on a bad file, or when a case id or a source key repeats
    across files (naming the second occurrence).
    """
    files = shipped_measurement_files() if paths is None else [Path(p) for p in paths]
    out: list[Measurement] = []
    seen: dict[str, Measurement] = {}
    sources: dict[str, str] = {}
    for file in files:
        found = load_measurement_file(file)
        for m in found:
            claim_case_id(seen, m, m.id, f"cases[{found.index(m)}].id")
        if found and sources.setdefault(found[0].source, str(file)) != str(file):
            raise ConfigError(
                f"duplicate source key '{found[0].source}' (also in {sources[found[0].source]})",
                file=str(file),
                path="source.key",
            )
        out.extend(found)
    return out
