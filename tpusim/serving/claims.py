"""Google's inference claim for TPU 8i, "up to 80% better performance per dollar than
Ironwood", evaluated from serving capacities.

Definition: performance is the steady-state capacity at an SLO per chip
(:func:`tpusim.serving.capacity.find_capacity`: requests/s or tokens/s per chip, the
same work on both); performance per dollar divides it by the price per
chip-hour. With ``perf_ratio = perf_8i / perf_ironwood`` and ``price_ratio =
price_8i / price_ironwood``, 8i's advantage is ``perf_ratio / price_ratio - 1``, and the
claim holds at every price ratio up to the *break-even* ``perf_ratio / 1.8``.

No per-chip price is published for either chip: :data:`PRICE_RANGES_USD_PER_CHIP_HOUR`
are stated ranges (graded assumptions); the verdict reads the range of price ratios
they allow.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

#: "up to 80% better performance per dollar" (Google TPU 8 announcement, published).
CLAIMED_PERF_PER_DOLLAR_RATIO = 1.8
#: An "up to" ratio holds when the figure reaches this fraction of it (as tpusim's
#: other claims: vendor ratios are rounded).
RATIO_MARGIN = 0.9

#: USD per chip-hour, (low, high). ASSUMPTION: no list price is published for
#: Ironwood, TPU 8i or TPU 8t; the ranges bracket Google Cloud's on-demand list
#: prices of v6e ($2.70) and v5p ($4.20) per chip-hour, scaled up for a newer
#: generation. Change them here or pass your own.
PRICE_RANGES_USD_PER_CHIP_HOUR: dict[str, tuple[float, float]] = {
    "ironwood": (4.0, 6.0),
    "tpu8i": (3.5, 6.0),
    "tpu8t": (5.0, 8.0),
}


@dataclass(frozen=True)
class PerfPerDollar:
    """The claim's figures: ``perf_ratio`` (8i over Ironwood, per chip),
    ``breakeven_price_ratio`` (8i's price over Ironwood's at which 8i is exactly 1.8x
    in performance per dollar), the advantage (fraction, ``perf_ratio / price_ratio -
    1``) at the price ratios the ranges allow (``best``: cheapest 8i against dearest
    Ironwood; ``worst``: the reverse; ``mid``: the ranges' midpoints), and the verdict."""

    perf_ratio: float
    breakeven_price_ratio: float
    price_ratio_best: float
    price_ratio_mid: float
    price_ratio_worst: float
    advantage_best: float
    advantage_mid: float
    advantage_worst: float
    verdict: str

    def row(self) -> dict[str, Any]:
        return asdict(self)


def _mid(bounds: tuple[float, float]) -> float:
    return (bounds[0] + bounds[1]) / 2


def inference_perf_per_dollar(
    perf_8i_per_chip: float,
    perf_ironwood_per_chip: float,
    price_8i: tuple[float, float] = PRICE_RANGES_USD_PER_CHIP_HOUR["tpu8i"],
    price_ironwood: tuple[float, float] = PRICE_RANGES_USD_PER_CHIP_HOUR["ironwood"],
) -> PerfPerDollar:
    """The claim evaluated (see the module docstring); prices in USD per chip-hour as
    (low, high) ranges. Verdict: ``holds`` when the advantage reaches
    :data:`RATIO_MARGIN` of 1.8x at the midpoint prices, ``partly`` when only at the
    range's best end, ``does not hold`` otherwise. Raises ValueError for a
    non-positive performance or price."""
    if min(perf_8i_per_chip, perf_ironwood_per_chip, *price_8i, *price_ironwood) <= 0:
        raise ValueError("performance and prices must be positive")
    perf = perf_8i_per_chip / perf_ironwood_per_chip
    ratios = (
        price_8i[0] / price_ironwood[1],
        _mid(price_8i) / _mid(price_ironwood),
        price_8i[1] / price_ironwood[0],
    )
    best, mid, worst = (perf / r for r in ratios)
    target = RATIO_MARGIN * CLAIMED_PERF_PER_DOLLAR_RATIO
    verdict = "holds" if mid >= target else "partly" if best >= target else "does not hold"
    return PerfPerDollar(
        perf, perf / CLAIMED_PERF_PER_DOLLAR_RATIO, *ratios, best - 1, mid - 1, worst - 1, verdict
    )


def capacity_per_chip(rows: list[dict[str, Any]], system: str, workload: str) -> float | None:
    """``capacity_rate_per_s_per_chip`` of the serving row of ``system`` whose workload
    label starts with ``workload``, or None."""
    for row in rows:
        if row.get("system") == system and str(row.get("workload", "")).startswith(workload):
            value = row.get("capacity_rate_per_s_per_chip")
            return float(value) if value is not None else None
    return None


def claim_row(
    rows: list[dict[str, Any]],
    workload: str,
    tpu8i: str = "tpu8i-pod",
    ironwood: str = "ironwood-256",
) -> dict[str, str] | None:
    """The claims-table row (``claim``, ``source``, ``tpusim``, ``assumptions``,
    ``verdict``) from the serving capacities of ``workload`` on the two systems in a
    scenario's ``rows``; None when either is missing or zero."""
    perf_8i = capacity_per_chip(rows, tpu8i, workload)
    perf_iw = capacity_per_chip(rows, ironwood, workload)
    if not perf_8i or not perf_iw:
        return None
    p = inference_perf_per_dollar(perf_8i, perf_iw)
    return {
        "claim": "TPU 8i: up to 80% better performance per dollar than Ironwood for inference",
        "source": "Google TPU 8 announcement",
        "tpusim": (
            f"{workload}: capacity per chip {perf_8i:.3g} vs {perf_iw:.3g} req/s "
            f"({p.perf_ratio:.2f}x); perf/$ {p.advantage_worst:+.0%} to "
            f"{p.advantage_best:+.0%} over the price ranges; 1.8x needs 8i at "
            f"<= {p.breakeven_price_ratio:.2f}x Ironwood's price per chip-hour"
        ),
        "assumptions": (
            "steady-state capacity at the scenario's SLO, same model, dtype and stream; prices per "
            "chip-hour (USD) 8i {:g}-{:g}, Ironwood {:g}-{:g} (assumed, unpublished)".format(
                *PRICE_RANGES_USD_PER_CHIP_HOUR["tpu8i"],
                *PRICE_RANGES_USD_PER_CHIP_HOUR["ironwood"],
            )
        ),
        "verdict": p.verdict,
    }
