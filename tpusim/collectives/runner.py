"""Simulating a collective on a network fidelity, and its records.

``execute`` runs a schedule inside a SimPy environment (one process per pipeline:
each step's flow batch, then the on-chip cost of the step); ``run_collective``
wraps it with a fresh environment and returns a :class:`CollectiveResult`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import simpy

from tpusim.collectives import build_schedule, bus_factor, make_group
from tpusim.collectives.base import Algorithm, Op, Schedule, Step
from tpusim.collectives.offload import Engine, OnChipModel
from tpusim.config.chip import ChipSpec
from tpusim.config.loader import System, load_system
from tpusim.network import DEFAULT_PACKET_BYTES, Fidelity, Network, make_network
from tpusim.network.base import FlowBatch
from tpusim.network.routes import RouteCache
from tpusim.results import link_utilization, links_frame
from tpusim.topology import Topology

if TYPE_CHECKING:
    import pandas as pd


class _Batches:
    """Flow batches of a schedule's steps; a step repeated in a ring is built once."""

    def __init__(self, routes: RouteCache, split_ports: bool):
        self.routes, self.split_ports = routes, split_ports
        # keyed by id(step); the step is kept alive beside its batch so the id stays unique
        self._by_step: dict[int, tuple[Step, FlowBatch]] = {}
        self.hops: list[np.ndarray] = []

    def of_cached(self, step: Step) -> FlowBatch:
        """The batch of ``step`` without counting a send (for reports)."""
        cached = self._by_step.get(id(step))
        if cached is None:
            batch = self.routes.batch(step.src, step.dst, step.bytes, self.split_ports)
            self._by_step[id(step)] = cached = (step, batch)
        return cached[1]

    def of(self, step: Step) -> FlowBatch:
        """The batch of ``step``, counting its hops as sent."""
        batch = self.of_cached(step)
        self.hops.append(batch.hops)
        return batch


def execute(
    env: simpy.Environment,
    network: Network,
    schedule: Schedule,
    onchip: OnChipModel,
    batches: _Batches,
) -> simpy.Event:
    """Start every pipeline of ``schedule`` now; the event fires when all have finished."""

    def pipeline(steps):
        for step in steps:
            yield network.send(batches.of(step))
            cost = onchip.step_time_s(step)
            if cost > 0:
                yield env.timeout(cost)

    return env.all_of([env.process(pipeline(p)) for p in schedule.pipelines if p])


@dataclass
class CollectiveResult:
    """One simulated collective. Times in s, bandwidths in bytes/s; ``bytes`` follows
    nccl-tests; ``chips`` counts every chip taking part (``group_size`` per group)."""

    system: str
    op: str
    bytes: float
    chips: int
    group_size: int
    num_groups: int
    algorithm: str
    fidelity: str
    engine: str
    time_s: float
    algbw_Bps: float
    busbw_Bps: float
    max_hops: int
    mean_hops: float
    num_steps: int
    num_flows: int
    max_link_utilization: float
    mean_link_utilization: float
    busiest_link_bytes: float
    num_events: int

    def record(self) -> dict[str, Any]:
        return asdict(self)


def link_table(topology: Topology, network: Network, time_s: float) -> pd.DataFrame:
    """The ``links`` table (see :mod:`tpusim.results.tables`) after a collective."""
    return links_frame(topology.links, network.link_bytes, time_s)


def run_collective(
    topology: Topology,
    op: Op,
    size: float,
    *,
    chip: ChipSpec | None = None,
    system_name: str = "",
    axes: Sequence[str] | None = None,
    chips: int | None = None,
    algorithm: Algorithm | None = None,
    fidelity: Fidelity = "flow",
    engine: Engine | Literal["auto"] = "auto",
    onchip: OnChipModel | None = None,
    pairs: list[tuple[int, int]] | None = None,
    packet_bytes: float = DEFAULT_PACKET_BYTES,
    check_capacity: bool = False,
    routes: RouteCache | None = None,
    flow_tolerance: float | None = None,
) -> tuple[CollectiveResult, Network]:
    """Simulate one collective of ``size`` bytes (nccl-tests convention) on ``topology``.

    ``flow_tolerance``: see :func:`tpusim.network.make_network`.
    ``routes``: a :class:`RouteCache` of ``topology`` to reuse (runs of one collective
    at several sizes then route each step once); a fresh one by default.

    The on-chip cost comes from ``onchip``, else from ``chip`` and ``engine``
    (:meth:`OnChipModel.for_chip`), else there is none. Returns the result and the
    network (whose ``link_bytes`` feed :func:`link_table`). Raises ValueError (or
    AlgorithmError) for a bad size, group, op or algorithm.
    """
    if not size > 0:
        raise ValueError(f"bytes must be > 0 (got {size:g})")
    group = make_group(topology, axes, chips)
    schedule = build_schedule(op, size, group, algorithm, pairs)
    if onchip is not None:
        model = onchip
    else:
        model = OnChipModel.for_chip(chip, engine) if chip is not None else OnChipModel.none()
    env = simpy.Environment()
    kwargs: dict[str, Any] = {}
    if fidelity == "flow":
        kwargs = {"check_capacity": check_capacity, "flow_tolerance": flow_tolerance}
    if fidelity == "packet":
        kwargs = {"packet_bytes": packet_bytes}
    network = make_network(fidelity, env, topology, **kwargs)
    if routes is None:
        routes = RouteCache(topology)
    elif routes.topology is not topology:
        raise ValueError("routes must be a RouteCache of the same topology")
    batches = _Batches(routes, split_ports=op == "collective-permute")
    done = execute(env, network, schedule, model, batches)
    env.run(until=done)
    time_s = float(env.now)
    hops = np.concatenate(batches.hops) if batches.hops else np.zeros(1)
    algbw = size / time_s if time_s > 0 else float("inf")
    chips_in = int(np.unique(np.ravel(pairs) if pairs else group.chips).size)
    return CollectiveResult(
        system=system_name,
        op=op,
        bytes=float(size),
        chips=chips_in,
        group_size=group.size,
        num_groups=group.num_groups,
        algorithm=schedule.algorithm,
        fidelity=fidelity,
        engine=model.engine,
        time_s=time_s,
        algbw_Bps=algbw,
        busbw_Bps=algbw * bus_factor(op, group.size),
        max_hops=int(hops.max()) if hops.size else 0,
        mean_hops=float(hops.mean()) if hops.size else 0.0,
        num_steps=schedule.num_steps,
        num_flows=int(sum(h.size for h in batches.hops)),
        **link_utilization(network.link_bytes, network.bandwidth_Bps, time_s),
        num_events=network.num_events,
    ), network


def simulate_collective(
    system: System | str, op: Op, size: float, **options: Any
) -> tuple[CollectiveResult, Network]:
    """:func:`run_collective` on a loaded system or a shipped name / YAML path, with
    the system's chip for the on-chip model."""
    from tpusim.topology import build_topology

    loaded = load_system(system) if isinstance(system, str) else system
    return run_collective(
        build_topology(loaded), op, size, chip=loaded.chip, system_name=loaded.name, **options
    )
