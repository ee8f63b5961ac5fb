"""Vendor claims, each against tpusim's figure for it: the claims are data
(``configs/claims/*.yaml``, :mod:`tpusim.study.claim_specs`), the checks here.

:func:`vendor_claims` returns one row per claim: the claim as published, its source,
tpusim's figure, the assumptions behind that figure, a verdict, the 80% interval that
decided it (``interval``, never empty: an exact figure says so) and, for a claim that
can be read more than one way, the ``reading`` the verdict judges with the others'
verdicts. The verdicts (:data:`~tpusim.study.claim_verdicts.VERDICTS`):

* ``holds``, ``holds within the interval``, ``cannot tell``, ``does not hold``: the
  figure against the claim (within the file's ``ratio_margin`` for "Nx" claims), read
  with its 80% interval;
* ``holds by construction``: the figure comes from a configured number that was
  itself derived from the claim, so it is no independent test.

A claim with several readings is judged like for like (the same dtype on both chips,
a bandwidth counted as the vendor counts its others), a claim of several figures by
its weakest part, and a claim on performance per dollar over the whole of its
unknown price ranges (``cannot tell`` when the price decides, with the price that
would in ``reading``): :mod:`tpusim.study.claim_verdicts` states the rules.

Figures from a scenario run (``rows``, as :func:`tpusim.study.scenario.run_scenario` gives)
are used where present (a pod-wide all-reduce, training steps, decode steps, serving
capacities); what is missing is simulated here on the systems the claims name (a
performance-per-dollar claim appears only with serving rows), on each claim's
``network:`` (a tree as a scenario's; ``tpusim claims``'s network flags replace it).
Latency checks run at
the analytic fidelity: the claims file picks sizes at which every pattern is
latency-bound, where analytic equals flow (see the tests).

Each ``check`` of a claims file is one function here, registered in :data:`CHECKS`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from tpusim.collectives.offload import OnChipModel
from tpusim.config.loader import System, load_system
from tpusim.engine import CollectiveOptions, run_collective
from tpusim.errors import ConfigError
from tpusim.later import LaterModule
from tpusim.network import NetworkSettings
from tpusim.registry import Registry
from tpusim.study import claims_serving, claims_training
from tpusim.study.claim_runs import US_PER_S, Built, latency, latency_cut_values
from tpusim.study.claim_specs import (
    ClaimsFile,
    ClaimSpec,
    DiameterClaim,
    IciBandwidthClaim,
    LatencyCutClaim,
    OnChipSpeedupClaim,
    PerfPerDollarClaim,
    PodComputeClaim,
    SramCapacityClaim,
    TrainingPerfPerDollarClaim,
    VirgoScalingClaim,
    shipped_claims,
)
from tpusim.study.claim_verdicts import (
    BY_CONSTRUCTION,
    EXACT_CAPACITY,
    EXACT_HOPS,
    EXACT_PEAKS,
    Verdict,
)
from tpusim.study.claims_training import figure
from tpusim.topology import build_topology
from tpusim.vocabulary import Dtype

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = LaterModule("pandas")

BYTES_PER_GB = 1e9
"""Bytes per decimal gigabyte (display)."""
BYTES_PER_MIB = 2**20
"""Bytes per mebibyte (display)."""
FLOPS_PER_EFLOPS = 1e18
"""FLOP/s per EFLOP/s (display)."""

Rows = list[dict[str, object]]


@dataclass
class ClaimRow:
    """One row of the claims table."""

    claim: str
    source: str
    tpusim: str
    assumptions: str
    verdict: Verdict
    #: The 80% interval that decided the verdict, or why the figure has none.
    interval: str
    #: For a claim with several readings: the one the verdict judges, and the others'
    #: verdicts (:mod:`tpusim.study.claim_verdicts`); empty for a claim with one.
    reading: str = ""


@dataclass(frozen=True)
class ClaimContext:
    """What a check reads besides its claim: the run's summary rows (may be empty) and
    the claims file (its ratio margin and prices)."""

    rows: Rows
    file: ClaimsFile

    def verdict_ratio(self, measured: float, claimed: float) -> Verdict:
        """``holds`` if ``measured`` reaches the file's ratio margin of ``claimed``."""
        return "holds" if measured >= self.file.ratio_margin * claimed else "does not hold"


