"""The vendor claims as data: ``configs/claims/*.yaml``, validated with file:line errors.

A claims file names its claims in table order. Each claim has a ``check`` (what
tpusim computes for it: :mod:`tpusim.study.claims` evaluates each kind), the text of
its row (``claim``, ``source``), the systems and workloads it compares, the claimed
numbers, and templates: ``figure`` (the ``tpusim`` column), ``assumptions`` and, for
a claim that can be read more than one way, ``reading`` (which reading the verdict
judges and the others' verdicts: :mod:`tpusim.study.claim_verdicts`), whose
``{fields}`` the check fills in (each spec class lists its fields in ``FIELDS``; a
template naming another field is refused when the file loads). The
file also holds the ratio margin of "Nx" claims and the prices per chip-hour by chip
(ranges, graded in its ``sources``).
"""

from __future__ import annotations

import string
from functools import cache
from pathlib import Path
from typing import Annotated, ClassVar, Literal

from pydantic import Field, PositiveFloat, PositiveInt, model_validator

from tpusim.config.loader import configs_dir, validate
from tpusim.config.types import Frozen, Source
from tpusim.config.yamlio import load_yaml
from tpusim.errors import ConfigError
from tpusim.network import NetworkSettings, NetworkTree
from tpusim.study.claim_verdicts import Verdict
from tpusim.vocabulary import Dtype, EngineChoice, Op

Price = tuple[PositiveFloat, PositiveFloat]
"""USD per chip-hour, (low, high)."""


def template_fields(template: str) -> set[str]:
    """The field names a ``str.format`` template uses (``{ratio:.2f}`` -> ratio)."""
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


class ClaimSpec(Frozen):
    """What every claim has: its row's ``claim`` and ``source`` text, and the
    ``figure``, ``assumptions`` and ``reading`` templates (module doc; ``reading`` is
    empty for a claim with one reading, and required by the checks of claims with
    several)."""

    #: Fields the check fills in, for every template of the claim.
    FIELDS: ClassVar[frozenset[str]] = frozenset()
    #: Templates of the claim besides figure and assumptions, and the fields of each.
    PARTS: ClassVar[dict[str, frozenset[str]]] = {}

    claim: str
    source: str
    figure: str
    assumptions: str
    reading: str = ""

    @model_validator(mode="after")
    def _known_fields(self) -> ClaimSpec:
        own = {"figure": self.FIELDS, "assumptions": self.FIELDS, "reading": self.FIELDS}
        parts = {**own, **self.PARTS}
        for key, fields in parts.items():
            unknown = sorted(template_fields(getattr(self, key)) - fields)
            if unknown:
                known = ", ".join(sorted(fields)) or "none"
                raise ValueError(f"{key}: unknown field '{unknown[0]}' (choose from {known})")
        return self


class Comparison(ClaimSpec):
    """A claim comparing a ``subject`` system with a ``baseline`` system."""

    baseline: str
    subject: str


class DiameterClaim(Comparison):
    """Network diameters (hops) of the two systems against ``claimed_hops``
    (baseline, subject)."""

    FIELDS: ClassVar[frozenset[str]] = frozenset(
        {"baseline", "subject", "baseline_hops", "subject_hops"}
    )

    check: Literal["diameter"]
    claimed_hops: tuple[PositiveInt, PositiveInt]


class LatencyCutClaim(Comparison):
    """Latency of ``ops`` of ``bytes`` over each whole system (network only, each side
    with its fastest algorithm, analytic fidelity): holds when the largest cut reaches
    ``claimed_cut`` (a fraction of the baseline's latency)."""

    FIELDS: ClassVar[frozenset[str]] = frozenset(
        {"baseline", "subject", "cuts", "structural_cuts", "structural_verdict", "depends"}
    )

    check: Literal["latency_cut"]
    ops: list[Op] = Field(min_length=1)
    bytes: PositiveFloat
    claimed_cut: float = Field(gt=0, lt=1)


class OnChipSpeedupClaim(ClaimSpec):
    """An on-chip collective engine's speed-up: the per-step on-chip time of
    ``engines`` (baseline, subject) on ``system``'s chip, and ``op`` of ``bytes`` over
    the system end to end with each. The speed-up is an input of the
    cost model, so ``verdict`` is stated (one of
    :data:`~tpusim.study.claim_verdicts.VERDICTS`)."""

    FIELDS: ClassVar[frozenset[str]] = frozenset(
        {"system", "onchip_ratio", "baseline_us", "subject_us", "ratio"}
    )

    check: Literal["onchip_speedup"]
    system: str
    op: Op
    engines: tuple[EngineChoice, EngineChoice]
    bytes: PositiveFloat
    verdict: Verdict


