"""``kind: hlo``: an XLA-compiled HLO module replayed on the system, and the ``tpusim
hlo`` record of one module (:func:`hlo_summary`)."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypedDict

from tpusim.config.loader import load_system
from tpusim.network import NetworkSettings
from tpusim.results.hlo_record import HloRecord
from tpusim.results.records import ProgramRecord
from tpusim.workloads.registry import Outcome, WorkloadContext, WorkloadKind
from tpusim.workloads.simulate import check_program, run_program
from tpusim.workloads.spec import FaultKeys, WorkloadSpec

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


class HloWorkload(WorkloadSpec, FaultKeys):
    """An XLA-compiled HLO module (a path, relative to the scenario file) replayed."""

    kind: Literal["hlo"]
    name: str
    path: str


def load(spec: HloWorkload, context: WorkloadContext) -> tuple[HloModule, Program]:
    """The module and its program replayed with device d on chip d."""
    from tpusim.program.hlo import load_hlo, replay_program

    path = Path(spec.path)
    module, program = load_hlo(path if path.is_absolute() else Path(context.file).parent / path)
    return module, replay_program(module, program, context.system.num_chips)


def build(spec: HloWorkload, context: WorkloadContext) -> Program:
    """The module's program replayed with device d on chip d."""
    return load(spec, context)[1]


def run(spec: HloWorkload, context: WorkloadContext) -> Outcome:
    """The module replayed, simulated; its record counts the chips the module runs on
    (its devices, as ``tpusim hlo`` does), not the system's."""
    module, program = load(spec, context)
    outcome = run_program(program, context, spec.kind, chips=module.num_devices)
    unknown = sum(module.unknown_ops.values())
    known = {f.name: getattr(outcome.record, f.name) for f in fields(ProgramRecord)}
    return replace(outcome, record=HloRecord(**known, unknown_ops=unknown))


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
    from tpusim.config.calibration import calibrated_system, load_calibration
    from tpusim.engine import RunSettings, Simulation
    from tpusim.program.hlo import load_hlo, replay_program

    module, program = load_hlo(file)
    system = load_system(system_name)
    if calibration is not None:
        system = calibrated_system(system, load_calibration(calibration))
    program = replay_program(module, program, system.num_chips, device_chips)
    if isinstance(network, str):
        network = NetworkSettings.of(network)
    summary = Simulation(system, program, RunSettings(network)).run().summary()
    return {
        "system": system.name,
        "file": file,
        "chips": module.num_devices,
        "num_ops": len(program.ops),
        "flops_per_chip": module.flops_per_chip,
        "collectives": {k: int(v) for k, v in sorted(module.collectives.items())},
        "collective_bytes_per_chip": module.collective_bytes_per_chip,
        "step_time_s": summary["step_time_s"],
        "compute_time_s": summary["compute_time_s"],
        "communication_time_s": summary["communication_time_s"],
        "exposed_communication_time_s": summary["exposed_communication_time_s"],
        "mfu": summary["mfu"],
        "unknown_ops": dict(module.unknown_ops),
    }


KIND = WorkloadKind(HloWorkload, run, record=HloRecord, check=check)
