"""Typed records of a scenario run: one per system x workload point.

Each record's :meth:`~Record.row` gives its ``summary.csv`` columns (and the rows of
``tpusim run --json``) in a fixed order: ``system``, ``workload`` (the label, with the
sweep point), ``kind``, then its own fields. A record also names its figures for the
comparison table (:meth:`~Record.figures`, and :meth:`~Record.sweep_figures` for
figures that summarise several records, such as a collective's size sweep).

=========================  ==========================================================
record                     columns after system, workload, kind
=========================  ==========================================================
:class:`TopologyRecord`    the ``tpusim topo`` figures that are numbers or names
:class:`CollectiveRecord`  the ``tpusim collective`` record, then ``step_time_s``
:class:`ProgramRecord`     the simulation summary (``step_time_s``, ``mfu``...), then
                           the :class:`Economics` columns that are known
:class:`DecodeRecord`      a program's, with ``per_token_latency_s`` before economics
:class:`TrainingRecord`    a program's, with ``peak_hbm_bytes_per_chip`` (and
                           ``pipeline_bubble_fraction`` when pipelined) before economics,
                           ``exposed_<kind>_s`` and ``hidden_<kind>_s`` after it
=========================  ==========================================================

Mean hop counts are named by what they average: ``mean_pair_hops`` (topology rows)
over every ordered pair of distinct chips of the topology; ``mean_flow_hops``
(collective and program rows) over the flows the run sent, each flow's route length
(``tpusim topo`` and ``tpusim collective`` call both ``mean_hops``).

A scenario's rows read back as records (:func:`tpusim.workloads.record_from_row`).
:class:`Economics` is defined in :mod:`tpusim.results.economics` (re-exported here).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar

from tpusim.config.uncertainty import Kind
from tpusim.results.economics import SECONDS_PER_HOUR, TOKENS_PER_MILLION, Economics
from tpusim.results.fault_columns import FaultColumns, columns_from_row, fault_columns
from tpusim.results.intervals import interval_columns
from tpusim.results.overlap import breakdown_columns
from tpusim.results.simulation import CollectiveResult
from tpusim.results.topology_summary import pod_totals, topology_summary
from tpusim.units import format_bytes

if TYPE_CHECKING:
    from tpusim.config.loader import System
    from tpusim.topology import Topology

Figure = tuple[str, float | None]  # (comparison-table row name with its unit, value)

Row = Mapping[str, Any]
"""A record's row as ``summary.csv`` or the JSON output holds it (column -> value of
whatever type the column has; :meth:`Record.from_row` reads it back)."""


def base_name(label: str) -> str:
    """A workload label without its sweep point: ``ar[bytes=1 MiB]`` -> ``ar``."""
    return label.split("[", 1)[0]


@dataclass(frozen=True, kw_only=True)
class Record:
    """What one workload point produced on one system."""

    system: str
    workload: str
    kind: str

    #: The columns a cost model produced: column -> (kind of figure, whether a rate,
    #: 1 / time); each gets an 80% interval (:mod:`tpusim.results.intervals`). Exact
    #: figures (hops, bytes, chips) are not listed.
    interval_columns: ClassVar[Mapping[str, tuple[Kind, bool]]] = {}
    #: Comparison-table figures from a cost model: a phrase of the figure's name ->
    #: the :attr:`interval_columns` entry whose interval it takes (scaled;
    #: :func:`tpusim.results.intervals.figure_kind`).
    figure_columns: ClassVar[Mapping[str, str]] = {}

    def row(self) -> dict[str, Any]:
        """The record's columns, in field order."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def interval_row(self, chip: str | None = None) -> dict[str, Any]:
        """:meth:`row` with ``x_lo``, ``x_hi`` per :attr:`interval_columns` entry and
        ``interval_basis`` (the ``summary.csv`` row), ``chip`` the system's chip."""
        row = self.row()
        return row | interval_columns(row, self.interval_columns, chip)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Record:
        """The record back from its :meth:`row` (a ``summary.csv`` or JSON row)."""
        return cls(**{f.name: row[f.name] for f in fields(cls)})

    def figures(self) -> list[Figure]:
        """Comparison-table figures of this record alone (none by default)."""
        return []

    @classmethod
    def sweep_figures(cls, records: Sequence[Record]) -> list[tuple[str, str, float]]:
        """(figure, system, value) summarising several records of this type (none by
        default); the comparison table lists them after every per-record figure."""
        return []


