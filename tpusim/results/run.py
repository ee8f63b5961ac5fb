"""What a scenario run produced (:func:`tpusim.study.runner.run_scenario`): the records
of its points, the simulated programs behind them, each collective workload's per-link
bytes, the systems' topologies and the points that failed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from tpusim.results.records import Record
from tpusim.results.simulation import Results

if TYPE_CHECKING:
    from tpusim.topology import Topology

__all__ = ["CollectiveLinks", "PointFailure", "ProgramDetail", "ScenarioRun"]


@dataclass
class CollectiveLinks:
    """Per-link bytes of the largest run of one collective workload on one system
    (``bytes`` its size, ``time_s`` its completion time, ``link_bytes`` one value per
    directed link of the topology)."""

    system: str
    workload: str
    op: str
    bytes: float
    time_s: float
    link_bytes: np.ndarray


@dataclass(frozen=True, eq=False)
class ProgramDetail:
    """One simulated program of a run: the system's name, the workload point's label
    and the simulation's results (its ops, links and memory, for traces and plots)."""

    system: str
    label: str
    results: Results


@dataclass(frozen=True)
class PointFailure:
    """A workload point that failed on a system: the one-line problem."""

    system: str
    label: str
    message: str

    def line(self) -> str:
        """``SYSTEM LABEL failed: MESSAGE`` (the command line prefixes it)."""
        return f"{self.system} {self.label} failed: {self.message}"


@dataclass
class ScenarioRun:
    """What :func:`tpusim.study.runner.run_scenario` produced.

    ``records``: one :class:`Record` per system x workload point (``rows``: their
    columns as dicts); ``details``: each simulated program; ``collectives``: per-link
    bytes of each collective workload's largest size per system; ``topologies``:
    system name -> Topology; ``failures``: each point that failed (the others'
    records are kept); ``wall_s``: seconds the run took.
    """

    records: list[Record] = field(default_factory=list)
    details: list[ProgramDetail] = field(default_factory=list)
    collectives: list[CollectiveLinks] = field(default_factory=list)
    topologies: dict[str, Topology] = field(default_factory=dict)
    failures: list[PointFailure] = field(default_factory=list)
    wall_s: float = 0.0
    #: System name -> its chip generation (the intervals' basis names an unmeasured chip).
    chips: dict[str, str] = field(default_factory=dict)

    @property
    def rows(self) -> list[dict[str, Any]]:
        """One summary dict per record (the columns of ``summary.csv``, with the
        intervals of :meth:`Record.interval_row`)."""
        return [record.interval_row(self.chips.get(record.system)) for record in self.records]

    def extend(self, part: ScenarioRun) -> None:
        """Append another run's records, details, collectives, topologies and failures."""
        self.records += part.records
        self.details += part.details
        self.collectives += part.collectives
        self.topologies |= part.topologies
        self.failures += part.failures
        self.chips |= part.chips
