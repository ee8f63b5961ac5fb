"""The residual model behind every interval (``configs/uncertainty.yaml``).

For each kind of figure (:data:`KINDS`) the file holds the held-out residuals
``r = log(simulated / measured)`` of a cross-validation (each case predicted by cost
terms fitted without its group), what they were computed on, and the 80% interval's
log bounds ``q10``, ``q90`` (a two-level fit: :class:`Spread`). Since ``measured =
simulated / exp(r)``, a figure ``x`` that scales with time gets the 80% interval
``[x / exp(q90), x / exp(q10)]``; a rate (``1 / time``)
gets ``[x exp(q10), x exp(q90)]``; a kind whose residuals are of a rate
(:data:`RATE_KINDS`: serving throughput) the other way round. A ratio of two systems'
figures uses the spread of ``r_a - r_b`` over pairs of held-out cases of the same
published work on two chips (``pairs``), which already contains the error they
share. A kind whose data has no such pairs (serving: no published model was served on
two chips) falls back to ``unpaired``: the spread of ``r_a - r_b`` over held-out
cases of *different* chips and any work, which treats the two errors as independent
(wider than a paired interval when the errors are shared, as they are for the same
software), and says so.

The file is written by :mod:`tpusim.validation.uncertainty` (``tpusim validate
--workloads --cv chip --write-uncertainty``, ``tpusim validate --write-uncertainty``);
this module only reads it, so results, reports and studies need not import
validation. A kind the file lacks gets no interval and a stated reason
(:func:`missing_reason`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import Field

from tpusim.config.loader import configs_dir, validate
from tpusim.config.types import Frozen
from tpusim.config.yamlio import load_yaml

Kind = Literal[
    "training_step_time",
    "collective_time",
    "serving_throughput",
    "serving_ttft",
    "serving_tpot",
]
KINDS: tuple[Kind, ...] = (
    "training_step_time",
    "collective_time",
    "serving_throughput",
    "serving_ttft",
    "serving_tpot",
)
RATE_KINDS: frozenset[Kind] = frozenset({"serving_throughput"})
"""Kinds whose residuals are of a rate, not a time: the serving cross-validation's
``log(simulated / measured)`` of output tokens/s itself. A rate figure of such a kind
scales like its residuals' figure (``[x / exp(q90), x / exp(q10)]``) and a time
figure like their inverse."""
LOW_PERCENTILE = 10.0
HIGH_PERCENTILE = 90.0
"""The percentiles bounding an 80% interval."""
MIN_CHIP_PAIRS = 2
"""Fewest distinct pairs of chips whose paired residuals make a ratio interval (one
pair of chips would make every ratio's spread that one pair's difference)."""


class Residual(Frozen):
    """One held-out case: its id, its group (the chip generation held out), the work
    it ran (``work``: pairs of cases of the same work on two chips give the ratio
    spread), its tags (model family, dense or MoE) and ``log_ratio`` =
    log(simulated / measured)."""

    case: str
    group: str
    work: str
    tags: dict[str, str] = Field(default_factory=dict)
    log_ratio: float


class Quantiles(Frozen):
    """10th and 90th percentiles of log residuals, and how many there were."""

    q10: float
    q90: float
    count: int = Field(ge=1)


class Spread(Frozen):
    """A two-level fit of log residuals (one-way random effects, REML:
    :mod:`tpusim.validation.random_effects`): a chip effect (``between_sd``) plus a
    case's own error (``within_sd``) around ``mean`` (known to ``mean_sd``); a figure
    of a chip not among them falls in ``mean -+ t_multiplier * predictive_sd`` with
    80% probability (Student's t at ``dof``, Satterthwaite's degrees of freedom)."""

    mean: float
    between_sd: float = Field(ge=0.0)
    within_sd: float = Field(ge=0.0)
    mean_sd: float = Field(ge=0.0)
    num_groups: int = Field(ge=2)
    dof: float = Field(gt=0.0)
    t_multiplier: float = Field(gt=0.0)

    @property
    def predictive_sd(self) -> float:
        """``sqrt(between_sd^2 + within_sd^2 + mean_sd^2)``: a new chip's effect, a
        case's own error, the uncertainty of the mean."""
        return math.sqrt(self.between_sd**2 + self.within_sd**2 + self.mean_sd**2)


class Provenance(Frozen):
    """What a kind was computed on: the command, when, tpusim's version and commit,
    and every measurement file with its SHA-256."""

    command: str
    date: str
    tpusim_version: str
    commit: str
    measurements: dict[str, str]


class OtherGrouping(Frozen):
    """The same kind cross-validated by another grouping (``validate --workloads --cv
    family``: each case predicted without its model family), for reading: its
    two-level bounds, nested coverage and per-group percentiles. Intervals use the
    chip grouping only (the chip is what tpusim's headline figures extrapolate)."""

    method: str
    computed_on: Provenance
    quantiles: Quantiles
    coverage_80: float | None = None
    by: dict[str, Quantiles] = Field(default_factory=dict)