@dataclass(frozen=True, kw_only=True)
class TopologyRecord(Record):
    """A system's topology metrics (see :func:`topology_summary` for the units)."""

    topology: str
    chip: str
    chips: int
    links: int
    diameter_hops: int
    mean_pair_hops: float
    bisection_bandwidth_Bps: float
    link_bandwidth_Bps: float
    hop_latency_s: float
    hbm_capacity_bytes: float
    sram_capacity_bytes: float

    @classmethod
    def of(cls, system: System, topology: Topology, workload: str) -> TopologyRecord:
        summary = topology_summary(system, topology)
        summary["mean_pair_hops"] = summary["mean_hops"]
        names = [f.name for f in fields(cls)]
        return cls(
            workload=workload, kind="topology", **{k: v for k, v in summary.items() if k in names}
        )

    def figures(self) -> list[Figure]:
        return [
            ("chips", self.chips),
            ("diameter (hops)", self.diameter_hops),
            ("mean hops", self.mean_pair_hops),
            ("bisection (TB/s, one direction)", self.bisection_bandwidth_Bps / 1e12),
        ]


@dataclass(frozen=True, kw_only=True)
class CollectiveRecord(Record):
    """One collective: its :class:`~tpusim.results.simulation.CollectiveResult` (the
    ``system`` too) and its columns (as :mod:`tpusim.results.tables` documents, with
    ``mean_hops`` as ``mean_flow_hops``), then ``step_time_s`` (= ``time_s``, so every
    row has a step time), then ``faults``' columns."""

    system: str = field(init=False)
    kind: str = field(init=False, default="collective")
    result: CollectiveResult
    #: With faults or a routing policy only: :mod:`tpusim.results.fault_columns`.
    faults: FaultColumns = field(default_factory=lambda: FaultColumns())

    interval_columns: ClassVar[Mapping[str, tuple[Kind, bool]]] = {
        "time_s": ("collective_time", False),
        "algbw_Bps": ("collective_time", True),
        "busbw_Bps": ("collective_time", True),
        "step_time_s": ("collective_time", False),
    }
    figure_columns: ClassVar[Mapping[str, str]] = {
        ": time (us)": "time_s",
        ": busbw (GB/s)": "busbw_Bps",
    }

    #: The result's fields under their column names where these differ.
    _COLUMN_OF: ClassVar[dict[str, str]] = {"mean_hops": "mean_flow_hops"}

    def __post_init__(self) -> None:
        object.__setattr__(self, "system", self.result.system)

    @classmethod
    def of(
        cls, result: CollectiveResult, workload: str, report: Mapping[str, Any] | None = None
    ) -> CollectiveRecord:
        """From a collective's result (and the network's ``fault_report``, when the run
        had faults or a routing policy)."""
        return cls(workload=workload, result=result, faults=fault_columns(report))

    def row(self) -> dict[str, Any]:
        head = {f.name: getattr(self, f.name) for f in fields(Record)}
        values = self.result.record()
        del values["system"]
        own = {self._COLUMN_OF.get(k, k): v for k, v in values.items()}
        return head | own | {"step_time_s": self.result.time_s} | self.faults

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Record:
        names = [f.name for f in fields(CollectiveResult)]
        result = CollectiveResult(**{k: row[cls._COLUMN_OF.get(k, k)] for k in names})
        return cls(workload=row["workload"], result=result, faults=columns_from_row(row))

    @classmethod
    def sweep_figures(cls, records: Sequence[Record]) -> list[tuple[str, str, float]]:
        """Per workload and system: the time at the smallest size (when the sweep has
        more than one) and the bus bandwidth at the largest."""
        runs: dict[tuple[str, str], list[CollectiveResult]] = {}
        for record in records:
            if isinstance(record, CollectiveRecord):
                key = (base_name(record.workload), record.system)
                runs.setdefault(key, []).append(record.result)
        out = []
        for (name, system), group in runs.items():
            small = min(group, key=lambda r: r.bytes)
            large = max(group, key=lambda r: r.bytes)
            if small is not large:
                time_us = small.time_s * 1e6
                out.append((f"{name} {format_bytes(small.bytes)}: time (us)", system, time_us))
            if large.busbw_Bps is None:  # took no time: no bandwidth to compare
                continue
            busbw_GBps = large.busbw_Bps / 1e9
            out.append((f"{name} {format_bytes(large.bytes)}: busbw (GB/s)", system, busbw_GBps))
        return out


