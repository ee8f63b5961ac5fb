"""``tpusim validate --workloads --compiled``: published training runs whose own
MaxText step was compiled by XLA for their slice (MaxText's ``train_compile`` on a CPU,
``tools/compile_workloads.py``), each replayed by ``tpusim hlo``'s replay on the run's
slice and compared with the measured step time.

The artifacts are shipped in ``configs/measurements/compiled/`` (gzip JSON, as
``tpusim compile`` writes them: the per-device module XLA optimized, its cost and
memory analyses, the MaxText line, the libtpu flags and the versions), each beside a
small record ``<case>.json`` naming the workload case it compiles, the command that
made it, the versions and the date. Replaying needs no JAX.

A row is the same as a ``validate --workloads`` row (``simulated_s`` is the replayed
step, ``status`` ``ok``), plus the replay's TensorCore time per op kind
(``busy_by_kind_s``) and its exposed communication, so a miss is a named op kind; the
same replay with XLA's op costs (``xla_costed_s``: each op XLA estimated takes its
cycles over the clock, the rest, collectives and Pallas kernels, as tpusim costs
them); and XLA's own estimate of the device's TensorCore time (``xla_estimate_s``: the
``estimated_cycles`` its TPU backend writes on each op, :mod:`tpusim.program.hlo.
xla_estimate`, over the chip's clock, :data:`CLOCK_HZ`), the compiler's cost model
beside tpusim's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

from tpusim.config import configs_dir
from tpusim.errors import ConfigError
from tpusim.network import NetworkSettings
from tpusim.validation.workloads import WorkloadCase
from tpusim.validation.workloads_run import WorkloadResult, case_system
from tpusim.workloads.hlo import replay_summary

COMPILED_DIR = configs_dir() / "measurements" / "compiled"
#: TensorCore clock per chip, Hz, at which XLA's estimated cycles are counted (grade:
#: primary, code: the shared reference tpu-specs sections 1.2 to 1.5, XLA-PI's clock
#: tables; Ironwood's default P-state, 1.9 GHz, where its published peak is at its
#: highest, 2.2 GHz: at 2.2 GHz its estimate would be 14% shorter).
CLOCK_HZ = {"v4": 1.05e9, "v5e": 1.5e9, "v5p": 1.75e9, "v6e": 1.75e9, "ironwood": 1.9e9}
#: Fields every record carries (``tools/compile_workloads.py`` writes them).
RECORD_FIELDS = ("case", "artifact", "command", "maxtext", "topology", "versions", "compiled")


@dataclass(frozen=True)
class CompiledRecord:
    """How one shipped artifact was made: the workload ``case`` it compiles, the
    artifact's path and the record's fields (command, versions, date, ...)."""

    file: str
    case: str
    artifact: Path
    fields: dict[str, Any]


def read_compiled_record(path: Path) -> CompiledRecord:
    """The record in ``path``; ConfigError naming the file and the problem."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a compiled-run record ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: not a compiled-run record (a JSON object is expected)")
    missing = [k for k in RECORD_FIELDS if k not in data]
    if missing:
        raise ConfigError(f"{path}: compiled-run record lacks {', '.join(missing)}")
    artifact = path.parent / str(data["artifact"])
    if not artifact.is_file():
        raise ConfigError(f"{path}: artifact: {artifact.name} is not in {path.parent}")
    return CompiledRecord(path.name, str(data["case"]), artifact, data)


def compiled_records(folder: Path = COMPILED_DIR) -> dict[str, CompiledRecord]:
    """Case id -> its record, for every record in ``folder`` (sorted by file name)."""
    out: dict[str, CompiledRecord] = {}
    for path in sorted(folder.glob("*.json")):
        record = read_compiled_record(path)
        if record.case in out:
            raise ConfigError(
                f"{path}: case {record.case} is compiled twice ({out[record.case].file})"
            )
        out[record.case] = record
    return out


