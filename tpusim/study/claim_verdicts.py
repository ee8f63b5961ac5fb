"""Verdicts of the claims with the 80% interval that decided them.

A claim compares a figure with a threshold (the claimed number, times the claims
file's ``ratio_margin`` for "Nx" claims), a higher figure meeting it. When the figure
comes from a cost model its 80% interval (:mod:`tpusim.config.uncertainty`: for a
ratio of two systems, the spread of paired held-out residuals) decides:

* ``holds``: the whole interval meets the threshold;
* ``holds within the interval``: the central figure meets it, the interval's low end
  does not;
* ``cannot tell``: the central figure falls short, the interval's high end meets it;
* ``does not hold``: the whole interval falls short;
* ``holds by construction``: the figure is an input derived from the claim.

A figure that is exact (hop counts, configured capacities, published peaks) is
judged as it stands (``holds`` or ``does not hold``) and says so in ``interval``.

Claims that can be read more than one way get one verdict, on the reading a careful
buyer would apply; the row's ``reading`` states that reading and the others with
their verdicts, so nothing is lost:

* **like for like**: a comparison of two chips is judged at the same dtype (a peak
  of one chip in fp4 against the other's in fp8 is the other reading), and a
  bandwidth is counted as the vendor counts its other bandwidth figures (both
  directions, as Google's ICI bandwidth per chip);
* **every part**: a claim of several figures holds only as far as its weakest part
  (:func:`weakest`: ``holds`` > ``holds by construction`` > ``holds within the
  interval`` > ``cannot tell`` > ``does not hold``);
* **unknown prices**: a claim on performance per dollar, with prices known only as
  ranges, gets its verdict at the dearest price ratio the ranges allow when it holds
  there, ``does not hold`` when it fails even at the cheapest, and ``cannot tell``
  otherwise, the price deciding it (:func:`price_range_verdict`; ``reading`` gives
  the price ratio that would decide it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Literal, get_args

from tpusim.config.uncertainty import Interval, Kind, ratio_interval, ratio_missing_reason
from tpusim.vocabulary import Op

if TYPE_CHECKING:
    from tpusim.serving.perf_per_dollar import PerfPerDollar

Verdict = Literal[
    "holds",
    "holds within the interval",
    "cannot tell",
    "does not hold",
    "holds by construction",
]
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)
"""Every verdict a claim row can get (module docstring)."""
STRENGTH: tuple[Verdict, ...] = (
    "holds",
    "holds by construction",
    "holds within the interval",
    "cannot tell",
    "does not hold",
)
"""The verdicts from the strongest to the weakest (:func:`weakest`)."""
HOLDING: tuple[Verdict, ...] = ("holds", "holds within the interval")
"""The verdicts of a figure that meets its threshold at its central value."""

EXACT_HOPS = "exact: hop counts of the topologies"
EXACT_CAPACITY = "exact: configured capacities"
EXACT_PEAKS = "exact: published peak figures"
BY_CONSTRUCTION = "none: the figure is an input derived from the claim"


def interval_verdict(
    value: float, interval: tuple[float, float] | None, threshold: float
) -> Verdict:
    """The verdict of ``value`` (with its 80% ``interval``, None for an exact figure)
    against ``threshold`` (module docstring)."""
    if interval is None:
        return "holds" if value >= threshold else "does not hold"
    lo, hi = interval
    if lo >= threshold:
        return "holds"
    if value >= threshold:
        return "holds within the interval"
    if hi >= threshold:
        return "cannot tell"
    return "does not hold"


def claim_ratio(ratio: float, kind: Kind, rate: bool) -> Interval | None:
    """The 80% interval of a ratio of two systems' figures of ``kind`` (None without a
    residual model with pairs for the kind)."""
    return ratio_interval(ratio, kind, rate)


def interval_text(name: str, value: float, interval: Interval | None, kind: Kind) -> str:
    """``NAME 1.55 [1.21-1.98] (basis)`` of a ratio, or why it has no interval."""
    if interval is None:
        return f"{name} {value:.3g}: no interval ({ratio_missing_reason(kind)})"
    return f"{name} {value:.3g} [{interval.lo:.3g}-{interval.hi:.3g}] ({interval.basis})"


def cut_verdict(
    cuts: Mapping[Op, tuple[float, float, float, str]], claimed_cut: float
) -> tuple[Verdict, str]:
    """The verdict of the op with the largest cut, from the 80% interval of its
    latency ratio (subject / baseline, paired collective residuals): a cut of
    ``1 - ratio`` spans ``[1 - hi, 1 - lo]``."""
    op, (t_base, t_subj, cut, _) = max(cuts.items(), key=lambda item: item[1][2])
    interval = claim_ratio(t_subj / t_base, "collective_time", rate=False)
    pair = None if interval is None else (1 - interval.hi, 1 - interval.lo)
    text = interval_text(f"{op} latency ratio", t_subj / t_base, interval, "collective_time")
    return interval_verdict(cut, pair, claimed_cut), text


def weakest(verdicts: Iterable[Verdict]) -> Verdict:
    """The weakest of the verdicts of a claim's parts (:data:`STRENGTH`)."""
    return max(verdicts, key=STRENGTH.index)


