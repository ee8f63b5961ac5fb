"""Faults during a simulation: when links and chips fail, and what the runtime does.

:class:`FaultState` belongs to one :class:`~tpusim.engine.Simulation`. It resolves
the fault set on the topology (random links drawn from the simulation's one random
generator, seeded with its seed and made only when a fault or a routing policy draws),
puts the routing policy and the faults present from the start on every network the
simulation builds, applies later faults at their instants (SimPy processes), adapts
collective groups (a ring with a dead link runs as a line; down chips leave the group
under ``exclude``) and runs collectives as attempts under the chip-failure policy:

- ``fail``: a chip of the group down when the collective starts or fails while it
  runs ends the simulation (SimulationError, exit 1) naming the chip, the op, the time;
- ``exclude``: the collective runs without the down chips; one that loses a chip
  while running is retried, from the end of the attempt, on the shrunk group (the
  runtime notices the failure when the attempt completes or times out);
- ``spare_cube`` (a torus of 4x4x4 cubes): the optical circuit switches swap a spare
  cube in :data:`OCS_RECONFIGURATION_S` after the failure; a collective waits for it
  (and one that lost a chip while running is retried then) on the whole torus.

Every fidelity takes non-minimal routing and the faults present from the start (the
packet fidelity sends its packets on the routes the policy and the failures leave); a
link or chip that fails during the run needs flows moved in flight, which only the
flow and analytic fidelities do: asking the packet fidelity for it is an InputError
(exit 2).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import simpy

from tpusim import units
from tpusim.collectives.adapt import rings_as_lines, without_chips
from tpusim.collectives.base import Group, Schedule
from tpusim.config.faults import NO_FAULTS, FaultSet, Routing
from tpusim.errors import InputError, SimulationError
from tpusim.network import NETWORKS, Network, NetworkSettings
from tpusim.network.faults import ChipFault, DisconnectedError, FaultSchedule, resolve_faults
from tpusim.network.routing import Router, make_router
from tpusim.program.ir import ChipOverride, Op, Program
from tpusim.topology import Topology

if TYPE_CHECKING:
    from tpusim.engine.context import CollectiveRunner

OCS_RECONFIGURATION_S = 10.0
"""Seconds for the optical circuit switches to swap a spare 4x4x4 cube into a torus.
Source: GLK (tpu-specs.md, TPU v4 section): "Reconfiguring the torus via OCS takes ten
seconds." Grade: secondary. Override with ``FaultState.reconfiguration_s``."""

CUBE_EDGE_CHIPS = 4
"""Chips along each edge of an OCS cube (TPU v4/v5p/Ironwood: 4x4x4 = 64 chips per
rack). Source: tpu-specs.md "Cube / OCS" (secondary)."""


