"""``tpusim calibrate``: the cost terms of each chip generation fitted to the ``fit``
measurements by least squares, and written as a calibration overlay.

Fitted terms, per chip generation with measurements: the per-hop router latency
(``ici.hop_latency``), the launch cost per collective and the synchronisation cost per
step (``collectives.launch``, ``collectives.step_sync``) and the link efficiency
(``collectives.link_efficiency``). A simulated time is linear in (hop latency, launch,
step sync, 1 / efficiency) as long as the chosen algorithm and the critical path stay
the same, so each round measures that linear map by finite differences (one simulation
per term and case), solves the bounded linear least-squares problem on relative errors
(``scipy.optimize.lsq_linear``) with a prior centred on the chip file's values
(:data:`PRIOR_SPREAD`; a term the data cannot see stays where it was), and repeats from
the new values (the algorithm ``auto`` picks may change with the terms), keeping a step only when
the simulated cost does not grow (halving it until it does not: Gauss-Newton with
backtracking). ``holdout`` points are never used.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from scipy.optimize import lsq_linear

from tpusim.config.calibration import Calibration, ChipCalibration
from tpusim.config.loader import load_chip
from tpusim.validation.measurements import Measurement
from tpusim.validation.validate import simulate_case

if TYPE_CHECKING:
    from tpusim.network import NetworkSettings

TERMS = ("hop_latency_s", "launch_s", "step_sync_s", "inverse_efficiency")
LOWER = np.array([0.0, 0.0, 0.0, 1.0])
"""Bounds of the terms (s, s, s, dimensionless): no negative cost, efficiency <= 1."""
UPPER = np.array([1e-6, 50e-6, 10e-6, 2.0])
"""Upper bounds: 1 us per hop (the scaling book's "typically around 1us" per hop includes
software; router latency is below it), 50 us per launch, 10 us per step, efficiency >= 0.5
(assumptions: wide enough that no shipped fit sits on them; a fit that does is
reported)."""
SCALE = np.array([1e-6, 5e-6, 1e-6, 0.2])
"""Typical size of each term (s, s, s, dimensionless): finite-difference steps are 1%
of it."""
PRIOR_SPREAD = np.array([0.5e-6, 5e-6, 1e-6, 0.06])
"""How far each term may plausibly sit from the chip file's value (the prior's standard
deviation; s, s, s, dimensionless). Link efficiency: public sweeps measure 86-95% of
peak (the scaling book's v5e all-gather ~95%; 86-90% on v5p/v6e), so 1 / efficiency
is known to about +-0.06; the others are assumptions wide enough for the data to move
them freely."""
MEASUREMENT_REL_ERROR = 0.05
"""Relative uncertainty of one public measurement (dimensionless; assumption:
run-to-run spread, timing method, rounding in the source): each case's relative error
is weighted by its inverse, the prior's terms by the inverse of PRIOR_SPREAD (a
maximum a posteriori fit), so thin data cannot drag a term far from its prior."""
ROUNDS = 4
"""Linearise-and-solve rounds (the fit moves by well under 1% in the last one on the
shipped data)."""
BACKTRACKS = 6
"""Halvings of a round's step before giving up on it: a step is kept only if the
simulated (not the linearised) cost does not grow."""


@dataclass(frozen=True)
class ChipFit:
    """A chip generation's fitted terms and what they were fitted on."""

    chip: str
    terms: ChipCalibration
    at_bound: tuple[str, ...]


def _theta(terms: ChipCalibration) -> np.ndarray:
    hop, launch, step, link = terms.collective_terms()
    return np.array([hop, launch, step, 1.0 / link])


def _terms(theta: np.ndarray, fit_on: Sequence[str]) -> ChipCalibration:
    return ChipCalibration(
        hop_latency=float(theta[0]),
        launch=float(theta[1]),
        step_sync=float(theta[2]),
        link_efficiency=float(1.0 / theta[3]),
        fit_on=tuple(fit_on),
    )


def chip_terms(chip: str) -> ChipCalibration:
    """The terms a chip file gives today (the starting point and the prior)."""
    spec = load_chip(chip)
    costs = spec.collectives
    return ChipCalibration(
        hop_latency=spec.ici.hop_latency_s,
        launch=costs.launch_s,
        step_sync=costs.step_sync_s,
        link_efficiency=costs.link_efficiency,
    )


