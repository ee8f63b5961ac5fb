"""Calibration overlays: cost terms fitted by ``tpusim calibrate``, applied on top of
the chip files (``--calibration FILE``, a scenario's ``calibration:``).

An overlay names chips and, for each, the terms it replaces::

    chips:
      v5e:
        hop_latency: 0.62 us        # ici.hop_latency
        launch: 3.1 us              # collectives.launch
        step_sync: 0.35 us          # collectives.step_sync
        link_efficiency: 0.91       # collectives.link_efficiency
        fit_on: [sb-v5e-..., ...]   # the measurement ids the values were fitted on

A chip the overlay does not name is left as its file says.
"""

from __future__ import annotations

import dataclasses
from functools import cache
from pathlib import Path

from pydantic import Field

from tpusim.config.chip import ChipSpec
from tpusim.config.loader import System, validate
from tpusim.config.types import Frozen, Time
from tpusim.config.yamlio import load_yaml


class ChipCalibration(Frozen):
    """The fitted terms of one chip generation (see the module docstring)."""

    hop_latency_s: Time = Field(alias="hop_latency")
    launch_s: Time = Field(alias="launch")
    step_sync_s: Time = Field(alias="step_sync")
    link_efficiency: float = Field(gt=0.0, le=1.0)
    fit_on: tuple[str, ...] = ()


class Calibration(Frozen):
    """An overlay file: fitted terms per chip name."""

    chips: dict[str, ChipCalibration]


@cache
def _load(path: Path) -> Calibration:
    data, lines = load_yaml(path)
    return validate(Calibration, data, str(path), lines)


def load_calibration(path: str | Path) -> Calibration:
    """The overlay in ``path``; raises ConfigError (``file:line path: problem``)."""
    return _load(Path(path).resolve())


def calibrated_chip(chip: ChipSpec, calibration: Calibration | None) -> ChipSpec:
    """``chip`` with the overlay's terms for it (unchanged when the overlay has none)."""
    terms = calibration.chips.get(chip.name) if calibration else None
    if terms is None:
        return chip
    ici = chip.ici.model_copy(update={"hop_latency_s": terms.hop_latency_s})
    costs = chip.collectives.model_copy(
        update={
            "launch_s": terms.launch_s,
            "step_sync_s": terms.step_sync_s,
            "link_efficiency": terms.link_efficiency,
        }
    )
    return chip.model_copy(update={"ici": ici, "collectives": costs})


def calibrated_system(system: System, calibration: Calibration | None) -> System:
    """``system`` whose chip (and pod's chip) carry the overlay's terms. A hop latency
    the system file overrides (``ici: {hop_latency: ...}``) stays overridden."""
    if calibration is None:
        return system
    pod = calibrated_system(system.pod, calibration) if system.pod is not None else None
    return dataclasses.replace(system, chip=calibrated_chip(system.chip, calibration), pod=pod)
