"""``tpusim validate --workloads``: every published training run simulated as a
``training_step`` on its slice and compared.

Each case runs on a torus of its slice's dims built from the chip (as
:func:`tpusim.validation.validate.slice_system` builds a collective's slice), the
``training_step`` fields :func:`~tpusim.validation.workloads_translate.translate`
gives, flow fidelity and layer reuse. A case ends one of three ways (``status``):

- ``ok``: simulated; ``error = (simulated - measured) / measured``.
- ``out of memory``: the memory model says the run does not fit in HBM where it ran
  by more than :data:`MEMORY_MARGIN` (a shortcoming of the model, reported as such, not
  as an error of the tool); the step is still simulated and its error counted, so time
  and memory are judged apart.
- ``tight``: the model's peak is over the HBM by less than :data:`MEMORY_MARGIN`, the
  model's own error: it cannot say whether the run fits (simulated as ``ok`` is).
- ``not expressible``: the case needs a field the current ``training_step`` lacks
  (named). With ``approximate`` those fields are dropped instead (a remat policy
  other than ``none`` becomes ``recompute: true``) and the row lists what was dropped,
  except the :data:`STRUCTURAL` ones, whose absence changes the mesh itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import ValidationError

from tpusim.config.chip import ChipSpec
from tpusim.config.loader import System, load_chip
from tpusim.config.system import SystemSpec
from tpusim.errors import ConfigError, SimulationError
from tpusim.network import NetworkSettings
from tpusim.network.routes import RouteCache
from tpusim.program.builders.memory import peak_stage
from tpusim.program.builders.roles import CONTEXT
from tpusim.topology import build_topology
from tpusim.validation.memory_records import error_summary, memory_errors, xla_peak_per_chip
from tpusim.validation.workloads import WorkloadCase
from tpusim.validation.workloads_translate import Translation, translate
from tpusim.workloads import WorkloadContext
from tpusim.workloads.training_memory import check_fits
from tpusim.workloads.training_step import TrainingWorkload, prepare, simulate_step

if TYPE_CHECKING:
    from tpusim.program.builders.training import TrainingStep

WITHIN = (0.10, 0.15)
"""The relative errors counted in the summary (``within_10pct``, ``within_15pct``:
the issue's acceptance thresholds)."""

MEMORY_MARGIN = 0.05
"""Relative excess of the memory model's peak over the HBM below which a run is
``tight``, not ``out of memory`` (assumption: about the model's median |error| against
XLA's memory analysis of the compiled published runs, 5.7% over 22 runs,
``configs/measurements/memory/``, docs/validation.md)."""

STRUCTURAL = (CONTEXT.field, "num_slices")
"""Missing fields ``approximate`` cannot drop: the mesh itself changes without them
(a context axis of a batch smaller than the chips, slices over DCN)."""


@dataclass(frozen=True)
class WorkloadResult:
    """One case against its simulation: ``status`` (see the module docstring),
    ``simulated_s`` when simulated, the peak HBM per chip the memory model gives,
    the fields dropped (``approximate``) or missing."""

    case: WorkloadCase
    status: str
    simulated_s: float | None = None
    peak_hbm_bytes: float | None = None
    detail: str = ""
    dropped: tuple[str, ...] = ()

    @property
    def error(self) -> float | None:
        """(simulated - measured) / measured, or None when not simulated."""
        if self.simulated_s is None:
            return None
        return (self.simulated_s - self.case.measured_s) / self.case.measured_s

    def row(self) -> dict[str, Any]:
        s = self.case.spec
        return {
            "id": s.id,
            "source": self.case.source,
            "chip": s.chip,
            "model": s.model,
            "slice": s.slice.name,
            "dtype": s.tpusim_dtype,
            "measured_s": self.case.measured_s,
            "simulated_s": self.simulated_s,
            "error": self.error,
            "split": s.split,
            "status": self.status,
            "detail": self.detail,
            "dropped": list(self.dropped),
            "peak_hbm_bytes": self.peak_hbm_bytes,
            "xla_peak_hbm_bytes": xla_peak_per_chip(s.id, s.devices_per_chip),
        }


DCN_HOP_LATENCY_S = 5e-6
"""Latency of one DCN fabric link (chip-leaf, leaf-spine, ...), in s (assumption, as
``configs/systems/ironwood-multislice.yaml``: not published)."""
DCN_CHIPS_PER_LEAF = 4
"""Chips of one host sharing its first-tier DCN node (derived: a TPU VM host holds 4
chips on v4, v5p and Ironwood, D-GKE-7x; an assumption for v5e and v6e hosts)."""


def case_system(case: WorkloadCase, chip: ChipSpec | None = None) -> System:
    """A torus of the case's slice dims of ``chip`` (default: the shipped chip); with
    several slices, that many of them joined by a DCN Clos at the chip's published
    DCN bandwidth (``dcn.bandwidth``)."""
    s = case.spec
    name = f"{s.chip}-{'x'.join(str(d) for d in s.slice.dims)}"
    spec = SystemSpec.model_validate(
        {"name": name, "chip": s.chip, "topology": {"kind": "torus", "dims": list(s.slice.dims)}}
    )
    one = System(spec=spec, chip=chip or load_chip(s.chip), file=case.file)
    if s.num_slices == 1:
        return one
    fabric = {"hop_latency": DCN_HOP_LATENCY_S, "chips_per_leaf": DCN_CHIPS_PER_LEAF}
    spec = SystemSpec.model_validate(
        {"name": f"{s.num_slices}x{name}", "pod": name, "pods": s.num_slices, "fabric": fabric}
    )
    return System(spec=spec, chip=one.chip, file=case.file, pod=one)


def workload_fields(case: WorkloadCase, approximate: bool = False) -> Translation:
    """The case's ``training_step`` fields; with ``approximate`` the missing fields are
    dropped (listed in ``missing``) and any remat but ``none`` is ``recompute: true``."""
    translation = translate(case.spec)
    if not approximate or set(translation.missing) & set(STRUCTURAL):
        return translation
    fields = dict(translation.fields)
    if "remat_policy" in translation.missing:
        fields["recompute"] = case.spec.remat_policy != "none"
    return Translation(fields, translation.missing)


def expressible(case: WorkloadCase, approximate: bool = False) -> bool:
    """Whether the case can be simulated: no missing field (with ``approximate``: no
    missing :data:`STRUCTURAL` field)."""
    missing = set(translate(case.spec).missing)
    return not (missing & set(STRUCTURAL) if approximate else missing)


def training_spec(case: WorkloadCase, fields: dict[str, object]) -> TrainingWorkload:
    """The :class:`TrainingWorkload` of ``fields``; ConfigError naming the case."""

    data = {"kind": "training_step", "name": case.id, **fields}
    try:
        return TrainingWorkload.model_validate(data)
    except ValidationError as exc:
        problem = exc.errors()[0]["msg"]
        raise ConfigError(
            f"{case.id}: {problem}", file=case.file, path=case.path, line=case.line
        ) from None


def simulate_workload(
    case: WorkloadCase,
    chip: ChipSpec | None = None,
    network: NetworkSettings | None = None,
    approximate: bool = False,
    simulate: bool = True,
) -> WorkloadResult:
    """Case ``case`` on its slice of ``chip`` (default: the shipped chip); with
    ``simulate`` false only the memory verdict (no step time)."""

    translation = workload_fields(case, approximate)
    if not expressible(case, approximate):
        return WorkloadResult(case, "not expressible", detail=", ".join(translation.missing))
    context = _context(case, case_system(case, chip), network)
    step, peak, problem = memory_verdict(case, translation, context)
    status = _memory_status(peak, context.system.chip.hbm.capacity_bytes) if problem else "ok"
    if not simulate:
        return WorkloadResult(case, status, None, peak, problem, translation.missing)
    if problem:
        context = dataclasses.replace(context, system=_roomy(context.system, peak))
    results = simulate_step(step, context, reuse=True)
    return WorkloadResult(case, status, results.step_time_s, peak, problem, translation.missing)


def _memory_status(peak_bytes: float, capacity_bytes: float) -> str:
    """``tight`` or ``out of memory`` for a peak over the capacity (see the module
    docstring)."""
    return "tight" if peak_bytes <= capacity_bytes * (1 + MEMORY_MARGIN) else "out of memory"


def memory_verdict(
    case: WorkloadCase, translation: Translation, context: WorkloadContext
) -> tuple[TrainingStep, float, str]:
    """The case's planned step, its peak HBM per chip (bytes) and, when the memory
    model says it does not fit on the chip, why (else "")."""

    step = prepare(training_spec(case, translation.fields), context)
    peak = peak_stage(step).total_bytes
    try:
        check_fits(step, context.system.chip)
    except SimulationError as exc:
        return step, peak, str(exc)
    return step, peak, ""


def _roomy(system: System, need_bytes: float) -> System:
    """``system`` whose chip's HBM holds ``need_bytes`` (capacity sets no time: the
    step of a case that does not fit is still timed)."""
    hbm = system.chip.hbm.model_copy(update={"capacity_bytes": 2 * need_bytes})
    return dataclasses.replace(system, chip=system.chip.model_copy(update={"hbm": hbm}))


def _context(
    case: WorkloadCase, system: System, network: NetworkSettings | None
) -> WorkloadContext:
    topology = build_topology(system)
    return WorkloadContext(
        system=system,
        topology=topology,
        routes=RouteCache(topology),
        network=network or NetworkSettings(),
        power_per_chip_W=None,
        price_per_chip_hour_usd=None,
        file=case.file,
        lines={("cases", case.index): case.line} if case.line is not None else {},
        path=("cases", case.index),
        label=case.id,
    )


def validate_workloads(
    cases: Sequence[WorkloadCase],
    chips: dict[str, ChipSpec] | None = None,
    network: NetworkSettings | None = None,
    approximate: bool = False,
) -> list[WorkloadResult]:
    """Every case simulated, in order; ``chips`` replaces a chip by name."""
    chips = chips or {}
    return [simulate_workload(c, chips.get(c.spec.chip), network, approximate) for c in cases]


def workload_summary(results: Sequence[WorkloadResult]) -> dict[str, Any]:
    """The statistics over the simulated cases, overall and per split, and the count of
    cases per status."""
    out: dict[str, Any] = _stats(results)
    for split in ("fit", "holdout"):
        out[split] = _stats([r for r in results if r.case.split == split])
    out["status"] = {s: sum(r.status == s for r in results) for s in _statuses(results)}
    out["memory_vs_xla"] = error_summary(_memory_errors(results).values())
    return out


def _memory_errors(results: Sequence[WorkloadResult]) -> dict[str, float]:
    """Case id -> the memory model's peak against XLA's (:func:`memory_errors`)."""
    peaks = {r.case.id: r.peak_hbm_bytes for r in results if r.peak_hbm_bytes is not None}
    devices = {r.case.id: r.case.spec.devices_per_chip for r in results}
    return memory_errors(peaks, devices)


def _statuses(results: Sequence[WorkloadResult]) -> list[str]:
    return list(dict.fromkeys(r.status for r in results))


def _stats(results: Sequence[WorkloadResult]) -> dict[str, Any]:
    errors = np.abs([r.error for r in results if r.error is not None])
    stats: dict[str, Any] = {"total": len(results), "simulated": len(errors)}
    for limit in WITHIN:
        stats[f"within_{round(limit * 100)}pct"] = int((errors <= limit).sum())
    stats["median_abs_error"] = float(np.median(errors)) if len(errors) else None
    return stats
