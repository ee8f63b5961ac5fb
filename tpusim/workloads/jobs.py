"""``kind: jobs``: several jobs on chip sets of one system, run at once on one network.

::

    - name: shared
      kind: jobs
      jobs:
        - {name: a, slice: 4x4x4, offset: [0, 0, 0],
           collective: {op: all-reduce, bytes: 64 MiB}}
        - {name: b, slice: 4x4x4, offset: [4, 0, 0],
           program: {mesh: {data: 4, model: 16}, ops: [...]}}   # the YAML program format
        - {name: c, chips: [128, 129, 130, 131], collective: {op: all-gather, bytes: 1 MiB}}
        - {name: chat, serve: {model: llama-3.1-8b, disaggregate: "1:1", rate: 5}}

Each job is a ``slice`` (a shape at an ``offset``, default the origin, on the system's
axes: x, y, z on a torus) or explicit ``chips``, running one ``collective`` (over the
job's chips, or ``axes`` of its slice) or a ``program`` (mesh axes laid on the slice's
axes; ``overrides`` keyed by the job's own chip positions). The record gives each
job's time together and alone and its slowdown (:class:`JobsRecord`); the ``jobs``
output writer draws the shared-link heatmap ``jobs-<system>-<workload>.png``
(:func:`tpusim.report.workload_plots.write_jobs_heatmaps`). How the jobs share the network:
:mod:`tpusim.engine.multijob`. Jobs that share a chip, or a slice that does not fit at its offset,
are bad input naming the entry. Sharing shows at ``flow`` and ``packet`` fidelity; the
``analytic`` network has no contention, so there every slowdown is 1. A ``serve``
entry is a serving job beside the training jobs, on one clock and one network
(:mod:`tpusim.workloads.jobs_serving`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, fields, replace
from typing import Literal

import numpy as np
from pydantic import Field, NonNegativeInt, PositiveInt, model_validator

from tpusim.collectives.registry import AlgorithmName
from tpusim.config.faults import FaultKeys
from tpusim.config.types import Bytes, Frozen
from tpusim.config.yamlio import PathKey
from tpusim.engine import multijob as placing
from tpusim.engine.multijob import Job, JobsRun, run_jobs
from tpusim.program.ir import Op, Program
from tpusim.program.yaml_program import ProgramSpec, program_from_data
from tpusim.results.records import Figure, Record, Row
from tpusim.results.simulation import Results
from tpusim.serving.options import ServeSpec
from tpusim.serving.rows import Row as JobRow
from tpusim.serving.rows import number, required
from tpusim.vocabulary import Op as CollectiveOp
from tpusim.workloads.jobs_serving import (
    PlacedService,
    entry_error,
    job_row,
    place_service,
    run_together,
)
from tpusim.workloads.registry import Outcome, WorkloadContext, WorkloadKind
from tpusim.workloads.spec import WorkloadSpec


class JobCollective(Frozen):
    """One collective of ``bytes`` (nccl-tests convention) over the job's chips or
    ``axes`` of its slice; ``algorithm`` defaults to the fastest known."""

    op: CollectiveOp
    bytes: Bytes
    axes: list[str] = Field(default_factory=list)
    algorithm: AlgorithmName | None = None


class JobEntry(Frozen):
    """One job: where (``slice`` + ``offset``, or ``chips``) and what (``collective``,
    ``program`` or ``serve``: a serving job, on ``chips`` or after the jobs before it)."""

    name: str
    slice: str | list[PositiveInt] | None = None
    offset: list[NonNegativeInt] | None = None
    chips: list[NonNegativeInt] | None = Field(None, min_length=1)
    collective: JobCollective | None = None
    program: ProgramSpec | None = None
    serve: ServeSpec | None = None

    @model_validator(mode="after")
    def _one_place_one_work(self) -> JobEntry:
        works = [self.collective, self.program, self.serve]
        if sum(w is not None for w in works) != 1:
            raise ValueError("give a job one of 'collective', 'program' or 'serve'")
        if self.serve is not None:
            if self.slice is not None or self.offset is not None:
                raise ValueError("a serving job takes 'chips' (consecutive) or none, not 'slice'")
            return self
        if (self.slice is None) == (self.chips is None):
            raise ValueError("give a job either 'slice' (with 'offset') or 'chips'")
        if self.offset is not None and self.slice is None:
            raise ValueError("'offset' places a slice: give 'slice' too")
        return self


class JobsWorkload(WorkloadSpec, FaultKeys):
    """Jobs run at once on one network of each system (names unique)."""

    kind: Literal["jobs"]
    name: str
    jobs: list[JobEntry] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> JobsWorkload:
        names = [job.name for job in self.jobs]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"two jobs are named '{repeated[0]}'")
        return self


@dataclass(frozen=True, kw_only=True)
class JobsRecord(Record):
    """Jobs sharing one network: the system's chips, the chips the jobs use, the time
    until every job has ended together (``step_time_s``), the largest slowdown, the
    directed links that carried bytes of more than one job, and per job (``jobs``, a
    list of mappings): ``name``, ``chips``, ``time_s`` together, ``alone_time_s``,
    ``slowdown`` (together / alone)."""

    fidelity: str
    chips: int
    job_chips: int
    num_jobs: int
    step_time_s: float
    max_slowdown: float
    num_shared_links: int
    jobs: list[JobRow]

    @classmethod
    def from_row(cls, row: Row) -> Record:
        values = {f.name: row[f.name] for f in fields(cls)}
        if isinstance(values["jobs"], str):  # summary.csv holds the list as its repr
            values["jobs"] = ast.literal_eval(values["jobs"])
        return cls(**values)

    def figures(self) -> list[Figure]:
        label = self.workload
        out: list[Figure] = []
        for job in self.jobs:
            name = f"{label}: job {job['name']}"
            out.append((f"{name} time (ms)", 1e3 * required(job, "time_s")))
            out.append((f"{name} slowdown", required(job, "slowdown")))
            if "ttft_p99_s" in job:
                out.append((f"{name} TTFT p99 (s)", number(job, "ttft_p99_s")))
        return out


@dataclass
class JobsResults(Results):
    """A jobs run as one set of results (ops of every job, named ``job/op``, for
    traces and the ops table; the shared network's link bytes), plus each job's
    per-link bytes (``job_link_bytes``, for the shared-link heatmap)."""

    job_link_bytes: dict[str, np.ndarray] | None = None


def _program(entry: JobEntry, index: int, context: WorkloadContext) -> Program:
    """The job's program: its one collective, or its YAML program (errors at its path)."""
    if entry.program is not None:
        data = entry.program.model_dump(by_alias=True) | {"name": entry.name}
        prefix: PathKey = (*context.path, "jobs", index, "program")
        return program_from_data(data, context.file, context.lines, prefix)
    work = entry.collective
    assert work is not None
    op = Op(
        name=work.op,
        kind="collective",
        collective=work.op,
        size_bytes=float(work.bytes),
        axes=tuple(work.axes),
        algorithm=work.algorithm,
    )
    return Program(entry.name, (op,))


def _place(entry: JobEntry, index: int, context: WorkloadContext) -> Job:
    """Training job ``entry`` placed on the context's system; a ConfigError names the
    entry when it does not fit or names a missing chip."""
    topology = context.topology
    try:
        program = _program(entry, index, context)
        if entry.slice is not None:
            shape = placing.parse_shape(entry.slice)
            group = placing.slice_group(topology, shape, entry.offset)
        else:
            group = placing.chips_group(topology, entry.chips or [], program.mesh)
        if entry.collective is not None and group.size < 2:
            raise ValueError(
                f"its {entry.collective.op} runs on {group.size} chip and moves nothing "
                "(a step of 0 s): give it two or more chips"
            )
        if program.mesh:
            placing.mesh_axes(program.mesh, group.axes)
        program = placing.local_overrides(program, group.flat[0])
    except ValueError as exc:
        raise entry_error(context, index, f"job '{entry.name}': {exc}") from None
    return Job(entry.name, group, program)


def place_jobs(
    spec: JobsWorkload, context: WorkloadContext
) -> tuple[dict[int, Job], list[PlacedService]]:
    """The workload's training jobs (by entry index) and serving jobs placed on the
    context's system, a serving job without ``chips`` after the highest chip the
    training jobs and the serving jobs before it hold; a ConfigError names the entry
    of a job that does not fit, names a missing chip or shares one."""
    entries = spec.jobs
    training = {i: _place(e, i, context) for i, e in enumerate(entries) if e.serve is None}
    if not training:
        raise context.error("a jobs workload needs a training job (serve alone: kind: serving)")
    after = max(int(job.chips.max()) + 1 for job in training.values())
    services: list[PlacedService] = []
    for index, entry in enumerate(entries):
        if entry.serve is not None:
            placed = place_service(index, entry.name, entry.serve, entry.chips, after, context)
            services.append(placed)
            after = max(after, int(placed.job.chips.max()) + 1)
    served = {s.index: s.job for s in services}
    everyone = [training[i] if i in training else served[i] for i in range(len(entries))]
    clash = placing.overlap_problem(everyone, context.topology)
    if clash is not None:
        raise entry_error(context, *clash)
    return training, services


def _merged(together: JobsRun, context: WorkloadContext, label: str) -> JobsResults:
    """The together run as one :class:`JobsResults`: every job's op rows (named
    ``job/op``), hop counts and link bytes."""
    ops, first = [], together.results[0]
    for name, res in zip(together.names, together.results, strict=True):
        for record in res.ops:
            ops.append(replace(record, name=f"{name}/{record.name}"))
    return JobsResults(
        system=context.system.name,
        program=label,
        fidelity=context.fidelity,
        chips=context.topology.num_chips,
        step_time_s=together.makespan_s,
        compute_time_s=max(r.compute_time_s for r in together.results),
        communication_time_s=sum(r.communication_time_s for r in together.results),
        flops_per_chip=0.0,
        peak_flops=first.peak_flops,
        ops=sorted(ops, key=lambda r: (r.start_at, r.chips, r.name)),
        link_bytes=first.link_bytes,
        links=first.links,
        max_hops=max(r.max_hops for r in together.results),
        mean_hops=float(np.mean([r.mean_hops for r in together.results])),
        job_link_bytes=together.link_bytes,
    )


def run(spec: JobsWorkload, context: WorkloadContext) -> Outcome:
    """The jobs together on one network, then each alone on a fresh one."""
    training, services = place_jobs(spec, context)
    placed = list(training.values())

    def simulate(jobs: list[Job]) -> JobsRun:
        return run_jobs(context.system, context.topology, context.routes, jobs, context.settings)

    served: list[JobRow] = []
    if services:
        together, served = run_together(context, placed, services)
    else:
        together = simulate(placed)
    alone = [simulate([job]).times_s[0] for job in placed]
    users = sum((b > 0).astype(int) for b in together.link_bytes.values())
    trained = [
        job_row(job, t, a) for job, t, a in zip(placed, together.times_s, alone, strict=True)
    ]
    by_index = dict(zip(training, trained, strict=True)) | {
        s.index: row for s, row in zip(services, served, strict=True)
    }
    rows = [by_index[i] for i in sorted(by_index)]
    record = JobsRecord(
        system=context.system.name,
        workload=context.label,
        kind="jobs",
        fidelity=context.fidelity,
        chips=context.topology.num_chips,
        job_chips=sum(int(required(r, "chips")) for r in rows),
        num_jobs=len(rows),
        step_time_s=max(required(r, "time_s") for r in rows),
        max_slowdown=max(required(r, "slowdown") for r in rows),
        num_shared_links=int(np.count_nonzero(users > 1)),
        jobs=rows,
    )
    return Outcome(record, results=_merged(together, context, context.label))


def check(spec: JobsWorkload, context: WorkloadContext) -> None:
    """Place the jobs without running them (``tpusim check`` and before ``tpusim
    run``): a job that does not fit, names a missing chip or shares one is a
    ConfigError naming its entry."""
    place_jobs(spec, context)


KIND = WorkloadKind(JobsWorkload, run, record=JobsRecord, check=check)
