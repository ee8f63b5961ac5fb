"""Scenarios: systems x workloads (x sweeps), checked, run and written to a folder.

::

    name: demo
    network: {fidelity: flow, tolerance: 0.05}
    systems: [v5e-pod, ironwood-256]
    workloads:
      - {name: ar, kind: collective, op: all-reduce, bytes: 64 MiB,
         sweep: {bytes: [1 MiB, 64 MiB]}}
      - {name: train, kind: training_step, layers: 2, d_model: 4096, d_ff: 16384,
         heads: 32, head_dim: 128, seq: 2048, batch: 256, mesh: {data: 16, model: 16},
         tensor_axis: model}
      - {name: decode, kind: decode_step, layers: 2, d_model: 4096, d_ff: 16384,
         heads: 32, head_dim: 128, batch: 64, context: 8192, mesh: {data: 16, model: 16},
         tensor_axis: model}
      - {name: prog, kind: program, ops: [{name: mm, kind: matmul, m: 8192, n: 8192, k: 8192}]}
      - {name: jax, kind: hlo, path: ../tests/fixtures/hlo/transformer_8.hlo.txt}

``sweep`` maps any field of a workload to a list of values, or to a geometric range
``{from: 1 KiB, to: 1 GiB, factor: 4}``; a workload with several swept fields runs
their cross product. ``per_system`` overrides fields for named systems (a mesh that
fits that topology); ``systems: [NAME, ...]`` runs a workload on those systems only.
A mesh axis of size ``auto`` takes the chips the other axes leave;
``batch_per_shard`` (training) sets the global batch from the batch-sharding axes.
A ``systems`` entry may also derive systems with ICI overrides and sweeps
(:mod:`tpusim.study.systems`).

Top level, besides ``systems`` and ``workloads``: ``network`` (the fidelity and its
own options as a tree, ``network: {fidelity: flow, tolerance: 0.05}``:
:mod:`tpusim.network.tree`; the old flat ``fidelity:`` and ``flow_tolerance:`` still
read, with a deprecation warning), ``calibration`` (an overlay written by ``tpusim
calibrate``, relative to the scenario file: :mod:`tpusim.config.calibration`),
``assumptions`` (all-in power per chip and price per chip-hour, keyed by chip name,
for energy and cost columns), ``plots`` (figures, on by default) and ``claims`` (the
vendor-claims table), and the fault keys ``faults``, ``fail_links``, ``seed``,
``on_chip_failure`` and ``routing`` (:mod:`tpusim.config.faults`: defaults for every
workload kind that takes them; ``tpusim run --faults ...`` sets them on top). Errors
name the file, the YAML path and the line; ``Scenario(file, problems=[])`` collects
them all (:mod:`tpusim.study.check`).

A scenario is read, checked and expanded in three separate steps, each a module with
a typed result: :func:`~tpusim.study.reading.read_scenario` (the YAML parsed once, a
:class:`~tpusim.study.reading.ScenarioFile`), :func:`~tpusim.study.checking.check_read`
(validated, systems loaded, a :class:`~tpusim.study.checking.CheckedScenario`) and
:func:`~tpusim.study.expanding.expand` (its :class:`WorkloadPoint` list, checked against
the network's work limits). :class:`Scenario` is the three in a row.

The run path goes one way: a :class:`Scenario` (the validated file) -> its point set
(:mod:`tpusim.study.pointset`: every (system, workload point) as a frozen ``Point``) -> an
executor (:mod:`tpusim.study.executors`: in this process, in worker processes or on
Dask, each receiving the typed point set: the file is read once) -> the records of a
:class:`~tpusim.results.run.ScenarioRun` (:func:`tpusim.study.runner.run_scenario`).
Each module imports only those before it.

Each workload's ``kind`` names a registered kind (:mod:`tpusim.workloads`): its spec
class validates it and its ``run`` produces one record per system and sweep point
(:mod:`tpusim.results.records`); :meth:`Scenario.outputs` and
:func:`tpusim.study.outputs.write_outputs` write the files.
"""

from __future__ import annotations

from pathlib import Path