class FaultState:
    """The faults of one simulation (see the module docstring). ``epoch`` counts the
    changes so far (schedules are rebuilt after one)."""

    def __init__(
        self,
        topology: Topology,
        fault_set: FaultSet | None,
        routing: Routing,
        network: NetworkSettings,
        seed: int,
    ):
        fault_set = fault_set or NO_FAULTS
        self.topology, self.fault_set, self.routing = topology, fault_set, routing
        # the simulation's one random generator, made only when something draws from it
        # (loading numpy.random is ~10 ms of a healthy run's start)
        draws = not fault_set.empty or routing != "minimal"
        rng = np.random.default_rng(seed) if draws else None
        if rng is None or fault_set.empty:
            self.schedule = FaultSchedule(on_chip_failure=fault_set.on_chip_failure)
        else:
            self.schedule = resolve_faults(fault_set, topology, rng)
        self.router = None if rng is None else make_router(routing, rng)
        self.used = not self.schedule.empty or self.router is not None
        if not network.backend.reroutes_in_flight and self._changes_later():
            able = " or ".join(NETWORKS.names(where=lambda backend: backend.reroutes_in_flight))
            raise InputError(
                f"the {network.fidelity} fidelity does not move packets in flight off a link "
                f"that fails during the run: use the {able} fidelity (faults from the start "
                "and non-minimal routing run at every fidelity)"
            )
        if fault_set.on_chip_failure == "spare_cube":
            _check_cubes(topology)
        self.active = bool(self.schedule.chip_faults)
        self.reconfiguration_s = OCS_RECONFIGURATION_S
        self.epoch = 0
        self.notes: list[str] = []
        self._running: dict[str, tuple[set[int], list[ChipFault]]] = {}

    def _changes_later(self) -> bool:
        """Some link or chip fails after the start (links change under flows in flight)."""
        sched = self.schedule
        return any(f.at_s > 0 for f in sched.link_faults) or any(
            f.at_s > 0 for f in sched.chip_faults
        )

    # -- before the run --------------------------------------------------------------------
    def slowed(self, program: Program) -> Program:
        """``program`` with every slow chip's compute slowed (an MPMD override)."""
        if not self.schedule.slow_chips:
            return program
        overrides = dict(program.chip_overrides)
        for chip, factor in self.schedule.slow_chips.items():
            old = overrides.get(chip, ChipOverride())
            overrides[chip] = replace(old, slowdown=old.slowdown * factor)
        return replace(program, chip_overrides=overrides)

    def slowdown_of(self, chips: np.ndarray) -> float:
        """How many times slower a lock-step collective on ``chips`` computes: its slowest
        chip's slowdown (1 without slow chips)."""
        slow = self.schedule.slow_chips
        if not slow:
            return 1.0
        members = set(np.unique(chips).tolist())
        return max([f for c, f in slow.items() if c in members], default=1.0)

    def prepare(self, network: Network) -> None:
        """Put the routing policy and the faults present from the start on ``network``."""
        network.routing = self.router
        for fault in self.schedule.link_faults:
            if fault.at_s == 0:
                network.degrade_links(fault.links, fault.fraction)
        for chip_fault in self.schedule.chip_faults:
            if chip_fault.at_s == 0:
                self._cut_off(network, chip_fault.chip)

    def _cut_off(self, network: Network, chip: int) -> None:
        """Under ``exclude`` a down chip's links go down with it (nothing routes through
        it); a spare cube replaces the chip, so its links stay."""
        if self.fault_set.on_chip_failure == "exclude":
            links = self.topology.links
            network.degrade_links(np.flatnonzero((links.src == chip) | (links.dst == chip)), 0.0)

    def start(self, env: simpy.Environment, network: Network) -> None:
        """Processes that apply the later faults at their instants."""
        for at_s in self.schedule.link_times_s():
            if at_s > 0:
                env.process(self._links_fail(env, network, at_s))
        for fault in self.schedule.chip_faults:
            if fault.at_s > 0:
                env.process(self._chip_fails(env, network, fault))

    def _links_fail(self, env: simpy.Environment, network: Network, at_s: float):
        yield env.timeout(at_s)
        for fault in self.schedule.link_faults:
            if fault.at_s == at_s:
                network.degrade_links(fault.links, fault.fraction)
        self.epoch += 1

    def _chip_fails(self, env: simpy.Environment, network: Network, fault: ChipFault):
        yield env.timeout(fault.at_s)
        self.epoch += 1
        self._cut_off(network, fault.chip)
        for name, (members, failed) in self._running.items():
            if fault.chip in members:
                if self.fault_set.on_chip_failure == "fail":
                    raise SimulationError(self.failure_message(fault.chip, name, fault.at_s))
                failed.append(fault)

    # -- collectives -------------------------------------------------------------------------
    def down_at(self, time_s: float) -> list[int]:
        """Chips down at ``time_s`` (a swapped-in spare cube makes its chip healthy again)."""
        out = []
        for fault in self.schedule.chip_faults:
            back = fault.at_s + self.reconfiguration_s
            spare = self.fault_set.on_chip_failure == "spare_cube"
            if fault.at_s <= time_s and not (spare and time_s >= back):
                out.append(fault.chip)
        return sorted(set(out))

    def failure_message(self, chip: int, op: str, time_s: float) -> str:
        where = self.topology.chip_position(chip)
        return (
            f"chip {chip} ({where}) is down at {units.format_time(time_s)}: collective "
            f"'{op}' cannot complete (on_chip_failure: fail; exclude or spare_cube continue)"
        )

    def adapt(self, group: Group, network: Network, op: str, now_s: float) -> Group:
        """``group`` as the runtime runs it now: rings with a dead link as lines, down
        chips failing the collective or left out (see the module docstring)."""
        notes: list[str] = []
        if network.dead is not None:
            group, notes = rings_as_lines(group, self.topology, network.dead)
        down = [c for c in self.down_at(now_s) if c in set(np.unique(group.chips).tolist())]
        policy = self.fault_set.on_chip_failure
        if down and policy == "fail":
            raise SimulationError(self.failure_message(down[0], op, now_s))
        if down and policy == "exclude":
            size = group.size
            group, more = without_chips(group, down)
            if group.size < 1:
                raise SimulationError(
                    f"every chip of the group of {size} is down (on_chip_failure: exclude "
                    f"leaves no chip): collective '{op}' cannot run"
                )
            notes += more
        if network.dead is not None:
            self._check_connected(group, network, op)
        for note in notes:
            if note not in self.notes:
                self.notes.append(note)
        return group

    def _check_connected(self, group: Group, network: Network, op: str) -> None:
        """Raise SimulationError naming the chips of ``group`` that failed links cut off
        from the rest of their group (a runtime cannot run the collective there)."""
        cut = network.surviving_routes().unreachable(group.flat)
        if cut.size:
            chips = np.unique(cut)
            named = ", ".join(map(str, chips[:8].tolist())) + (", ..." if chips.size > 8 else "")
            raise DisconnectedError(
                f"failed links cut chips {named} off from the rest of their group of "
                f"{group.size} chips: collective '{op}' cannot run"
            )

    def attempts(self, sim: CollectiveRunner, op: Op, schedule: Schedule):
        """SimPy process body: ``op``'s schedule, retried after a chip failure (spare
        cube: once the spare is in; exclude: on the shrunk group)."""
        env = sim.env
        while True:
            wait = self._spare_wait_s(schedule.group.chips, env.now)
            if wait > 0:
                self.notes.append(
                    f"op '{op.name}': waits {units.format_time(wait)} for a spare cube"
                )
                yield env.timeout(wait)
                self.epoch += 1
                schedule = sim.schedule(op)
            failed: list[ChipFault] = []
            self._running[op.name] = (set(np.unique(schedule.group.chips).tolist()), failed)
            yield sim.run_schedule(op, schedule)
            del self._running[op.name]
            if not failed:
                return
            chips = ", ".join(str(f.chip) for f in failed)
            self.notes.append(f"op '{op.name}': chip {chips} failed while it ran: retried")
            schedule = sim.schedule(op)

    def _spare_wait_s(self, chips: np.ndarray, now_s: float) -> float:
        if self.fault_set.on_chip_failure != "spare_cube":
            return 0.0
        members = set(np.unique(chips).tolist())
        back = [
            f.at_s + self.reconfiguration_s
            for f in self.schedule.chip_faults
            if f.chip in members and f.at_s <= now_s < f.at_s + self.reconfiguration_s
        ]
        return max(back, default=now_s) - now_s

    # -- after the run -------------------------------------------------------------------------
    def report(self, network: Network) -> None:
        """Fill ``network.fault_report`` (the JSON fields; nothing on the healthy path)."""
        if not self.used:
            return
        sched = self.schedule
        network.fault_report = record(sched, network, self.notes, self.routing, self.router)


