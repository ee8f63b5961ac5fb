"""The split rule of the serving figures (``split_rule:`` of each
``configs/measurements/serving/*.yaml``), written before any fit and checked on load.

``first-published-per-chip-model``: within a file, the figures of each (chip, model)
are ordered by publication date, then by concurrency (lowest first, an open stream
without a concurrency cap last), then by id; the first is ``fit``, every later one
``holdout``. A later run of the same benchmark (a newer server image) is a holdout
of the first, so a fit never sees the figure it is judged on.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Sequence
from typing import Protocol

from tpusim.config.yamlio import PathKey, format_path
from tpusim.errors import ConfigError


class Figure(Protocol):
    """What the rule reads of a figure (a
    :class:`~tpusim.validation.serving_figures.Figure`)."""

    @property
    def id(self) -> str: ...
    @property
    def split(self) -> str: ...
    @property
    def chip(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def published(self) -> datetime.date | None: ...
    @property
    def concurrency(self) -> int | None: ...


def _order(figure: Figure) -> tuple[datetime.date, float, str]:
    assert figure.published is not None  # check_splits refuses a figure without it
    cap = math.inf if figure.concurrency is None else float(figure.concurrency)
    return (figure.published, cap, figure.id)


def rule_splits(figures: Sequence[Figure]) -> dict[str, str]:
    """Figure id -> the split ``first-published-per-chip-model`` gives it (every figure
    needs ``published``)."""
    groups: dict[tuple[str, str], list[Figure]] = {}
    for figure in figures:
        groups.setdefault((figure.chip, figure.model), []).append(figure)
    out: dict[str, str] = {}
    for group in groups.values():
        for i, figure in enumerate(sorted(group, key=_order)):
            out[figure.id] = "fit" if i == 0 else "holdout"
    return out


def check_splits(figures: Sequence[Figure], file: str, lines: dict[PathKey, int]) -> None:
    """Raise ConfigError at the first figure without ``published`` or whose ``split``
    is not the one the rule gives."""
    for i, figure in enumerate(figures):
        if figure.published is None:
            path: PathKey = ("figures", i, "id")
            problem = "published is missing: the split rule orders figures by it"
            raise ConfigError(problem, file, format_path(path), lines.get(path))
    want = rule_splits(figures)
    for i, figure in enumerate(figures):
        if figure.split != want[figure.id]:
            path = ("figures", i, "split")
            problem = (
                f"split {figure.split} breaks the file's split_rule "
                f"first-published-per-chip-model, which gives {want[figure.id]}"
            )
            raise ConfigError(problem, file, format_path(path), lines.get(path))
