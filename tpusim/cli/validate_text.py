"""What ``tpusim validate`` and ``tpusim calibrate`` say alike for every kind
(collectives, ``--workloads``, ``--serving``): the ``--write-uncertainty`` target, the
coverage of the 80% intervals, a fit worse than the shipped terms."""

from __future__ import annotations

import argparse
from pathlib import Path
from statistics import median
from typing import Any

from tpusim.config.uncertainty import uncertainty_path

#: Where ``calibrate --serving`` writes the fitted profiles without ``--out``.
DEFAULT_SERVING_OUT = "servers"

#: How much a fit may raise its fit cases' median |error| over the shipped terms' before
#: the output and the file say so (a fraction: 0.1 percentage point, about the rounding
#: of the written terms).
WORSE_TOLERANCE = 1e-3


def uncertainty_target(args: argparse.Namespace) -> Path:
    """The file ``--write-uncertainty`` names (default: the shipped one)."""
    return Path(args.write_uncertainty) if args.write_uncertainty else uncertainty_path()


def coverage_text(part: dict[str, Any]) -> str:
    """``, 80% intervals cover N%`` when the summary part has a coverage."""
    coverage = part.get("coverage_80")
    if coverage is None:
        return ""
    return f", 80% intervals cover {coverage:.0%} (nested leave-one-group-out)"


def worse_sentence(before: list[float], after: list[float], count: int, what: str) -> str | None:
    """``the fit raises its N fit <what>' median |error| from B (the shipped terms) to
    A`` when A > B + WORSE_TOLERANCE, else None (``before``, ``after``: |errors|)."""
    if not before or not after or median(after) <= median(before) + WORSE_TOLERANCE:
        return None
    return (
        f"the fit raises its {count} fit {what}' median |error| from {median(before):.1%} "
        f"(the shipped terms) to {median(after):.1%}"
    )