@dataclass(frozen=True)
class ClaimCheck:
    """A check: ``evaluate(claim, context) -> rows`` (none when the run lacks what the
    claim compares)."""

    evaluate: Callable[..., list[ClaimRow]]


def _filled(spec: ClaimSpec, verdict: Verdict, decided_by: str, **values: object) -> ClaimRow:
    """The claim's row: its figure, assumptions and reading templates filled with
    ``values``, the verdict and the interval that decided it (``decided_by``)."""
    return ClaimRow(
        spec.claim,
        spec.source,
        spec.figure.format(**values),
        spec.assumptions.format(**values),
        verdict,
        decided_by,
        spec.reading.format(**values),
    )


def _row(rows: Rows, system: str, prefix: str = "", **match: object) -> dict[str, object] | None:
    """The first row of ``system`` whose workload label starts with ``prefix`` and whose
    other fields equal ``match``."""
    for row in rows:
        if (
            row.get("system") == system
            and str(row.get("workload", "")).startswith(prefix)
            and all(row.get(k) == v for k, v in match.items())
        ):
            return row
    return None


def diameter(spec: DiameterClaim, context: ClaimContext) -> list[ClaimRow]:
    """The two systems' network diameters (hops) against the claimed ones."""
    hops = tuple(
        build_topology(load_system(s)).diameter_hops for s in (spec.baseline, spec.subject)
    )
    verdict: Verdict = "holds" if hops == spec.claimed_hops else "does not hold"
    values = {"baseline_hops": hops[0], "subject_hops": hops[1]}
    return [
        _filled(spec, verdict, EXACT_HOPS, baseline=spec.baseline, subject=spec.subject, **values)
    ]


def latency_cut(spec: LatencyCutClaim, context: ClaimContext) -> list[ClaimRow]:
    """Network-only latency of each op over each whole system
    (:func:`~tpusim.study.claim_runs.latency_cut_values`)."""
    values, verdict, decided_by = latency_cut_values(spec)
    names = {"baseline": spec.baseline, "subject": spec.subject}
    return [_filled(spec, verdict, decided_by, **names, **values)]


def onchip_speedup(spec: OnChipSpeedupClaim, context: ClaimContext) -> list[ClaimRow]:
    """The on-chip time per step of the two engines, and the collective end to end with
    each (each side with its own fastest algorithm)."""
    system = load_system(spec.system)
    base, subj = (OnChipModel.for_chip(system.chip, engine) for engine in spec.engines)
    built = Built.of(system)
    t_base = latency(built, spec.op, spec.bytes, base)[0]
    t_subj = latency(built, spec.op, spec.bytes, subj)[0]
    values = {
        "onchip_ratio": base.step_sync_s / subj.step_sync_s,
        "baseline_us": US_PER_S * t_base,
        "subject_us": US_PER_S * t_subj,
        "ratio": t_base / t_subj,
    }
    return [_filled(spec, spec.verdict, BY_CONSTRUCTION, system=spec.system, **values)]


def sram_capacity(spec: SramCapacityClaim, context: ClaimContext) -> list[ClaimRow]:
    """The two chips' on-chip SRAM, plus the subject's decode steps if simulated."""
    baseline, subject = load_system(spec.baseline), load_system(spec.subject)
    ratio = subject.chip.sram.capacity_bytes / baseline.chip.sram.capacity_bytes
    sram = _row(context.rows, spec.subject, spec.sram_workload, kind="decode_step")
    hbm = _row(context.rows, spec.subject, spec.hbm_workload, kind="decode_step")
    decode = ""
    if sram is not None and hbm is not None:
        decode = spec.decode_figure.format(
            subject=spec.subject,
            hbm_us=figure(hbm, "step_time_s") * US_PER_S,
            sram_us=figure(sram, "step_time_s") * US_PER_S,
        )
    values = {
        "subject_MiB": subject.chip.sram.capacity_bytes / BYTES_PER_MIB,
        "baseline_MiB": baseline.chip.sram.capacity_bytes / BYTES_PER_MIB,
        "ratio": ratio,
        "decode": decode,
    }
    verdict = context.verdict_ratio(ratio, spec.claimed_ratio)
    names = {"baseline": spec.baseline, "subject": spec.subject}
    return [_filled(spec, verdict, EXACT_CAPACITY, **names, **values)]


