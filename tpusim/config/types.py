"""Pydantic field types for quantities with units.

A YAML value such as ``"100 GB/s"`` or a plain SI number becomes an SI float
through :func:`tpusim.units.parse`; a wrong or missing unit is a validation
error that names the bad string and the kind of quantity expected.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from tpusim import units
from tpusim.config.limits import (
    MAX_FLOPS,
    MAX_HOP_LATENCY_S,
    MAX_LINK_BANDWIDTH_BPS,
    MAX_POWER_PER_CHIP_W,
    MIN_FLOPS,
    MIN_LINK_BANDWIDTH_BPS,
    whole_bytes_problem,
)


def _parser(kind: units.Kind) -> BeforeValidator:
    def parse(value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ValueError(f"{value!r}: expected a {kind} quantity with a unit")
        return units.parse(value, kind)

    return BeforeValidator(parse)


def _whole_bytes(value: float) -> float:
    problem = whole_bytes_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _plausible_bandwidth(value: float) -> float:
    if not MIN_LINK_BANDWIDTH_BPS <= value <= MAX_LINK_BANDWIDTH_BPS:
        raise ValueError(
            f"{units.format_bandwidth(value)} is outside the plausible range "
            f"{units.format_bandwidth(MIN_LINK_BANDWIDTH_BPS)} .. "
            f"{units.format_bandwidth(MAX_LINK_BANDWIDTH_BPS)}"
        )
    return value


def _plausible_flops(value: float) -> float:
    if not MIN_FLOPS <= value <= MAX_FLOPS:
        raise ValueError(
            f"{value:.3g} FLOP/s is outside the plausible range {MIN_FLOPS:.0e} .. "
            f"{MAX_FLOPS:.0e} FLOP/s"
        )
    return value


def _plausible_latency(value: float) -> float:
    if value > MAX_HOP_LATENCY_S:
        raise ValueError(
            f"{units.format_time(value)} is over the plausible "
            f"{units.format_time(MAX_HOP_LATENCY_S)} per hop"
        )
    return value


#: A size: a whole number of bytes, > 0.
Bytes = Annotated[float, _parser("bytes"), AfterValidator(_whole_bytes)]
#: A data rate (bytes/s) within MIN_LINK_BANDWIDTH_BPS .. MAX_LINK_BANDWIDTH_BPS.
Bandwidth = Annotated[float, _parser("bandwidth"), AfterValidator(_plausible_bandwidth)]
Time = Annotated[float, _parser("time"), Field(ge=0)]
#: Latency of one hop (s): 0 .. MAX_HOP_LATENCY_S.
HopLatency = Annotated[float, _parser("time"), Field(ge=0), AfterValidator(_plausible_latency)]
FlopRate = Annotated[float, _parser("flops"), AfterValidator(_plausible_flops)]
Power = Annotated[float, _parser("power"), Field(gt=0, le=MAX_POWER_PER_CHIP_W)]

Grade = Literal["primary", "secondary", "derived", "calibrated", "assumption"]


class Frozen(BaseModel):
    """Base of every config model: immutable, unknown keys rejected, YAML names as
    aliases, no infinite or NaN float. Each model's validator is built when it first
    validates (``defer_build``), so a command pays only for the models it uses (a
    collective builds no model-preset or workload schema)."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", populate_by_name=True, allow_inf_nan=False, defer_build=True
    )


class Source(Frozen):
    """Where a number comes from: a key of reference/tpu-specs.md's source table and its grade."""

    source: str
    grade: Grade
    note: str = ""
