"""Serving on the engine's clock and network: the host simulation whose SimPy
environment the replicas run on (:mod:`.replica`) and whose network carries the KV
transfers of disaggregated services, alone or shared with training jobs.

Alone, a run makes its own host: a :class:`~tpusim.engine.Simulation` of no ops on the
replicas' system and network settings (:func:`host_for`). Shared (:func:`run_shared`),
the host is a training job's simulation: its ops, the services' replicas and their KV
transfers run on one clock, and the transfers' flows contend with the job's
collectives on one network (max-min fair shares under the flow fidelity).
:func:`run_jobs_serving` does the same for several training jobs on their own chips
(:mod:`tpusim.engine.multijob`) and services: the host is a simulation of no ops that
each job joins, as the services do (the ``jobs`` workload's serving jobs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import simpy

from tpusim.engine import Placement, Results, RunSettings, Simulation
from tpusim.engine.multijob import Job, JobsRun, run_jobs
from tpusim.program.ir import Op, Program
from tpusim.serving.replica import Collect, ServingRun
from tpusim.serving.scheduler import Request

if TYPE_CHECKING:
    from tpusim.config.loader import System
    from tpusim.network import NetworkSettings
    from tpusim.network.routes import RouteCache
    from tpusim.serving.costs import IterationCosts
    from tpusim.topology import Topology


class Startable(Protocol):
    """What serves on a host: a service (colocated or disaggregated)."""

    def start(self, requests: list[Request], host: Simulation) -> Collect: ...


def _no_ops(name: str) -> Program:
    return Program(name=name, ops=())


def host_for(costs: IterationCosts) -> Simulation:
    """A simulation of no ops on ``costs``' system, topology and network settings: the
    environment and network a serving run has alone."""
    settings = RunSettings(costs.network, port_rows=False)
    return Simulation(
        costs.system, _no_ops("serving"), settings, topology=costs.topology, routes=costs.routes
    )


class Transfers:
    """KV transfers as flows on ``host``'s network, recorded as the host's own
    collectives are (a simulation of no ops joined to the host, placing groups by
    their chip pairs)."""

    def __init__(self, host: Simulation):
        placement = Placement(host.topology, None)
        self.sim = Simulation.joining(host, _no_ops("kv_transfers"), placement)

    def start(self, op: Op) -> simpy.Event:
        """Run collective ``op`` once on the network from now; the event fires when
        its last byte has arrived."""
        return self.sim.run_schedule(op, self.sim.schedule(op))


def run_shared(
    host: Simulation, services: Sequence[tuple[Startable, list[Request]]]
) -> tuple[Results, list[ServingRun]]:
    """``host`` (a training job's simulation, not yet started) and each service serving
    its requests (sorted by arrival) on one clock and one network: the job's results
    and each service's run. The job's op records are its own; its ``step_time_s`` is
    when the environment ran out, which the services' last requests may set. Raises
    what :meth:`Simulation.run` raises."""
    pending = host.start()
    collects = [service.start(requests, host) for service, requests in services]
    host.env.run()
    return host.finish(pending), [collect() for collect in collects]


def run_jobs_serving(
    system: System,
    topology: Topology,
    routes: RouteCache,
    jobs: Sequence[Job],
    network: NetworkSettings | RunSettings,
    services: Sequence[tuple[Startable, list[Request]]],
) -> tuple[JobsRun, list[ServingRun]]:
    """``jobs`` (each on its own chips, as :func:`~tpusim.engine.multijob.run_jobs` runs
    them) and each service serving its requests (sorted by arrival) at once on one
    clock and one ``network``: the jobs' run (each job's time is its last op's end,
    its link bytes its own flows') and each service's run. Raises what
    :meth:`Simulation.run` raises."""
    collects: list[Collect] = []

    def join(host: Simulation) -> None:
        collects.extend(service.start(requests, host) for service, requests in services)

    run = run_jobs(system, topology, routes, jobs, network, join=join)
    return run, [collect() for collect in collects]
