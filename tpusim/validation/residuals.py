"""Held-out residuals of each validation, as :mod:`tpusim.validation.uncertainty`
takes them: one :class:`~tpusim.config.uncertainty.Residual` per simulated case,
grouped by the chip generation held out, paired by the work it ran (the same
published model and dtype; the same collective op and size), tagged for the
descriptive percentiles (model family, dense or MoE; the op).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tpusim.config.loader import load_model
from tpusim.config.uncertainty import KindModel, OtherGrouping, Residual
from tpusim.validation.uncertainty import (
    by_tag,
    interval_quantiles,
    kind_model,
    log_ratio,
    nested_coverage,
    provenance,
)
from tpusim.validation.validate import Case


def workload_residuals(rows: Iterable[Mapping[str, Any]], by: str = "chip") -> list[Residual]:
    """The simulated cases' residuals from their rows (:meth:`WorkloadResult.row`):
    grouped by chip generation (``by="family"``: by model family), paired by model and
    dtype (the same published work), tagged by model family and dense or MoE."""
    out = []
    for row in rows:
        if row["simulated_s"] is None:
            continue
        kind = model_family(row["model"])
        tags = {"family": kind, "structure": "moe" if kind == "moe" else "dense"}
        out.append(
            Residual(
                case=row["id"],
                group=row["chip"] if by == "chip" else kind,
                work=f"{row['model']} {row['dtype']}",
                tags=tags,
                log_ratio=log_ratio(row["simulated_s"], row["measured_s"]),
            )
        )
    return out


def model_family(model: str) -> str:
    """A shipped model's family: ``moe``, ``dense-llama`` (gated MLP) or ``dense-gpt``
    (as :func:`tpusim.validation.workloads_fit.family`)."""
    spec = load_model(model)
    if spec.moe is not None:
        return "moe"
    return "dense-llama" if spec.mlp == "gated" else "dense-gpt"


def training_model(
    rows: Sequence[Mapping[str, Any]], files: Iterable[str], command: str
) -> KindModel:
    """``training_step_time`` from the held-out rows of ``--cv chip`` and the
    measurement files they came from."""
    method = (
        "validate --workloads --cv chip: each case's step time predicted by the shared "
        "cost terms fitted without its chip generation"
    )
    held = "leave-one-chip-out"
    return kind_model(workload_residuals(rows), method, held, provenance(command, files))


def family_grouping(
    rows: Sequence[Mapping[str, Any]], files: Iterable[str], command: str
) -> OtherGrouping:
    """The held-out rows of ``--cv family`` as the training kind's ``family`` grouping."""
    residuals = workload_residuals(rows, "family")
    return OtherGrouping(
        method=(
            "validate --workloads --cv family: each case's step time predicted by the "
            "shared cost terms fitted without its model family"
        ),
        computed_on=provenance(command, files),
        quantiles=interval_quantiles(residuals),
        coverage_80=nested_coverage(residuals),
        by=by_tag(residuals),
    )


def collective_residuals(cases: Iterable[Case]) -> list[Residual]:
    """The holdout collective cases' residuals: grouped by chip, paired by op and
    size, tagged by op."""
    out = []
    for case in cases:
        m = case.measurement
        if m.split != "holdout":
            continue
        work = f"{m.op} {m.bytes:.0f} B"
        ratio = log_ratio(case.simulated_s, m.measured_s)
        out.append(Residual(case=m.id, group=m.chip, work=work, tags={"op": m.op}, log_ratio=ratio))
    return out


def collective_model(cases: Sequence[Case], command: str) -> KindModel:
    """``collective_time`` from the holdout cases of ``validate`` at the shipped terms."""
    method = (
        "validate: the holdout measurements at the shipped chip terms (calibrated on the "
        "fit split only)"
    )
    files = dict.fromkeys(c.measurement.file for c in cases)
    held = "holdout-split"
    return kind_model(collective_residuals(cases), method, held, provenance(command, files))
