"""Pydantic field types for quantities with units.

A YAML value such as ``"100 GB/s"`` or a plain SI number becomes an SI float
through :func:`tpusim.units.parse`; a wrong or missing unit is a validation
error that names the bad string and the kind of quantity expected.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from tpusim import units


def _parser(kind: units.Kind) -> BeforeValidator:
    def parse(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ValueError(f"{value!r}: expected a {kind} quantity with a unit")
        return units.parse(value, kind)

    return BeforeValidator(parse)


Bytes = Annotated[float, _parser("bytes"), Field(gt=0)]
Bandwidth = Annotated[float, _parser("bandwidth"), Field(gt=0)]
Time = Annotated[float, _parser("time"), Field(ge=0)]
FlopRate = Annotated[float, _parser("flops"), Field(gt=0)]
Power = Annotated[float, _parser("power"), Field(gt=0)]

Grade = Literal["primary", "secondary", "derived", "calibrated", "assumption"]


class Frozen(BaseModel):
    """Base of every config model: immutable, unknown keys rejected, YAML names as aliases."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class Source(Frozen):
    """Where a number comes from: a key of reference/tpu-specs.md's source table and its grade."""

    source: str
    grade: Grade
    note: str = ""