class SramCapacityClaim(Comparison):
    """On-chip SRAM of the subject's chip over the baseline's against
    ``claimed_ratio``; with the subject's decode steps with the KV cache in SRAM and in
    HBM (workload label prefixes) in the run, ``decode_figure`` adds them."""

    FIELDS: ClassVar[frozenset[str]] = frozenset(
        {"baseline", "subject", "subject_MiB", "baseline_MiB", "ratio", "decode"}
    )
    PARTS: ClassVar[dict[str, frozenset[str]]] = {
        "decode_figure": frozenset({"subject", "sram_us", "hbm_us"})
    }

    check: Literal["sram_capacity"]
    claimed_ratio: PositiveFloat
    sram_workload: str
    hbm_workload: str
    decode_figure: str


class IciBandwidthClaim(Comparison):
    """Configured ICI bandwidth per chip (every port, both directions) and the bus
    bandwidth of an all-reduce of ``bytes`` over each whole pod (the run's row, else
    simulated here on ``network``, a tree as a scenario's). The subject's link rate is
    derived from the claim, so ``verdict`` is stated (one of
    :data:`~tpusim.study.claim_verdicts.VERDICTS`)."""

    FIELDS: ClassVar[frozenset[str]] = frozenset(
        {
            "baseline",
            "subject",
            "subject_ici_GBps",
            "baseline_ici_GBps",
            "subject_busbw_GBps",
            "baseline_busbw_GBps",
            "ratio",
            "claimed_ratio",
        }
    )

    check: Literal["ici_bandwidth"]
    claimed_ratio: PositiveFloat
    bytes: PositiveFloat
    network: NetworkTree
    verdict: Verdict


class PodComputeClaim(Comparison):
    """Peak compute of the two pods: the subject's ``mixed_dtypes[0]`` against the
    baseline's ``mixed_dtypes[1]``, and both at ``same_dtype``, against
    ``claimed_ratio``: the verdict is the same dtype's (like for like), ``reading``
    states it and the mixed comparison's (``same_verdict``, ``mixed_verdict``).
    ``training_figure`` adds each of ``training_workloads`` both pods ran."""

    FIELDS: ClassVar[frozenset[str]] = frozenset(
        {
            "baseline",
            "subject",
            "subject_mixed_EF",
            "baseline_mixed_EF",
            "mixed",
            "same",
            "training",
            "mixed_verdict",
            "same_verdict",
        }
    )
    PARTS: ClassVar[dict[str, frozenset[str]]] = {
        "training_figure": frozenset({"workload", "step"})
    }

    check: Literal["pod_compute"]
    claimed_ratio: PositiveFloat
    mixed_dtypes: tuple[Dtype, Dtype]
    same_dtype: Dtype
    training_workloads: list[str]
    training_figure: str
    reading: str


class PerfPerDollarClaim(ClaimSpec):
    """Serving performance per dollar of ``subject`` over the first of ``baselines``
    the run served on, once per serving workload with a capacity on both
    (:func:`tpusim.serving.perf_per_dollar.inference_perf_per_dollar`; prices from the file's
    ``prices_usd_per_chip_hour`` by chip); the verdict over the price ranges
    (:func:`~tpusim.study.claim_verdicts.price_range_verdict`), ``reading`` with the
    price ratio that would decide it (``deciding_price_ratio``,
    ``deciding_price_range``)."""

    FIELDS: ClassVar[frozenset[str]] = frozenset(
        {
            "workload",
            "subject",
            "baseline",
            "subject_perf",
            "baseline_perf",
            "perf_ratio",
            "breakeven_price_ratio",
            "advantage_best",
            "advantage_mid",
            "advantage_worst",
            "subject_price_low",
            "subject_price_high",
            "baseline_price_low",
            "baseline_price_high",
            "price_ratio_best",
            "price_ratio_worst",
            "deciding_price_ratio",
            "deciding_price_low",
            "deciding_price_high",
            "deciding_price_range",
        }
    )

    check: Literal["perf_per_dollar"]
    subject: str
    baselines: list[str] = Field(min_length=1)
    claimed_ratio: PositiveFloat
    reading: str


class TrainingClaim(ClaimSpec):
    """A claim read from a training step: ``workload`` (the ``training_step`` fields,
    with ``name``; a mesh axis may be ``auto``) is the run's row of that name when the
    run has one, else simulated on ``network`` (a tree as a scenario's; default the
    default network; :mod:`tpusim.study.claims_training`)."""

    workload: dict[str, object]
    network: NetworkTree = Field(default_factory=NetworkSettings)

    @model_validator(mode="after")
    def _named_workload(self) -> TrainingClaim:
        for key in ("name", "model", "mesh"):
            if key not in self.workload:
                raise ValueError(f"workload: needs '{key}'")
        return self


