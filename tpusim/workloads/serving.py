"""``kind: serving``: an LLM inference service on the system (:mod:`tpusim.serving`),
at a request rate or, with ``find_capacity``, its capacity at an SLO."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from types import SimpleNamespace
from typing import Any, Literal

from pydantic import Field, PositiveFloat, PositiveInt, model_validator

from tpusim.config.types import Time
from tpusim.errors import InputError
from tpusim.results.records import Figure, Record
from tpusim.vocabulary import Dtype
from tpusim.workloads.registry import Outcome, WorkloadContext, WorkloadKind
from tpusim.workloads.spec import WorkloadSpec

#: Joules per megajoule (display).
J_PER_MJ = 1e6


class ServingWorkload(WorkloadSpec):
    """The ``tpusim serve`` options as fields (see ``tpusim serve --help``); SLO times
    with units (``2 s``, ``50 ms``)."""

    kind: Literal["serving"]
    name: str
    model: str
    tp: PositiveInt | None = None
    ep: PositiveInt | None = None
    chips: PositiveInt | None = None
    replicas: PositiveInt = 1
    dtype: Dtype = "bf16"
    kv_cache: Literal["hbm", "sram", "tiered"] = "hbm"
    rate: PositiveFloat = Field(1.0, description="requests/s; .inf: every request at once")
    concurrency: PositiveInt | None = Field(None, description="closed loop of N clients")
    arrival: Literal["poisson", "gamma"] = "poisson"
    burstiness: PositiveFloat = 1.0
    requests: PositiveInt = 1000
    prompt_tokens: int | str | dict[str, Any] = 1024
    output_tokens: int | str | dict[str, Any] = 256
    seed: int = 0
    block_size: PositiveInt = 16
    max_tokens: PositiveInt = 8192
    max_sequences: PositiveInt = 256
    disaggregate: str | None = Field(None, description="P:D prefill and decode replicas")
    async_scheduling: bool = True
    overheads: bool = True
    prefix_tokens: int = Field(0, description="shared prompt prefix in the prefix cache")
    prefix_hit_rate: float = Field(0.0, description="fraction of requests sharing it")
    draft_tokens: int = Field(0, description="speculative decoding: drafts per iteration")
    acceptance: float = Field(0.0, description="speculative decoding: acceptance rate")
    expert_imbalance: float = Field(1.0, description="MoE: busiest rank's load over the mean")
    find_capacity: bool = False
    slo_ttft: Time | None = None
    slo_tpot: Time | None = None
    trace: str | None = Field(None, description="CSV of arrival_s,prompt_tokens,output_tokens")

    @model_validator(mode="after")
    def _capacity_needs_slo(self) -> ServingWorkload:
        if self.find_capacity and (self.slo_ttft is None or self.slo_tpot is None):
            raise ValueError("find_capacity needs slo_ttft and slo_tpot")
        if self.find_capacity and self.trace:
            raise ValueError("find_capacity varies the rate; it takes no trace")
        if self.concurrency and (self.find_capacity or self.disaggregate):
            raise ValueError(
                "concurrency runs a closed loop; it takes no find_capacity or disaggregate"
            )
        if self.disaggregate and self.replicas != 1:
            raise ValueError("disaggregate P:D sets the replicas; drop replicas")
        return self


@dataclass(frozen=True, kw_only=True)
class ServingRecord(Record):
    """One serving run: the ``tpusim serve --json`` figures (None where not measured)."""

    model: str
    chips: int
    chips_per_replica: int
    tp: int
    ep: int
    rate_per_s: float | None = None
    requests: int = 0
    completed: int = 0
    rejected: int = 0
    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None
    tpot_p50_s: float | None = None
    tpot_p99_s: float | None = None
    e2e_p50_s: float | None = None
    e2e_p99_s: float | None = None
    output_tokens_per_s: float | None = None
    tokens_per_s_per_chip: float | None = None
    kv_cache_capacity_tokens: int = 0
    preemptions: int = 0
    capacity_rate_per_s: float | None = None
    capacity_rate_per_s_per_chip: float | None = None
    energy_per_million_tokens_J: float | None = None
    cost_per_million_tokens_usd: float | None = None
    #: The capacity search's trials, (rate per s, p99 TTFT s, p99 TPOT s) by rate:
    #: drawn as the serving curve (``serving-<workload>.png``), not a table column.
    curve: tuple[tuple[float, float | None, float | None], ...] = ()

    @classmethod
    def of(cls, row: dict[str, Any], **values: Any) -> ServingRecord:
        names = {f.name for f in fields(cls)} - set(values)
        known: dict[str, Any] = {k: row[k] for k in names if k in row}
        known["curve"] = tuple(tuple(p) for p in known.get("curve", ()))
        return cls(**values, **known)

    def row(self) -> dict[str, Any]:
        """The columns (the curve is a figure, not a column)."""
        return {k: v for k, v in super().row().items() if k != "curve"}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Record:
        return cls(**{f.name: row[f.name] for f in fields(cls) if f.name != "curve"})

    def figures(self) -> list[Figure]:
        out: list[Figure] = [
            (f"{self.workload}: TTFT p99 (s)", self.ttft_p99_s),
            (f"{self.workload}: TPOT p99 (ms)", _ms(self.tpot_p99_s)),
            (f"{self.workload}: output tokens/s per chip", self.tokens_per_s_per_chip),
        ]
        if self.capacity_rate_per_s_per_chip is not None:
            out.append(
                (f"{self.workload}: capacity (req/s per chip)", self.capacity_rate_per_s_per_chip)
            )
        return out


def _ms(x: float | None) -> float | None:
    return None if x is None else x * 1e3


def deployment_of(spec: ServingWorkload, context: WorkloadContext) -> Any:
    """The workload's :class:`~tpusim.serving.service.Deployment` on the context's system."""
    from tpusim.serving.service import Deployment

    return Deployment(
        system=context.system, model=spec.model, tp=spec.tp, ep=spec.ep, chips=spec.chips,
        replicas=spec.replicas, dtype=spec.dtype, kv_cache=spec.kv_cache,
        block_size=spec.block_size, max_tokens=spec.max_tokens, max_sequences=spec.max_sequences,
        fidelity=context.fidelity, flow_tolerance=context.flow_tolerance,
        overheads=spec.overheads, async_scheduling=spec.async_scheduling,
        prefix_tokens=spec.prefix_tokens, draft_tokens=spec.draft_tokens,
        acceptance=spec.acceptance, expert_imbalance=spec.expert_imbalance,
    )  # fmt: skip


def options_of(spec: ServingWorkload, context: WorkloadContext) -> SimpleNamespace:
    """The workload as the ``tpusim serve`` flags :func:`tpusim.serving.run.serve` reads.
    Raises InputError for a bad ``disaggregate``."""
    from tpusim.cli.serve import split_flag

    return SimpleNamespace(
        **spec.model_dump(include={"requests", "seed", "arrival", "burstiness", "trace"}),
        rate=None if spec.trace else spec.rate, find_capacity=spec.find_capacity,
        prompt_tokens=_tokens(spec.prompt_tokens), output_tokens=_tokens(spec.output_tokens),
        slo_ttft=spec.slo_ttft, slo_tpot=spec.slo_tpot, concurrency=spec.concurrency,
        prefix_hit_rate=spec.prefix_hit_rate,
        disaggregate=split_flag(spec.disaggregate) if spec.disaggregate else None,
        power_per_chip=context.power_per_chip_W,
        price_per_chip_hour=context.price_per_chip_hour_usd,
    )  # fmt: skip


def run(spec: ServingWorkload, context: WorkloadContext) -> Outcome:
    """Serve on the context's system; a bad deployment is a ConfigError at the workload."""
    from tpusim.serving.run import serve

    try:
        row = serve(options_of(spec, context), deployment_of(spec, context))
    except InputError as exc:
        raise context.error(field_names(str(exc))) from None
    record = ServingRecord.of(
        row, system=context.system.name, workload=context.label, kind="serving"
    )
    return Outcome(record)