def _allreduce_busbw(
    rows: Rows, system: System, size_bytes: float, network: NetworkSettings
) -> float:
    """Bus bandwidth (B/s) of an all-reduce of ``size_bytes`` over all of ``system``:
    the run's row, else simulated here on ``network``."""
    row = _row(rows, system.name, kind="collective", op="all-reduce", bytes=size_bytes)
    if row is not None:
        return figure(row, "busbw_Bps")
    options = CollectiveOptions(network=network)
    topology = build_topology(system)
    result, _ = run_collective(
        topology, "all-reduce", size_bytes, options, chip=system.chip, system_name=system.name
    )
    return result.busbw_Bps or 0.0  # None only for a collective that took no time


def ici_bandwidth(spec: IciBandwidthClaim, context: ClaimContext) -> list[ClaimRow]:
    """Configured ICI bandwidth per chip (every port, both directions) and the
    all-reduce bus bandwidth over each whole pod."""
    baseline, subject = load_system(spec.baseline), load_system(spec.subject)
    ici = {
        s.name: s.chip.ici.ports * s.chip.ici.link_bandwidth_Bps * 2 for s in (baseline, subject)
    }
    busbw = {
        s.name: _allreduce_busbw(context.rows, s, spec.bytes, spec.network)
        for s in (baseline, subject)
    }
    values = {
        "subject_ici_GBps": ici[spec.subject] / BYTES_PER_GB,
        "baseline_ici_GBps": ici[spec.baseline] / BYTES_PER_GB,
        "subject_busbw_GBps": busbw[spec.subject] / BYTES_PER_GB,
        "baseline_busbw_GBps": busbw[spec.baseline] / BYTES_PER_GB,
        "ratio": busbw[spec.subject] / busbw[spec.baseline],
        "claimed_ratio": spec.claimed_ratio,
    }
    names = {"baseline": spec.baseline, "subject": spec.subject}
    return [_filled(spec, spec.verdict, BY_CONSTRUCTION, **names, **values)]


def _pod_flops(system: System, dtype: Dtype) -> float:
    """Peak FLOP/s of the whole pod at ``dtype``; ConfigError when its chip has none."""
    try:
        return system.chip.peak_flops[dtype] * system.num_chips
    except KeyError:
        raise ConfigError(f"chip '{system.chip.name}' has no peak_flops for {dtype}") from None


def pod_compute(spec: PodComputeClaim, context: ClaimContext) -> list[ClaimRow]:
    """Peak compute of the two pods, judged at the same dtype (like for like; the mixed
    dtypes' verdict in ``reading``), plus the training steps both ran."""
    baseline, subject = load_system(spec.baseline), load_system(spec.subject)
    mixed_subj = _pod_flops(subject, spec.mixed_dtypes[0])
    mixed_base = _pod_flops(baseline, spec.mixed_dtypes[1])
    mixed = mixed_subj / mixed_base
    same = _pod_flops(subject, spec.same_dtype) / _pod_flops(baseline, spec.same_dtype)
    training = ""
    for workload in spec.training_workloads:
        base_row = _row(context.rows, spec.baseline, workload, kind="training_step")
        subj_row = _row(context.rows, spec.subject, workload, kind="training_step")
        if base_row is not None and subj_row is not None:
            step = figure(subj_row, "tokens_per_s") / figure(base_row, "tokens_per_s")
            training += spec.training_figure.format(workload=workload, step=step)
    verdict = context.verdict_ratio(same, spec.claimed_ratio)
    values = {
        "same_verdict": verdict,
        "mixed_verdict": context.verdict_ratio(mixed, spec.claimed_ratio),
        "subject_mixed_EF": mixed_subj / FLOPS_PER_EFLOPS,
        "baseline_mixed_EF": mixed_base / FLOPS_PER_EFLOPS,
        "mixed": mixed,
        "same": same,
        "training": training,
    }
    names = {"baseline": spec.baseline, "subject": spec.subject}
    return [_filled(spec, verdict, EXACT_PEAKS, **names, **values)]


