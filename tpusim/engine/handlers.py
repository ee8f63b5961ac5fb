"""One handler per op kind: how the engine runs an op on one chip class.

A handler is a SimPy process body ``handler(sim, chip_class, op)`` that runs ``op``
for ``chip_class`` (a :class:`ChipClass`) inside ``sim`` (a
:class:`~tpusim.engine.Simulation`) and reports an :class:`~tpusim.results.OpRecord`
to the observers. Compute kinds share :func:`compute_handler` around a cost function;
``collective`` rendezvous and runs the schedule once on the shared network. A new op
kind is a new handler plus one ``OP_HANDLERS.register(kind, OpHandler(handler))`` call
(:data:`OP_HANDLERS`; the shipped kinds are registered at the end of this module, in
one list).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import simpy

from tpusim.engine.schedule import Rendezvous, execute_schedule
from tpusim.errors import InputError
from tpusim.hardware import ChipCostModel
from tpusim.hardware.costs import OpCost
from tpusim.program.ir import Op
from tpusim.registry import Registry
from tpusim.results.simulation import OpRecord

if TYPE_CHECKING:
    from tpusim.engine.context import OpContext


@dataclass
class ChipClass:
    """Chips that run the same ops at the same speed, simulated once. ``core`` is the
    class's TensorCore, a SimPy ``Resource`` of capacity 1 (compute ops and synchronous
    collectives hold it); ``done`` has an event per op name; ``dma_Bps`` is the HBM
    bandwidth the asynchronous collectives in flight take now (see
    :func:`contended_s`)."""

    name: str
    chips: list[int]
    slowdown: float
    core: simpy.Resource
    done: dict[str, simpy.Event]
    dmas: dict[str, float] = field(default_factory=dict)

    @property
    def dma_Bps(self) -> float:
        """HBM bandwidth (B/s) the DMAs of the asynchronous collectives in flight take."""
        return sum(self.dmas.values())

    @property
    def label(self) -> str:
        """The ``chips`` column of its records: ``spmd (255 chips)``, ``chip 7``."""
        return self.name if len(self.chips) == 1 else f"{self.name} ({len(self.chips)} chips)"


#: An op handler's SimPy process body: yields SimPy events, is sent their values.
Handler = Callable[["OpContext", ChipClass, Op], Generator[simpy.Event, object, None]]
#: Cost of a compute op on a chip (before the class's slowdown): its roofline terms.
CostFunction = Callable[[ChipCostModel, Op], OpCost]

HBM_COMPUTE_SHARE_MIN = 0.5
"""Smallest share of HBM bandwidth a memory-bound op keeps while collectives' DMAs run
beside it (an assumption: the memory controller serves both streams, so the DMAs
never take more than half)."""


@dataclass(frozen=True)
class OpHandler:
    """How the engine runs ops of one kind: ``run`` is the SimPy process body
    ``run(sim, chip_class, op)`` (module doc)."""

    run: Handler


#: Op handlers by op kind; raises UnknownEntryError (an InputError) naming the kinds
#: that have one, DuplicateEntryError for a taken kind (:mod:`tpusim.registry`).
OP_HANDLERS: Registry[OpHandler] = Registry("op kind")


def op_handler(kind: str) -> Handler:
    """The handler of ``kind``; raises UnknownEntryError naming the kinds that have one."""
    return OP_HANDLERS.get(kind).run


def contended_s(cost: OpCost, op: Op, dma_Bps: float, hbm_Bps: float) -> float:
    """The op's time (s) with collectives' DMAs taking ``dma_Bps`` of the HBM's
    ``hbm_Bps`` beside it.

    The roofline ``max(compute, memory) + overhead`` with the compute term divided by
    the op's ``efficiency`` (a grouped matmul's kernel) and, for an op on HBM, the
    memory term stretched by ``hbm / (hbm - dma)``, the DMAs taking at most
    ``1 - HBM_COMPUTE_SHARE_MIN`` of the bandwidth. The load at the op's start holds
    for its whole duration (an assumption: the DMAs in flight when it starts run on)."""
    memory_s = cost.memory_s
    if dma_Bps > 0 and hbm_Bps > 0 and op.memory == "hbm":
        memory_s *= hbm_Bps / max(hbm_Bps - dma_Bps, HBM_COMPUTE_SHARE_MIN * hbm_Bps)
    grouped = op.grouped or op.grouped_k  # its cost has its padding
    efficiency = 1.0 if grouped else op.efficiency
    return max(cost.compute_s / efficiency, memory_s) + cost.overhead_s


def compute_handler(cost: CostFunction, slowed: bool = True) -> Handler:
    """A handler holding the class's TensorCore for ``cost`` (times the class's slowdown
    when ``slowed``), its HBM shared with the collectives' DMAs in flight
    (:func:`contended_s`), or for the op's ``fixed_s`` when it has one (a compiled
    op timed by XLA's own estimate); a ValueError from the cost model becomes an InputError
    naming the op."""

    def run(sim: OpContext, cls: ChipClass, op: Op):
        try:
            if sim.costs is None:
                raise ValueError("a compute op needs a system with a chip")
            roofline = cost(sim.costs, op)
            hbm_Bps = sim.costs.memory_bandwidth_Bps("hbm") if cls.dma_Bps else 0.0
        except ValueError as exc:
            raise InputError(f"op '{op.name}': {exc}") from None
        with cls.core.request() as req:
            yield req
            start = sim.env.now
            duration = (
                contended_s(roofline, op, cls.dma_Bps, hbm_Bps)
                if op.fixed_s is None
                else op.fixed_s
            )
            yield sim.env.timeout(duration * cls.slowdown if slowed else duration)
        unit = roofline.unit
        sim.report(OpRecord(op.name, op.kind, cls.label, unit, start, sim.env.now, op.flops))

    return run


def matmul_cost(costs: ChipCostModel, op: Op) -> OpCost:
    """What ``costs`` charges for matmul ``op`` (grouped or not): the one reading of a
    matmul op's fields, shared with serving's iteration costs."""
    if op.grouped or op.grouped_k:
        grouped = (op.m, op.n, op.k, op.efficiency, op.dtype, op.memory, op.batch)
        rows = (op.grouped_k, op.dropless_rows, op.weights_stored, op.own_weights)
        return costs.grouped_matmul(*grouped, *rows)  # type: ignore[arg-type]
    shape = (op.m, op.n, op.k, op.dtype, op.memory, op.batch, op.grouped, op.weights_stored)
    return costs.matmul(*shape, op.own_weights)  # type: ignore[arg-type]


def _elementwise(costs: ChipCostModel, op: Op) -> OpCost:
    return costs.elementwise(op.bytes, op.memory, op.gather, op.vector)


def _kernel(costs: ChipCostModel, op: Op) -> OpCost:
    work = (op.mxu_flops, op.padded_flops, op.vector_ops, op.bytes)
    return costs.kernel(*work, op.dtype, op.memory, op.pad_dims)  # type: ignore[arg-type]


def _embedding(costs: ChipCostModel, op: Op) -> OpCost:
    return costs.embedding_lookup(op.rows, op.row_bytes, op.memory)


def _host_transfer(_costs: ChipCostModel, op: Op) -> OpCost:
    """Over PCIe at the op's bandwidth (no HBM contention); a straggler's slowdown
    does not apply."""
    time_s = op.bytes / op.bandwidth_Bps
    return OpCost(time_s, time_s, 0.0, 0.0, 0.0, 0.0, op.bytes, "memory", "host")


_host_transfer_sync = compute_handler(_host_transfer, slowed=False)


def host_transfer(sim: OpContext, cls: ChipClass, op: Op):
    """A host transfer: synchronous it holds the TensorCore; with ``overlap`` it runs
    on the host DMA engines alongside compute (XLA's async host offload copies) and is
    recorded on unit ``host-dma``, which is not TensorCore busy time."""
    if not op.overlap:
        yield from _host_transfer_sync(sim, cls, op)
        return
    start = sim.env.now
    yield sim.env.timeout(op.bytes / op.bandwidth_Bps)
    sim.report(OpRecord(op.name, op.kind, cls.label, "host-dma", start, sim.env.now, 0.0))


def collective(sim: OpContext, cls: ChipClass, op: Op):
    """Wait for every class in the collective's groups, run its schedule once on the
    network (the first class to get there starts it), record an ``ici`` row and one row
    per ICI port of the class's first chip. A synchronous collective holds the
    TensorCore from arrival to completion; ``overlap`` does not, and while it runs its
    DMAs take HBM bandwidth from the class's compute
    (:meth:`~tpusim.engine.context.OpContext.dma_Bps`)."""
    schedule = sim.schedule(op)
    rendezvous = sim.rendezvous(op.name, schedule)
    held = cls.core.request() if not op.overlap else None
    if held is not None:
        yield held
    arrived = sim.env.now
    yield rendezvous.arrive(cls.name)
    if held is None:
        cls.dmas[op.name] = sim.dma_Bps(op, schedule, cls.chips[0])
    yield sim.start_collective(op, schedule)
    cls.dmas.pop(op.name, None)
    if held is not None:
        cls.core.release(held)
    end = sim.env.now
    kind, role = op.collective, op.role
    sim.report(OpRecord(op.name, op.kind, cls.label, "ici", arrived, end, 0.0, kind, role))
    for port in sim.ports(op, schedule, cls.chips[0]):
        sim.report(OpRecord(op.name, op.kind, cls.label, port, arrived, end, 0.0, kind, role))


def members(schedule_chips: np.ndarray) -> set[int]:
    """Distinct chips of a schedule's groups (a set of all of them: np.unique would
    load numpy.ma on every command's first collective)."""
    return set(np.ravel(schedule_chips).tolist())


__all__ = [
    "OP_HANDLERS",
    "ChipClass",
    "Handler",
    "OpHandler",
    "Rendezvous",
    "collective",
    "compute_handler",
    "contended_s",
    "execute_schedule",
    "op_handler",
]

OP_HANDLERS.register_all(
    (
        ("matmul", OpHandler(compute_handler(matmul_cost))),
        ("elementwise", OpHandler(compute_handler(_elementwise))),
        ("embedding", OpHandler(compute_handler(_embedding))),
        ("kernel", OpHandler(compute_handler(_kernel))),
        ("host_transfer", OpHandler(host_transfer)),
        ("collective", OpHandler(collective)),
    )
)


def all_done(env: simpy.Environment, events: list[simpy.Event]) -> simpy.Event:
    """An event that succeeds once every one of ``events`` has been processed: SimPy's
    ``env.all_of`` to the event (its waits registered in the same order, so it fires at
    the same point of the event queue), without the value it builds of every event and
    its search of each event's callbacks, which cost time quadratic in an op's
    dependencies (an op after a compiled module's loop waits for thousands)."""
    done = env.event()
    waiting = [event for event in events if event.callbacks is not None]
    left = len(waiting)
    if not left:
        return done.succeed()

    def check(_event: simpy.Event) -> None:
        nonlocal left
        left -= 1
        if not left:
            done.succeed()

    for event in waiting:
        event.callbacks.append(check)  # type: ignore[union-attr]
    return done
