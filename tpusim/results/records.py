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
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar

from tpusim.results.energy import mean_power_W
from tpusim.results.fault_columns import columns_from_row, fault_columns
from tpusim.results.overlap import BREAKDOWN_COLUMNS as COMM
from tpusim.units import format_bytes

if TYPE_CHECKING:
    from tpusim.config.loader import System
    from tpusim.topology import Topology

#: Seconds in an hour (chip-hours from seconds).
SECONDS_PER_HOUR = 3600.0
#: Tokens in the "per million tokens" cost column.
TOKENS_PER_MILLION = 1e6

Figure = tuple[str, float | None]  # (comparison-table row name with its unit, value)


def base_name(label: str) -> str:
    """A workload label without its sweep point: ``ar[bytes=1 MiB]`` -> ``ar``."""
    return label.split("[", 1)[0]


@dataclass(frozen=True, kw_only=True)
class Record:
    """What one workload point produced on one system."""

    system: str
    workload: str
    kind: str

    def row(self) -> dict[str, Any]:
        """The record's columns, in field order."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

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
    """One collective (columns as :mod:`tpusim.results.tables` documents), then
    ``step_time_s`` (= ``time_s``, so every row has a step time)."""

    op: str
    bytes: float
    chips: int
    group_size: int
    num_groups: int
    algorithm: str
    fidelity: str
    engine: str
    time_s: float
    algbw_Bps: float | None
    busbw_Bps: float | None
    max_hops: int
    mean_flow_hops: float
    num_steps: int
    num_flows: int
    max_link_utilization: float
    mean_link_utilization: float
    busiest_link_bytes: float
    num_events: int
    step_time_s: float
    #: With faults or a routing policy only: :mod:`tpusim.results.fault_columns`.
    faults: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, result: Any, workload: str, report: Any = None) -> CollectiveRecord:
        """From a :class:`~tpusim.results.simulation.CollectiveResult` (and the
        network's ``fault_report``, when the run had faults or a routing policy)."""
        record = result.record()
        record["mean_flow_hops"] = record["mean_hops"]
        skip = ("workload", "kind", "step_time_s", "faults")
        names = [f.name for f in fields(cls) if f.name not in skip]
        values = {k: record[k] for k in names}
        faults = fault_columns(report)
        return cls(workload=workload, kind="collective", step_time_s=result.time_s, **values,
                   faults=faults)  # fmt: skip

    def row(self) -> dict[str, Any]:
        own = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "faults"}
        return own | self.faults

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Record:
        names = [f.name for f in fields(cls) if f.name != "faults"]
        return cls(**{k: row[k] for k in names}, faults=columns_from_row(row))

    @classmethod
    def sweep_figures(cls, records: Sequence[Record]) -> list[tuple[str, str, float]]:
        """Per workload and system: the time at the smallest size (when the sweep has
        more than one) and the bus bandwidth at the largest."""
        runs: dict[tuple[str, str], list[CollectiveRecord]] = {}
        for record in records:
            if isinstance(record, CollectiveRecord):
                runs.setdefault((base_name(record.workload), record.system), []).append(record)
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


