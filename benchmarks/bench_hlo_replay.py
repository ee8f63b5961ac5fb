"""Replay of a whole MaxText training step compiled by XLA (issue 42): the wall time of
each phase of ``tpusim validate --workloads --compiled`` on one shipped artifact
(configs/measurements/compiled/), in this process:

- read: unzip the artifact and parse its module;
- lower: the module as a program (loops unrolled up to 256 iterations);
- place: the devices' groups on the run's slice;
- simulate: the step on the slice (``--fidelity``, default flow, as validate runs).

Beside each wall time the CPU time of the phase (the load of a shared machine inflates
wall time, not this), and the ops, the replayed step and the measured one.

Run: ``python benchmarks/bench_hlo_replay.py [CASE] [--fidelity analytic]`` (default
the largest shipped module, v5e-maxtext-1x256-128b: 166,298 ops).
"""

from __future__ import annotations

import argparse
import time

from tpusim.engine import RunSettings, Simulation
from tpusim.network import NetworkSettings
from tpusim.program.hlo import hlo_to_program, replay_program
from tpusim.program.hlo.artifact import read_artifact
from tpusim.program.hlo.module import parse_hlo
from tpusim.validation.compiled import compiled_records
from tpusim.validation.workloads import load_workload_cases
from tpusim.validation.workloads_run import case_system

DEFAULT_CASE = "v5e-maxtext-1x256-128b"


class Phases:
    """Wall and CPU seconds per named phase."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, float, float]] = []
        self._wall, self._cpu = time.perf_counter(), time.process_time()

    def done(self, name: str) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        self.rows.append((name, wall - self._wall, cpu - self._cpu))
        self._wall, self._cpu = wall, cpu


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("case", nargs="?", default=DEFAULT_CASE)
    p.add_argument("--fidelity", default="flow")
    args = p.parse_args()
    record = compiled_records()[args.case]
    case = next(c for c in load_workload_cases() if c.id == args.case)
    system = case_system(case)
    phases = Phases()
    artifact = read_artifact(record.artifact)
    module = parse_hlo(artifact.hlo, str(record.artifact))
    phases.done("read")
    program = hlo_to_program(module, args.case)
    phases.done("lower")
    dims = tuple(system.spec.topology.dims)  # type: ignore[union-attr]
    program = replay_program(module, program, system.num_chips, artifact.device_chips(dims))
    phases.done("place")
    results = Simulation(system, program, RunSettings(NetworkSettings.of(args.fidelity))).run()
    phases.done("simulate")
    print(f"{args.case}: {len(program.ops):,} ops on {system.num_chips} chips, {args.fidelity}")
    for name, wall, cpu in phases.rows:
        print(f"  {name:<9} {wall:7.1f} s wall  {cpu:7.1f} s CPU")
    total = sum(r[1] for r in phases.rows)
    print(f"  {'total':<9} {total:7.1f} s wall")
    print(f"  step {results.step_time_s:.3f} s replayed, {case.measured_s:.3f} s measured")


if __name__ == "__main__":
    main()