@dataclass(frozen=True)
class CompiledResult(WorkloadResult):
    """A ``validate --workloads`` result whose ``simulated_s`` is the replayed step;
    ``busy_by_kind_s`` the replay's TensorCore seconds per op kind,
    ``exposed_communication_s`` its communication not hidden under compute."""

    busy_by_kind_s: dict[str, float] | None = None
    exposed_communication_s: float | None = None
    xla_costed_s: float | None = None
    xla_estimate_s: float | None = None

    def _error(self, seconds: float | None) -> float | None:
        if seconds is None:
            return None
        return (seconds - self.case.measured_s) / self.case.measured_s

    @property
    def xla_costed_error(self) -> float | None:
        """(the replay with XLA's op costs - measured) / measured; None without a clock."""
        return self._error(self.xla_costed_s)

    @property
    def xla_estimate_error(self) -> float | None:
        """(XLA's estimate - measured) / measured, None without a clock for the chip."""
        return self._error(self.xla_estimate_s)

    def row(self) -> dict[str, Any]:
        return {
            **super().row(),
            "busy_by_kind_s": self.busy_by_kind_s,
            "exposed_communication_s": self.exposed_communication_s,
            "xla_costed_s": self.xla_costed_s,
            "xla_costed_error": self.xla_costed_error,
            "xla_estimate_s": self.xla_estimate_s,
            "xla_estimate_error": self.xla_estimate_error,
        }


def replay_case(
    case: WorkloadCase, record: CompiledRecord, network: NetworkSettings | None = None
) -> CompiledResult:
    """``record``'s artifact replayed on ``case``'s slice (:func:`case_system`): with
    tpusim's op costs, and again with XLA's (its estimated cycles over the chip clock)
    where the chip's clock is known."""
    system, path = case_system(case), str(record.artifact)
    summary = replay_summary(path, system, network or NetworkSettings())
    if summary["unknown_ops"]:
        unknown = ", ".join(summary["unknown_ops"])
        raise ConfigError(f"{record.artifact}: ops the replay cannot cost: {unknown}")
    clock_hz = CLOCK_HZ.get(case.spec.chip)
    xla_costed, estimate = None, None
    if clock_hz is not None:
        costed = replay_summary(path, system, network or NetworkSettings(), clock_hz=clock_hz)
        xla_costed, estimate = costed["step_time_s"], costed["xla_estimate_s"]
    return CompiledResult(
        case,
        "ok",
        summary["step_time_s"],
        detail=f"replayed {record.artifact.name}",
        busy_by_kind_s=summary["busy_by_kind_s"],
        exposed_communication_s=summary["exposed_communication_time_s"],
        xla_costed_s=xla_costed,
        xla_estimate_s=estimate,
    )


def validate_compiled(
    cases: Sequence[WorkloadCase],
    records: dict[str, CompiledRecord] | None = None,
    network: NetworkSettings | None = None,
) -> list[CompiledResult]:
    """Every case with a compiled artifact replayed, in the cases' order; ConfigError
    for a record naming no case of ``cases``."""
    records = compiled_records() if records is None else records
    ids = {c.id for c in cases}
    stray = sorted(set(records) - ids)
    if stray:
        raise ConfigError(f"{records[stray[0]].file}: case {stray[0]} is in no workload file")
    return [replay_case(c, records[c.id], network) for c in cases if c.id in records]


def by_chip(results: Sequence[CompiledResult]) -> dict[str, dict[str, Any]]:
    """Per chip: runs replayed, their median |error| and that of XLA's estimate."""
    chips: dict[str, list[CompiledResult]] = {}
    for r in results:
        chips.setdefault(r.case.spec.chip, []).append(r)
    return {chip: estimate_stats(rows) for chip, rows in sorted(chips.items())}


def estimate_stats(results: Sequence[CompiledResult]) -> dict[str, Any]:
    """Runs and the median |error| of the replay, of the replay with XLA's op costs
    and of XLA's estimate (None when none)."""

    def median_abs(errors: list[float | None]) -> float | None:
        known = [abs(e) for e in errors if e is not None]
        return median(known) if known else None

    return {
        "runs": len(results),
        "median_abs_error": median_abs([r.error for r in results]),
        "xla_costed_median_abs_error": median_abs([r.xla_costed_error for r in results]),
        "xla_estimate_median_abs_error": median_abs([r.xla_estimate_error for r in results]),
    }
