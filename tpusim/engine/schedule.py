"""Running a collective's schedule on the network, and the rendezvous before it.

A schedule is a set of pipelines; each pipeline sends its steps' flow batches one
after the other, paying the on-chip cost of each step (overhead, reduction) between
them (:func:`execute_schedule`). A collective starts only when every chip class
taking part has reached it (:class:`Rendezvous`).
"""

from __future__ import annotations

from collections.abc import Sequence

import simpy

from tpusim.collectives.base import Schedule, Step
from tpusim.collectives.offload import OnChipModel
from tpusim.network import Network
from tpusim.network.base import FlowBatch
from tpusim.network.routes import RouteCache
from tpusim.results.observers import Observer


class FlowBatches:
    """The flow batch of each schedule step, built once (a ring repeats its step);
    every send is reported to the observers (hop statistics)."""

    def __init__(self, routes: RouteCache, observers: Sequence[Observer]):
        self.routes, self.observers = routes, observers
        # keyed by id(step); the step is kept alive beside its batch so the id stays unique
        self._by_step: dict[int, tuple[Step, FlowBatch]] = {}

    def of(self, step: Step, split_ports: bool) -> FlowBatch:
        """The batch of ``step`` without counting a send (for reports). ``split_ports``
        spreads each transfer over the ports its minimal routes allow."""
        cached = self._by_step.get(id(step))
        if cached is None:
            batch = self.routes.batch(step.src, step.dst, step.bytes, split_ports)
            self._by_step[id(step)] = cached = (step, batch)
        return cached[1]

    def send(self, step: Step, split_ports: bool) -> FlowBatch:
        """The batch of ``step``, reported to the observers as sent."""
        batch = self.of(step, split_ports)
        for observer in self.observers:
            observer.flows_sent(batch)
        return batch


def execute_schedule(
    env: simpy.Environment,
    network: Network,
    schedule: Schedule,
    onchip: OnChipModel,
    batches: FlowBatches,
    split_ports: bool = False,
    slowdown: float = 1.0,
) -> simpy.Event:
    """Start every pipeline of ``schedule`` now; the event fires when all have finished.
    Each pipeline is one SimPy process: the collective's launch cost, then per step the
    transfer and what the step costs after it (:meth:`OnChipModel.after_transfer_s`),
    ``slowdown`` times longer (the slowest chip of a lock-step collective)."""

    def pipeline(steps: list[Step]):
        if onchip.launch_s > 0:
            yield env.timeout(onchip.launch_s)
        for step in steps:
            began = env.now
            yield network.send(batches.send(step, split_ports))
            cost = onchip.after_transfer_s(step, env.now - began)
            if slowdown != 1.0:
                cost *= slowdown
            if cost > 0:
                yield env.timeout(cost)

    return env.all_of([env.process(pipeline(p)) for p in schedule.pipelines if p])


class Rendezvous:
    """A collective waiting for every class of chips that takes part in it: ``started``
    fires when the last expected class arrives."""

    def __init__(self, env: simpy.Environment, expected: set[str]):
        self.expected = expected
        self.arrived: set[str] = set()
        self.started = env.event()

    def arrive(self, cls: str) -> simpy.Event:
        self.arrived.add(cls)
        if self.arrived >= self.expected and not self.started.triggered:
            self.started.succeed()
        return self.started

    @property
    def missing(self) -> set[str]:
        """Classes expected that never arrived (empty once started)."""
        return set() if self.started.triggered else self.expected - self.arrived
