"""Residual models from cross-validation, written to ``configs/uncertainty.yaml``
(read back by :mod:`tpusim.config.uncertainty`).

One writer for every kind: :func:`kind_model` takes held-out residuals
(:class:`~tpusim.config.uncertainty.Residual`: group, work, log(simulated /
measured)) and makes the interval's log bounds (:func:`interval_quantiles`: a
two-level fit, a group effect plus a case's own error, by REML with Student's t at
Satterthwaite's degrees of freedom, :mod:`~tpusim.validation.random_effects`; the
residuals of one chip err together, so pooled percentiles would be too narrow for a
chip held out), the ratio bounds (empirical 10th and 90th percentiles of
the differences of pairs of the same work on two groups, both orders, so symmetric),
the descriptive percentiles per tag and the nested leave-one-group-out coverage;
:func:`write_kind` puts it into the file beside the kinds already there
(:func:`write_residuals`: the same from plain tuples, in one call).

- ``training_step_time``: ``validate --workloads --cv chip``: each case predicted by
  the shared cost terms fitted without its chip generation.
- ``collective_time``: ``validate`` (the collective measurements) at the shipped chip
  terms, holdout split only (the fit split calibrated those terms).
- ``serving_*``: the serving cross-validation, by the same :func:`kind_model` and
  :func:`write_kind` from its held-out residuals.

Coverage: a group's cases are judged against the interval of every other group's
residuals, never their own (the interval made from all of them would be circular).
"""

from __future__ import annotations

import datetime
import hashlib
import math
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from scipy.stats import t as student_t

from tpusim import package_version
from tpusim.config.loader import configs_dir, validate
from tpusim.config.uncertainty import (
    HIGH_PERCENTILE,
    KINDS,
    LOW_PERCENTILE,
    MIN_CHIP_PAIRS,
    Kind,
    KindModel,
    OtherGrouping,
    Provenance,
    Quantiles,
    Residual,
    Spread,
    UncertaintyFile,
    load_uncertainty,
)
from tpusim.config.yamlio import load_yaml
from tpusim.results.files import atomic_write_text
from tpusim.validation.random_effects import one_way_fit

PENDING_SERVING = "pending: the serving cross-validation (validate --serving --cv chip) writes it"
"""The note a serving kind carries in the file until its cross-validation writes it."""


def quantiles(log_ratios: Sequence[float]) -> Quantiles:
    """The empirical 10th and 90th percentiles (numpy's linear interpolation) of
    ``log_ratios``; ValueError when empty."""
    if not log_ratios:
        raise ValueError("no residuals to take percentiles of")
    values = np.asarray(log_ratios, dtype=float)
    q10, q90 = np.percentile(values, [LOW_PERCENTILE, HIGH_PERCENTILE])
    return Quantiles(q10=float(q10), q90=float(q90), count=len(values))


def spread(residuals: Sequence[Residual]) -> Spread:
    """The two-level fit of the residuals: a chip effect plus a case's own error, by
    REML with Satterthwaite's degrees of freedom
    (:func:`~tpusim.validation.random_effects.one_way_fit`); ValueError with fewer
    than two groups."""
    groups = sorted({r.group for r in residuals})
    if len(groups) < 2:
        raise ValueError("a two-level fit needs residuals of at least two groups")
    fit = one_way_fit([[r.log_ratio for r in residuals if r.group == g] for g in groups])
    return Spread(
        mean=fit.mean,
        between_sd=math.sqrt(fit.between_var),
        within_sd=math.sqrt(fit.within_var),
        mean_sd=math.sqrt(fit.mean_var),
        num_groups=len(groups),
        dof=fit.dof,
        t_multiplier=float(student_t.ppf(HIGH_PERCENTILE / 100, fit.dof)),
    )


def interval_quantiles(residuals: Sequence[Residual]) -> Quantiles:
    """The 80% interval's log bounds for a figure of a group not among the residuals':
    ``mean -+ t sd`` of :func:`spread`, or the empirical percentiles with one group."""
    if len({r.group for r in residuals}) < 2:
        return quantiles([r.log_ratio for r in residuals])
    fit = spread(residuals)
    half = fit.t_multiplier * fit.predictive_sd
    return Quantiles(q10=fit.mean - half, q90=fit.mean + half, count=len(residuals))


