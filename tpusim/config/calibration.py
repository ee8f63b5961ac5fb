"""Calibration overlays: cost terms fitted by ``tpusim calibrate``, applied on top of
the chip files (``--calibration FILE``, a scenario's ``calibration:``).

An overlay names chips and, for each, the terms it replaces (every term optional)::

    chips:
      v5e:
        hop_latency: 0.62 us        # ici.hop_latency
        launch: 3.1 us              # collectives.launch
        step_sync: 0.35 us          # collectives.step_sync
        link_efficiency: 0.91       # collectives.link_efficiency
        matmul_efficiency: {bf16: 0.78, int8: 0.7}   # efficiency.matmul (merged per dtype)
        hbm_efficiency: 0.88        # efficiency.hbm
        vector_flops: 6 TFLOP/s     # efficiency.vector
        fit_on: [sb-v5e-..., ...]   # the measurement ids the values were fitted on

The values obey the chip files' limits (a hop latency of at most 1 s, collective
costs of at most 1 s, efficiencies in [0.01, 1]). A chip the overlay does not name is
left as its file says; naming a chip that does not exist is an error.
:func:`with_efficiency` sets the efficiency terms programmatically (for fitting).
"""

from __future__ import annotations

import dataclasses
from functools import cache
from pathlib import Path

from pydantic import Field, model_validator

from tpusim.config.chip import ChipSpec, CostTime, EfficiencySpec, Fraction
from tpusim.config.loader import System, shipped, validate
from tpusim.config.types import FlopRate, Frozen, HopLatency
from tpusim.config.yamlio import line_of, load_yaml
from tpusim.errors import ConfigError
from tpusim.vocabulary import Dtype


class ChipCalibration(Frozen):
    """The fitted terms of one chip generation (see the module docstring); a term left
    out keeps the chip file's value."""

    hop_latency_s: HopLatency | None = Field(None, alias="hop_latency")
    launch_s: CostTime | None = Field(None, alias="launch")
    step_sync_s: CostTime | None = Field(None, alias="step_sync")
    link_efficiency: Fraction | None = None
    matmul_efficiency: dict[Dtype, Fraction] = Field(default_factory=dict)
    hbm_efficiency: Fraction | None = None
    vector_flops: FlopRate | None = None
    fit_on: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _whole_fit(self) -> ChipCalibration:
        """The four collective terms are fitted together (``tpusim calibrate`` writes all
        or none): a subset would mix fitted and chip-file values silently."""
        named = {
            "hop_latency": self.hop_latency_s,
            "launch": self.launch_s,
            "step_sync": self.step_sync_s,
            "link_efficiency": self.link_efficiency,
        }
        missing = [name for name, value in named.items() if value is None]
        if 0 < len(missing) < len(named):
            raise ValueError(
                f"missing {', '.join(missing)}: the collective terms are fitted together, "
                "give all four or none"
            )
        others = (self.matmul_efficiency, self.hbm_efficiency, self.vector_flops)
        if len(missing) == len(named) and not any(v for v in others if v is not None):
            raise ValueError("names no term to calibrate")
        return self

    def collective_terms(self) -> tuple[float, float, float, float]:
        """(hop latency s, launch s, step sync s, link efficiency); ValueError when the
        overlay leaves one out (a fit needs all four)."""
        terms = (self.hop_latency_s, self.launch_s, self.step_sync_s, self.link_efficiency)
        if any(t is None for t in terms):
            raise ValueError("an overlay fitted on collectives gives all four collective terms")
        return terms  # type: ignore[return-value]


class Calibration(Frozen):
    """An overlay file: fitted terms per chip name."""

    chips: dict[str, ChipCalibration]


@cache
def _load(path: Path) -> Calibration:
    data, lines = load_yaml(path)
    calibration = validate(Calibration, data, str(path), lines)
    known = shipped("chips")
    for name in calibration.chips:
        if name not in known:
            raise ConfigError(
                f"unknown chip '{name}' (shipped: {', '.join(known)})",
                file=str(path),
                line=line_of(lines, ("chips", name)),
                path=f"chips.{name}",
            )
    return calibration


def load_calibration(path: str | Path) -> Calibration:
    """The overlay in ``path``; raises ConfigError (``file:line path: problem``), also
    for a chip name no chip file has."""
    return _load(Path(path).resolve())


def _given(**values: object) -> dict[str, object]:
    return {k: v for k, v in values.items() if v is not None}


def with_efficiency(
    chip: ChipSpec,
    matmul: dict[str, float] | None = None,
    hbm: float | None = None,
    vector_flops: float | None = None,
) -> ChipSpec:
    """``chip`` with its efficiency terms replaced where given: ``matmul`` fractions
    per dtype (merged into the chip's), ``hbm`` fraction, ``vector_flops`` in FLOP/s.
    Validated as a chip file is: ValueError (pydantic's) for a term out of range."""
    spec = chip.efficiency or EfficiencySpec.model_validate({})
    data = spec.model_dump(by_alias=True) | _given(hbm=hbm, vector=vector_flops)
    data["matmul"] = {**spec.matmul, **(matmul or {})}
    return chip.model_copy(update={"efficiency": EfficiencySpec.model_validate(data)})


def calibrated_chip(chip: ChipSpec, calibration: Calibration | None) -> ChipSpec:
    """``chip`` with the overlay's terms for it (unchanged when the overlay has none)."""
    terms = calibration.chips.get(chip.name) if calibration else None
    if terms is None:
        return chip
    ici = chip.ici.model_copy(update=_given(hop_latency_s=terms.hop_latency_s))
    costs = chip.collectives.model_copy(
        update=_given(
            launch_s=terms.launch_s,
            step_sync_s=terms.step_sync_s,
            link_efficiency=terms.link_efficiency,
        )
    )
    chip = chip.model_copy(update={"ici": ici, "collectives": costs})
    matmul = {str(d): f for d, f in terms.matmul_efficiency.items()}
    return with_efficiency(chip, matmul, terms.hbm_efficiency, terms.vector_flops)


def calibrated_system(system: System, calibration: Calibration | None) -> System:
    """``system`` whose chip (and pod's chip) carry the overlay's terms. A hop latency
    the system file overrides (``ici: {hop_latency: ...}``) stays overridden."""
    if calibration is None:
        return system
    pod = calibrated_system(system.pod, calibration) if system.pod is not None else None
    return dataclasses.replace(system, chip=calibrated_chip(system.chip, calibration), pod=pod)
