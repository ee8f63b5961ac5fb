"""One handler per op kind: how the engine runs an op on one chip class.

A handler is a SimPy process body ``handler(sim, chip_class, op)`` that runs ``op``
for ``chip_class`` (a :class:`ChipClass`) inside ``sim`` (a
:class:`~tpusim.engine.Simulation`) and reports an :class:`~tpusim.results.OpRecord`
to the observers. Compute kinds share :func:`compute_handler` around a cost function;
``collective`` rendezvous and runs the schedule once on the shared network. A new op
kind is a new handler plus one :func:`register_op_handler` call.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import simpy

from tpusim.engine.schedule import Rendezvous, execute_schedule
from tpusim.errors import InputError
from tpusim.hardware import ChipCostModel
from tpusim.program.ir import Op
from tpusim.results.simulation import OpRecord

if TYPE_CHECKING:
    from tpusim.engine.simulation import Simulation


@dataclass
class ChipClass:
    """Chips that run the same ops at the same speed, simulated once. ``core`` is the
    class's TensorCore, a SimPy ``Resource`` of capacity 1 (compute ops and synchronous
    collectives hold it); ``done`` has an event per op name."""

    name: str
    chips: list[int]
    slowdown: float
    core: simpy.Resource
    done: dict[str, simpy.Event]

    @property
    def label(self) -> str:
        """The ``chips`` column of its records: ``spmd (255 chips)``, ``chip 7``."""
        return self.name if len(self.chips) == 1 else f"{self.name} ({len(self.chips)} chips)"


Handler = Callable[["Simulation", ChipClass, Op], Generator[Any, Any, None]]
#: Cost of a compute op on a chip: (seconds before the class's slowdown, unit).
CostFunction = Callable[[ChipCostModel, Op], tuple[float, str]]

_HANDLERS: dict[str, Handler] = {}


def register_op_handler(kind: str, handler: Handler) -> None:
    """Run ops of ``kind`` with ``handler``."""
    _HANDLERS[kind] = handler


def op_handler(kind: str) -> Handler:
    """The handler of ``kind``; raises InputError naming the kinds that have one."""
    try:
        return _HANDLERS[kind]
    except KeyError:
        raise InputError(f"no handler for op kind '{kind}' (have {', '.join(_HANDLERS)})") from None


def compute_handler(cost: CostFunction, slowed: bool = True) -> Handler:
    """A handler holding the class's TensorCore for ``cost`` (times the class's slowdown
    when ``slowed``); a ValueError from the cost model becomes an InputError naming the op."""

    def run(sim: Simulation, cls: ChipClass, op: Op):
        try:
            if sim.costs is None:
                raise ValueError("a compute op needs a system with a chip")
            duration, unit = cost(sim.costs, op)
        except ValueError as exc:
            raise InputError(f"op '{op.name}': {exc}") from None
        with cls.core.request() as req:
            yield req
            start = sim.env.now
            yield sim.env.timeout(duration * cls.slowdown if slowed else duration)
        sim.report(OpRecord(op.name, op.kind, cls.label, unit, start, sim.env.now, op.flops))

    return run


def _matmul(costs: ChipCostModel, op: Op) -> tuple[float, str]:
    cost = costs.matmul(op.m, op.n, op.k, op.dtype, op.memory, op.batch)  # type: ignore[arg-type]
    return cost.time_s, cost.unit


def _elementwise(costs: ChipCostModel, op: Op) -> tuple[float, str]:
    cost = costs.elementwise(op.bytes, op.memory)
    return cost.time_s, cost.unit


def _kernel(costs: ChipCostModel, op: Op) -> tuple[float, str]:
    work = (op.mxu_flops, op.padded_flops, op.vector_ops, op.bytes)
    cost = costs.kernel(*work, op.dtype, op.memory, op.pad_dims)  # type: ignore[arg-type]
    return cost.time_s, cost.unit


def _embedding(costs: ChipCostModel, op: Op) -> tuple[float, str]:
    cost = costs.embedding_lookup(op.rows, op.row_bytes, op.memory)
    return cost.time_s, cost.unit


def _host_transfer(_costs: ChipCostModel, op: Op) -> tuple[float, str]:
    """Over PCIe at the op's bandwidth; a straggler's slowdown does not apply."""
    return op.bytes / op.bandwidth_Bps, "host"


_host_transfer_sync = compute_handler(_host_transfer, slowed=False)


def host_transfer(sim: Simulation, cls: ChipClass, op: Op):
    """A host transfer: synchronous it holds the TensorCore; with ``overlap`` it runs
    on the host DMA engines alongside compute (XLA's async host offload copies) and is
    recorded on unit ``host-dma``, which is not TensorCore busy time."""
    if not op.overlap:
        yield from _host_transfer_sync(sim, cls, op)
        return
    start = sim.env.now
    yield sim.env.timeout(op.bytes / op.bandwidth_Bps)
    sim.report(OpRecord(op.name, op.kind, cls.label, "host-dma", start, sim.env.now, 0.0))


def collective(sim: Simulation, cls: ChipClass, op: Op):
    """Wait for every class in the collective's groups, run its schedule once on the
    network (the first class to get there starts it), record an ``ici`` row and one row
    per ICI port of the class's first chip. A synchronous collective holds the
    TensorCore from arrival to completion; ``overlap`` does not."""
    schedule = sim.schedule(op)
    rendezvous = sim.rendezvous(op.name, schedule)
    held = cls.core.request() if not op.overlap else None
    if held is not None:
        yield held
    arrived = sim.env.now
    yield rendezvous.arrive(cls.name)
    yield sim.start_collective(op, schedule)
    if held is not None:
        cls.core.release(held)
    end = sim.env.now
    sim.report(OpRecord(op.name, op.kind, cls.label, "ici", arrived, end, 0.0))
    for port in sim.ports(op, schedule, cls.chips[0]):
        sim.report(OpRecord(op.name, op.kind, cls.label, port, arrived, end, 0.0))


def members(schedule_chips: np.ndarray) -> set[int]:
    """Distinct chips of a schedule's groups."""
    return set(np.unique(schedule_chips).tolist())


__all__ = [
    "ChipClass",
    "Handler",
    "Rendezvous",
    "collective",
    "compute_handler",
    "execute_schedule",
    "op_handler",
    "register_op_handler",
]

register_op_handler("matmul", compute_handler(_matmul))
register_op_handler("elementwise", compute_handler(_elementwise))
register_op_handler("embedding", compute_handler(_embedding))
register_op_handler("kernel", compute_handler(_kernel))
register_op_handler("host_transfer", host_transfer)
register_op_handler("collective", collective)