class TrainingPerfPerDollarClaim(TrainingClaim):
    """Training performance per dollar of ``subject`` over ``baseline``: tokens/s per
    chip of ``workload`` on each over the file's prices per chip-hour, against
    ``claimed_ratio``; the break-even price is the subject's price at which it holds.
    The verdict over the price ranges as :class:`PerfPerDollarClaim`'s."""

    FIELDS: ClassVar[frozenset[str]] = frozenset(
        {
            "workload",
            "subject",
            "baseline",
            "source",
            "subject_tokens_per_s",
            "baseline_tokens_per_s",
            "subject_tokens_per_chip_hour",
            "baseline_tokens_per_chip_hour",
            "perf_ratio",
            "breakeven_price_ratio",
            "breakeven_price_low",
            "breakeven_price_high",
            "price_ratio_best",
            "price_ratio_mid",
            "price_ratio_worst",
            "advantage_best",
            "advantage_mid",
            "advantage_worst",
            "subject_price_low",
            "subject_price_high",
            "baseline_price_low",
            "baseline_price_high",
            "deciding_price_ratio",
            "deciding_price_low",
            "deciding_price_high",
            "deciding_price_range",
        }
    )

    check: Literal["training_perf_per_dollar"]
    subject: str
    baseline: str
    claimed_ratio: PositiveFloat
    reading: str


class VirgoScalingClaim(TrainingClaim):
    """A multi-pod ``system`` of ``pod``s: its chips, bisection bandwidth (Pb/s, one
    direction and both) and peak FLOP/s at ``flops_dtype`` (EF) against the claimed
    figures, and the scaling efficiency of ``workload`` from one pod to all of them
    against ``claimed_efficiency`` (a fraction). The bisection is judged counted both
    directions (``bisection_verdict``; one direction: ``bisection_one_way_verdict``),
    the row by its weakest part; ``reading`` says so."""

    FIELDS: ClassVar[frozenset[str]] = frozenset(
        {
            "system",
            "pod",
            "pods",
            "chips",
            "bisection_Pbps",
            "bisection_both_Pbps",
            "pod_EF",
            "flops_dtype",
            "workload",
            "step_s",
            "allreduce_ms",
            "efficiency",
            "source",
            "chips_verdict",
            "bisection_verdict",
            "flops_verdict",
            "scaling_verdict",
            "bisection_one_way_verdict",
        }
    )

    check: Literal["virgo_scaling"]
    system: str
    pod: str
    claimed_chips: PositiveInt
    claimed_bisection_Pbps: PositiveFloat
    claimed_EF: PositiveFloat
    flops_dtype: Dtype
    claimed_efficiency: float = Field(gt=0, le=1)
    reading: str


Claim = Annotated[
    DiameterClaim
    | LatencyCutClaim
    | OnChipSpeedupClaim
    | SramCapacityClaim
    | IciBandwidthClaim
    | PodComputeClaim
    | PerfPerDollarClaim
    | TrainingPerfPerDollarClaim
    | VirgoScalingClaim,
    Field(discriminator="check"),
]


class ClaimsFile(Frozen):
    """One ``configs/claims/*.yaml`` file (module doc)."""

    name: str
    description: str = ""
    ratio_margin: float = Field(gt=0, le=1)
    prices_usd_per_chip_hour: dict[str, Price] = Field(default_factory=dict)
    claims: list[Claim]
    sources: dict[str, Source] = Field(default_factory=dict)

    def price(self, chip: str) -> Price:
        """The price range of ``chip``; raises ConfigError when the file has none."""
        try:
            return self.prices_usd_per_chip_hour[chip]
        except KeyError:
            raise ConfigError(f"claims file '{self.name}' has no price for chip '{chip}'") from None


def load_claims_file(path: str | Path) -> ClaimsFile:
    """A claims file, validated; raises ConfigError naming the file, line and key."""
    data, lines = load_yaml(path)
    claims = validate(ClaimsFile, data, str(path), lines)
    for key in claims.sources:
        if key not in data:
            raise ConfigError(
                f"names '{key}', which is not a value in this file",
                file=str(path),
                path=f"sources.{key}",
                line=lines.get(("sources", key)),
            )
    return claims


@cache
def shipped_claims() -> tuple[ClaimsFile, ...]:
    """Every shipped claims file (``configs/claims/*.yaml``), in file-name order."""
    folder = configs_dir() / "claims"
    return tuple(load_claims_file(path) for path in sorted(folder.glob("*.yaml")))
