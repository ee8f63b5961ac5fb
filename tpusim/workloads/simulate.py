"""The steps every program-shaped workload shares: simulate a program on the context's
system and make its record, economics included; check it without simulating."""

from __future__ import annotations

from tpusim.engine import Simulation
from tpusim.engine.placement import Placement
from tpusim.errors import InputError
from tpusim.hardware import MemoryTracker
from tpusim.program.ir import Program
from tpusim.results.economics import Economics
from tpusim.results.energy import busy_share
from tpusim.results.records import DecodeRecord, ProgramRecord
from tpusim.results.simulation import Results
from tpusim.workloads.registry import Outcome, WorkloadContext


def simulate(program: Program, context: WorkloadContext) -> Results:
    """``program`` through :class:`~tpusim.engine.Simulation` at the context's fidelity
    and flow tolerance; returns its :class:`~tpusim.engine.Results`."""

    return Simulation(context.system, program, context.settings).run()


def program_outcome(
    results: Results,
    context: WorkloadContext,
    kind: str,
    tokens_per_step: float | None = None,
    decode: bool = False,
    chips: int | None = None,
    fragment: str | None = None,
) -> Outcome:
    """The record of a simulated program: its summary, the chips it runs on
    (``chips``, default the system's) and the step's economics over those chips
    (``tokens_per_step`` for the token columns); ``decode`` makes it a
    :class:`DecodeRecord`, whose step time is the latency per token; ``fragment``
    labels a part of a model (:meth:`~tpusim.workloads.ModelWorkload.fragment`)."""
    system = context.system
    chips = system.num_chips if chips is None else chips
    economics = Economics.of(
        results.step_time_s,
        chips,
        tokens_per_step,
        context.power_per_chip_W,
        context.price_per_chip_hour_usd,
        busy_share(results.compute_time_s, results.step_time_s),
    )
    values: dict[str, object] = {
        "workload": context.label,
        "kind": kind,
        "chips": chips,
        "fragment": fragment,
    }
    if decode:
        values["per_token_latency_s"] = results.step_time_s
    record_type = DecodeRecord if decode else ProgramRecord
    record = record_type.of(results.summary(), economics=economics, **values)
    return Outcome(record, results=results)


def run_program(
    program: Program,
    context: WorkloadContext,
    kind: str,
    tokens_per_step: float | None = None,
    chips: int | None = None,
) -> Outcome:
    """Simulate ``program`` and make its outcome (see :func:`program_outcome`)."""
    results = simulate(program, context)
    return program_outcome(results, context, kind, tokens_per_step, chips=chips)


def check_program(program: Program, context: WorkloadContext) -> None:
    """What simulating ``program`` on the context's system would refuse before its
    first event, without simulating: a mesh that does not fit the topology, a
    collective whose mesh axes or chip groups do not exist (InputError), and resident
    memory past a chip's capacity (:class:`~tpusim.hardware.OutOfMemoryError`)."""

    sizes = [op.size_bytes for op in program.ops if op.kind == "collective"]
    problem = context.network.program_work_problem(context.topology.num_chips, sizes)
    if problem is not None:
        raise InputError(f"program '{program.name}': {problem}")
    placement = Placement(context.topology, program.mesh)
    seen: set[tuple[object, ...]] = set()
    for op in program.ops:
        key = (op.axes, op.groups, op.num_chips)
        if op.kind != "collective" or key in seen:
            continue
        seen.add(key)
        try:
            placement.group(op, placement.physical_axes(op))
        except ValueError as exc:
            raise InputError(f"op '{op.name}': {exc}") from None
    tracker = MemoryTracker(context.system.chip, chip_index=0)
    for tier, nbytes in program.memory_bytes.items():
        tracker.allocate(f"{program.name} resident {tier}", nbytes, memory=tier)  # type: ignore[arg-type]