def pair_differences(residuals: Sequence[Residual]) -> list[float]:
    """``r_a - r_b`` for every ordered pair of residuals of the same work on two
    different groups."""
    return [d for _, d in _pairs(residuals)]


def _pairs(residuals: Sequence[Residual]) -> list[tuple[frozenset[str], float]]:
    """(the two groups, ``r_a - r_b``) of every ordered pair of the same work."""
    return [
        (frozenset((a.group, b.group)), a.log_ratio - b.log_ratio)
        for a in residuals
        for b in residuals
        if a.work == b.work and a.group != b.group
    ]


def unpaired_differences(residuals: Sequence[Residual]) -> list[float]:
    """``r_a - r_b`` for every ordered pair of residuals of two different groups, any
    work: the ratio spread when errors are taken as independent."""
    return [a.log_ratio - b.log_ratio for a in residuals for b in residuals if a.group != b.group]


def covered(residuals: Iterable[Residual], q: Quantiles) -> list[bool]:
    """Whether each case's measured value lies inside its figure's interval from ``q``:
    ``sim / exp(q90) <= measured <= sim / exp(q10)``, i.e. ``q10 <= r <= q90``."""
    return [q.q10 <= r.log_ratio <= q.q90 for r in residuals]


def nested_coverage(residuals: Sequence[Residual]) -> float | None:
    """Share of cases inside the interval (:func:`interval_quantiles`) made from the
    other groups' residuals only (nested leave-one-group-out); None with fewer than
    two groups."""
    groups = sorted({r.group for r in residuals})
    if len(groups) < 2:
        return None
    inside: list[bool] = []
    for group in groups:
        others = interval_quantiles([r for r in residuals if r.group != group])
        inside += covered([r for r in residuals if r.group == group], others)
    return sum(inside) / len(inside)


def pair_coverage(residuals: Sequence[Residual]) -> float | None:
    """Share of ordered pairs whose measured ratio lies inside the ratio interval made
    from the pairs of other chip pairs only; None when no pair has such a basis."""
    pairs = _pairs(residuals)
    inside = []
    for chips, diff in pairs:
        rest = [d for other, d in pairs if other != chips]
        if rest:
            q = quantiles(rest)
            inside.append(q.q10 <= diff <= q.q90)
    return sum(inside) / len(inside) if inside else None


def by_tag(residuals: Sequence[Residual]) -> dict[str, Quantiles]:
    """Quantiles of the residuals per ``tag=value`` (and per group: ``chip=...``)."""
    keyed: dict[str, list[float]] = {}
    for r in residuals:
        for key in (f"group={r.group}", *(f"{k}={v}" for k, v in r.tags.items())):
            keyed.setdefault(key, []).append(r.log_ratio)
    return {key: quantiles(values) for key, values in sorted(keyed.items())}


def kind_model(
    residuals: Sequence[Residual], method: str, held_out: str, computed_on: Provenance
) -> KindModel:
    """The residual model of one kind (module docstring): ``method`` says how the
    residuals were made, ``held_out`` in a few words (``leave-one-chip-out``);
    ValueError without residuals."""
    pairs = _pairs(residuals)
    enough = len({chips for chips, _ in pairs}) >= MIN_CHIP_PAIRS
    diffs = [d for _, d in pairs] if enough else []
    two_level = len({r.group for r in residuals}) >= 2
    return KindModel(
        method=method,
        held_out=held_out,
        computed_on=computed_on,
        quantiles=interval_quantiles(residuals),
        spread=spread(residuals) if two_level else None,
        pairs=quantiles(diffs) if diffs else None,
        unpaired=None if diffs or not two_level else quantiles(unpaired_differences(residuals)),
        coverage_80=nested_coverage(residuals),
        pair_coverage_80=pair_coverage(residuals),
        by=by_tag(residuals),
        residuals=tuple(residuals),
    )


def log_ratio(simulated_s: float, measured_s: float) -> float:
    """log(simulated / measured)."""
    return math.log(simulated_s / measured_s)