#: ``tpusim serve`` flags whose workload field is not the flag's name with underscores.
FLAG_FIELDS = {"acceptance_rate": "acceptance", "max_seqs": "max_sequences"}


def field_names(message: str) -> str:
    """``message`` with the ``tpusim serve`` flags it names (``--prompt-tokens``) as the
    workload's fields (``prompt_tokens``)."""
    import re

    def field(match: re.Match[str]) -> str:
        name = match.group(1).replace("-", "_")
        return FLAG_FIELDS.get(name, name)

    return re.sub(r"--([a-z][a-z-]*)", field, message)


def _tokens(value: int | str | dict[str, Any]) -> str:
    """A token count as the CLI flag's text (a YAML mapping stays YAML)."""
    import yaml

    return (
        yaml.safe_dump(value, default_flow_style=True).strip()
        if isinstance(value, dict)
        else str(value)
    )


def check(spec: ServingWorkload, context: WorkloadContext) -> None:
    """Fit the deployment and check the stream without serving (``tpusim check`` and
    before ``tpusim run``): a model the chips cannot hold, a degree that does not
    divide its heads or experts, more replicas than chips, a bad token count, seed,
    burstiness or request count, a prompt longer than the context or the cache, a
    ConfigError at the workload."""
    from tpusim.serving.run import check_options

    try:
        check_options(options_of(spec, context), deployment_of(spec, context))
    except InputError as exc:
        raise context.error(field_names(str(exc))) from None


KIND = WorkloadKind(ServingWorkload, run, record=ServingRecord, check=check)
