"""``tpusim validate --serving --cv chip|server``: each group of the serving figures (a
chip generation, or a server profile) predicted by terms fitted without it.

Per fold, the held-out group's figures are simulated with terms fitted
(:func:`~tpusim.validation.serving_fit.fit_server`) on every figure of the other groups,
``fit`` and ``holdout`` alike (as ``validate --workloads --cv`` does):

* ``chip``: each server profile of the held-out figures is refitted on its figures of
  the other chips (its terms are shared by every chip, so this asks whether they carry
  over to a chip they never saw); a profile with no figure on another chip takes one
  set of terms fitted on all the other chips' figures, whatever their server;
* ``server``: one set of terms fitted on every other profile's figures (the engine held
  out keeps only its scheduling mode, which its command line states).

Every fold's search starts from the neutral host time and HBM efficiency, not from
the shipped terms (which were fitted on the held-out figures too). Terms a profile
derives rather than fits (its MoE terms) are the held-out profile's own in every fold:
nothing is fitted for them. The simulations are memoised across
folds (:class:`~tpusim.validation.serving.Simulator`), so a second fold costs what its
new grid points cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from tpusim.errors import InputError
from tpusim.serving.overheads import IterationOverheads
from tpusim.validation.serving import Figure, Simulator, Terms, cases, shipped_overheads
from tpusim.validation.serving_fit import Fitted, fit_server, median_error
from tpusim.validation.uncertainty import write_residuals

Grouping = Literal["chip", "server"]
GROUPINGS: tuple[Grouping, ...] = ("chip", "server")

#: Where every fold's search starts (a design choice, the middle of the grids): 8 ms of
#: host time per iteration, 70% of the HBM bandwidth.
NEUTRAL_HOST_S = 8e-3
NEUTRAL_HBM_EFFICIENCY = 0.7


@dataclass(frozen=True)
class Fold:
    """One held-out group: the terms it was predicted with and its rows (those of
    :func:`~tpusim.validation.serving.cases`, each with ``group``)."""

    group: str
    fitted: tuple[Fitted, ...]
    rows: list[dict[str, Any]]

    @property
    def median_abs_error(self) -> float | None:
        """Median absolute error of the held-out rows."""
        return median_error(self.rows)


def _start(figure: Figure) -> IterationOverheads:
    """The neutral start (no fixed step time), with the terms of ``figure``'s profile
    that are never fitted: its sampler passes and MoE terms."""
    return replace(
        shipped_overheads(figure),
        host_s=NEUTRAL_HOST_S,
        hbm_efficiency=NEUTRAL_HBM_EFFICIENCY,
        step_s=0.0,
    )


def _own_moe(fitted: IterationOverheads, figure: Figure) -> IterationOverheads:
    """``fitted`` with the MoE terms of ``figure``'s own profile (derived, not fitted)."""
    own = shipped_overheads(figure)
    return replace(
        fitted,
        expert_efficiency=own.expert_efficiency,
        moe_layer_s=own.moe_layer_s,
        moe_token_s=own.moe_token_s,
    )


def _group(figure: Figure, by: Grouping) -> str:
    return figure.chip if by == "chip" else figure.server


def _fold_terms(
    held: list[Figure], train: list[Figure], by: Grouping, simulator: Simulator
) -> tuple[Terms, tuple[Fitted, ...]]:
    """The terms each held-out figure's server takes in this fold."""
    terms: Terms = {}
    fitted: list[Fitted] = []
    pooled: Fitted | None = None
    for server in dict.fromkeys(f.server for f in held):
        own = [f for f in train if f.server == server] if by == "chip" else []
        if own:
            fit = fit_server(server, own, simulator, _start(own[0]))
        else:
            pooled = pooled or fit_server("all others", train, simulator, _start(train[0]))
            fit = pooled
        first = next(f for f in held if f.server == server)
        terms[server] = _own_moe(fit.overheads, first)
        if fit not in fitted:
            fitted.append(fit)
    return terms, tuple(fitted)


def cross_validate(
    figures: list[Figure], by: Grouping, simulator: Simulator | None = None
) -> list[Fold]:
    """One :class:`Fold` per group (sorted by name). Raises InputError when the figures
    hold fewer than two groups (nothing to fit a fold on)."""
    simulator = simulator or Simulator()
    groups = sorted({_group(f, by) for f in figures})
    if len(groups) < 2:
        raise InputError(
            f"tpusim validate --serving --cv {by}: the figures have one {by} "
            f"({', '.join(groups)}); leaving it out leaves nothing to fit on"
        )
    folds = []
    for group in groups:
        held = [f for f in figures if _group(f, by) == group]
        train = [f for f in figures if _group(f, by) != group]
        terms, fitted = _fold_terms(held, train, by, simulator)
        rows = [r | {"group": group} for r in cases(held, terms, simulator)]
        folds.append(Fold(group, fitted, rows))
    return folds


def held_out_rows(folds: list[Fold]) -> list[dict[str, Any]]:
    """Every fold's rows, in fold order."""
    return [r for fold in folds for r in fold.rows]


#: The serving kinds of the residual model and the metric each is made from.
SERVING_KINDS: dict[str, str] = {
    "serving_throughput": "output_tokens_per_s",
    "serving_ttft": "ttft_median_s",
    "serving_tpot": "tpot_median_s",
}


def serving_residuals(rows: list[dict[str, Any]], metric: str) -> list[tuple[str, str, str, float]]:
    """The held-out rows of ``metric`` as (figure id, chip held out, work, log(simulated
    / measured)); the work is the model and the stream, so that the same benchmark on two
    chips pairs up for the ratio spread."""

    out = []
    for r in rows:
        if r["metric"] == metric and r["simulated"]:
            work = f"{r['model']} tp{r['tp']} c{r['concurrency']}"
            out.append((r["id"], r["group"], work, math.log(r["simulated"] / r["measured"])))
    return out


def write_serving_uncertainty(
    path: Path, rows: list[dict[str, Any]], command: str, files: list[str]
) -> list[str]:
    """Each serving kind's model from the chip-held-out ``rows`` of
    :func:`cross_validate` (``--cv chip``), written into ``path``; the kinds written."""

    written = []
    for kind, metric in SERVING_KINDS.items():
        residuals = serving_residuals(rows, metric)
        if len(residuals) >= 2:
            method = f"held-out log residuals of {metric}, leave-one-chip-out"
            write_residuals(path, kind, residuals, method, command, files)  # type: ignore[arg-type]
            written.append(kind)
    return written