from tpusim.config.faults import NO_FAULT_FLAGS, FaultFlags
from tpusim.config.loader import System
from tpusim.config.yamlio import PathKey
from tpusim.errors import ConfigError
from tpusim.network import NetworkSettings
from tpusim.results.run import ScenarioRun
from tpusim.results.writers import Outputs
from tpusim.study.checking import AS_WRITTEN, CheckedScenario, Checking, check_read
from tpusim.study.expanding import WorkloadPoint, check_network_work, expand
from tpusim.study.reading import ScenarioFile, read_scenario
from tpusim.study.schema import Assumptions, ScenarioSpec
from tpusim.study.systems import SystemVariants, locate_scenario
from tpusim.workloads.spec import SweepRange

__all__ = [
    "Assumptions",
    "CheckedScenario",
    "FaultFlags",
    "Scenario",
    "ScenarioFile",
    "ScenarioSpec",
    "SweepRange",
    "SystemVariants",
    "WorkloadPoint",
    "locate_scenario",
]


class Scenario:
    """A scenario file read, checked (its systems loaded) and expanded by its sweeps.

    ``max_points`` (the CLI's ``--max-points``) overrides the file's ``max_points``:
    the most workload points (sweep points summed over workloads) it may have;
    ``fault_flags`` (the CLI's fault flags, :class:`~tpusim.config.faults.FaultFlags`)
    set the fault keys of every workload that takes them; ``network`` (the CLI's
    network flags) replaces the file's ``network:``.
    ``problems``: given a list, every problem found is appended to it (each a
    ConfigError naming file:line and path) and loading goes on without the broken
    workload or system (``tpusim check``); without one, the first problem is raised.
    A file that does not read or validate at the top level is raised either way.
    :meth:`of` builds one from a file already read.
    """

    def __init__(
        self,
        file: str | Path,
        max_points: int | None = None,
        fault_flags: FaultFlags | None = None,
        problems: list[ConfigError] | None = None,
        warn_deprecated: bool = True,
        network: NetworkSettings | None = None,
    ):
        checking = Checking(max_points, fault_flags or NO_FAULT_FLAGS, network, problems)
        self._take(read_scenario(file, warn_deprecated), checking)

    @classmethod
    def of(cls, read: ScenarioFile, checking: Checking = AS_WRITTEN) -> Scenario:
        """The scenario of a file already read (:func:`~tpusim.study.reading.read_scenario`)."""
        scenario = cls.__new__(cls)
        scenario._take(read, checking)
        return scenario

    def _take(self, read: ScenarioFile, checking: Checking) -> None:
        """Check ``read`` and expand it (the second and third steps)."""
        self.checked = check_read(read, checking)
        #: Every workload point, workloads in order (:class:`WorkloadPoint`).
        self.runs: list[WorkloadPoint] = expand(self.checked)
        check_network_work(self.checked, self.runs)

    @property
    def file(self) -> str:
        """The scenario file, as given."""
        return self.checked.read.file

    @property
    def lines(self) -> dict[PathKey, int]:
        """The line of each YAML path of the file."""
        return self.checked.read.lines

    @property
    def data(self) -> dict[str, object]:
        """The file's top-level mapping (it validated, so it is one)."""
        return self.checked.read.data

    @property
    def spec(self) -> ScenarioSpec:
        """The validated scenario (the command line's network applied)."""
        return self.checked.spec

    @property
    def systems(self) -> list[System]:
        """Its systems, in order (each entry's variants in theirs)."""
        return self.checked.systems

    @property
    def max_points(self) -> int:
        """The most workload points it may have (the flag's, else the file's)."""
        return self.checked.max_points

    @property
    def fault_flags(self) -> FaultFlags:
        """The command line's fault flags set on its workloads."""
        return self.checked.checking.fault_flags

    def at(self, index: int, *rest: str | int) -> PathKey:
        """The YAML path of spec workload ``index`` (its place in the file) and below."""
        return self.checked.at(index, *rest)

    def raw_workload(self, index: int) -> dict[str, object]:
        """Spec workload ``index`` as written in the file (a mapping: it validated)."""
        return self.checked.raw_workload(index)

    def outputs(self, run: ScenarioRun) -> Outputs:
        """What the writers of :mod:`tpusim.results.writers` write for ``run``: the
        scenario as validated (``resolved.yaml``), and plots and claims if it asks."""
        from tpusim.study.claims import vendor_claims

        resolved = self.spec.model_dump(mode="json", by_alias=True)
        return Outputs(
            run,
            resolved,
            with_plots=self.spec.plots,
            with_claims=self.spec.claims,
            claims_of=vendor_claims,
            systems=self.systems,
        )
