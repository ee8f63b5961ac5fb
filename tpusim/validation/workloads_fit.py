"""``tpusim calibrate --workloads``: the shared compute cost terms
(``configs/cost_terms.yaml``) fitted to the training step times of every chip at once,
and ``validate --workloads --cv``: the same fit leaving one chip generation or one
model family out.

The rule (fixed before any fit):

- Terms: :data:`~tpusim.config.cost_terms.FITTED`, one value for every chip
  generation (the chips differ only by their published peaks, bandwidths, MXU size and
  vector rate). Each is fitted in log space within :data:`BOUNDS`.
- Cost: least squares on log step time, ``sum (log(simulated / measured) /
  MEASUREMENT_LOG_ERROR)^2`` over the cases fitted on, plus a prior ``sum
  (log(term / prior) / PRIOR_LOG_SPREAD)^2`` centred on :data:`PRIOR`, terms fixed
  before any fit, so a term the cases cannot see (grouped matmuls when no fitted case is
  a megablox MoE) stays where it was and no fit's prior has seen the data.
- Search: the log step times' slopes in each log term are measured once, at the prior,
  by finite differences (one simulation per case and term the case can see:
  quantization only for 8-bit cases, grouped matmuls and gathers only for MoE); the
  cost is minimised on that linear map (``scipy.optimize.least_squares``, bounded), then
  :data:`CHORD_ROUNDS` times the cases are simulated at the new terms and the cost
  minimised again with the same slopes (a chord method). The slopes are a property of
  the model at the prior, not of the measurements, so the folds of a cross-validation
  share them.
- ``calibrate --workloads`` fits on the ``fit`` cases; ``holdout`` cases are never
  used. ``--cv chip|family`` fits on every case outside one group (all splits) and
  reports the group's errors at those terms: each case is predicted by terms fitted
  without its chip generation (or its model family).
- A case that is not expressible is left out and listed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np
import yaml
from scipy.optimize import least_squares

from tpusim.config.cost_terms import FITTED, CostTerms, shared_terms, with_terms
from tpusim.config.loader import load_chip
from tpusim.errors import InputError
from tpusim.hardware.efficiency import EIGHT_BIT
from tpusim.validation.residuals import model_family
from tpusim.validation.workloads import WorkloadCase
from tpusim.validation.workloads_run import WorkloadResult, expressible, simulate_workload

if TYPE_CHECKING:
    from tpusim.network import NetworkSettings

BOUNDS: dict[str, tuple[float, float]] = {
    "mxu": (0.3, 1.0),
    "gather_hbm": (0.05, 1.0),
    "vector_ops_per_element": (0.25, 64.0),
    "quantize_ops_per_element": (0.25, 64.0),
    "grouped_matmul": (0.2, 1.0),
}
"""Where each term may go (assumption: public MaxText runs reach 40-70% MFU, so a large
matmul under 30% of peak would be a modelling error; an elementwise op does between a
fraction of an operation and a few tens per element)."""
MEASUREMENT_LOG_ERROR = 0.05
"""Uncertainty of one published step time in log units (assumption: run-to-run spread
and the difference between a README's example log line and a steady run, ~5%)."""
PRIOR_LOG_SPREAD = 0.5
"""Spread of the prior on each term in log units (assumption: wide, a factor of 1.6,
so the data decide any term they see)."""
CHORD_ROUNDS = 2
"""Rounds after the first solve: each simulates the cases at the new terms and solves
again on the slopes measured at the prior (a chord method: the slopes, the costly part,
are measured once)."""
PRIOR = {
    "mxu": 0.75,
    "gather_hbm": 0.5,
    "vector_ops_per_element": 8.0,
    "quantize_ops_per_element": 8.0,
    "grouped_matmul": 0.7,
}
"""The start and prior centre of every fit, fixed before any fit and free of the
measurements (so a cross-validation fold's prior has not seen its held-out cases).
Assumptions: a large bf16 matmul at 75% of the MXU peak in whole programs (a single
GEMM reaches 83% on Ironwood, AMB-7x); streaming HBM at 85% of nominal and row gathers
at half of it; about eight vector operations per element of an elementwise fusion
(a norm: square, sum, rsqrt, scale, multiply) and of a quantization (abs, max, scale,
round, clip, cast); a megablox grouped matmul at 70% of a dense one's rate."""
LOG_STEP = math.log(0.85)
"""Finite-difference step in log term."""

Grouping = Literal["chip", "family"]
Job = tuple[WorkloadCase, CostTerms]
Simulator = Callable[[Sequence[Job]], list[float]]
"""Step times (s) of a batch of (case, terms) simulations, in order."""


def family(case: WorkloadCase) -> str:
    """The case's model family: ``moe`` (routed experts), ``dense-llama`` (a gated
    MLP: Llama, Mistral) or ``dense-gpt`` (a plain MLP: GPT-3)."""
    return model_family(case.spec.model)


def group_of(case: WorkloadCase, by: Grouping) -> str:
    """The case's chip generation or model family."""
    return case.spec.chip if by == "chip" else family(case)


def sees(case: WorkloadCase, term: str) -> bool:
    """Whether ``term`` can move the case's step time (module docstring)."""
    if term == "quantize_ops_per_element":
        return case.spec.tpusim_dtype in EIGHT_BIT
    if term in ("grouped_matmul", "gather_hbm"):
        return family(case) == "moe"
    return True


def simulated_s(
    case: WorkloadCase,
    terms: CostTerms,
    network: NetworkSettings | None = None,
    approx: bool = False,
) -> float:
    """The case's simulated step time (s) with its chip at ``terms``."""
    chip = with_terms(load_chip(case.spec.chip), terms)
    result = simulate_workload(case, chip, network, approx)
    assert result.simulated_s is not None
    return result.simulated_s


def _simulated(args: tuple[WorkloadCase, CostTerms, NetworkSettings | None, bool]) -> float:
    return simulated_s(*args)


def simulator(
    network: NetworkSettings | None = None, approx: bool = False, jobs: int = 1
) -> Simulator:
    """A :data:`Simulator` running its batch in this process (``jobs`` 1) or over
    ``jobs`` worker processes (each simulation is a pure function of its case and
    terms, so the numbers do not depend on ``jobs``)."""

    def run(batch: Sequence[Job]) -> list[float]:
        work = [(case, terms, network, approx) for case, terms in batch]
        if jobs <= 1 or len(work) < 2:
            return [_simulated(w) for w in work]

        with ProcessPoolExecutor(min(jobs, len(work))) as pool:
            return list(pool.map(_simulated, work, chunksize=max(1, len(work) // (4 * jobs))))

    return run


@dataclass
class TermsFit:
    """A fit: the terms, the cases fitted on, those left out (not expressible), the
    terms that ended at a bound."""

    terms: CostTerms
    fit_on: list[str]
    skipped: list[str] = field(default_factory=list)

    @property
    def at_bound(self) -> list[str]:
        """Terms within 0.1% of a bound of :data:`BOUNDS`."""
        out = []
        for name in FITTED:
            value, (low, high) = getattr(self.terms, name), BOUNDS[name]
            if math.isclose(value, low, rel_tol=1e-3) or math.isclose(value, high, rel_tol=1e-3):
                out.append(name)
        return out


def _terms(start: CostTerms, x: np.ndarray) -> CostTerms:
    values = {name: float(math.exp(v)) for name, v in zip(FITTED, x, strict=True)}
    return start.model_copy(update=values)


def prior_terms() -> CostTerms:
    """The fit's data-free start and prior centre: :data:`PRIOR` over the shipped
    file's unfitted terms (``hbm``, ``rows_half_tiles``)."""
    return shared_terms().model_copy(update=PRIOR)


@dataclass(frozen=True)
class Slopes:
    """The model's log step times at log terms ``x`` and their slopes in each log term,
    by case id (a property of the model, not of any measurement)."""

    x: np.ndarray
    log_s: dict[str, float]
    grad: dict[str, np.ndarray]

    def rows(self, cases: Sequence[WorkloadCase]) -> tuple[np.ndarray, np.ndarray]:
        return (
            np.array([self.log_s[c.id] for c in cases]),
            np.array([self.grad[c.id] for c in cases]).reshape(len(cases), len(FITTED)),
        )


def measure_slopes(
    cases: Sequence[WorkloadCase], start: CostTerms, x: np.ndarray, simulate: Simulator
) -> Slopes:
    """Log step times at ``x`` and their slopes in each log term by finite differences
    (0 where a case cannot see the term), every simulation in one batch."""
    batch: list[Job] = [(c, _terms(start, x)) for c in cases]
    where: list[tuple[int, int]] = []
    for k, name in enumerate(FITTED):
        moved = x.copy()
        moved[k] += LOG_STEP
        trial = _terms(start, moved)
        for i, case in enumerate(cases):
            if sees(case, name):
                batch.append((case, trial))
                where.append((i, k))
    times = np.log(simulate(batch))
    grad = np.zeros((len(cases), len(FITTED)))
    for (i, k), t in zip(where, times[len(cases) :], strict=True):
        grad[i, k] = (t - times[i]) / LOG_STEP
    ids = [c.id for c in cases]
    return Slopes(
        x, dict(zip(ids, times[: len(cases)], strict=True)), dict(zip(ids, grad, strict=True))
    )


def fit_terms(
    cases: Sequence[WorkloadCase],
    simulate: Simulator | None = None,
    approx: bool = False,
    slopes: Slopes | None = None,
) -> TermsFit:
    """The shared terms fitted to ``cases`` by the module's rule from the data-free
    :func:`prior_terms`; ``slopes`` measured there over these cases or more (else
    measured here)."""
    start = prior_terms()
    simulate = simulate or simulator(approx=approx)
    usable = [c for c in cases if expressible(c, approx)]
    skipped = [c.id for c in cases if not expressible(c, approx)]
    fit = TermsFit(start, [c.id for c in usable], skipped)
    if not usable:
        return fit
    x0 = np.log([getattr(start, n) for n in FITTED])
    slopes = slopes or measure_slopes(usable, start, x0, simulate)
    log_s, grad = slopes.rows(usable)
    measured = np.log([c.measured_s for c in usable])
    x = _solve(log_s, grad, x0, x0, measured)
    for _ in range(CHORD_ROUNDS):
        here = _terms(start, x)
        log_s = np.log(simulate([(c, here) for c in usable]))
        x = _solve(log_s, grad, x, x0, measured)
    fit.terms = _terms(start, x)
    return fit


def _solve(
    log_s: np.ndarray, grad: np.ndarray, x: np.ndarray, x0: np.ndarray, measured: np.ndarray
) -> np.ndarray:
    """The bounded least-squares minimum of the cost on the linear model ``log_s +
    grad (y - x)`` of the log step times; the new log terms."""
    low = np.log([BOUNDS[n][0] for n in FITTED])
    high = np.log([BOUNDS[n][1] for n in FITTED])

    def residuals(y: np.ndarray) -> np.ndarray:
        data = (log_s + grad @ (y - x) - measured) / MEASUREMENT_LOG_ERROR
        return np.concatenate([data, (y - x0) / PRIOR_LOG_SPREAD])

    solved = least_squares(residuals, np.clip(x, low, high), bounds=(low, high))
    return np.asarray(solved.x)


def calibrate_workloads(
    cases: Sequence[WorkloadCase],
    network: NetworkSettings | None = None,
    approx: bool = False,
    jobs: int = 1,
) -> TermsFit:
    """The shared terms fitted on the ``fit`` cases (``jobs`` worker processes)."""
    simulate = simulator(network, approx, jobs)
    return fit_terms([c for c in cases if c.split == "fit"], simulate, approx)


def fit_results(
    fit: TermsFit,
    cases: Sequence[WorkloadCase],
    network: NetworkSettings | None = None,
    approx: bool = False,
) -> list[WorkloadResult]:
    """Every case simulated with the fitted terms."""
    return [
        simulate_workload(c, with_terms(load_chip(c.spec.chip), fit.terms), network, approx)
        for c in cases
    ]


@dataclass(frozen=True)
class Fold:
    """One cross-validation fold: the group left out, the terms fitted without it and
    its cases' results at those terms."""

    group: str
    fit: TermsFit
    results: list[WorkloadResult]

    @property
    def median_abs_error(self) -> float | None:
        """Median |error| of the group's simulated cases (None when none is)."""
        errors = [abs(r.error) for r in self.results if r.error is not None]
        return float(np.median(errors)) if errors else None


def cross_validate(
    cases: Sequence[WorkloadCase],
    by: Grouping,
    network: NetworkSettings | None = None,
    approx: bool = False,
    jobs: int = 1,
) -> list[Fold]:
    """Leave-one-group-out: for each chip generation (or model family) with an
    expressible case, the terms fitted on every other case, and the group's cases
    simulated with them (``jobs`` worker processes). Raises InputError when no case is
    expressible, or naming a fold that leaves no expressible case to fit on (the
    fold would report the data-free prior as a fit)."""
    usable = [c for c in cases if expressible(c, approx)]
    if not usable:
        raise InputError(f"--cv {by}: no expressible case to cross-validate")
    groups = sorted({group_of(c, by) for c in usable})
    for group in groups:
        if all(group_of(c, by) == group for c in usable):
            raise InputError(
                f"--cv {by}: fold '{group}' has no case to fit on without it (every "
                f"expressible case is {by} {group}): cross-validation needs cases of two "
                f"{by} groups"
            )
    simulate = simulator(network, approx, jobs)
    start = prior_terms()
    x0 = np.log([getattr(start, n) for n in FITTED])
    slopes = measure_slopes(usable, start, x0, simulate)
    folds = []
    for group in groups:
        train = [c for c in cases if group_of(c, by) != group]
        fit = fit_terms(train, simulate, approx, slopes)
        held = [c for c in cases if group_of(c, by) == group]
        folds.append(Fold(group, fit, fit_results(fit, held, network, approx)))
    return folds


def cost_terms_text(fit: TermsFit, worse: str | None = None) -> str:
    """``fit`` as a cost terms file (``configs/cost_terms.yaml``'s format, loadable by
    :func:`~tpusim.config.cost_terms.load_cost_terms_file`), each fitted term's source
    naming the cases; ``worse`` (a sentence: the fit is worse than the shipped terms on
    its own cases) is said in the header."""

    terms = {name: round(float(v), 4) for name, v in fit.terms.model_dump().items()}
    note = "tpusim calibrate --workloads (rule: tpusim/validation/workloads_fit.py) on " + (
        ", ".join(fit.fit_on)
    )
    sources = {
        f"terms.{name}": {"source": "tpusim-calibrate", "grade": "calibrated", "note": note}
        for name in FITTED
    }
    for name in fit.at_bound:
        low, high = BOUNDS[name]
        sources[f"terms.{name}"]["note"] = (
            f"AT A BOUND of the fit ({low:g} .. {high:g}): the cases do not determine it; " + note
        )
    sources["terms.hbm"] = {
        "source": "XLA-cost-model",
        "grade": "derived",
        "note": "not fitted here: XLA's streaming share of the compiled steps' elementwise "
        "fusions (tools/xla_hbm_share.py; configs/cost_terms.yaml)",
    }
    sources["terms.rows_half_tiles"] = {
        "source": "AMB-7x",
        "grade": "derived",
        "note": "not fitted here: the Ironwood bf16 GEMM sweep (configs/cost_terms.yaml)",
    }
    header = (
        "# Shared compute cost terms fitted by `tpusim calibrate --workloads` (fit_on);\n"
        "# apply with `tpusim validate --workloads --calibration FILE`.\n"
    )
    if worse:
        header += f"# WORSE THAN THE SHIPPED TERMS: {worse}.\n"
    if fit.at_bound:
        header += (
            f"# At a bound of the fit (not determined by the cases): {', '.join(fit.at_bound)}.\n"
        )
    body = {"terms": terms, "fit_on": list(fit.fit_on), "sources": sources}
    return header + yaml.safe_dump(body, sort_keys=False, width=100)