def price_range_verdict(
    ratio: float, interval: Interval | None, price_ratios: tuple[float, float], threshold: float
) -> Verdict:
    """The verdict of a performance ratio (with its 80% ``interval``) over a price
    ratio known only as a range, ``price_ratios`` = (cheapest, dearest) subject price
    over the baseline's, against ``threshold`` (module docstring, unknown prices)."""

    def at(price_ratio: float) -> Verdict:
        pair = None if interval is None else (interval.lo / price_ratio, interval.hi / price_ratio)
        return interval_verdict(ratio / price_ratio, pair, threshold)

    dearest = at(price_ratios[1])
    if dearest in HOLDING:
        return dearest
    return "does not hold" if at(price_ratios[0]) == "does not hold" else "cannot tell"


def deciding_price(
    ratio: float, interval: Interval | None, threshold: float, baseline_price: tuple[float, float]
) -> dict[str, object]:
    """The price ratio (subject over baseline) at which ``ratio`` per dollar meets
    ``threshold``: ``deciding_price_ratio`` for the central figure, the subject's
    price per chip-hour it makes at the baseline's (low, high) ``baseline_price``
    (``deciding_price_low``, ``deciding_price_high``), and ``deciding_price_range``,
    the ratio for the interval's ends as text (empty without an interval): below the
    low one the whole interval meets it, above the high one none of it does."""
    text = ""
    if interval is not None:
        lo, hi = interval.lo / threshold, interval.hi / threshold
        text = f" ({lo:.2f}x-{hi:.2f}x over the 80% interval)"
    deciding = ratio / threshold
    return {
        "deciding_price_ratio": deciding,
        "deciding_price_low": deciding * baseline_price[0],
        "deciding_price_high": deciding * baseline_price[1],
        "deciding_price_range": text,
    }


def per_dollar_verdict(
    p: PerfPerDollar,
    baseline_price: tuple[float, float],
    kind: Kind,
    threshold: float,
    name: str,
) -> tuple[Verdict, str, dict[str, object]]:
    """A performance-per-dollar claim: the verdict of ``p``'s performance ratio (a rate
    of ``kind``, with the 80% interval of paired residuals) over its price ratios
    (cheapest, dearest) against ``threshold``, the interval's text (``name`` its
    figure) and the row's values: ``p``'s and the deciding price
    (:func:`deciding_price`, at the baseline's ``baseline_price`` range)."""
    interval = claim_ratio(p.perf_ratio, kind, rate=True)
    prices = (p.price_ratio_best, p.price_ratio_worst)
    verdict = price_range_verdict(p.perf_ratio, interval, prices, threshold)
    text = interval_text(name, p.perf_ratio, interval, kind)
    deciding = deciding_price(p.perf_ratio, interval, threshold, baseline_price)
    return verdict, text, {**p.row(), **deciding}
