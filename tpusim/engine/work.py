"""Work limits checked before simulating (:mod:`tpusim.config.limits`): a program's
collectives counted before its first event, and a collective's schedule at the packet
fidelity counted exactly (packets x hops of every transfer) once it is planned, so an
algorithm whose transfers travel far (one-shot, direct) cannot slip past the estimate,
which counts transfers, not their hops."""

from __future__ import annotations

import math

import numpy as np

from tpusim.collectives.base import Schedule
from tpusim.config.limits import MAX_PACKET_HOPS
from tpusim.errors import InputError
from tpusim.network import NetworkSettings
from tpusim.program.ir import Program
from tpusim.topology import Topology

__all__ = ["check_program_work", "check_schedule_work", "packet_hops"]


def check_program_work(program: Program, network: NetworkSettings, num_chips: int) -> None:
    """Refuse (InputError) a program whose collectives are over the fidelity's work
    limit (:meth:`~tpusim.network.NetworkSettings.program_work_problem`): every command
    and the Python API simulate through here."""
    sizes = [op.size_bytes for op in program.ops if op.kind == "collective"]
    problem = network.program_work_problem(num_chips, sizes)
    if problem is not None:
        raise InputError(f"program '{program.name}': {problem}")


def check_schedule_work(
    schedule: Schedule, network: NetworkSettings, topology: Topology, name: str
) -> None:
    """At a fidelity that counts its events per hop (the packet fidelity,
    :meth:`~tpusim.network.NetworkSettings.hop_event_bytes`), refuse (InputError naming
    op ``name``) a schedule of more than MAX_PACKET_HOPS packet-hops (:func:`packet_hops`)."""
    packet_bytes = network.hop_event_bytes()
    if packet_bytes is None:
        return
    hops = packet_hops(schedule, topology, packet_bytes, stop_after=MAX_PACKET_HOPS)
    if hops > MAX_PACKET_HOPS:
        raise InputError(
            f"op '{name}': {network.fidelity} fidelity would simulate over {MAX_PACKET_HOPS:,} "
            f"packet-hops ({schedule.algorithm}: its transfers' packets times their hops); "
            "use larger packets (packet_bytes), another algorithm or the flow fidelity"
        )


def packet_hops(
    schedule: Schedule, topology: Topology, packet_bytes: float, stop_after: float = math.inf
) -> float:
    """Packets x route hops summed over every transfer of ``schedule`` (counting stops
    once past ``stop_after``): one SimPy event per packet per hop at the packet
    fidelity. Routes are the topology's minimal ones."""
    rows: dict[int, np.ndarray] = {}
    total = 0.0
    for pipeline in schedule.pipelines:
        for step in pipeline:
            sources = np.unique(step.src)
            for s in sources.tolist():
                if s not in rows:
                    rows[s] = topology.hops_from(s)
            table = np.stack([rows[s] for s in sources.tolist()])
            hops = table[np.searchsorted(sources, step.src), step.dst]
            total += float((np.ceil(step.bytes / packet_bytes) * np.maximum(hops, 1)).sum())
            if total > stop_after:
                return total
    return total
