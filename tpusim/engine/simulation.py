"""The simulation driver: one program on one system, the only place a SimPy
environment is built.

SPMD symmetry: chips that run the same ops at the same speed form one *class* and are
simulated by one SimPy process per op, not one per chip; every chip with an MPMD
override (a straggler, extra ops) is a class of its own. Each op runs through the
handler of its kind (:mod:`tpusim.engine.handlers`); collectives are placed by
:mod:`tpusim.engine.placement`; measurements go to observers
(:mod:`tpusim.results.observers`). A collective some class never reaches is reported
as a deadlock naming the chips and the op.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import simpy

from tpusim.collectives import Predictor, build_schedule
from tpusim.collectives.base import Schedule
from tpusim.collectives.offload import OnChipModel, engine_model
from tpusim.config.loader import System, load_system
from tpusim.engine.choices import choice_key, keep_choice, known_choice
from tpusim.engine.deadlock import raise_if_deadlocked
from tpusim.engine.faults import FaultState
from tpusim.engine.handlers import ChipClass, all_done, members, op_handler
from tpusim.engine.placement import Placement
from tpusim.engine.schedule import FlowBatches, Rendezvous, execute_schedule
from tpusim.engine.settings import RunSettings
from tpusim.engine.work import check_program_work, check_schedule_work
from tpusim.errors import InputError
from tpusim.hardware import ChipCostModel, MemoryTracker
from tpusim.network import AnalyticNetwork, Network, make_network
from tpusim.network.routes import RouteCache
from tpusim.program.ir import Op, Program
from tpusim.results.observers import CommunicationTime, HopStats, LinkBytes, Observer, OpsTable
from tpusim.results.simulation import OpRecord, Results, mfu_peak_flops
from tpusim.topology import Topology, build_topology

#: The class of every chip without an MPMD override.
SPMD_CLASS = "spmd"

#: Flow fidelity at its default tolerance, seed 0, no faults, minimal routing.
DEFAULT_SETTINGS = RunSettings()


class Simulation:
    """One program on one system.

    ``system``: a loaded system or a shipped name / YAML path; None runs on a bare
    ``topology`` (network-only programs: collectives with ``onchip`` or no on-chip
    cost). ``settings``: the network model and its options, the seed of the random
    generator (the only source of randomness: :class:`FaultState`'s), the faults and
    routing policy (see :mod:`tpusim.engine.faults`) and per-port op rows. ``onchip`` and ``costs``
    override the chip's collective on-chip model and op cost model; ``topology`` and
    ``routes`` reuse a built topology and its :class:`RouteCache` across runs;
    ``observers`` are told what happens besides the built-in recorders; ``placement``
    places the collectives (default: the program's mesh on every chip).

    Two modes: built this way, a simulation owns its SimPy environment and network;
    :meth:`joining` makes one that shares another's (several jobs on one network,
    :mod:`tpusim.engine.multijob`: each starts with :meth:`start`, the environment
    runs once, each ends with :meth:`finish`). Raises InputError for a fault naming no
    link or chip, or for faults the network fidelity cannot take.
    """

    def __init__(
        self,
        system: System | str | None,
        program: Program,
        settings: RunSettings = DEFAULT_SETTINGS,
        *,
        onchip: OnChipModel | None = None,
        costs: ChipCostModel | None = None,
        topology: Topology | None = None,
        routes: RouteCache | None = None,
        observers: Sequence[Observer] = (),
        placement: Placement | None = None,
    ):
        self._setup(system, program, settings, onchip, costs, topology)
        self.placement = placement or Placement(self.topology, self.program.mesh)
        self.env = simpy.Environment()
        self.network = self._new_network(self.env, settings.network.check_capacity)
        self._observe(routes or RouteCache(self.topology), observers)

    @classmethod
    def joining(
        cls,
        host: Simulation,
        program: Program,
        placement: Placement,
        observers: Sequence[Observer] = (),
    ) -> Simulation:
        """A simulation of ``program`` on ``host``'s system, settings, SimPy environment
        and network, placing its collectives with ``placement`` (its own chips)."""
        sim = cls.__new__(cls)
        sim._setup(host.system, program, host.settings, None, None, host.topology)
        sim.placement, sim.env, sim.network = placement, host.env, host.network
        sim._observe(host.batches.routes, observers)
        return sim

    def _setup(
        self,
        system: System | str | None,
        program: Program,
        settings: RunSettings,
        onchip: OnChipModel | None,
        costs: ChipCostModel | None,
        topology: Topology | None,
    ) -> None:
        """What both modes share: the system, program, RNG, faults and cost models."""
        self.system = load_system(system) if isinstance(system, str) else system
        self.settings, self.fidelity = settings, settings.network.fidelity
        self.topology = topology or self._built_topology()
        check_program_work(program, settings.network, self.topology.num_chips)
        faults, routing = settings.faults, settings.routing
        self.faults = FaultState(self.topology, faults, routing, settings.network, settings.seed)
        self.program = self.faults.slowed(program)
        chip = self.system.chip if self.system else None
        self.costs = costs or (ChipCostModel(chip) if chip else None)
        self.onchip = onchip or (OnChipModel.for_chip(chip) if chip else OnChipModel.none())
        self._op_engines = onchip is None and chip is not None  # else the caller's model
        self._onchip_of: dict[str, OnChipModel] = {}

    def _observe(self, routes: RouteCache, observers: Sequence[Observer]) -> None:
        """The built-in recorders, then ``observers``; per-collective caches."""
        self.ops_table, self.comm, self.hops = OpsTable(), CommunicationTime(), HopStats()
        self.ops_table.wants_ports = self.settings.port_rows
        self.links = LinkBytes()
        self.observers: list[Observer] = [self.ops_table, self.comm, self.hops, self.links]
        self.observers += observers
        self.batches = FlowBatches(routes, self.observers)
        self._schedules: dict[tuple[object, ...], Schedule] = {}
        self._predictors: dict[tuple[bool, int], Predictor] = {}
        self._rendezvous: dict[str, Rendezvous] = {}
        self._started: dict[str, simpy.Event] = {}
        self._port_cache: dict[tuple[int, int], list[str]] = {}
        self._dma_cache: dict[tuple[int, int], float] = {}
        self._links_cache: dict[tuple[int, int], np.ndarray] = {}
        self.classes: dict[str, list[int]] = {}

    def _built_topology(self) -> Topology:
        if self.system is None:
            raise ValueError("a simulation needs a system or a topology")
        return build_topology(self.system)

    # -- what handlers call ----------------------------------------------------------------
    def report(self, record: OpRecord) -> None:
        """Tell every observer that an op finished on a chip class."""
        for observer in self.observers:
            observer.op_finished(record)

    def schedule(self, op: Op) -> Schedule:
        """The schedule of collective ``op`` (built once per distinct collective).
        Raises InputError naming the op for a bad group, axis, op or algorithm."""
        axes = self.placement.physical_axes(op)
        key: tuple[object, ...] = (op.collective, op.size_bytes, tuple(axes or ()), op.algorithm)
        key += (op.groups, op.num_chips, op.pairs, self.faults.epoch)
        if key not in self._schedules:
            try:
                group = self.faults.adapt(
                    self.placement.group(op, axes), self.network, op.name, self.env.now
                )
                chosen = choice_key(op, group, self.settings, self.onchip)
                schedule = build_schedule(
                    op.collective,  # type: ignore[arg-type]  # checked by build_schedule
                    op.size_bytes,
                    group,
                    known_choice(self.topology, chosen) or op.algorithm,
                    list(op.pairs) or None,
                    self.predictor(op.split_ports),
                )
                keep_choice(self.topology, chosen, schedule.algorithm)
                check_schedule_work(schedule, self.settings.network, self.topology, op.name)
                self._schedules[key] = schedule
            except ValueError as exc:  # kept as the cause: run_collective re-raises it
                raise InputError(f"op '{op.name}': {exc}") from exc
        return self._schedules[key]

    def predictor(self, split_ports: bool) -> Predictor:
        """What ``auto`` predicts algorithms with: the analytic model of this network
        under this cost model, on the simulation's route cache, with the links that are
        down or degraded now (``auto`` re-plans on the surviving topology)."""
        key = (bool(split_ports), self.faults.epoch)
        if key not in self._predictors:
            self._predictors[key] = Predictor(
                AnalyticNetwork(self.env, self.topology),
                self.onchip,
                lambda step: self.batches.of(step, key[0]),
                lambda schedule: self._trial_time_s(schedule, key[0]),
                faults_of=self.network,
            )
        return self._predictors[key]

    def _new_network(
        self, env: simpy.Environment, check_capacity: bool = False, healthy: bool = False
    ) -> Network:
        """A network of this simulation's fidelity, options and link efficiency in ``env``,
        with its routing policy and the faults present from the start (none: ``healthy``)."""
        settings = self.settings.network
        if check_capacity != settings.check_capacity:
            settings = replace(settings, check_capacity=check_capacity)
        network = make_network(settings, env, self.topology, self.onchip.link_efficiency)
        if not healthy:
            self.faults.prepare(network)
        return network

    def _trial_time_s(self, schedule: Schedule, split_ports: bool, healthy: bool = False) -> float:
        """``schedule`` run alone on a fresh network of this fidelity (nothing recorded),
        with the links down now (none: ``healthy``)."""
        env = simpy.Environment()
        network = self._new_network(env, healthy=healthy)
        if not healthy:
            network.copy_links_from(self.network)
        batches = FlowBatches(self.batches.routes, ())
        execute_schedule(env, network, schedule, self.onchip, batches, split_ports)
        env.run()
        return float(env.now)

    def rendezvous(self, name: str, schedule: Schedule) -> Rendezvous:
        """The rendezvous of collective ``name``: every class with chips in its groups."""
        if name not in self._rendezvous:
            chips = members(schedule.group.chips)
            expected = {c for c, cs in self.classes.items() if chips.intersection(cs)}
            self._rendezvous[name] = Rendezvous(self.env, expected)
        return self._rendezvous[name]

    def start_collective(self, op: Op, schedule: Schedule) -> simpy.Event:
        """Run ``op``'s schedule on the network once; every class waits on the same event.
        With faults, the collective is retried as the chip-failure policy says
        (:meth:`FaultState.attempts`)."""
        if op.name not in self._started:
            start = self.env.now
            finished: simpy.Event
            if self.faults.active:
                finished = self.env.process(self.faults.attempts(self, op, schedule))
            else:
                finished = self.run_schedule(op, schedule)
            self._started[op.name] = finished
            finished.callbacks.append(_Ran(self, op.name, start))
        return self._started[op.name]

    def run_schedule(self, op: Op, schedule: Schedule) -> simpy.Event:
        """One attempt of ``op``'s schedule on the network, starting now."""
        slowdown = self.faults.slowdown_of(schedule.group.chips)
        onchip = self.onchip_of(op)
        return execute_schedule(
            self.env, self.network, schedule, onchip, self.batches, op.split_ports, slowdown
        )

    def onchip_of(self, op: Op) -> OnChipModel:
        """The on-chip model ``op`` runs with: its ``engine``'s on the system's chip
        when it names one the chip has and the run was not given a model, else the
        run's (the algorithm is chosen with the run's model either way)."""
        if op.engine is None or not self._op_engines or self.system is None:
            return self.onchip
        if op.engine not in self._onchip_of:
            self._onchip_of[op.engine] = engine_model(self.system.chip, op.engine, self.onchip)
        return self._onchip_of[op.engine]

    def ports(self, op: Op, schedule: Schedule, chip: int) -> list[str]:
        """Names of the ICI ports of ``chip`` that the collective's transfers leave by
        (none unless an observer wants port rows)."""
        if not any(o.wants_ports for o in self.observers):
            return []
        key = (id(schedule), chip)
        if key not in self._port_cache:
            mine = self._links_from(op, schedule, chip)
            self._port_cache[key] = sorted({self.topology.port_name(int(link)) for link in mine})
        return self._port_cache[key]

    def _links_from(self, op: Op, schedule: Schedule, chip: int) -> np.ndarray:
        """The links (sorted, unique) that ``schedule``'s transfers leave ``chip`` by."""
        key = (id(schedule), chip)
        if key not in self._links_cache:
            src = self.topology.links.src
            parts = [
                b.links[src[b.links] == chip]
                for b in (
                    self.batches.of(step, op.split_ports) for p in schedule.pipelines for step in p
                )
            ]
            self._links_cache[key] = np.unique(np.concatenate(parts or [np.zeros(0, int)]))
        return self._links_cache[key]

    def dma_Bps(self, op: Op, schedule: Schedule, chip: int) -> float:
        """HBM bandwidth (B/s) the DMAs of asynchronous collective ``op`` take on
        ``chip`` while it runs: it reads from HBM what it sends and writes what it
        receives, at most the bandwidth of the links its transfers leave ``chip`` by,
        each way (an upper bound: the links run full while it is in flight)."""
        key = (id(schedule), -1 - chip)
        if key not in self._dma_cache:
            mine = self._links_from(op, schedule, chip)
            self._dma_cache[key] = 2.0 * float(np.sum(self.topology.links.bandwidth_Bps[mine]))
        return self._dma_cache[key]

    # -- running -----------------------------------------------------------------------------
    def run(self) -> Results:
        """Simulate to completion. Raises SimulationError on a deadlock (exit code 1)
        and OutOfMemoryError when the resident bytes do not fit."""
        pending = self.start()
        self.env.run()
        return self.finish(pending)

    def start(self) -> dict[str, dict[str, simpy.Event]]:
        """Make the chip classes, check memory and start one process per op without
        running the environment; returns each class's op-done events for
        :meth:`finish`. Raises OutOfMemoryError when the resident bytes do not fit."""
        self.classes = self._chip_classes()
        self._check_memory()
        pending = {name: self._start_class(name, chips) for name, chips in self.classes.items()}
        self.faults.start(self.env, self.network)
        return pending

    def finish(self, pending: dict[str, dict[str, simpy.Event]]) -> Results:
        """Once the environment has run: tell the observers, raise SimulationError on
        a deadlock, return the results."""
        self.faults.report(self.network)
        for observer in self.observers:
            observer.run_finished(float(self.env.now), self.network.link_bytes)
        raise_if_deadlocked(self._rendezvous, pending, self.classes)
        return self._results()

    def _chip_classes(self) -> dict[str, list[int]]:
        """Chip classes: ``spmd`` for every chip without an override, one per override."""
        num_chips = self.topology.num_chips
        bad = [c for c in self.program.chip_overrides if not 0 <= c < num_chips]
        if bad:
            raise InputError(f"chip override for chip {bad[0]}: the system has {num_chips} chips")
        overridden = sorted(self.program.chip_overrides)
        classes = {f"chip {c}": [c] for c in overridden}
        rest = sorted(set(range(num_chips)) - set(overridden))
        return ({SPMD_CLASS: rest} if rest else {}) | classes

    def _check_memory(self) -> None:
        if self.system is None:
            return
        for chips in self.classes.values():
            tracker = MemoryTracker(self.system.chip, chip_index=chips[0])
            for tier, nbytes in self.program.memory_bytes.items():
                tracker.allocate(f"{self.program.name} resident {tier}", nbytes, memory=tier)  # type: ignore[arg-type]

    def _start_class(self, name: str, chips: list[int]) -> dict[str, simpy.Event]:
        """One process per op of the class; returns the class's op-done events."""
        override = self.program.chip_overrides.get(chips[0]) if name != SPMD_CLASS else None
        ops = self.program.ops_for(chips[0])
        cls = ChipClass(
            name,
            chips,
            override.slowdown if override else 1.0,
            simpy.Resource(self.env, capacity=1),
            {op.name: self.env.event() for op in ops},
        )
        for op in ops:
            self.env.process(self._op(cls, op))
        return cls.done

    def _op(self, cls: ChipClass, op: Op):
        yield all_done(self.env, [cls.done[d] for d in op.after])
        yield from op_handler(op.kind)(self, cls, op)
        cls.done[op.name].succeed()

    def _results(self) -> Results:
        spmd = next(iter(self.classes))
        chip = self.system.chip if self.system else None
        return Results(
            system=self.system.name if self.system else "",
            program=self.program.name,
            fidelity=self.fidelity,
            chips=self.topology.num_chips,
            step_time_s=float(self.env.now),
            compute_time_s=self.ops_table.busy_time_s(spmd),
            communication_time_s=self.comm.total_s,
            flops_per_chip=self.program.flops_per_chip,
            peak_flops=mfu_peak_flops(chip.peak_flops, self.program) if chip else 0.0,
            ops=self.ops_table.sorted_records(),
            link_bytes=self.network.link_bytes,
            links=self.topology.links,
            max_hops=self.hops.max_hops,
            mean_hops=self.hops.mean_hops,
        )


class _Ran:
    """Event callback telling the observers a collective ran from ``start`` to now."""

    def __init__(self, sim: Simulation, name: str, start: float):
        self.sim, self.name, self.start = sim, name, start

    def __call__(self, _event: simpy.Event) -> None:
        for observer in self.sim.observers:
            observer.collective_ran(self.name, self.start, self.sim.env.now)
