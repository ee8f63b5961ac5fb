"""``kind: hlo``: an XLA-compiled HLO module replayed on the system, and the ``tpusim
hlo`` record of one module (:func:`hlo_summary`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NotRequired, TypedDict

from tpusim.config.calibration import calibrated_system, load_calibration
from tpusim.config.faults import FaultKeys
from tpusim.config.loader import System, load_system
from tpusim.config.system import TorusTopologySpec
from tpusim.engine import Placement, RunSettings, Simulation
from tpusim.network import NetworkSettings
from tpusim.program.hlo import load_hlo, replay_program
from tpusim.program.hlo.artifact import is_artifact, load_compiled
from tpusim.program.hlo.xla_estimate import estimated_cycles
from tpusim.results.hlo_record import HloRecord
from tpusim.results.records import ProgramRecord
from tpusim.results.simulation import OpRecord, Results
from tpusim.topology import Topology, build_topology
from tpusim.workloads.registry import Outcome, WorkloadContext, WorkloadKind
from tpusim.workloads.simulate import check_program, program_outcome
from tpusim.workloads.spec import WorkloadSpec

if TYPE_CHECKING:
    from tpusim.program.hlo.module import HloModule
    from tpusim.program.ir import Program


class HloSummary(TypedDict):
    """The ``tpusim hlo`` record: the module's figures and its replay's (times in s)."""

    system: str
    file: str
    chips: int
    num_ops: int
    flops_per_chip: float
    collectives: dict[str, int]
    collective_bytes_per_chip: float
    step_time_s: float
    compute_time_s: float
    communication_time_s: float
    exposed_communication_time_s: float
    mfu: float
    unknown_ops: dict[str, int]
    compiled: dict[str, float]
    busy_by_kind_s: NotRequired[dict[str, float]]
    xla_estimate_s: NotRequired[float]


class HloWorkload(WorkloadSpec, FaultKeys):
    """An XLA-compiled HLO module or ``tpusim compile`` artifact (a path, relative to
    the scenario file) replayed."""

    kind: Literal["hlo"]
    name: str
    path: str


def load(spec: HloWorkload, context: WorkloadContext) -> tuple[HloModule, Program, int]:
    """The module, its program replayed (device d on chip d, or a ``tpusim compile``
    artifact's devices on their chips) and the devices per chip."""

    path = Path(spec.path)
    path = path if path.is_absolute() else Path(context.file).parent / path
    module, program, chips, compiled = _module(str(path), context.system, None)
    replayed = replay_program(module, program, context.system.num_chips, chips)
    return module, replayed, int(compiled.get("devices_per_chip", 1))


def build(spec: HloWorkload, context: WorkloadContext) -> Program:
    """The module's program replayed (see :func:`load`)."""
    return load(spec, context)[1]


def run(spec: HloWorkload, context: WorkloadContext) -> Outcome:
    """The module replayed, simulated; its record counts the chips the module runs on
    (its devices over the devices per chip, as ``tpusim hlo`` does), not the system's."""
    module, program, per_chip = load(spec, context)
    results = replay(context.system, program, context.settings, context.topology)
    outcome = program_outcome(results, context, spec.kind, chips=module.num_devices // per_chip)
    unknown = sum(module.unknown_ops.values())
    known = {f.name: getattr(outcome.record, f.name) for f in fields(ProgramRecord)}
    return replace(outcome, record=HloRecord(**known, unknown_ops=unknown))


def replay(
    system: System, program: Program, settings: RunSettings, topology: Topology | None = None
) -> Results:
    """A replayed module simulated: its replica groups that are whole torus axes run
    over those axes, as XLA's TPU emitters run them (:class:`Placement` ``whole_axes``)."""
    topology = topology or build_topology(system)
    placement = Placement(topology, program.mesh, whole_axes=True)
    return Simulation(system, program, settings, topology=topology, placement=placement).run()


def check(spec: HloWorkload, context: WorkloadContext) -> None:
    """Read and replay the module and check it fits the system (groups, memory)."""
    check_program(build(spec, context), context)


def hlo_summary(
    file: str,
    system_name: str,
    network: NetworkSettings | str = "flow",
    device_chips: list[int] | None = None,
    calibration: str | None = None,
) -> HloSummary:
    """The ``tpusim hlo`` record: the module's figures (FLOPs per chip, collectives by
    HLO op name, their bytes per chip) and its replay on ``system_name`` (times in s),
    device d on chip ``device_chips[d]`` (default d), with the ``calibration`` overlay
    file applied if given, on ``network`` (settings, or a fidelity at its defaults)."""

    summary = replay_summary(file, load_system(system_name), network, device_chips, calibration)
    del summary["busy_by_kind_s"]  # validate --workloads --compiled's, not tpusim hlo's
    return summary


def replay_summary(
    file: str,
    system: System,
    network: NetworkSettings | str = "flow",
    device_chips: list[int] | None = None,
    calibration: str | None = None,
    clock_hz: float | None = None,
) -> HloSummary:
    """:func:`hlo_summary` on a loaded ``system`` (``validate --workloads --compiled``
    replays on each run's slice), plus ``busy_by_kind_s``, the TensorCore's seconds per
    op kind; with ``clock_hz`` the ops XLA estimated take its
    cycles over that clock (:func:`~tpusim.program.hlo.replay.replay_program`) and
    ``xla_estimate_s`` is XLA's estimate of the whole device run at that clock
    (:func:`~tpusim.program.hlo.xla_estimate.estimated_cycles`)."""
    module, program, device_chips, compiled = _module(file, system, device_chips)
    if calibration is not None:
        system = calibrated_system(system, load_calibration(calibration))
    program = replay_program(module, program, system.num_chips, device_chips, clock_hz)
    per_chip = int(compiled.get("devices_per_chip", 1))
    if isinstance(network, str):
        network = NetworkSettings.of(network)
    results = replay(system, program, RunSettings(network))
    summary = results.summary()
    record: HloSummary = {
        "system": system.name,
        "file": file,
        "chips": module.num_devices // per_chip,
        "num_ops": len(program.ops),
        "flops_per_chip": module.flops_per_chip * per_chip,
        "collectives": {k: int(v) for k, v in sorted(module.collectives.items())},
        "collective_bytes_per_chip": module.collective_bytes_per_chip,
        "step_time_s": summary["step_time_s"],
        "compute_time_s": summary["compute_time_s"],
        "communication_time_s": summary["communication_time_s"],
        "exposed_communication_time_s": summary["exposed_communication_time_s"],
        "mfu": summary["mfu"],
        "unknown_ops": dict(module.unknown_ops),
        "compiled": compiled,
        "busy_by_kind_s": busy_by_kind(results.ops),
    }
    if clock_hz is not None:
        record["xla_estimate_s"] = estimated_cycles(module).cycles / clock_hz
    return record


def busy_by_kind(ops: Sequence[OpRecord]) -> dict[str, float]:
    """Seconds the TensorCore spends per op kind (``matmul``, ``elementwise``,
    ``kernel``, ...: the op-category breakdown of a replay), largest first."""
    busy: dict[str, float] = {}
    for op in ops:
        if op.unit == "tensorcore":
            busy[op.kind] = busy.get(op.kind, 0.0) + op.end_at - op.start_at
    return dict(sorted(busy.items(), key=lambda kv: -kv[1]))


def _module(
    file: str, system: System, device_chips: list[int] | None
) -> tuple[HloModule, Program, list[int] | None, dict[str, float]]:
    """The module and program of HLO text or of a ``tpusim compile`` artifact; for an
    artifact, its devices' chips on the system (by their coordinates, on a torus) and
    XLA's figures (``xla_flops``: its cost analysis, loop bodies once, beside
    tpusim's ``flops_loop_bodies_once`` per device;
    ``xla_peak_memory_bytes``; ``devices_per_chip``)."""

    if not is_artifact(file):
        return (*load_hlo(file), device_chips, {})
    module, program, artifact = load_compiled(file)
    topology = system.spec.topology
    dims = tuple(topology.dims) if isinstance(topology, TorusTopologySpec) else None
    figures = {
        "xla_flops": artifact.cost_analysis.get("flops", 0.0),
        "flops_loop_bodies_once": module.flops(loop_trip_counts=False),
        "xla_peak_memory_bytes": artifact.memory_analysis.get("peak_memory_in_bytes", 0.0),
        "devices_per_chip": float(artifact.devices_per_chip),
    }
    return module, program, device_chips or artifact.device_chips(dims), figures


KIND = WorkloadKind(HloWorkload, run, record=HloRecord, check=check)
