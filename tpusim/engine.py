"""Simulating a program on a system: compute and communication overlapping where the
dependencies allow.

``Simulation(system, program, fidelity, seed).run() -> Results``. The simulation owns
its SimPy environment, network and RNG: two simulations never interfere.

SPMD symmetry: chips that run the same ops at the same speed form one *class* and are
simulated by one SimPy process per op, not one per chip; every chip with an MPMD
override (a straggler, extra ops) is a class of its own. Each class has one
TensorCore (a SimPy ``Resource`` of capacity 1) that runs its compute ops in
dependency order. A collective *rendezvous*: it starts when every class with chips in
it has reached it (so a straggler delays everyone), then runs once on the shared
network, where concurrent collectives contend for links. A synchronous collective
holds the TensorCore until it is done; an asynchronous one (``overlap``) does not.
A collective some class never reaches is reported as a deadlock naming the chips and
the op. Mesh axes map onto physical axes as JAX's ``create_device_mesh`` lays a mesh
on a torus: in order, each logical axis taking whole physical axes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import simpy

from tpusim.collectives import build_schedule, make_group
from tpusim.collectives.base import Axis, Group, Schedule
from tpusim.collectives.offload import OnChipModel
from tpusim.collectives.runner import _Batches, execute
from tpusim.config.loader import System, load_system
from tpusim.errors import InputError, SimulationError
from tpusim.hardware import ChipCostModel, MemoryTracker
from tpusim.network import Fidelity, make_network
from tpusim.network.routes import RouteCache
from tpusim.program.ir import Op, Program
from tpusim.results import link_utilization
from tpusim.topology import Topology, build_topology


def map_mesh(topology: Topology, mesh: dict[str, int]) -> dict[str, list[str]]:
    """Logical mesh axis -> the physical axes it occupies, first axes first.

    Raises InputError when the mesh does not fit: sizes that do not multiply out to
    the chip count or a logical axis that would split a physical one.
    """
    _, physical = topology.axis_structure()
    total = int(np.prod(list(mesh.values()))) if mesh else 1
    if total != topology.num_chips:
        raise InputError(
            f"mesh {mesh} has {total} devices but the system has {topology.num_chips} chips"
        )
    mapping: dict[str, list[str]] = {}
    queue = list(physical)
    for name, size in mesh.items():
        taken, product = [], 1
        while product < size and queue:
            axis = queue.pop(0)
            taken.append(axis.name)
            product *= axis.size
        if product != size:
            raise InputError(
                f"mesh axis '{name}' ({size}) does not fit the physical axes "
                f"{', '.join(f'{a.name}={a.size}' for a in physical)}"
            )
        mapping[name] = taken
    return mapping


@dataclass
class OpRecord:
    """One op on one chip class: ``start_at``/``end_at`` in s, ``unit`` that ran it."""

    name: str
    kind: str
    chips: str
    unit: str
    start_at: float
    end_at: float
    flops: float


@dataclass
class Results:
    """What a simulation measured; ``summary()`` is the JSON record of ``tpusim run``."""

    system: str
    program: str
    fidelity: str
    chips: int
    step_time_s: float
    compute_time_s: float
    communication_time_s: float
    flops_per_chip: float
    peak_flops: float
    ops: list[OpRecord] = field(default_factory=list)
    link_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0))
    links: Any = None
    max_hops: int = 0
    mean_hops: float = 0.0

    @property
    def communication_busy_time_s(self) -> float:
        """Time during which at least one collective was in flight (the union of their
        intervals; ``communication_time_s`` sums them, counting concurrent ones twice)."""
        spans = sorted(
            (op.start_at, op.end_at)
            for op in self.ops
            if op.kind == "collective" and op.unit == "ici"
        )
        busy, reach = 0.0, float("-inf")
        for start, end in spans:
            if end > reach:
                busy += end - max(start, reach)
                reach = end
        return busy

    @property
    def exposed_communication_time_s(self) -> float:
        """Step time not covered by compute on the TensorCore of the default class."""
        return max(0.0, self.step_time_s - self.compute_time_s)

    @property
    def mfu(self) -> float:
        """Model FLOPs utilisation: useful FLOPs per chip / (step time x peak)."""
        return (
            self.flops_per_chip / (self.step_time_s * self.peak_flops)
            if self.step_time_s > 0
            else 0.0
        )

    def summary(self) -> dict[str, Any]:
        return {
            "system": self.system,
            "workload": self.program,
            "fidelity": self.fidelity,
            "chips": self.chips,
            "step_time_s": self.step_time_s,
            "compute_time_s": self.compute_time_s,
            "communication_time_s": self.communication_time_s,
            "communication_busy_time_s": self.communication_busy_time_s,
            "exposed_communication_time_s": self.exposed_communication_time_s,
            "flops_per_chip": self.flops_per_chip,
            "mfu": self.mfu,
            "max_hops": self.max_hops,
            "mean_hops": self.mean_hops,
            **link_utilization(self.link_bytes, self.links.bandwidth_Bps, self.step_time_s),
        }

    def links_frame(self) -> Any:
        """The ``links`` table (:mod:`tpusim.results.tables`) of the links that carried bytes."""
        from tpusim.results import links_frame

        frame = links_frame(self.links, self.link_bytes, self.step_time_s)
        return frame[frame["bytes"] > 0]

    def ops_frame(self) -> Any:
        """The ``ops`` table: name, kind, chips (class), unit, start_at, end_at, flops."""
        import pandas as pd

        return pd.DataFrame([vars(r) for r in self.ops])


class _Rendezvous:
    """A collective waiting for every class of chips that takes part in it."""

    def __init__(self, env: simpy.Environment, expected: set[str]):
        self.expected = expected
        self.arrived: set[str] = set()
        self.started = env.event()

    def arrive(self, cls: str) -> simpy.Event:
        self.arrived.add(cls)
        if self.arrived >= self.expected and not self.started.triggered:
            self.started.succeed()
        return self.started


class Simulation:
    """One program on one system. ``fidelity`` of the network; ``seed`` for anything
    random (kept so equal inputs give equal numbers); ``onchip`` and ``costs`` override
    the chip's collective on-chip model and op cost model; ``flow_tolerance``: see
    :func:`tpusim.network.make_network`."""

    def __init__(
        self,
        system: System | str,
        program: Program,
        fidelity: Fidelity = "flow",
        seed: int = 0,
        onchip: OnChipModel | None = None,
        costs: ChipCostModel | None = None,
        flow_tolerance: float | None = None,
    ):
        self.system = load_system(system) if isinstance(system, str) else system
        self.program, self.fidelity = program, fidelity
        self.rng = np.random.default_rng(seed)
        self.topology = build_topology(self.system)
        self.costs = costs or ChipCostModel(self.system.chip)
        self.onchip = onchip or OnChipModel.for_chip(self.system.chip)
        self.mesh_axes = map_mesh(self.topology, program.mesh) if program.mesh else {}
        self.env = simpy.Environment()
        self.network = make_network(
            fidelity, self.env, self.topology, flow_tolerance=flow_tolerance
        )
        self._batches = _Batches(RouteCache(self.topology), split_ports=False)
        self._schedules: dict[tuple[Any, ...], Schedule] = {}
        self._rendezvous: dict[str, _Rendezvous] = {}
        self._collective_done: dict[str, simpy.Event] = {}
        self.records: list[OpRecord] = []
        self._comm_s = 0.0
        self._port_cache: dict[tuple[int, int], list[str]] = {}

    # -- set-up --------------------------------------------------------------------------
    def _classes(self) -> dict[str, list[int]]:
        """Chip classes: ``spmd`` for every chip without an override, one per override."""
        overridden = sorted(c for c in self.program.chip_overrides if c < self.topology.num_chips)
        bad = [c for c in self.program.chip_overrides if not 0 <= c < self.topology.num_chips]
        if bad:
            raise InputError(
                f"chip override for chip {bad[0]}: the system has {self.topology.num_chips} chips"
            )
        classes = {f"chip {c}": [c] for c in overridden}
        rest = sorted(set(range(self.topology.num_chips)) - set(overridden))
        return ({"spmd": rest} if rest else {}) | classes

    def _check_memory(self, classes: dict[str, list[int]]) -> None:
        for chips in classes.values():
            tracker = MemoryTracker(self.system.chip, chip_index=chips[0])
            for tier, nbytes in self.program.memory_bytes.items():
                tracker.allocate(f"{self.program.name} resident {tier}", nbytes, memory=tier)  # type: ignore[arg-type]

    def _physical_axes(self, op: Op) -> list[str] | None:
        if not op.axes:
            return None
        if not self.mesh_axes:
            return list(op.axes)
        unknown = [a for a in op.axes if a not in self.mesh_axes]
        if unknown:
            raise InputError(
                f"op '{op.name}': mesh has no axis '{unknown[0]}' (has {', '.join(self.mesh_axes)})"
            )
        return [p for a in op.axes for p in self.mesh_axes[a]]

    def _group(self, op: Op, axes: list[str] | None) -> Group:
        """Explicit chip groups (all the same size), else the mesh/physical axes."""
        if not op.groups:
            return make_group(self.topology, axes)
        sizes = {len(g) for g in op.groups}
        chips = np.array(op.groups, dtype=np.int64) if len(sizes) == 1 else None
        if chips is None or chips.min() < 0 or chips.max() >= self.topology.num_chips:
            raise ValueError(
                f"groups must be equal-sized lists of chips 0..{self.topology.num_chips - 1}"
            )
        return Group(chips[:, self._ring_order(chips[0])], (Axis("group", chips.shape[1], "any"),))

    def _ring_order(self, chips: np.ndarray) -> np.ndarray:
        """Positions of a group in the ring order with the shorter longest hop: as given,
        or folded (0, 2, 4, ..., 3, 1), which keeps a line of chips from paying its
        length on the closing hop. Judged on the first group; the others follow it."""
        from tpusim.collectives.base import ring_order

        def longest(order: np.ndarray) -> tuple[int, int]:
            ring = chips[order]
            hops = [
                self.topology.hops(int(a), int(b))
                for a, b in zip(ring, np.roll(ring, -1), strict=True)
            ]
            return max(hops), sum(hops)

        natural, folded = np.arange(chips.size), ring_order(chips.size, "line")
        return folded if longest(folded) < longest(natural) else natural

    def _schedule(self, op: Op) -> Schedule:
        axes = self._physical_axes(op)
        key = (op.collective, op.size_bytes, tuple(axes or ()), op.algorithm, op.groups)
        if key not in self._schedules:
            try:
                group = self._group(op, axes)
                self._schedules[key] = build_schedule(
                    op.collective,  # type: ignore[arg-type]  # checked by build_schedule
                    op.size_bytes,
                    group,
                    op.algorithm,  # type: ignore[arg-type]
                )
            except ValueError as exc:
                raise InputError(f"op '{op.name}': {exc}") from None
        return self._schedules[key]

    # -- running -------------------------------------------------------------------------
    def _compute_time_s(self, op: Op, slowdown: float) -> tuple[float, str]:
        if op.kind == "matmul":
            cost = self.costs.matmul(op.m, op.n, op.k, op.dtype, op.memory, op.batch)  # type: ignore[arg-type]
        elif op.kind == "elementwise":
            cost = self.costs.elementwise(op.bytes, op.memory)
        elif op.kind == "embedding":
            cost = self.costs.embedding_lookup(op.rows, op.row_bytes, op.memory)
        else:  # host transfer over PCIe
            return op.bytes / op.bandwidth_Bps, "host"
        return cost.time_s * slowdown, cost.unit

    def _op(
        self,
        cls: str,
        chips: list[int],
        op: Op,
        done: dict[str, simpy.Event],
        core: simpy.Resource,
        slowdown: float,
        classes: dict[str, list[int]],
    ):
        yield self.env.all_of([done[d] for d in op.after])
        label = cls if len(chips) == 1 else f"{cls} ({len(chips)} chips)"
        if op.kind != "collective":
            try:
                duration, unit = self._compute_time_s(op, slowdown)
            except ValueError as exc:
                raise InputError(f"op '{op.name}': {exc}") from None
            with core.request() as req:
                yield req
                start = self.env.now
                yield self.env.timeout(duration)
            self.records.append(
                OpRecord(op.name, op.kind, label, unit, start, self.env.now, op.flops)
            )
            done[op.name].succeed()
            return
        schedule = self._schedule(op)
        members = set(np.unique(schedule.group.chips).tolist())
        rendezvous = self._rendezvous.setdefault(
            op.name,
            _Rendezvous(self.env, {c for c, cs in classes.items() if members.intersection(cs)}),
        )
        held = core.request() if not op.overlap else None
        if held is not None:
            yield held
        arrived = self.env.now
        yield rendezvous.arrive(cls)
        if op.name not in self._collective_done:
            start = self.env.now
            finished = execute(self.env, self.network, schedule, self.onchip, self._batches)
            self._collective_done[op.name] = finished
            finished.callbacks.append(_CommTimer(self, start))
        yield self._collective_done[op.name]
        if held is not None:
            core.release(held)
        self.records.append(OpRecord(op.name, op.kind, label, "ici", arrived, self.env.now, 0.0))
        for port in self._ports(schedule, chips[0]):
            self.records.append(OpRecord(op.name, op.kind, label, port, arrived, self.env.now, 0.0))
        done[op.name].succeed()

    def _ports(self, schedule: Schedule, chip: int) -> list[str]:
        """Names of the ICI ports of ``chip`` that the collective's transfers leave by."""
        key = (id(schedule), chip)
        if key not in self._port_cache:
            batches = [self._batches.of_cached(step) for p in schedule.pipelines for step in p]
            used = np.unique(np.concatenate([b.links for b in batches] or [np.zeros(0, int)]))
            mine = used[self.topology.links.src[used] == chip]
            self._port_cache[key] = sorted({self.topology.port_name(int(link)) for link in mine})
        return self._port_cache[key]

    def run(self) -> Results:
        """Simulate to completion. Raises SimulationError on a deadlock (exit code 1)
        and OutOfMemoryError when the resident bytes do not fit."""
        classes = self._classes()
        self._check_memory(classes)
        pending: dict[str, dict[str, simpy.Event]] = {}
        for cls, chips in classes.items():
            override = self.program.chip_overrides.get(chips[0]) if cls != "spmd" else None
            slowdown = override.slowdown if override else 1.0
            ops = self.program.ops_for(chips[0])
            done = {op.name: self.env.event() for op in ops}
            core = simpy.Resource(self.env, capacity=1)
            for op in ops:
                self.env.process(self._op(cls, chips, op, done, core, slowdown, classes))
            pending[cls] = done
        self.env.run()
        self._raise_if_deadlocked(pending, classes)
        spmd = next(iter(classes))
        hops = np.concatenate(self._batches.hops) if self._batches.hops else np.zeros(0)
        compute = sum(
            r.end_at - r.start_at
            for r in self.records
            if r.kind != "collective" and r.chips.startswith(spmd)
        )
        dtype = next((op.dtype for op in self.program.ops if op.kind == "matmul"), "bf16")
        return Results(
            system=self.system.name,
            program=self.program.name,
            fidelity=self.fidelity,
            chips=self.topology.num_chips,
            step_time_s=float(self.env.now),
            compute_time_s=compute,
            communication_time_s=self._comm_s,
            flops_per_chip=self.program.flops_per_chip,
            # MFU against the program's matmul dtype, bf16 where the chip lists none (fp32)
            peak_flops=self.system.chip.peak_flops.get(dtype)  # type: ignore[call-overload]
            or self.system.chip.peak_flops["bf16"],
            ops=sorted(self.records, key=lambda r: (r.start_at, r.chips, r.name)),
            link_bytes=self.network.link_bytes,
            links=self.topology.links,
            max_hops=int(hops.max()) if hops.size else 0,
            mean_hops=float(hops.mean()) if hops.size else 0.0,
        )

    def _raise_if_deadlocked(
        self, pending: dict[str, dict[str, simpy.Event]], classes: dict[str, list[int]]
    ) -> None:
        for name, rendezvous in self._rendezvous.items():
            missing = rendezvous.expected - rendezvous.arrived
            if missing and not rendezvous.started.triggered:
                waiting = ", ".join(sorted(rendezvous.arrived))
                absent = ", ".join(_chips_text(classes[c]) for c in sorted(missing))
                raise SimulationError(
                    f"deadlock: collective '{name}' waits on {waiting}, but {absent} never reach it"
                )
        stuck = [
            (cls, op)
            for cls, done in pending.items()
            for op, ev in done.items()
            if not ev.triggered
        ]
        if stuck:
            cls, op = stuck[0]
            raise SimulationError(
                f"deadlock: op '{op}' on {_chips_text(classes[cls])} "
                f"never ran ({len(stuck)} ops stuck)"
            )


class _CommTimer:
    """Event callback adding a collective's duration to the communication time."""

    def __init__(self, sim: Simulation, start: float):
        self.sim, self.start = sim, start

    def __call__(self, _event: simpy.Event) -> None:
        self.sim._comm_s += self.sim.env.now - self.start


def _chips_text(chips: Sequence[int]) -> str:
    if len(chips) == 1:
        return f"chip {chips[0]}"
    return f"chips {chips[0]}..{chips[-1]} ({len(chips)} chips)"