class KindModel(Frozen):
    """One kind: how it was made (``method``; ``held_out`` names its residuals in a
    few words, such as ``leave-one-chip-out``), its residuals, the interval's log
    bounds (``quantiles``, from ``spread``: None when the residuals have one group,
    then the empirical percentiles), the ratio bounds (``pairs``: empirical
    percentiles of paired differences; None without a pair; ``unpaired``: the same
    over cases of different groups and any work, the fallback of a ratio without
    pairs), the descriptive
    percentiles by tag value (``by``), and the share of cases inside an interval made
    without their own group (``coverage_80``, nested leave-one-group-out; for ratios
    ``pair_coverage_80``, without their own pair of groups)."""

    method: str
    held_out: str
    computed_on: Provenance
    quantiles: Quantiles
    spread: Spread | None = None
    pairs: Quantiles | None = None
    unpaired: Quantiles | None = None
    coverage_80: float | None = None
    pair_coverage_80: float | None = None
    by: dict[str, Quantiles] = Field(default_factory=dict)
    #: Cross-validations by other groupings (``family``), read only.
    other_groupings: dict[str, OtherGrouping] = Field(default_factory=dict)
    residuals: tuple[Residual, ...]

    @property
    def groups(self) -> set[str]:
        """The groups (chip generations) with measured cases."""
        return {r.group for r in self.residuals}


class UncertaintyFile(Frozen):
    """``configs/uncertainty.yaml``: the kinds computed so far and, for each kind not
    computed yet, why (``pending``)."""

    kinds: dict[Kind, KindModel] = Field(default_factory=dict)
    pending: dict[Kind, str] = Field(default_factory=dict)


def uncertainty_path() -> Path:
    """The shipped residual model."""

    return configs_dir() / "uncertainty.yaml"


@cache
def load_uncertainty(path: Path | None = None) -> UncertaintyFile:
    """The residual model at ``path`` (default: the shipped one), read once; an empty
    model when the shipped file is absent; ConfigError naming file, path and line for
    a bad value."""

    path = path or uncertainty_path()
    if not path.exists() and path == uncertainty_path():
        return UncertaintyFile()
    data, lines = load_yaml(path)
    return validate(UncertaintyFile, data, str(path), lines)


@dataclass(frozen=True)
class Interval:
    """An 80% interval ``[lo, hi]`` around a figure, with its basis (one phrase)."""

    lo: float
    hi: float
    basis: str

    def pair(self) -> list[float]:
        """``[lo, hi]`` (the JSON form)."""
        return [self.lo, self.hi]


def inverse_of_residuals(kind: Kind, rate: bool) -> bool:
    """Whether a figure (``rate``: a rate, else a time) of ``kind`` is the inverse of
    the figure its residuals are of (:data:`RATE_KINDS`): the ``rate`` of
    :func:`scaled`."""
    return rate != (kind in RATE_KINDS)


def scaled(value: float, q: Quantiles, rate: bool = False) -> tuple[float, float]:
    """``value``'s interval from log-residual quantiles ``q``: a time-like figure
    ``[x / exp(q90), x / exp(q10)]``, a rate (``rate``) ``[x exp(q10), x exp(q90)]``."""
    if rate:
        return value * math.exp(q.q10), value * math.exp(q.q90)
    return value / math.exp(q.q90), value / math.exp(q.q10)


def missing_reason(kind: Kind, model: UncertaintyFile | None = None) -> str:
    """Why ``kind`` has no interval: the file's ``pending`` note, or that it lacks it."""
    model = model or load_uncertainty()
    note = model.pending.get(kind)
    return f"no residual model for {kind}" + (f" ({note})" if note else "")


def ratio_missing_reason(kind: Kind, model: UncertaintyFile | None = None) -> str:
    """Why a ratio of ``kind`` has no interval: no model, or too few paired residuals."""
    model = model or load_uncertainty()
    if kind not in model.kinds:
        return missing_reason(kind, model)
    return (
        f"no paired residuals for {kind}: fewer than {MIN_CHIP_PAIRS} pairs of chips ran "
        "the same work"
    )


def basis(kind: Kind, chip: str | None, model: KindModel) -> str:
    """The interval's basis: a measured chip's pooled held-out residuals, or for a chip
    never measured the leave-one-chip-out residuals of every measured one."""
    n, held = model.quantiles.count, model.held_out
    if chip is not None and chip not in model.groups:
        return f"{kind}: {chip} unmeasured, {held} residuals of the measured chips ({n} cases)"
    return f"{kind}: {held} residuals ({n} cases)"


def figure_interval(
    value: float | None, kind: Kind, chip: str | None = None, rate: bool = False
) -> Interval | None:
    """The 80% interval of a figure of ``kind`` on ``chip`` (None without a value or
    a residual model for the kind: :func:`missing_reason` says why)."""
    if value is None or not math.isfinite(value):
        return None
    model = load_uncertainty().kinds.get(kind)
    if model is None:
        return None
    lo, hi = scaled(value, model.quantiles, inverse_of_residuals(kind, rate))
    return Interval(lo, hi, basis(kind, chip, model))


def ratio_interval(ratio: float | None, kind: Kind, rate: bool = False) -> Interval | None:
    """The 80% interval of a ratio of two systems' figures of ``kind`` from the spread
    of paired residuals, or without pairs from the unpaired spread (module docstring);
    None without either."""
    if ratio is None or not math.isfinite(ratio):
        return None
    model = load_uncertainty().kinds.get(kind)
    if model is None:
        return None
    if model.pairs is not None:
        lo, hi = scaled(ratio, model.pairs, inverse_of_residuals(kind, rate))
        basis = f"{kind} ratio: paired held-out residuals ({model.pairs.count} pairs)"
        return Interval(lo, hi, basis)
    if model.unpaired is None:
        return None
    lo, hi = scaled(ratio, model.unpaired, inverse_of_residuals(kind, rate))
    return Interval(
        lo,
        hi,
        f"{kind} ratio: no chip pair ran the same work, so the held-out residuals of "
        f"different chips taken as independent ({model.unpaired.count} differences; "
        "wider than a paired interval)",
    )