def perf_per_dollar(spec: PerfPerDollarClaim, context: ClaimContext) -> list[ClaimRow]:
    """Once per serving workload with a capacity on the subject and on the first of
    the baselines the run served on
    (:func:`tpusim.study.claims_serving.serving_perf_per_dollar`)."""
    judged = claims_serving.serving_perf_per_dollar(spec, context.rows, context.file)
    return [_filled(spec, verdict, text, **values) for values, verdict, text in judged]


def training_perf_per_dollar(
    spec: TrainingPerfPerDollarClaim, context: ClaimContext
) -> list[ClaimRow]:
    """Tokens/s per chip of one training step on both pods over their prices
    (:func:`tpusim.study.claims_training.training_perf_per_dollar`)."""
    values, verdict, text = claims_training.training_perf_per_dollar(
        spec, context.rows, context.file
    )
    return [_filled(spec, verdict, text, **values)]


def virgo_scaling(spec: VirgoScalingClaim, context: ClaimContext) -> list[ClaimRow]:
    """Virgo's structural figures and one-pod-to-all scaling efficiency
    (:func:`tpusim.study.claims_training.virgo_scaling`)."""
    values, verdict, text = claims_training.virgo_scaling(spec, context.rows, context.file)
    return [_filled(spec, verdict, text, **values)]


#: The checks by the ``check`` key of a claim (:mod:`tpusim.study.claim_specs`).
CHECKS: Registry[ClaimCheck] = Registry("claim check")
CHECKS.register_all(
    (
        ("diameter", ClaimCheck(diameter)),
        ("latency_cut", ClaimCheck(latency_cut)),
        ("onchip_speedup", ClaimCheck(onchip_speedup)),
        ("sram_capacity", ClaimCheck(sram_capacity)),
        ("ici_bandwidth", ClaimCheck(ici_bandwidth)),
        ("pod_compute", ClaimCheck(pod_compute)),
        ("perf_per_dollar", ClaimCheck(perf_per_dollar)),
        ("training_perf_per_dollar", ClaimCheck(training_perf_per_dollar)),
        ("virgo_scaling", ClaimCheck(virgo_scaling)),
    )
)


def claim_rows(
    rows: Rows | None = None,
    checks: Collection[str] | None = None,
    files: tuple[ClaimsFile, ...] | None = None,
    network: NetworkSettings | None = None,
) -> list[dict[str, str]]:
    """The claims table's rows (:class:`ClaimRow`'s fields) of every
    claim in ``files`` (default: the shipped claims files), or only those whose check
    is in ``checks``; ``rows`` are a scenario run's summary rows to reuse (optional);
    ``network`` replaces the ``network:`` of every claim that simulates on one."""
    out = []
    for file in shipped_claims() if files is None else files:
        context = ClaimContext(rows or [], file)
        for spec in file.claims:
            if checks is None or spec.check in checks:
                if network is not None and "network" in type(spec).model_fields:
                    spec = spec.model_copy(update={"network": network})
                out += [asdict(r) for r in CHECKS.get(spec.check).evaluate(spec, context)]
    return out


def vendor_claims(rows: Rows | None = None, network: NetworkSettings | None = None) -> pd.DataFrame:
    """The claims table of the shipped claims files as a DataFrame (columns: claim,
    source, tpusim, assumptions, verdict, interval, reading), reusing a run's summary
    ``rows`` if given, every simulated figure on ``network`` if given (else each claim's
    own)."""
    return pd.DataFrame(claim_rows(rows, network=network))


def format_claims(frame: pd.DataFrame) -> str:
    """The claims table as text: claim, tpusim's figure, verdict, the interval that
    decided it and (for a claim with several readings) the reading, one block each."""
    return "\n".join(
        f"{i}. {row.claim}\n   tpusim: {row.tpusim}\n   verdict: {row.verdict}"
        f"\n   interval: {row.interval}"
        + (f"\n   reading: {row.reading}" if row.reading else "")
        + f"\n   assuming: {row.assumptions}"
        for i, row in enumerate(frame.itertuples(index=False), start=1)
    )
