"""The layout search behind ``tpusim plan``: generate, prune by memory, screen, rank by
simulation, confirm.

1. :mod:`.candidates`: every role-named mesh of the system's chips that the topology
   takes, with each remat choice and a few microbatch counts;
2. :mod:`.memory`: the builder's checks and the closed-form memory model (no
   simulation) keep the layouts that fit in HBM;
3. :mod:`.estimate`: a closed-form step time orders them (steps 2 and 3 split over
   the workers by mesh, :mod:`.split`); the best ``shortlist``
   (plus the pure-FSDP reference) go on;
4. :mod:`.rank`: those are simulated on the ``rank_network`` (default analytic) as the
   training_step workload runs them (layer and loop reuse), and the best ``confirm``
   (plus the reference) again on the ``confirm_network`` (default flow, the
   simulator's default). The result lists the confirmed layouts by their confirmed
   step time, then the others by their ranking time.

The reference is pure FSDP: the layout with the largest fsdp axis among those that
fit whose other axes are tensor (none when no such layout fits); the search always
simulates it the same way, so the best layout is at least as fast by construction
of the ranking, and the two MFUs say by how much.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tpusim.config import load_system
from tpusim.config.loader import load_model
from tpusim.engine.placement import map_mesh
from tpusim.errors import InputError, SimulationError
from tpusim.planner.candidates import Layout, layouts
from tpusim.planner.estimate import Screen
from tpusim.planner.memory import Fitted, MemoryReport, prune
from tpusim.planner.parallel import simulate_all
from tpusim.planner.rank import Simulated, Simulator
from tpusim.planner.request import (
    SCREEN_MARGIN,
    PlanRequest,
    check_request,
    request_problem,
)
from tpusim.planner.split import assess_all, screens_of
from tpusim.program.builders.roles import FSDP, ROLES, TENSOR
from tpusim.topology import build_topology
from tpusim.units import format_bytes
from tpusim.workloads.training_step import TrainingWorkload

if TYPE_CHECKING:
    from tpusim.config.loader import System
    from tpusim.topology import Topology

SCREEN_TIE = 0.01
"""Screened steps within this fraction of a class's best count as equal (the screen's
resolution; an assumption)."""


@dataclass
class PlanResult:
    """What the search found: the memory report, the screened layouts (best first),
    the simulations at each fidelity, the reference and the final order."""

    request: PlanRequest
    system: System
    memory: MemoryReport
    screened: list[tuple[Fitted, Screen]]
    ranked: list[Simulated]
    confirmed: list[Simulated]
    reference: Fitted | None
    screens: dict[int, Screen] = field(default_factory=dict)

    def ordered(self) -> list[Simulated]:
        """Confirmed layouts by confirmed step time, then the rest by ranking time."""
        done = {id(s.fitted) for s in self.confirmed}
        rest = [s for s in self.ranked if id(s.fitted) not in done]
        return sorted(self.confirmed, key=_order) + sorted(rest, key=_order)

    def best(self) -> Simulated:
        return self.ordered()[0]

    def reference_run(self) -> Simulated | None:
        """The reference's confirmed simulation (None without a reference)."""
        for s in self.confirmed:
            if s.fitted is self.reference:
                return s
        return None

    def ranked_run(self, fitted: Fitted) -> Simulated | None:
        """``fitted``'s simulation at the ranking fidelity."""
        return next((s for s in self.ranked if s.fitted is fitted), None)


def _order(s: Simulated) -> tuple[float, str]:
    return (s.step_time_s, s.fitted.layout.label())


def workload_fields(request: PlanRequest) -> dict[str, Any]:
    """The training_step workload's fields besides the layout's (validated by the
    workload schema: an unknown model is a ConfigError naming the choices)."""
    return {
        "kind": "training_step",
        "name": "plan",
        "model": request.model,
        "seq": request.seq,
        "global_batch": request.global_batch,
        "dtype": request.dtype,
    } | request.overrides