def _times(
    cases: Sequence[Measurement], chip: str, theta: np.ndarray, network: NetworkSettings | None
) -> np.ndarray:
    overlay = Calibration(chips={chip: _terms(theta, ())})
    return np.array([simulate_case(m, overlay, network).simulated_s for m in cases])


def fit_chip(
    chip: str, cases: Sequence[Measurement], network: NetworkSettings | None = None
) -> ChipFit:
    """The terms of ``chip`` fitted to ``cases`` (its ``fit`` measurements)."""
    prior = _theta(chip_terms(chip))
    theta = np.clip(prior, LOWER, UPPER)
    measured = np.array([m.measured_s for m in cases])

    def cost(times: np.ndarray, at: np.ndarray) -> float:
        misfit = (times - measured) / measured / MEASUREMENT_REL_ERROR
        return float((misfit**2).sum() + (((at - prior) / PRIOR_SPREAD) ** 2).sum())

    base = _times(cases, chip, theta, network)
    for _ in range(ROUNDS):
        proposal = _linear_step(cases, chip, theta, base, measured, prior, network)
        for _halving in range(BACKTRACKS):  # the map is only piecewise linear: never get worse
            times = _times(cases, chip, proposal, network)
            if cost(times, proposal) <= cost(base, theta):
                theta, base = proposal, times
                break
            proposal = (theta + proposal) / 2
    at_bound = tuple(
        t
        for t, v, lo, hi in zip(TERMS, theta, LOWER, UPPER, strict=True)
        if np.isclose(v, lo, rtol=0, atol=1e-12) or np.isclose(v, hi, rtol=1e-9)
    )
    fit_on = [m.id for m in cases]
    return ChipFit(chip, _terms(theta, fit_on), at_bound)


def _linear_step(
    cases: Sequence[Measurement],
    chip: str,
    theta: np.ndarray,
    base: np.ndarray,
    measured: np.ndarray,
    prior: np.ndarray,
    network: NetworkSettings | None,
) -> np.ndarray:
    """The bounded least-squares solution of the problem linearised at ``theta``."""
    jac = np.empty((len(cases), len(TERMS)))
    for j, step in enumerate(SCALE * 0.01):
        moved = theta.copy()
        moved[j] += step
        jac[:, j] = (_times(cases, chip, moved, network) - base) / step
    offset = base - jac @ theta
    scale = measured * MEASUREMENT_REL_ERROR
    rows = np.vstack([jac / scale[:, None], np.diag(1 / PRIOR_SPREAD)])
    rhs = np.concatenate([(measured - offset) / scale, prior / PRIOR_SPREAD])
    return np.asarray(lsq_linear(rows, rhs, bounds=(LOWER, UPPER)).x)


def calibrate(
    measurements: Sequence[Measurement], network: NetworkSettings | None = None
) -> list[ChipFit]:
    """One fit per chip generation that has ``fit`` measurements, in chip-name order."""
    chips = sorted({m.chip for m in measurements if m.split == "fit"})
    return [
        fit_chip(chip, [m for m in measurements if m.chip == chip and m.split == "fit"], network)
        for chip in chips
    ]


def overlay_yaml(fits: Sequence[ChipFit]) -> str:
    """The overlay file for ``fits`` (:mod:`tpusim.config.calibration`)."""
    lines = [
        "# Written by `tpusim calibrate`: cost terms fitted per chip generation by least",
        "# squares on the `fit` measurements of configs/measurements/ (holdout points unused).",
        "chips:",
    ]
    for fit in fits:
        hop, launch, step, link = fit.terms.collective_terms()
        if fit.at_bound:  # said in the file as in the output: not determined by the points
            lines.append(f"  # {fit.chip}: at a bound of the fit: {', '.join(fit.at_bound)}")
        lines += [
            f"  {fit.chip}:",
            f"    hop_latency: {hop * 1e6:.4g} us",
            f"    launch: {launch * 1e6:.4g} us",
            f"    step_sync: {step * 1e6:.4g} us",
            f"    link_efficiency: {link:.4g}",
            f"    fit_on: [{', '.join(fit.terms.fit_on)}]",
        ]
    return "\n".join(lines) + "\n"


def write_overlay(fits: Sequence[ChipFit], path: str | Path) -> None:
    """Write the overlay YAML of ``fits`` to ``path``."""
    Path(path).write_text(overlay_yaml(fits))
