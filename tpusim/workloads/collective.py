"""``kind: collective``: one collective over the system (sizes follow nccl-tests)."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, PositiveInt

from tpusim.collectives import build_schedule, make_group
from tpusim.collectives.registry import AlgorithmName
from tpusim.config.faults import FaultKeys
from tpusim.config.types import Bytes
from tpusim.engine import CollectiveOptions, run_collective
from tpusim.engine.faults import FaultState
from tpusim.engine.work import check_schedule_work
from tpusim.results.records import CollectiveRecord
from tpusim.results.run import CollectiveLinks
from tpusim.vocabulary import Op
from tpusim.workloads.registry import Outcome, WorkloadContext, WorkloadKind
from tpusim.workloads.spec import NetworkDemand, WorkloadSpec


class CollectiveWorkload(WorkloadSpec, FaultKeys):
    """``op`` of ``bytes`` over the torus ``axes`` (one group per rest), the first
    ``chips`` chips, or every chip; ``algorithm`` defaults to the fastest known.
    ``faults``, ``fail_links``, ``seed`` and ``on_chip_failure`` (see
    :mod:`tpusim.config.faults`) and ``routing`` apply to this collective; per system
    through ``per_system``."""

    kind: Literal["collective"]
    name: str
    op: Op
    bytes: Bytes
    axes: list[str] = Field(default_factory=list)
    chips: PositiveInt | None = None
    algorithm: AlgorithmName | None = None

    def network_demand(self) -> NetworkDemand:
        """This collective: ``op`` of ``bytes`` by ``algorithm``."""
        return NetworkDemand(self.op, float(self.bytes), self.algorithm)


def run(spec: CollectiveWorkload, context: WorkloadContext) -> Outcome:
    """The collective through :func:`~tpusim.engine.run_collective`; the
    outcome keeps its per-link bytes."""

    system = context.system
    options = CollectiveOptions(
        axes=spec.axes or (),
        chips=spec.chips,
        algorithm=spec.algorithm,
        network=context.network,
        faults=spec.fault_set(),
        routing=spec.routing,
        seed=spec.seed,
    )
    result, network = run_collective(
        context.topology,
        spec.op,
        spec.bytes,
        options,
        chip=system.chip,
        system_name=system.name,
        routes=context.routes,
    )
    link_bytes = np.array(network.link_bytes, dtype=float)
    links = CollectiveLinks(system.name, spec.name, spec.op, spec.bytes, result.time_s, link_bytes)
    record = CollectiveRecord.of(result, context.label, network.fault_report)
    return Outcome(record, links=links)


def check(spec: CollectiveWorkload, context: WorkloadContext) -> None:
    """The group exists on the system (axes, chip count; ValueError), a named
    algorithm's schedule is within the packet fidelity's work (InputError), and the
    faults and routing apply to it (every link and chip named exists, the fidelity models
    them; InputError), as the run would find before its first event."""

    group = make_group(context.topology, spec.axes or None, spec.chips)
    named = spec.algorithm not in (None, "auto")
    if named and context.network.hop_event_bytes() is not None:  # packets x hops, as run
        schedule = build_schedule(spec.op, spec.bytes, group, spec.algorithm)
        check_schedule_work(schedule, context.network, context.topology, spec.name)
    FaultState(context.topology, spec.fault_set(), spec.routing, context.network, spec.seed or 0)


KIND = WorkloadKind(CollectiveWorkload, run, record=CollectiveRecord, check=check)