def _program_columns(kind: Kind) -> dict[str, tuple[Kind, bool]]:
    """A program's cost-model columns: times (and energy, cost) and rates of ``kind``."""
    times = ("step_time_s", "energy_per_step_J", "energy_per_token_J", "cost_per_step_usd")
    rates = ("mfu", "tokens_per_s", "tokens_per_s_per_chip")
    return {c: (kind, c in rates) for c in (*times, "cost_per_million_tokens_usd", *rates)}


@dataclass(frozen=True, kw_only=True)
class ProgramRecord(Record):
    """One simulated program (a training step, an inline program, an HLO replay): the
    simulation's summary (times in s, ``flops_per_chip`` in FLOPs, ``mfu`` a fraction)
    and the step's economics."""

    fidelity: str
    chips: int
    step_time_s: float
    compute_time_s: float
    communication_time_s: float
    communication_busy_time_s: float
    exposed_communication_time_s: float
    flops_per_chip: float
    mfu: float
    max_hops: int
    mean_flow_hops: float
    max_link_utilization: float
    mean_link_utilization: float
    busiest_link_bytes: float
    economics: Economics
    #: Set when the program is part of a model: "fragment: 2 of 80 layers" (its token
    #: figures are the fragment's, so they say so); None for a whole model or program.
    fragment: str | None = None

    interval_columns: ClassVar[Mapping[str, tuple[Kind, bool]]] = _program_columns(
        "training_step_time"
    )
    figure_columns: ClassVar[Mapping[str, str]] = {
        ": step time (ms)": "step_time_s",
        ": MFU (%)": "mfu",
        ": tokens/s per chip": "tokens_per_s_per_chip",
        ": energy per token": "energy_per_token_J",
        ": cost per 1M tokens": "cost_per_million_tokens_usd",
    }

    #: Fields that are not a summary column of the simulation.
    _NOT_SUMMARY: ClassVar[tuple[str, ...]] = (
        "workload",
        "kind",
        "chips",
        "economics",
        "fragment",
    )

    @classmethod
    def of(
        cls, summary: Mapping[str, Any], *, economics: Economics, **values: Any
    ) -> ProgramRecord:
        """From :meth:`Results.summary() <tpusim.engine.Results.summary>` and the values
        the summary does not give (``workload``, ``kind``, ``chips``...)."""
        names = [f.name for f in fields(cls) if f.name not in (*cls._NOT_SUMMARY, *values)]
        summary = {**summary, "mean_flow_hops": summary["mean_hops"]}
        return cls(economics=economics, **values, **{k: summary[k] for k in names})

    def row(self) -> dict[str, Any]:
        own = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "economics"}
        return own | self.economics.row()

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Record:
        known: dict[str, Any] = {f.name: row.get(f.name) for f in fields(Economics)}
        economics = Economics(**known)
        names = [f.name for f in fields(cls) if f.name not in ("economics", "fragment")]
        fragment = row.get("fragment")
        return cls(
            economics=economics,
            fragment=fragment if isinstance(fragment, str) and fragment else None,
            **{k: row[k] for k in names},
        )

    def figures(self) -> list[Figure]:
        label, money = self.workload, self.economics
        scope = f" ({self.fragment})" if self.fragment else ""
        return [
            *self.time_figures(),
            (f"{label}: tokens/s per chip{scope}", money.tokens_per_s_per_chip),
            (
                f"{label}: energy per token{scope} (mJ)",
                _scaled(money.energy_per_token_J, 1e3),
            ),
            (f"{label}: mean power per chip (W)", money.power_per_chip_W),
            (
                f"{label}: cost per 1M tokens{scope} (USD)",
                money.cost_per_million_tokens_usd,
            ),
        ]

    def time_figures(self) -> list[Figure]:
        """Step time and exposed communication (ms), MFU (%)."""
        label = self.workload
        return [
            (f"{label}: step time (ms)", self.step_time_s * 1e3),
            (f"{label}: exposed communication (ms)", self.exposed_communication_time_s * 1e3),
            (f"{label}: MFU (%)", 100 * self.mfu),
        ]


