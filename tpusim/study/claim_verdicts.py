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
"""

from __future__ import annotations

from collections.abc import Mapping

from tpusim.config.uncertainty import Interval, Kind, ratio_interval, ratio_missing_reason
from tpusim.vocabulary import Op

VERDICTS = (
    "holds",
    "holds within the interval",
    "cannot tell",
    "does not hold",
    "holds by construction",
)
"""Every verdict a figure with an interval can get (module docstring)."""

EXACT_HOPS = "exact: hop counts of the topologies"
EXACT_CAPACITY = "exact: configured capacities"
EXACT_PEAKS = "exact: published peak figures"
BY_CONSTRUCTION = "none: the figure is an input derived from the claim"


def interval_verdict(value: float, interval: tuple[float, float] | None, threshold: float) -> str:
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
) -> tuple[str, str]:
    """The verdict of the op with the largest cut, from the 80% interval of its
    latency ratio (subject / baseline, paired collective residuals): a cut of
    ``1 - ratio`` spans ``[1 - hi, 1 - lo]``."""
    op, (t_base, t_subj, cut, _) = max(cuts.items(), key=lambda item: item[1][2])
    interval = claim_ratio(t_subj / t_base, "collective_time", rate=False)
    pair = None if interval is None else (1 - interval.hi, 1 - interval.lo)
    text = interval_text(f"{op} latency ratio", t_subj / t_base, interval, "collective_time")
    return interval_verdict(cut, pair, claimed_cut), text