def builder_base(request: PlanRequest) -> tuple[dict[str, Any], set[str]]:
    """The builder fields every layout shares (the model preset's shape, the batch,
    the overrides) and the workload's field names."""

    known = set(TrainingWorkload.field_names())
    shape = load_model(request.model).builder_fields()
    base = {k: v for k, v in shape.items() if k in known}
    base |= {"seq": request.seq, "global_batch": request.global_batch, "dtype": request.dtype}
    return base | request.overrides, known


def candidates(request: PlanRequest, system: System, topology: Topology) -> MemoryReport:
    """Every layout generated and pruned by memory, here (see :func:`closed_form`)."""
    found, base = generated(request, system, topology)
    return checked(prune(found, base, system.chip), request, system)


def closed_form(
    request: PlanRequest, system: System, topology: Topology
) -> tuple[MemoryReport, dict[int, Screen]]:
    """Every layout generated and pruned by memory, and the screened step of each
    that fits by ``id`` of its Fitted, over ``request.workers`` processes
    (:func:`.split.assess_all`). Raises InputError when no mesh's batch axes divide
    the batch or the builder rejects every layout, SimulationError when none fits."""
    found, base = generated(request, system, topology)
    report, screens = assess_all(found, base, system, topology, request.workers)
    return checked(report, request, system), screens


def generated(
    request: PlanRequest, system: System, topology: Topology
) -> tuple[list[Layout], dict[str, Any]]:
    """The candidate layouts of ``request`` and the builder fields they share."""

    base, known = builder_base(request)

    def fits(mesh: dict[str, int]) -> bool:
        try:
            map_mesh(topology, mesh)
        except InputError:
            return False
        return True

    return list(layouts(system.num_chips, request.global_batch, base, known, fits)), base


def checked(report: MemoryReport, request: PlanRequest, system: System) -> MemoryReport:
    """``report``, or the error of a search with no layout (see :func:`closed_form`)."""
    if report.considered == 0:
        raise InputError(
            f"global batch {request.global_batch}: no layout of {system.num_chips} chips "
            f"on {system.name} has batch axes (data x fsdp x expert) that divide it"
        )
    if report.planned == 0:
        raise InputError(f"no layout is valid: {report.first_rejection}")
    if not report.fitting:
        _out_of_memory(report, system)
    return report


def _out_of_memory(report: MemoryReport, system: System) -> None:
    closest = report.smallest_shortfall()
    assert closest is not None
    layout = closest.layout
    raise SimulationError(
        f"no layout fits in HBM on {system.name} ({report.planned} valid layouts): the "
        f"closest, {layout.label()} remat {layout.remat.name} microbatches "
        f"{layout.microbatches}, needs {format_bytes(closest.peak_hbm_bytes)} per chip of "
        f"{format_bytes(closest.capacity_bytes)} (short by "
        f"{format_bytes(closest.shortfall_bytes)})"
    )


def reference_layout(fitting: list[Fitted], screens: dict[int, Screen]) -> Fitted | None:
    """Pure FSDP: the largest fsdp axis whose other axes are tensor, best screened."""
    fsdp, pure_axes = FSDP.name, {FSDP.name, TENSOR.name}
    pure = [f for f in fitting if fsdp in f.layout.mesh and set(f.layout.mesh) <= pure_axes]
    return min(
        pure,
        key=lambda f: (-f.layout.mesh[fsdp], screens[id(f)].step_s, f.layout.label()),
        default=None,
    )


def screen_all(report: MemoryReport, system: System, topology: Topology) -> dict[int, Screen]:
    """The screened step of every layout that fits, by ``id`` of its Fitted."""
    screens = screens_of(report.fitting, system, topology)
    return dict(zip(map(id, report.fitting), screens, strict=True))


