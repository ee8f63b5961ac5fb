"""``kind: serving``: an LLM inference service on the system (:mod:`tpusim.serving`),
at a request rate or, with ``find_capacity``, its capacity at an SLO."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, ClassVar, Literal

from tpusim.config.uncertainty import Kind
from tpusim.config.yamlio import format_path, line_of
from tpusim.errors import ConfigError, InputError
from tpusim.results.records import Figure, Record, Row
from tpusim.serving.option_error import OptionError
from tpusim.serving.options import ServeOptions, ServeSpec, with_environment
from tpusim.serving.run import check_options, serve_run
from tpusim.workloads.registry import Outcome, WorkloadContext, WorkloadKind
from tpusim.workloads.spec import WorkloadSpec

if TYPE_CHECKING:
    from tpusim.serving.replica import IterationRecord

#: Joules per megajoule (display).
J_PER_MJ = 1e6
#: The record's fields that are figures, not ``summary.csv`` columns.
NOT_COLUMNS = ("curve", "iterations")


class ServingWorkload(WorkloadSpec, ServeSpec):
    """The serving run's choices (:class:`~tpusim.serving.options.ServeSpec`: the
    ``tpusim serve`` options, by field name) as the workload's keys; SLO times with
    units (``2 s``, ``50 ms``). The network fidelity and the economics come from the
    scenario and its system."""

    kind: Literal["serving"]
    name: str


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
    slo_ttft_s: float | None = None
    slo_tpot_s: float | None = None
    energy_per_million_tokens_J: float | None = None
    cost_per_million_tokens_usd: float | None = None
    #: The capacity search's trials, (rate per s, p99 TTFT s, p99 TPOT s, p50 TTFT s,
    #: p50 TPOT s) by rate: drawn as the serving figure (``serving-<workload>.png``),
    #: not a table column.
    curve: tuple[tuple[float | None, ...], ...] = ()
    #: Each replica's iterations (:class:`~tpusim.serving.service.IterationRecord`, a
    #: tuple per replica): drawn as ``serving_trace.json``, not a table column; empty
    #: for the capacity search.
    iterations: tuple[tuple[IterationRecord, ...], ...] = ()

    #: The serving kinds of :mod:`tpusim.config.uncertainty` (written by the serving
    #: cross-validation, ``validate --serving --cv chip --write-uncertainty``).
    interval_columns: ClassVar[Mapping[str, tuple[Kind, bool]]] = {
        "ttft_p50_s": ("serving_ttft", False),
        "ttft_p99_s": ("serving_ttft", False),
        "tpot_p50_s": ("serving_tpot", False),
        "tpot_p99_s": ("serving_tpot", False),
        "output_tokens_per_s": ("serving_throughput", True),
        "tokens_per_s_per_chip": ("serving_throughput", True),
        "capacity_rate_per_s": ("serving_throughput", True),
        "capacity_rate_per_s_per_chip": ("serving_throughput", True),
    }
    figure_columns: ClassVar[Mapping[str, str]] = {
        ": TTFT p99 (s)": "ttft_p99_s",
        ": TPOT p99 (ms)": "tpot_p99_s",
        ": output tokens/s per chip": "tokens_per_s_per_chip",
        ": capacity (req/s per chip)": "capacity_rate_per_s_per_chip",
    }

    @classmethod
    def of(
        cls,
        row: Row,
        *,
        system: str,
        workload: str,
        kind: str,
        iterations: tuple[tuple[IterationRecord, ...], ...],
    ) -> ServingRecord:
        """From a serving run's row, on ``system`` for ``workload`` of ``kind``, with
        each replica's ``iterations``."""
        given = {"system", "workload", "kind", "iterations"}
        known = {f.name: row[f.name] for f in fields(cls) if f.name in row and f.name not in given}
        known["curve"] = tuple(tuple(p) for p in known.get("curve", ()))
        return cls(system=system, workload=workload, kind=kind, iterations=iterations, **known)

    def row(self) -> dict[str, object]:
        """The columns (the curve and the iterations are figures, not columns)."""
        return {k: v for k, v in super().row().items() if k not in NOT_COLUMNS}

    @classmethod
    def from_row(cls, row: Row) -> Record:
        return cls(**{f.name: row[f.name] for f in fields(cls) if f.name not in NOT_COLUMNS})

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


def options_of(spec: ServingWorkload, context: WorkloadContext) -> ServeOptions:
    """The workload's options with the context's network settings (whole) and
    economics."""
    return with_environment(
        spec,
        network=context.network,
        power_per_chip_W=context.power_per_chip_W,
        price_per_chip_hour_usd=context.price_per_chip_hour_usd,
    )


def run(spec: ServingWorkload, context: WorkloadContext) -> Outcome:
    """Serve on the context's system; bad input is a ConfigError at the workload (at
    the key of the option to blame)."""

    try:
        row, served = serve_run(options_of(spec, context), context.system)
    except InputError as exc:
        raise at_workload(exc, context) from None
    iterations = () if served is None else tuple(tuple(r.batches) for r in served.replicas)
    record = ServingRecord.of(
        row,
        system=context.system.name,
        workload=context.label,
        kind="serving",
        iterations=iterations,
    )
    return Outcome(record)


def at_workload(exc: InputError, context: WorkloadContext) -> ConfigError:
    """``exc`` as a ConfigError at the workload, or at the key of the option an
    :class:`~tpusim.serving.option_error.OptionError` blames (its line when written,
    else the workload's)."""
    if not isinstance(exc, OptionError):
        return context.error(str(exc))
    path = (*context.path, exc.fields[0])
    where = format_path(path)
    if len(exc.fields) > 1:
        where += "".join(f" + {field}" for field in exc.fields[1:])
    line = line_of(context.lines, path)
    return ConfigError(exc.problem, file=context.file, path=where, line=line)


def check(spec: ServingWorkload, context: WorkloadContext) -> None:
    """Fit the deployment and check the stream without serving (``tpusim check`` and
    before ``tpusim run``): a model the chips cannot hold, a degree that does not
    divide its heads or experts, more replicas than chips, a bad token count, seed,
    burstiness or request count, a prompt longer than the context or the cache, a
    ConfigError at the workload."""

    try:
        check_options(options_of(spec, context), context.system)
    except InputError as exc:
        raise at_workload(exc, context) from None


KIND = WorkloadKind(ServingWorkload, run, record=ServingRecord, check=check)
