"""``tpusim calibrate --workloads``: the chip efficiency terms fitted to the ``fit``
training step times, written as an overlay.

The rule (fixed before any fit):

- Terms, per chip generation with ``fit`` cases: the matmul efficiency of every dtype
  those cases compute in (``matmul: {bf16: ..}``: the fraction of MXU peak a large
  matmul reaches) and the HBM efficiency (``hbm``: the fraction of HBM bandwidth a
  streaming op reaches), each bounded to [:data:`LOWER`, 1].
- Cost: least squares on log step time, ``sum (log(simulated / measured) /
  MEASUREMENT_LOG_ERROR)^2`` over the chip's ``fit`` cases, plus a prior ``sum
  (log(term / start) / PRIOR_LOG_SPREAD)^2`` centred on the chip's current terms, so a
  term the cases cannot see (a dtype no fit case uses, HBM when every case is
  compute bound) stays where it was. ``holdout`` cases are never used.
- Search: a step time is close to linear in the inverse of each efficiency (each op's
  time is its work over the rate), so each of :data:`ROUNDS` rounds measures that
  linear map around the current terms by finite differences (one simulation per term
  and case), minimises the cost on it (``scipy.optimize.least_squares``, bounded) and
  moves there; the last terms are confirmed by simulating every case again.
- A case that is not expressible (fields the model lacks; with ``approximate`` only
  the structural ones) is left out of the fit and listed.

The terms reach the chip through :func:`with_efficiency`: the kernels helper's
``tpusim.config.calibration.with_efficiency`` when it exists, else a local stand-in
that scales the chip's peak FLOP/s per dtype and its HBM bandwidth (the same for an
op that is purely compute or purely bandwidth bound).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field
from scipy.optimize import least_squares

from tpusim.config.chip import ChipSpec
from tpusim.config.loader import load_chip, validate
from tpusim.config.types import Frozen
from tpusim.config.yamlio import load_yaml
from tpusim.validation.workloads import WorkloadCase
from tpusim.validation.workloads_run import WorkloadResult, expressible, simulate_workload
from tpusim.vocabulary import Dtype

LOWER = 0.3
"""Lowest efficiency a fit may reach (assumption: public MaxText runs reach 40-70% MFU,
so a large matmul below 30% of peak would mean a modelling error, reported at bound)."""
MEASUREMENT_LOG_ERROR = 0.05
"""Uncertainty of one published step time in log units (assumption: run-to-run spread
and the difference between a README's example log line and a steady run, ~5%)."""
PRIOR_LOG_SPREAD = 0.5
"""Spread of the prior on each term in log units (assumption: wide, a factor of 1.6,
so the data decide any term they see)."""
ROUNDS = 3
"""Linearise-and-solve rounds (each re-measures the linear map at the new terms)."""
STEP = 0.9
"""Finite-difference step: a term is multiplied by this to measure its slope."""


class EfficiencyTerms(Frozen):
    """One chip's fitted terms as the overlay writes them."""

    matmul_efficiency: dict[Dtype, float] = Field(default_factory=dict)
    hbm_efficiency: float = Field(1.0, gt=0.0, le=1.0)
    fit_on: tuple[str, ...] = ()


class EfficiencyOverlay(Frozen):
    """An overlay file of efficiency terms per chip name."""

    chips: dict[str, EfficiencyTerms]


def load_efficiency_overlay(path: str | Path) -> EfficiencyOverlay:
    """The overlay in ``path``; ConfigError (``file:line path: problem``)."""
    data, lines = load_yaml(Path(path))
    return validate(EfficiencyOverlay, data, str(path), lines)


def with_efficiency(chip: ChipSpec, matmul: dict[str, float], hbm: float) -> ChipSpec:
    """``chip`` with its matmul efficiency per dtype and HBM efficiency set (see the
    module docstring for which implementation applies)."""
    from tpusim.config import calibration

    upstream = getattr(calibration, "with_efficiency", None)
    if upstream is not None:
        return upstream(chip, matmul=matmul, hbm=hbm)  # type: ignore[no-any-return]
    base = load_chip(chip.name)
    peaks = dict(base.peak_flops)
    for dtype, value in matmul.items():
        if dtype in peaks:
            peaks[dtype] = base.peak_flops[dtype] * value  # type: ignore[index]
    bandwidth = base.hbm.bandwidth_Bps
    hbm_spec = base.hbm.model_copy(
        update={"bandwidth_Bps": None if bandwidth is None else bandwidth * hbm}
    )
    return chip.model_copy(update={"peak_flops": peaks, "hbm": hbm_spec})


def overlay_chips(overlay: EfficiencyOverlay) -> dict[str, ChipSpec]:
    """The chips an overlay names, with its terms applied."""
    return {
        name: with_efficiency(load_chip(name), _str_keys(t.matmul_efficiency), t.hbm_efficiency)
        for name, t in overlay.chips.items()
    }


def _str_keys(terms: dict[Dtype, float]) -> dict[str, float]:
    return {str(k): v for k, v in terms.items()}


@dataclass
class ChipFit:
    """One chip generation's fit: the terms, the cases fitted and the terms at bound."""

    chip: str
    names: list[str]
    values: np.ndarray
    fit_on: list[str]
    skipped: list[str] = field(default_factory=list)

    @property
    def matmul(self) -> dict[str, float]:
        return {n: float(v) for n, v in zip(self.names, self.values, strict=True) if n != "hbm"}

    @property
    def hbm(self) -> float:
        return float(self.values[self.names.index("hbm")])

    @property
    def at_bound(self) -> list[str]:
        return [
            n
            for n, v in zip(self.names, self.values, strict=True)
            if math.isclose(v, LOWER, rel_tol=1e-6) or math.isclose(v, 1.0, rel_tol=1e-6)
        ]

    def chip_spec(self) -> ChipSpec:
        return with_efficiency(load_chip(self.chip), self.matmul, self.hbm)


def _start(chip: ChipSpec, names: Sequence[str]) -> np.ndarray:
    """The chip's current terms (its ``efficiency`` block once chips have one, else 1:
    today's model computes at peak)."""
    block = getattr(chip, "efficiency", None)
    matmul = getattr(block, "matmul", None) or {}
    hbm = getattr(block, "hbm", None) or 1.0
    values = [hbm if n == "hbm" else matmul.get(n, 1.0) for n in names]
    return np.clip(np.array(values, dtype=float), LOWER, 1.0)


def _simulate(
    cases: Sequence[WorkloadCase],
    fit: ChipFit,
    values: np.ndarray,
    fidelity: str,
    approx: bool,
) -> np.ndarray:
    """Simulated step times (s) of ``cases`` with the chip at ``values``."""
    trial = ChipFit(fit.chip, fit.names, values, fit.fit_on)
    chip = trial.chip_spec()
    out = [simulate_workload(c, chip, fidelity, approx).simulated_s for c in cases]
    return np.array(out, dtype=float)


def fit_chip(
    chip: str, cases: Sequence[WorkloadCase], fidelity: str = "flow", approx: bool = False
) -> ChipFit:
    """The terms of ``chip`` fitted to its ``fit`` cases by the module's rule."""
    usable: list[WorkloadCase] = []
    skipped: list[WorkloadCase] = []
    for case in cases:
        (usable if expressible(case, approx) else skipped).append(case)
    names = [*sorted({c.spec.tpusim_dtype for c in usable}), "hbm"]
    start = _start(load_chip(chip), names)
    fit = ChipFit(chip, names, start.copy(), [c.id for c in usable], [c.id for c in skipped])
    if not usable:
        return fit
    measured = np.array([c.measured_s for c in usable])
    for _ in range(ROUNDS):
        fit.values = _round(usable, fit, measured, start, fidelity, approx)
    return fit


def _round(
    cases: Sequence[WorkloadCase],
    fit: ChipFit,
    measured: np.ndarray,
    start: np.ndarray,
    fidelity: str,
    approx: bool,
) -> np.ndarray:
    """One linearise-and-solve round from ``fit.values``; the new values."""
    x0 = fit.values
    t0 = _simulate(cases, fit, x0, fidelity, approx)
    slopes = []
    for k in range(len(x0)):
        x = x0.copy()
        x[k] *= STEP
        tk = _simulate(cases, fit, x, fidelity, approx)
        slopes.append((tk - t0) / (1 / x[k] - 1 / x0[k]))
    grad = np.array(slopes).T  # seconds per unit of 1/efficiency, per case and term

    def residuals(x: np.ndarray) -> np.ndarray:
        model = t0 + grad @ (1 / x - 1 / x0)
        data = np.log(np.maximum(model, 1e-12) / measured) / MEASUREMENT_LOG_ERROR
        prior = np.log(x / start) / PRIOR_LOG_SPREAD
        return np.concatenate([data, prior])

    solved = least_squares(residuals, x0, bounds=(np.full(len(x0), LOWER), np.ones(len(x0))))
    return np.asarray(solved.x)


def calibrate_workloads(
    cases: Sequence[WorkloadCase], fidelity: str = "flow", approx: bool = False
) -> list[ChipFit]:
    """One fit per chip generation with ``fit`` cases, chips in case order."""
    chips = list(dict.fromkeys(c.spec.chip for c in cases if c.split == "fit"))
    return [
        fit_chip(
            chip, [c for c in cases if c.spec.chip == chip and c.split == "fit"], fidelity, approx
        )
        for chip in chips
    ]


def overlay_text(fits: Sequence[ChipFit]) -> str:
    """The overlay YAML of ``fits`` (loadable by :func:`load_efficiency_overlay`)."""
    import yaml

    chips: dict[str, Any] = {
        f.chip: {
            "matmul_efficiency": {k: round(v, 4) for k, v in f.matmul.items()},
            "hbm_efficiency": round(f.hbm, 4),
            "fit_on": list(f.fit_on),
        }
        for f in fits
    }
    header = (
        "# Chip efficiency terms fitted by `tpusim calibrate --workloads` on the `fit`\n"
        "# cases of configs/measurements/workloads/ (fit_on); apply with\n"
        "# `tpusim validate --workloads --calibration FILE`.\n"
    )
    return header + yaml.safe_dump({"chips": chips}, sort_keys=False)


def fit_results(
    fits: Sequence[ChipFit],
    cases: Sequence[WorkloadCase],
    fidelity: str = "flow",
    approx: bool = False,
) -> list[WorkloadResult]:
    """Every case of the fitted chips simulated with the fitted terms."""
    chips = {f.chip: f.chip_spec() for f in fits}
    return [
        simulate_workload(c, chips[c.spec.chip], fidelity, approx)
        for c in cases
        if c.spec.chip in chips
    ]