def shortlist(
    fitting: list[Fitted],
    screens: dict[int, Screen],
    size: int,
    reference: Fitted | None,
    margin: float | None = SCREEN_MARGIN,
) -> list[Fitted]:
    """The ``size`` best screened classes' representatives (see :func:`classes`)
    within ``margin`` of the best screened step (None: any), plus the reference."""
    reps = [_representative(group, screens) for group in classes(fitting).values()]
    picked = sorted(reps, key=lambda f: (screens[id(f)].step_s, _label(f.layout)))[:size]
    if margin is not None and picked:
        best = screens[id(picked[0])].step_s
        picked = [f for f in picked if screens[id(f)].step_s <= best * (1 + margin)]
    if reference is not None and reference not in picked:
        picked.append(reference)
    return picked


def classes(fitting: list[Fitted]) -> dict[tuple[object, ...], list[Fitted]]:
    """Layouts grouped by everything but how the batch shards split between the roles
    whose split is free (:attr:`PlannerCandidates.free_split`: data and fsdp), that is
    by the other roles' sizes (tensor, pipeline, expert...), the remat, the
    microbatches: the screen tells the splits apart only by their asynchronous
    communication, which it assumes hidden, so one of each class is simulated."""
    free = set(ROLES.names(where=lambda role: role.planner.free_split))
    out: dict[tuple[object, ...], list[Fitted]] = {}
    for f in fitting:
        roles = f.layout.roles
        key = tuple(v for k, v in roles.items() if k not in free)
        out.setdefault(
            (key, f.layout.remat.name, f.layout.microbatches, f.layout.flags), []
        ).append(f)
    return out


def _representative(group: list[Fitted], screens: dict[int, Screen]) -> Fitted:
    """The class's best screen; among those within :data:`SCREEN_TIE` of it, the
    fewest mesh axes, then the largest fsdp axis (the most sharded memory)."""
    best = min(screens[id(f)].step_s for f in group)
    close = [f for f in group if screens[id(f)].step_s <= best * (1 + SCREEN_TIE)]
    return min(
        close, key=lambda f: (len(f.layout.mesh), -f.layout.roles[FSDP.name], _label(f.layout))
    )


def _label(layout: Layout) -> str:
    return f"{layout.label()} {layout.remat.name} m{layout.microbatches} {layout.flags}"


def report_first(request: PlanRequest, best: Simulated) -> None:
    """The first useful answer, on stderr when it is a terminal (scripts and pipes
    get only the final one): the best layout by the ranking, before the confirmation."""

    if request.progress and sys.stderr.isatty():
        layout = best.fitted.layout
        print(
            f"first answer ({best.fidelity}, {best.how}): {layout.label()} remat "
            f"{layout.remat.name} m{layout.microbatches}, step {best.step_time_s:.3f} s; "
            f"confirming at {request.confirm_network.fidelity}...",
            file=sys.stderr,
            flush=True,
        )


def plan_layouts(request: PlanRequest) -> PlanResult:
    """Search the layouts of ``request`` (see the module docstring). Raises
    InputError (exit 2) for bad input or no valid layout, SimulationError (exit 1)
    when no layout fits in HBM."""

    problem = request_problem(request)
    if problem is not None:
        raise InputError(problem)
    system = load_system(request.system)
    check_request(request, system)
    topology = build_topology(system)
    report, screens = closed_form(request, system, topology)
    reference = reference_layout(report.fitting, screens)
    picked = shortlist(report.fitting, screens, request.shortlist, reference, request.margin)
    sim = Simulator(system, topology, workload_fields(request))
    ranked = simulate_all(sim, picked, request.rank_network, "fragments", request.workers)
    ranked.sort(key=_order)
    report_first(request, ranked[0])
    top = [s.fitted for s in ranked[: request.confirm]]
    if reference is not None and reference not in top:
        top.append(reference)
    confirmed = simulate_all(sim, top, request.confirm_network, "run", request.workers)
    screened = sorted(((f, screens[id(f)]) for f in report.fitting), key=lambda p: p[1].step_s)
    return PlanResult(request, system, report, screened, ranked, confirmed, reference, screens)
