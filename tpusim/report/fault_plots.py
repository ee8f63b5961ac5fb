"""The degradation curve of ``tpusim faults`` (matplotlib, imported lazily): a
collective's time percentiles against the count of randomly failed links."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["degradation_curve"]


def degradation_curve(
    path: Path,
    failed_links: Sequence[int],
    percentiles_s: Mapping[int, Sequence[float]],
    healthy_s: float,
    title: str,
) -> None:
    """Write the curve to ``path`` (PNG): the p10-p90 band, the median and the p99 of
    the time (ms) at each count of ``failed_links`` (``percentiles_s``: percentile ->
    one time per count, s; 10, 50, 90 and 99 are drawn), and the healthy time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ms = {q: [t * 1e3 for t in times] for q, times in percentiles_s.items()}
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.fill_between(failed_links, ms[10], ms[90], alpha=0.25, label="p10-p90")
    ax.plot(failed_links, ms[50], marker="o", label="median")
    ax.plot(failed_links, ms[99], linestyle="--", label="p99")
    ax.axhline(healthy_s * 1e3, color="grey", linewidth=0.8, label="healthy")
    ax.set_xlabel("failed links (random, count)")
    ax.set_ylabel("collective time (ms)")
    ax.set_title(title)
    ax.set_ylim(bottom=0)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