@dataclass(frozen=True, kw_only=True)
class DecodeRecord(ProgramRecord):
    """One decode step: every sequence of the batch gains one token, so the step time
    is also the latency per token (s)."""

    per_token_latency_s: float

    #: A decode step's time is a time per output token: the serving TPOT residuals.
    interval_columns: ClassVar[Mapping[str, tuple[Kind, bool]]] = {
        **_program_columns("serving_tpot"),
        "per_token_latency_s": ("serving_tpot", False),
    }
    figure_columns: ClassVar[Mapping[str, str]] = {
        **ProgramRecord.figure_columns,
        ": per-token latency (us)": "per_token_latency_s",
    }

    def time_figures(self) -> list[Figure]:
        return [(f"{self.workload}: per-token latency (us)", self.step_time_s * 1e6)]


@dataclass(frozen=True, kw_only=True)
class TrainingRecord(ProgramRecord):
    """One training step: a program's columns, ``peak_hbm_bytes_per_chip`` (the peak
    stage's weights, optimiser state, gradients, activations and buffers, bytes), for a
    pipelined step ``pipeline_bubble_fraction`` (the share of the loop's ``m v + p - 1``
    iterations in which a stage has no microbatch: ``(p - 1) / (m v + p - 1)``; else
    None), ``communication``: exposed/hidden columns (:mod:`tpusim.results.overlap`)."""

    peak_hbm_bytes_per_chip: float | None = None
    pipeline_bubble_fraction: float | None = None
    communication: dict[str, float] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        """A program's columns (a bubble only when pipelined), then ``communication``'s."""
        row = super().row()
        if self.pipeline_bubble_fraction is None:
            row.pop("pipeline_bubble_fraction")
        return row | row.pop("communication")

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Record:
        """The row's record (a :class:`ProgramRecord` for a row without training columns)."""
        comm_columns = breakdown_columns()
        extra = ("peak_hbm_bytes_per_chip", "pipeline_bubble_fraction", *comm_columns)
        values: dict[str, Any] = {k: _number_or_none(row.get(k)) for k in extra}
        base = ProgramRecord.from_row({k: v for k, v in row.items() if k not in extra})
        if values["peak_hbm_bytes_per_chip"] is None:
            return base
        known = {f.name: getattr(base, f.name) for f in fields(ProgramRecord)}
        comm = {k: v for k in comm_columns if (v := values.pop(k)) is not None}
        return cls(**known, **values, communication=comm)


def _number_or_none(value: str | float | None) -> float | None:
    """A CSV cell as a float, None for a missing or NaN one."""
    if value is None or value == "":
        return None
    number = float(value)
    return None if math.isnan(number) else number


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else factor * value


__all__ = [
    "SECONDS_PER_HOUR",
    "TOKENS_PER_MILLION",
    "CollectiveRecord",
    "DecodeRecord",
    "Economics",
    "ProgramRecord",
    "Record",
    "Row",
    "TopologyRecord",
    "TrainingRecord",
    "base_name",
    "pod_totals",
    "topology_summary",
]