@dataclass(frozen=True)
class Economics:
    """Throughput, energy and cost of one step; a column is None (and left out of the
    row) when its input is unknown: tokens for the token columns, power for energy,
    a price for cost.

    Power follows :mod:`tpusim.results.energy`: ``full_load_power_per_chip_W`` (the
    all-in power at full load) scaled by ``busy_share`` (the step's TensorCore busy
    fraction) to the step's mean ``power_per_chip_W``. Token figures count the tokens
    of the program simulated (for a model fragment, e.g. 2 of 80 layers, the energy
    and cost per token of that fragment, not of the whole model)."""

    chip_hours_per_step: float
    tokens_per_s: float | None = None
    tokens_per_s_per_chip: float | None = None
    full_load_power_per_chip_W: float | None = None
    busy_share: float | None = None
    power_per_chip_W: float | None = None
    energy_per_step_J: float | None = None
    energy_per_token_J: float | None = None
    cost_per_step_usd: float | None = None
    cost_per_million_tokens_usd: float | None = None

    @classmethod
    def of(
        cls,
        step_time_s: float,
        num_chips: int,
        tokens_per_step: float | None = None,
        power_per_chip_W: float | None = None,
        price_per_chip_hour_usd: float | None = None,
        busy_share: float = 1.0,
    ) -> Economics:
        """From the step time (s), the system's chips, tokens one step processes, the
        all-in power per chip at full load (W), the price per chip-hour (USD) and the
        step's busy share (0..1, :func:`tpusim.results.energy.busy_share`)."""
        step, chips, tokens = step_time_s, num_chips, tokens_per_step or None
        hours = chips * step / SECONDS_PER_HOUR
        mean_W = mean_power_W(power_per_chip_W, busy_share) if power_per_chip_W else None
        energy = mean_W * chips * step if mean_W is not None else None
        cost = price_per_chip_hour_usd * hours if price_per_chip_hour_usd is not None else None
        return cls(
            chip_hours_per_step=hours,
            tokens_per_s=tokens / step if tokens else None,
            tokens_per_s_per_chip=tokens / step / chips if tokens else None,
            full_load_power_per_chip_W=power_per_chip_W,
            busy_share=busy_share if power_per_chip_W else None,
            power_per_chip_W=mean_W,
            energy_per_step_J=energy,
            energy_per_token_J=energy / tokens if tokens and energy is not None else None,
            cost_per_step_usd=cost,
            cost_per_million_tokens_usd=(
                cost / tokens * TOKENS_PER_MILLION if tokens and cost is not None else None
            ),
        )

    def row(self) -> dict[str, float]:
        """The known columns, in field order."""
        values = ((f.name, getattr(self, f.name)) for f in fields(self))
        return {name: value for name, value in values if value is not None}


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
        extra = ("peak_hbm_bytes_per_chip", "pipeline_bubble_fraction", *COMM)
        values: dict[str, Any] = {k: _number_or_none(row.get(k)) for k in extra}
        base = ProgramRecord.from_row({k: v for k, v in row.items() if k not in extra})
        if values["peak_hbm_bytes_per_chip"] is None:
            return base
        known = {f.name: getattr(base, f.name) for f in fields(ProgramRecord)}
        comm = {k: v for k in COMM if (v := values.pop(k)) is not None}
        return cls(**known, **values, communication=comm)


def _number_or_none(value: Any) -> float | None:
    """A CSV cell as a float, None for a missing or NaN one."""
    if value is None or value == "":
        return None
    number = float(value)
    return None if math.isnan(number) else number


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else factor * value


def pod_totals(system: System) -> dict[str, Any]:
    """Peak FLOP/s per dtype and HBM and SRAM bytes summed over every chip of the system."""
    chips = system.num_chips
    return {
        "peak_flops": {dtype: rate * chips for dtype, rate in system.chip.peak_flops.items()},
        "hbm_capacity_bytes": system.chip.hbm.capacity_bytes * chips,
        "sram_capacity_bytes": system.chip.sram.capacity_bytes * chips,
    }


def topology_summary(system: System, topology: Topology | None = None) -> dict[str, Any]:
    """The ``tpusim topo`` record (DESIGN.md contract fields first): counts, hops,
    bandwidths in bytes/s (one direction), latency in s, capacities in bytes."""
    from tpusim.topology import build_topology

    topo = topology or build_topology(system)
    hist = topo.hop_histogram()
    return {
        "system": system.name,
        "topology": topo.kind,
        "chip": system.chip.name,
        "chips": topo.num_chips,
        "links": topo.num_links,
        "diameter_hops": topo.diameter_hops,
        "mean_hops": topo.mean_hops,
        "bisection_bandwidth_Bps": topo.bisection_bandwidth_Bps,
        "link_bandwidth_Bps": system.link_bandwidth_Bps,
        "hop_latency_s": system.hop_latency_s,
        "links_by_kind": topo.link_counts(),
        "degree": topo.degree_stats(),
        "hop_histogram": {str(h): int(n) for h, n in enumerate(hist) if n},
        "shape": topo.describe(),
        **pod_totals(system),
    }


__all__ = [
    "SECONDS_PER_HOUR",
    "TOKENS_PER_MILLION",
    "CollectiveRecord",
    "DecodeRecord",
    "Economics",
    "ProgramRecord",
    "Record",
    "TopologyRecord",
    "TrainingRecord",
    "base_name",
    "pod_totals",
    "topology_summary",
]
