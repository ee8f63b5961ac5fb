"""What the parts of a simulation see of it: narrow views of
:class:`~tpusim.engine.Simulation`, so that op handlers and the fault state depend on
what they use rather than on the driver (which imports them).

* :class:`CollectiveRunner`: the environment, a collective's schedule (built again
  after a fault changed the group) and running one schedule on the network: what
  :meth:`~tpusim.engine.faults.FaultState.attempts` retries with;
* :class:`OpContext`: what an op handler (:mod:`tpusim.engine.handlers`) runs an op
  with: the chip's cost model, the rendezvous of a collective's groups, starting a
  collective, the ports and DMA bandwidth it takes, and reporting an
  :class:`~tpusim.results.ops.OpRecord`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import simpy

    from tpusim.collectives.base import Schedule
    from tpusim.engine.schedule import Rendezvous
    from tpusim.hardware import ChipCostModel
    from tpusim.program.ir import Op
    from tpusim.results.ops import OpRecord

__all__ = ["CollectiveRunner", "OpContext"]


class CollectiveRunner(Protocol):
    """A simulation as a fault state retries a collective on it."""

    env: simpy.Environment

    def schedule(self, op: Op) -> Schedule:
        """``op``'s schedule on the network as it is now (faults applied)."""
        ...

    def run_schedule(self, op: Op, schedule: Schedule) -> simpy.Event:
        """An event that fires when ``schedule`` has run on the network."""
        ...


class OpContext(CollectiveRunner, Protocol):
    """A simulation as an op handler runs one op of a chip class on it."""

    costs: ChipCostModel | None

    def report(self, record: OpRecord) -> None:
        """Hand a finished op's row to the observers."""
        ...

    def rendezvous(self, name: str, schedule: Schedule) -> Rendezvous:
        """The rendezvous of collective ``name``'s groups (made on first use)."""
        ...

    def start_collective(self, op: Op, schedule: Schedule) -> simpy.Event:
        """An event that fires when ``op`` has finished (started once, by the first
        class to arrive)."""
        ...

    def ports(self, op: Op, schedule: Schedule, chip: int) -> list[str]:
        """The ICI ports of ``chip`` the collective's transfers leave by."""
        ...

    def dma_Bps(self, op: Op, schedule: Schedule, chip: int) -> float:
        """HBM bandwidth (B/s) the asynchronous collective's DMAs take on ``chip``."""
        ...
