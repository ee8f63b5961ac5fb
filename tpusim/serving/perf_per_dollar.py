"""Performance per dollar of one deployment over another, from serving capacities
(the claims table's "up to N x better performance per dollar" claims:
:mod:`tpusim.study.claims`, whose claims files give the claimed ratio and the prices).

Definition: performance is the steady-state capacity at an SLO per chip
(:func:`tpusim.serving.capacity.find_capacity`: requests/s or tokens/s per chip, the
same work on both); performance per dollar divides it by the price per
chip-hour. With ``perf_ratio = perf_subject / perf_baseline`` and ``price_ratio =
price_subject / price_baseline``, the subject's advantage is ``perf_ratio / price_ratio
- 1``, and a claimed ratio R holds at every price ratio up to the *break-even*
``perf_ratio / R``.

Prices are (low, high) ranges in USD per chip-hour, so the figures are given at the
range of price ratios they allow. The verdict on a claim is the claims table's
(:func:`tpusim.study.claim_verdicts.price_range_verdict`: over the whole range, with
the 80% interval of the performance ratio); this module gives the figures only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from tpusim.serving.rows import Row, number


@dataclass(frozen=True)
class PerfPerDollar:
    """The claim's figures: ``perf_ratio`` (subject over baseline, per chip),
    ``breakeven_price_ratio`` (the subject's price over the baseline's at which the
    subject is exactly the claimed ratio better in performance per dollar), the
    advantage (fraction, ``perf_ratio / price_ratio - 1``) at the price ratios the
    ranges allow (``best``: cheapest subject against dearest baseline; ``worst``: the
    reverse; ``mid``: the ranges' midpoints)."""

    perf_ratio: float
    breakeven_price_ratio: float
    price_ratio_best: float
    price_ratio_mid: float
    price_ratio_worst: float
    advantage_best: float
    advantage_mid: float
    advantage_worst: float

    def row(self) -> Row:
        return asdict(self)


def _mid(bounds: tuple[float, float]) -> float:
    return (bounds[0] + bounds[1]) / 2


def inference_perf_per_dollar(
    perf_subject_per_chip: float,
    perf_baseline_per_chip: float,
    price_subject: tuple[float, float],
    price_baseline: tuple[float, float],
    claimed_ratio: float,
) -> PerfPerDollar:
    """The claim's figures (see the module docstring); prices in USD per chip-hour as
    (low, high) ranges, ``claimed_ratio`` the claimed performance per dollar over the
    baseline's (dimensionless). Raises ValueError for a non-positive performance or
    price."""
    if min(perf_subject_per_chip, perf_baseline_per_chip, *price_subject, *price_baseline) <= 0:
        raise ValueError("performance and prices must be positive")
    perf = perf_subject_per_chip / perf_baseline_per_chip
    ratios = (
        price_subject[0] / price_baseline[1],
        _mid(price_subject) / _mid(price_baseline),
        price_subject[1] / price_baseline[0],
    )
    best, mid, worst = (perf / r for r in ratios)
    return PerfPerDollar(perf, perf / claimed_ratio, *ratios, best - 1, mid - 1, worst - 1)


def capacity_per_chip(
    rows: Sequence[Mapping[str, object]], system: str, workload: str
) -> float | None:
    """``capacity_rate_per_s_per_chip`` of the serving row of ``system`` whose workload
    label starts with ``workload``, or None."""
    for row in rows:
        if row.get("system") == system and str(row.get("workload", "")).startswith(workload):
            return number(row, "capacity_rate_per_s_per_chip")
    return None
