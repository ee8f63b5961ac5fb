"""The serving curve: latency against request rate, one line per system (matplotlib,
imported lazily).

:func:`latency_curve` serves the same stream shape at each rate; :func:`plot_latency_vs_rate`
draws p99 TTFT and p50/p99 TPOT against the rate per chip (so systems of different
replica sizes compare), with the SLO as dashed lines when given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from tpusim.results.files import save_figure
from tpusim.serving.metrics import Slo, summary
from tpusim.serving.rows import Row, number, required
from tpusim.serving.scheduler import Request
from tpusim.serving.service import Service

#: Rates of the default curve, as fractions of the estimated saturated rate (a design
#: choice: from light load to past the knee).
DEFAULT_RATE_FRACTIONS = (0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5)
#: Milliseconds per second (display).
MS_PER_S = 1e3


def latency_curve(
    service: Service,
    stream: Callable[[float], list[Request]],
    rates_per_s: Sequence[float],
    slo: Slo | None = None,
) -> list[Row]:
    """One summary row per rate (requests/s over every replica), with ``system``."""
    rows = []
    for rate in rates_per_s:
        requests = stream(rate)
        service.run(requests)
        row = summary(requests, service.chips, slo, rate_per_s=rate)
        rows.append({"system": service.system.name, "chips": service.chips, **row})
    return rows


def plot_latency_vs_rate(
    curves: dict[str, list[Row]], path: str | Path, title: str, slo: Slo | None = None
) -> tuple[Path, Path]:
    """Write ``path.png`` and ``path.svg``: p99 TTFT (left) and TPOT p50 and p99 (right)
    against requests/s per chip, a line per system of ``curves``; returns both paths."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4))
    ttft, tpot = fig.subplots(1, 2)
    for system, rows in curves.items():
        x = [required(r, "rate_per_s") / required(r, "chips") for r in rows]
        ttft.plot(x, [number(r, "ttft_p99_s") for r in rows], marker="o", label=system)
        line = tpot.plot(x, _ms(rows, "tpot_p99_s"), marker="o", label=system)
        tpot.plot(x, _ms(rows, "tpot_p50_s"), ls=":", color=line[0].get_color())
    if slo is not None:
        ttft.axhline(slo.ttft_s, ls="--", color="grey", label="SLO")
        tpot.axhline(slo.tpot_s * MS_PER_S, ls="--", color="grey", label="SLO")
    ttft.set(xlabel="requests/s per chip", ylabel="TTFT p99 (s)", yscale="log")
    tpot.set(xlabel="requests/s per chip", ylabel="TPOT p99 (solid), p50 (dotted) (ms)")
    for ax in (ttft, tpot):
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    return save_figure(fig, path)


def _ms(rows: list[Row], key: str) -> list[float | None]:
    """``key`` of each row in milliseconds (None where the row has none)."""
    values = (number(r, key) for r in rows)
    return [None if v is None else v * MS_PER_S for v in values]
