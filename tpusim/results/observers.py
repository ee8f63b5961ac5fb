"""Observers: how a simulation's measurements are recorded.

:class:`tpusim.engine.Simulation` calls every observer it was given at four moments:
an op finished on a chip class (:meth:`Observer.op_finished`), a collective ran on
the network from start to end (:meth:`Observer.collective_ran`), a batch of flows
was sent (:meth:`Observer.flows_sent`) and the run ended
(:meth:`Observer.run_finished`). A new measurement (a fault log, a per-port
histogram) is a new observer, not a change to the engine. ``wants_ports`` asks the
engine to also report, for each collective, one row per ICI port it used.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from tpusim.network.base import FlowBatch
from tpusim.results.ops import OpRecord


class Observer(Protocol):
    """What a simulation reports as it runs (times in s)."""

    wants_ports: bool

    def op_finished(self, record: OpRecord) -> None: ...

    def collective_ran(self, name: str, start_at: float, end_at: float) -> None: ...

    def flows_sent(self, batch: FlowBatch) -> None: ...

    def run_finished(self, end_at: float, link_bytes: np.ndarray) -> None: ...


class BaseObserver:
    """An observer that ignores everything; subclasses override what they record."""

    wants_ports = False

    def op_finished(self, record: OpRecord) -> None:
        pass

    def collective_ran(self, name: str, start_at: float, end_at: float) -> None:
        pass

    def flows_sent(self, batch: FlowBatch) -> None:
        pass

    def run_finished(self, end_at: float, link_bytes: np.ndarray) -> None:
        pass


class OpsTable(BaseObserver):
    """Every op record (the ``ops`` table and the trace), port rows included."""

    wants_ports = True

    def __init__(self) -> None:
        self.records: list[OpRecord] = []

    def op_finished(self, record: OpRecord) -> None:
        self.records.append(record)

    def sorted_records(self) -> list[OpRecord]:
        """Records by start time, then chip class, then name."""
        return sorted(self.records, key=lambda r: (r.start_at, r.chips, r.name))

    def busy_time_s(self, chips_prefix: str) -> float:
        """Summed duration of the non-collective ops of the classes named
        ``chips_prefix...`` (async host transfers, unit ``host-dma``, left out)."""
        return sum(
            r.end_at - r.start_at
            for r in self.records
            if r.kind != "collective" and r.unit != "host-dma" and r.chips.startswith(chips_prefix)
        )


class CommunicationTime(BaseObserver):
    """Summed duration of every collective on the network (concurrent ones each count)."""

    def __init__(self) -> None:
        self.total_s = 0.0
        self.last_end_at = 0.0

    def collective_ran(self, name: str, start_at: float, end_at: float) -> None:
        self.total_s += end_at - start_at
        self.last_end_at = max(self.last_end_at, end_at)


class HopStats(BaseObserver):
    """Hop counts of every flow sent."""

    def __init__(self) -> None:
        self.hops: list[np.ndarray] = []

    def flows_sent(self, batch: FlowBatch) -> None:
        self.hops.append(batch.hops)

    @property
    def num_flows(self) -> int:
        return int(sum(h.size for h in self.hops))

    def all_hops(self) -> np.ndarray:
        return np.concatenate(self.hops) if self.hops else np.zeros(0)

    @property
    def max_hops(self) -> int:
        hops = self.all_hops()
        return int(hops.max()) if hops.size else 0

    @property
    def mean_hops(self) -> float:
        hops = self.all_hops()
        return float(hops.mean()) if hops.size else 0.0


class LinkBytes(BaseObserver):
    """Bytes each directed link carried over the run, and when the run ended."""

    def __init__(self) -> None:
        self.link_bytes = np.zeros(0)
        self.end_at = 0.0

    def run_finished(self, end_at: float, link_bytes: np.ndarray) -> None:
        self.end_at, self.link_bytes = end_at, link_bytes
