"""Several jobs on one network: each job a program on its own chips of one system, all
run at once on one network, and each also alone (for its slowdown).

Why several programs on one network, not one merged program. A merged
:class:`~tpusim.program.ir.Program` is SPMD: every chip runs every op, and MPMD
overrides only append ops after the shared ones (and each overridden chip becomes a
class of its own, one SimPy process per chip per op). Jobs run different ops on
disjoint chips, each job's chips in lock step; so each job is its own
:class:`~tpusim.engine.Simulation` (one chip class for its SPMD chips, its own
TensorCore resource, rendezvous and schedule cache), and the simulations share one
SimPy environment and one network (the constructor's ``env``, ``network`` and
``placement`` arguments, then :meth:`~tpusim.engine.Simulation.start`, one
``env.run()``, :meth:`~tpusim.engine.Simulation.finish`). Their flows then share link
bandwidth max-min fairly in the flow model, as concurrent jobs share ICI.

Where a job runs: a *slice* (``4x4x4`` at an ``offset``) of the system's axis
structure (:meth:`~tpusim.topology.base.Topology.axis_structure`: x, y, z on a torus;
group, board, chip on Boardfly; pod then the pod's axes on a fabric), or explicit
``chips``. A slice axis shorter than the system's wrapped axis is a line (no
wraparound link of its own), as a TPU slice carved out of a pod is; the job's mesh
axes take whole slice axes in order, as JAX's device mesh does on a torus.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from tpusim.collectives.base import Axis, Group
from tpusim.engine import Simulation
from tpusim.engine.placement import Placement
from tpusim.engine.settings import RunSettings
from tpusim.network import NetworkSettings
from tpusim.program.ir import ChipOverride, Op, Program
from tpusim.results.observers import BaseObserver

if TYPE_CHECKING:
    from tpusim.config.loader import System
    from tpusim.network.base import FlowBatch
    from tpusim.network.routes import RouteCache
    from tpusim.results.simulation import Results
    from tpusim.topology import Topology


@dataclass(frozen=True)
class Job:
    """One job: its ``name``, its chips as a one-group :class:`Group` (positions along
    the slice's axes) and its ``program`` (chip overrides keyed by system chip index;
    mesh axes laid on the group's axes)."""

    name: str
    group: Group
    program: Program

    @property
    def chips(self) -> np.ndarray:
        """The job's chips in position order."""
        return self.group.flat[0]


def parse_shape(shape: str | Sequence[int]) -> list[int]:
    """``"4x4x4"`` or ``[4, 4, 4]`` as sizes; raises ValueError unless every size >= 1."""
    parts = shape.lower().split("x") if isinstance(shape, str) else list(shape)
    try:
        sizes = [int(p) for p in parts]
    except ValueError:
        raise ValueError(f"slice '{shape}' is not a shape such as 4x4x4") from None
    if not sizes or min(sizes) < 1:
        raise ValueError(f"slice '{shape}' needs sizes >= 1")
    return sizes


def slice_group(
    topology: Topology, shape: Sequence[int], offset: Sequence[int] | None = None
) -> Group:
    """The chips of a ``shape`` slice at ``offset`` (default the origin) of the
    topology's axis structure. A wrapped axis the slice does not cover whole becomes a
    line. Raises ValueError when the shape has the wrong number of axes or does not fit."""
    chips, axes = topology.axis_structure()
    names = ", ".join(f"{a.name}={a.size}" for a in axes)
    where = list(offset) if offset is not None else [0] * len(shape)
    if len(shape) != len(axes) or len(where) != len(axes):
        raise ValueError(
            f"slice {'x'.join(map(str, shape))} at offset {where} needs one size and one "
            f"offset per axis of the system ({names})"
        )
    for size, start, axis in zip(shape, where, axes, strict=True):
        if start < 0 or start + size > axis.size:
            raise ValueError(
                f"slice {'x'.join(map(str, shape))} at offset {where} does not fit: axis "
                f"{axis.name} has {axis.size} chips, the slice needs {start}..{start + size - 1}"
            )
    picked = chips[tuple(slice(o, o + s) for o, s in zip(where, shape, strict=True))]
    kinds = [
        "line" if a.kind == "ring" and s < a.size else a.kind
        for a, s in zip(axes, shape, strict=True)
    ]
    return Group(
        picked[None, ...],
        tuple(Axis(a.name, s, k) for a, s, k in zip(axes, shape, kinds, strict=True)),  # type: ignore[arg-type]
    )


def chips_group(topology: Topology, chips: Sequence[int], mesh: dict[str, int] | None) -> Group:
    """Explicit chips: in the ring order with the shorter longest hop, one axis
    ``chips``, or shaped as ``mesh`` (its axes, in the order given). Raises ValueError
    for a chip outside the system, a repeated chip or a mesh of another size."""
    n = topology.num_chips
    bad = [c for c in chips if not 0 <= c < n]
    if bad:
        raise ValueError(f"chip {bad[0]} is not a chip of the system (0..{n - 1})")
    if len(set(chips)) != len(chips):
        repeated = next(c for c in chips if list(chips).count(c) > 1)
        raise ValueError(f"chip {repeated} is listed twice")
    given = np.asarray(chips, dtype=np.int64)
    if mesh:
        if math.prod(mesh.values()) != given.size:
            raise ValueError(
                f"mesh {mesh} has {math.prod(mesh.values())} devices, not {given.size}"
            )
        axes = tuple(Axis(name, size, "any") for name, size in mesh.items())
        return Group(given.reshape(1, *mesh.values()), axes)
    ordered = given[Placement(topology, None).ring_order(given)]
    return Group(ordered[None, :], (Axis("chips", given.size, "any"),))


def select_axes(group: Group, names: Sequence[str] | None) -> Group:
    """The job's group along ``names`` of its axes (one group per position of the
    others), or whole. Raises ValueError for an axis it does not have."""
    if not names:
        return group
    known = [a.name for a in group.axes]
    unknown = [a for a in names if a not in known]
    if unknown or len(set(names)) != len(names):
        raise ValueError(f"axes {','.join(names)}: the job's axes are {', '.join(known)}")
    picked = [known.index(a) for a in names]
    others = [i for i in range(len(known)) if i not in picked]
    moved = np.transpose(group.chips[0], others + picked)
    shape = [group.axes[i].size for i in picked]
    return Group(moved.reshape(-1, *shape), tuple(group.axes[i] for i in picked))


def mesh_axes(mesh: dict[str, int], axes: tuple[Axis, ...]) -> dict[str, list[str]]:
    """Logical mesh axis -> the job's axes it takes (whole axes, in order), as
    :func:`tpusim.engine.placement.map_mesh` does on a whole system. Raises ValueError
    when the mesh does not fit."""
    total, chips = math.prod(mesh.values()), math.prod(a.size for a in axes)
    if total != chips:
        raise ValueError(f"mesh {mesh} has {total} devices but the job has {chips} chips")
    out: dict[str, list[str]] = {}
    queue = list(axes)
    for name, size in mesh.items():
        taken, product = [], 1
        while product < size and queue:
            axis = queue.pop(0)
            taken.append(axis.name)
            product *= axis.size
        if product != size:
            shape = ", ".join(f"{a.name}={a.size}" for a in axes)
            raise ValueError(f"mesh axis '{name}' ({size}) does not fit the job's axes {shape}")
        out[name] = taken
    return out


class JobPlacement(Placement):
    """Placement of one job's collectives on its own chips: no axes, the whole job;
    mesh (or slice) axes, that part of it; ``num_chips``, the job's first chips."""

    def __init__(self, topology: Topology, job: Job):
        super().__init__(topology, None)
        self.job = job
        mesh = job.program.mesh
        if mesh:
            self.mesh_axes = mesh_axes(mesh, job.group.axes)

    def group(self, op: Op, axes: list[str] | None) -> Group:
        if op.groups:
            return super().group(op, axes)
        if op.num_chips is not None:
            first = self.job.chips[: op.num_chips]
            return Group(first[None, :], (Axis("chips", first.size, "any"),))
        return select_axes(self.job.group, axes)


class JobLinkBytes(BaseObserver):
    """Bytes each directed link carried for one job (from the flows it sent)."""

    def __init__(self, num_links: int):
        self.link_bytes = np.zeros(num_links)

    def flows_sent(self, batch: FlowBatch) -> None:
        per_entry = np.repeat(batch.bytes, batch.hops)
        np.add.at(self.link_bytes, batch.links, per_entry)


@dataclass
class JobsRun:
    """Jobs run at once on one network: per job its time (s, its last op's end),
    per-link bytes and :class:`~tpusim.engine.Results`; ``makespan_s`` when the last
    job ended."""

    names: list[str]
    times_s: list[float]
    link_bytes: dict[str, np.ndarray]
    results: list[Results] = field(default_factory=list)

    @property
    def makespan_s(self) -> float:
        return max(self.times_s)


#: Flow fidelity at its default tolerance.
DEFAULT_NETWORK = NetworkSettings()


def run_jobs(
    system: System,
    topology: Topology,
    routes: RouteCache,
    jobs: Sequence[Job],
    network: NetworkSettings | RunSettings = DEFAULT_NETWORK,
    join: Callable[[Simulation], object] | None = None,
) -> JobsRun:
    """``jobs`` at once on one ``network`` (settings, or whole run settings: with
    their faults, routing and seed); ``join``, when given, is called with the
    first job's simulation once every job has started, to start more work on the same
    clock and network (serving jobs). Raises SimulationError naming a job's deadlocked
    op, OutOfMemoryError for a job that does not fit."""
    observers = [JobLinkBytes(len(topology.links)) for _ in jobs]
    placements = [JobPlacement(topology, job) for job in jobs]
    given = network if isinstance(network, RunSettings) else RunSettings(network)
    settings = replace(given, port_rows=False)
    host = Simulation(
        system,
        jobs[0].program,
        settings,
        topology=topology,
        routes=routes,
        observers=observers[:1],
        placement=placements[0],
    )
    sims = [host]
    for job, observer, placement in zip(jobs[1:], observers[1:], placements[1:], strict=True):
        sims.append(Simulation.joining(host, job.program, placement, [observer]))
    pending = [sim.start() for sim in sims]
    if join is not None:
        join(host)
    host.env.run()
    results = [sim.finish(p) for sim, p in zip(sims, pending, strict=True)]
    times = [max((r.end_at for r in res.ops), default=0.0) for res in results]
    links = {job.name: o.link_bytes for job, o in zip(jobs, observers, strict=True)}
    return JobsRun([job.name for job in jobs], times, links, results)


def overlap_problem(jobs: Sequence[Job], topology: Topology) -> tuple[int, str] | None:
    """(index, problem) of the first job sharing a chip with an earlier one, or None;
    the chip is named by index and position on the system's axes."""
    owner: dict[int, str] = {}
    arr, axes = topology.axis_structure()
    for index, job in enumerate(jobs):
        for chip in job.chips.tolist():
            if chip in owner:
                where = np.argwhere(arr == chip)[0]
                position = ", ".join(f"{a.name}={p}" for a, p in zip(axes, where, strict=True))
                return index, (
                    f"job '{job.name}' shares chip {chip} ({position}) with job '{owner[chip]}'"
                )
        owner.update(dict.fromkeys(job.chips.tolist(), job.name))
    return None


def local_overrides(program: Program, chips: np.ndarray) -> Program:
    """``program`` with its chip overrides re-keyed from job-local chip positions to
    system chips. Raises ValueError for a position outside the job."""
    moved: dict[int, ChipOverride] = {}
    for local, override in program.chip_overrides.items():
        if not 0 <= local < chips.size:
            raise ValueError(f"override for chip {local}: the job has {chips.size} chips")
        moved[int(chips[local])] = override
    return Program(program.name, program.ops, program.mesh, program.memory_bytes, moved)


__all__ = [
    "DEFAULT_NETWORK",
    "Job",
    "JobLinkBytes",
    "JobPlacement",
    "JobsRun",
    "chips_group",
    "local_overrides",
    "mesh_axes",
    "overlap_problem",
    "parse_shape",
    "run_jobs",
    "select_axes",
    "slice_group",
]