def record(
    sched: FaultSchedule,
    network: Network,
    notes: list[str],
    routing: str,
    router: Router | None,
) -> dict[str, object]:
    """The JSON fields of a run with faults or a routing policy."""
    return {
        "failed_links": sched.failed_links,
        "degraded_links": [[*f.pair, f.fraction] for f in sched.link_faults if f.fraction > 0],
        "chips_down": sorted({f.chip for f in sched.chip_faults}),
        "slow_chips": {str(c): s for c, s in sorted(sched.slow_chips.items())},
        "on_chip_failure": sched.on_chip_failure,
        "rerouted_flows": int(network.rerouted_flows),
        "adapted": list(notes),
        "routing": routing,
        "nonminimal_flows": int(router.nonminimal_flows) if router is not None else 0,
        "routed_max_hops": network.routed_hops[2],
        "routed_mean_hops": network.routed_hops[1] / max(network.routed_hops[0], 1),
    }


def _check_cubes(topology: Topology) -> None:
    """spare_cube needs a torus whose every axis is a whole number of cube edges."""
    _, axes = topology.axis_structure()
    torus = all(a.kind in ("ring", "line") for a in axes) and len(axes) == 3
    if not torus or any(a.size % CUBE_EDGE_CHIPS for a in axes):
        shape = "x".join(str(a.size) for a in axes)
        raise InputError(
            "on_chip_failure: spare_cube needs a 3-D torus built of 4x4x4 cubes "
            f"(this one is {shape})"
        )
