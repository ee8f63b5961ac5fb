"""One collective on a network fidelity, and its record.

``run_collective`` makes the collective a one-op program and runs it through
:class:`tpusim.engine.Simulation` (the one simulation driver), then reads the
schedule, hop statistics and link bytes into a :class:`CollectiveResult`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tpusim.collectives import AUTO, Predictor, build_schedule, bus_factor
from tpusim.collectives.base import Schedule
from tpusim.collectives.offload import OnChipModel
from tpusim.config.chip import ChipSpec
from tpusim.config.loader import System
from tpusim.engine.arguments import collective_arguments, system_of
from tpusim.engine.settings import CollectiveOptions
from tpusim.engine.simulation import Simulation
from tpusim.errors import InputError
from tpusim.network import AnalyticNetwork, Network
from tpusim.network.routes import RouteCache
from tpusim.program.ir import Op as ProgramOp
from tpusim.program.ir import Program
from tpusim.results.simulation import CollectiveResult
from tpusim.results.tables import link_utilization, links_frame
from tpusim.topology import Topology, build_topology
from tpusim.vocabulary import Op

if TYPE_CHECKING:
    import pandas as pd


#: A collective on every chip, ``auto`` algorithm, flow fidelity, no faults.
DEFAULT_OPTIONS = CollectiveOptions()


def link_table(topology: Topology, network: Network, time_s: float) -> pd.DataFrame:
    """The ``links`` table (see :mod:`tpusim.results.tables`) after a collective."""
    return links_frame(topology.links, network.link_bytes, time_s)


def run_collective(
    topology: Topology,
    op: Op,
    size: float,
    options: CollectiveOptions = DEFAULT_OPTIONS,
    *,
    chip: ChipSpec | None = None,
    onchip: OnChipModel | None = None,
    system_name: str = "",
    routes: RouteCache | None = None,
) -> tuple[CollectiveResult, Network]:
    """Simulate one collective of ``size`` bytes (nccl-tests convention) on ``topology``
    as ``options`` say: a one-op program run by :class:`tpusim.engine.Simulation` (the
    network's ``fault_report`` holds the fault and routing JSON fields).

    On-chip cost from ``onchip``, else ``chip`` and ``options.engine``, else none;
    ``routes``: a reusable :class:`RouteCache` of ``topology``. Returns the result and
    the network. Raises ValueError (or AlgorithmError) for a bad size, group, op or
    algorithm, InputError for a fault naming no link or chip, SimulationError for a
    collective a failed chip stops.
    """
    if not size > 0:
        raise ValueError(f"bytes must be > 0 (got {size:g})")
    if routes is not None and routes.topology is not topology:
        raise ValueError("routes must be a RouteCache of the same topology")
    engine = options.engine
    model = onchip or (OnChipModel.for_chip(chip, engine) if chip else OnChipModel.none())
    collective = ProgramOp(
        name=op,
        kind="collective",
        collective=op,
        size_bytes=float(size),
        axes=tuple(options.axes),
        algorithm=options.algorithm,
        num_chips=options.chips,
        pairs=tuple(options.pairs),
        split_ports=op == "collective-permute",
    )
    program = Program(op, (collective,))
    settings = options.run_settings()
    sim = Simulation(None, program, settings, onchip=model, topology=topology, routes=routes)
    schedule = _schedule(sim, collective)
    sim.run()
    auto = options.algorithm in (None, AUTO)
    if options.name_replanning and auto and not sim.faults.schedule.empty:
        _note_replanning(sim, collective, schedule)
    return _result(sim, schedule, system_name, size, list(options.pairs)), sim.network


def _note_replanning(sim: Simulation, op: ProgramOp, schedule: Schedule) -> None:
    """Name what ``auto`` planned on the surviving links against what it predicts on the
    healthy topology (``replanned`` in the fault report, and a note in ``adapted``): the
    cause of a slowdown is the algorithm the runtime re-planned and its adaptations."""
    group = sim.placement.group(op, sim.placement.physical_axes(op))
    split = op.split_ports
    healthy = Predictor(
        AnalyticNetwork(sim.env, sim.topology),
        sim.onchip,
        lambda step: sim.batches.of(step, split),
        lambda trial: sim._trial_time_s(trial, split, healthy=True),
    )
    pairs = list(op.pairs) or None
    was = build_schedule(schedule.op, op.size_bytes, group, None, pairs, healthy).algorithm
    report = sim.network.fault_report
    report["replanned"] = {"algorithm": schedule.algorithm, "healthy_algorithm": was}
    change = "kept" if was == schedule.algorithm else f"instead of {was} (healthy)"
    report["adapted"].append(
        f"auto re-planned on the surviving links: {schedule.algorithm} {change}"
    )


def _schedule(sim: Simulation, op: ProgramOp) -> Schedule:
    """The collective's schedule; a bad group, op or algorithm raises the ValueError (or
    AlgorithmError) it was, not the program-level InputError, and so does a group of
    one chip (a collective of nothing, 0 s)."""
    try:
        schedule = sim.schedule(op)
    except InputError as exc:
        if isinstance(exc.__cause__, ValueError):
            raise exc.__cause__ from None
        raise
    if schedule.group.size < 2 and not op.pairs:
        raise ValueError(
            f"{op.collective} on a group of {schedule.group.size} chip moves nothing (it "
            "would take 0 s): give a group of two or more chips"
        )
    return schedule


def _result(
    sim: Simulation, schedule: Schedule, system_name: str, size: float, pairs: list | None
) -> CollectiveResult:
    """The record of a one-collective simulation that has run."""
    time_s = sim.comm.last_end_at
    group = schedule.group
    # a collective that takes no time (one chip, nothing to move) has no bandwidth:
    # None (JSON null), not infinity, which JSON cannot hold
    algbw = size / time_s if time_s > 0 else None
    # distinct chips counted as a set: np.unique loads numpy.ma, a start-up cost of its own
    chips_in = len(set(np.ravel(pairs if pairs else group.chips).tolist()))
    return CollectiveResult(
        system=system_name,
        op=schedule.op,
        bytes=float(size),
        chips=chips_in,
        group_size=group.size,
        num_groups=group.num_groups,
        algorithm=schedule.algorithm,
        fidelity=sim.fidelity,
        engine=sim.onchip.engine,
        time_s=time_s,
        algbw_Bps=algbw,
        busbw_Bps=None if algbw is None else algbw * bus_factor(schedule.op, group.size),
        max_hops=sim.hops.max_hops,
        mean_hops=sim.hops.mean_hops,
        num_steps=schedule.num_steps,
        num_flows=sim.hops.num_flows,
        **link_utilization(sim.network.link_bytes, sim.topology.links.bandwidth_Bps, time_s),
        num_events=sim.network.num_events,
    )


def simulate_collective(
    system: System | str,
    op: Op,
    size: float,
    options: CollectiveOptions = DEFAULT_OPTIONS,
    onchip: OnChipModel | None = None,
) -> tuple[CollectiveResult, Network]:
    """:func:`run_collective` on a loaded system or a shipped name / YAML path, with
    the system's chip for the on-chip model unless ``onchip`` is given. Arguments of
    the wrong type or out of range raise InputError naming them
    (:func:`~tpusim.engine.arguments.collective_arguments`)."""

    loaded = system_of(system)
    topology = build_topology(loaded)
    chip, name = loaded.chip, loaded.name
    op, size, options = collective_arguments(op, size, options, onchip, name, topology.num_chips)
    return run_collective(topology, op, size, options, chip=chip, onchip=onchip, system_name=name)