def provenance(command: str, files: Iterable[str]) -> Provenance:
    """The command, today's date (UTC), tpusim's version, the git commit of the
    source tree (``unknown`` outside a checkout) and each file's SHA-256."""

    hashes = {_shown(f): hashlib.sha256(Path(f).read_bytes()).hexdigest() for f in files}
    return Provenance(
        command=command,
        date=datetime.datetime.now(datetime.UTC).date().isoformat(),
        tpusim_version=package_version(),
        commit=_commit(),
        measurements=dict(sorted(hashes.items())),
    )


def _shown(file: str) -> str:
    """A measurement file relative to the configs folder when inside it."""

    path = Path(file).resolve()
    root = configs_dir().resolve().parent
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def _commit() -> str:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def write_kind(path: Path, kind: Kind, model: KindModel) -> None:
    """Put ``kind``'s model into the file at ``path`` (created with every other kind
    pending when absent), keeping the other kinds; OSError when it cannot be written."""

    old = load_uncertainty(path) if path.exists() else UncertaintyFile()
    _write_file(path, {**old.kinds, kind: model})


def _write_file(path: Path, kinds: dict[Kind, KindModel]) -> None:
    """The file at ``path`` with ``kinds`` and every other kind pending."""
    pending = {k: _pending_note(k) for k in KINDS if k not in kinds}
    new = UncertaintyFile(kinds=dict(sorted(kinds.items())), pending=pending)
    body: dict[str, Any] = new.model_dump(mode="json")
    atomic_write_text(str(path), HEADER + yaml.safe_dump(body, sort_keys=False, width=100))
    load_uncertainty.cache_clear()


def write_grouping(path: Path, kind: Kind, name: str, grouping: OtherGrouping) -> None:
    """Put ``grouping`` under ``kind``'s ``other_groupings[name]`` in the file at
    ``path``; ValueError when the file has no model of ``kind`` yet."""
    old = load_uncertainty(path) if path.exists() else UncertaintyFile()
    if kind not in old.kinds:
        raise ValueError(f"{path} has no {kind} model yet to add the {name} grouping to")
    model = old.kinds[kind]
    groupings = {**model.other_groupings, name: grouping}
    write_kind(path, kind, model.model_copy(update={"other_groupings": groupings}))


def write_residuals(
    path: Path,
    kind: Kind,
    residuals: Iterable[tuple[str, str, str, float]],
    method: str,
    command: str,
    files: Iterable[str],
) -> KindModel:
    """One call for a cross-validation's writer (the serving kinds'): ``residuals`` as
    (case id, chip held out, work, log(simulated / measured)), each predicted without
    its chip, made into ``kind``'s model and written into ``path``; returns the model."""
    made = [Residual(case=c, group=g, work=w, log_ratio=r) for c, g, w, r in residuals]
    model = kind_model(made, method, "leave-one-chip-out", provenance(command, files))
    write_kind(path, kind, model)
    return model


def refit(path: Path) -> UncertaintyFile:
    """Recompute every kind's derived fields (bounds, spread, pairs, coverage, tags)
    in the file at ``path`` from the residuals it stores, by the rule of this module,
    keeping what they were computed on and the other groupings (which store no
    residuals); the way to carry a change of the interval rule into the file without
    rerunning the cross-validations. ConfigError for a bad file, OSError when it
    cannot be written."""
    data, lines = load_yaml(path)
    for kind in data.get("kinds", {}).values() if isinstance(data, dict) else ():
        if isinstance(kind, dict):
            kind.pop("spread", None)  # derived, and an older rule's fields may differ
    old = validate(UncertaintyFile, data, str(path), lines)
    kinds = {
        kind: kind_model(m.residuals, m.method, m.held_out, m.computed_on).model_copy(
            update={"other_groupings": m.other_groupings}
        )
        for kind, m in old.kinds.items()
    }
    _write_file(path, kinds)
    return load_uncertainty(path)


def _pending_note(kind: Kind) -> str:
    if kind.startswith("serving"):
        return PENDING_SERVING
    return f"to be written by the cross-validation of {kind} (docs/validation.md)"


HEADER = """\
# Held-out residuals log(simulated / measured) per kind of figure and the 80% intervals
# they give (docs/validation.md, "Prediction intervals"). Written by
# `tpusim validate --workloads --cv chip --write-uncertainty` (training_step_time) and
# `tpusim validate --write-uncertainty` (collective_time); do not edit by hand.
"""
