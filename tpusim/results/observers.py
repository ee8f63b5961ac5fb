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
    """Hop counts of every flow sent: their number, sum and maximum, kept as running
    integers (the flows' hop arrays are not kept: a 9,600-chip training step sends
    hundreds of millions of flows). A batch sent again (a ring repeats its step's
    batch) reuses its counts."""

    def __init__(self) -> None:
        self.num_flows = 0
        self.total_hops = 0
        self.longest = 0
        # keyed by id(batch); the batch is kept beside its counts so the id stays unique
        self._counts: dict[int, tuple[FlowBatch, int, int, int]] = {}

    def flows_sent(self, batch: FlowBatch) -> None:
        cached = self._counts.get(id(batch))
        if cached is None or cached[0] is not batch:
            ptr = batch.ptr
            num = max(ptr.size - 1, 0)
            total = int(ptr[-1] - ptr[0]) if num > 0 else 0
            longest = int(np.diff(ptr).max()) if num > 0 else 0
            cached = self._counts[id(batch)] = (batch, num, total, longest)
        self.num_flows += cached[1]
        self.total_hops += cached[2]
        self.longest = max(self.longest, cached[3])

    @property
    def max_hops(self) -> int:
        return self.longest

    @property
    def mean_hops(self) -> float:
        """The mean over every flow sent (the integer sum over the count: what the mean
        of the concatenated hop counts gives, exactly, below 2**53 hops)."""
        return self.total_hops / self.num_flows if self.num_flows else 0.0


class LinkBytes(BaseObserver):
    """Bytes each directed link carried over the run, and when the run ended."""

    def __init__(self) -> None:
        self.link_bytes = np.zeros(0)
        self.end_at = 0.0

    def run_finished(self, end_at: float, link_bytes: np.ndarray) -> None:
        self.end_at, self.link_bytes = end_at, link_bytes
