"""The split rule of the serving figures (``split_rule:`` of each
``configs/measurements/serving/*.yaml``), written before any fit and checked on load.

``alternate-by-id-within-chip-dtype``, the training set's rule (issue 41: "keep the
split rule of the training set"): within each (chip, weights' dtype) group of a
file, the figures sorted by id (Python string order) alternate ``fit``, ``holdout``,
``fit``, ... starting with ``fit``; a group of one figure is ``fit``.
"""

from __future__ import annotations

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
    def weight_dtype(self) -> str: ...


#: The rule's name, as each file's ``split_rule`` states it.
SPLIT_RULE = "alternate-by-id-within-chip-dtype"


def rule_splits(figures: Sequence[Figure]) -> dict[str, str]:
    """Figure id -> the split :data:`SPLIT_RULE` gives it."""
    groups: dict[tuple[str, str], list[Figure]] = {}
    for figure in figures:
        groups.setdefault((figure.chip, figure.weight_dtype), []).append(figure)
    out: dict[str, str] = {}
    for group in groups.values():
        for i, figure in enumerate(sorted(group, key=lambda f: f.id)):
            out[figure.id] = "fit" if i % 2 == 0 else "holdout"
    return out


def check_splits(figures: Sequence[Figure], file: str, lines: dict[PathKey, int]) -> None:
    """Raise ConfigError at the first figure whose ``split`` is not the one the rule
    gives."""
    want = rule_splits(figures)
    for i, figure in enumerate(figures):
        if figure.split != want[figure.id]:
            path: PathKey = ("figures", i, "split")
            problem = (
                f"split {figure.split} breaks the file's split_rule "
                f"{SPLIT_RULE}, which gives {want[figure.id]}"
            )
            raise ConfigError(problem, file, format_path(path), lines.get(path))
