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

Each job is a ``slice`` (a shape at an ``offset``, default the origin, on the system's
axes: x, y, z on a torus) or explicit ``chips``, running one ``collective`` (over the
job's chips, or ``axes`` of its slice) or a ``program`` (mesh axes laid on the slice's
axes; ``overrides`` keyed by the job's own chip positions). The record gives each
job's time together and alone and its slowdown (:class:`JobsRecord`); the ``jobs``
output writer draws the shared-link heatmap ``jobs-<system>-<workload>.png``
(:func:`tpusim.report.workload_plots.write_jobs_heatmaps`). How the jobs share the network:
:mod:`tpusim.engine.multijob`. Jobs that share a chip, or a slice that does not fit at its offset,
are bad input naming the entry. Sharing shows at ``flow`` and ``packet`` fidelity; the
``analytic`` network has no contention, so there every slowdown is 1.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Literal, TypedDict

import numpy as np
from pydantic import Field, NonNegativeInt, PositiveInt, model_validator

from tpusim.collectives.registry import AlgorithmName
from tpusim.config.types import Bytes, Frozen
from tpusim.config.yamlio import PathKey, format_path, line_of
from tpusim.errors import ConfigError
from tpusim.program.ir import Op, Program
from tpusim.program.yaml_program import ProgramSpec, program_from_data
from tpusim.results.records import Figure, Record, Row
from tpusim.results.simulation import Results
from tpusim.vocabulary import Op as CollectiveOp
from tpusim.workloads.registry import Outcome, WorkloadContext, WorkloadKind
from tpusim.workloads.spec import WorkloadSpec

if TYPE_CHECKING:
    from tpusim.engine.multijob import Job, JobsRun


class JobCollective(Frozen):
    """One collective of ``bytes`` (nccl-tests convention) over the job's chips or
    ``axes`` of its slice; ``algorithm`` defaults to the fastest known."""

    op: CollectiveOp
    bytes: Bytes
    axes: list[str] = Field(default_factory=list)
    algorithm: AlgorithmName | None = None


class JobEntry(Frozen):
    """One job: where (``slice`` + ``offset``, or ``chips``) and what (``collective``
    or ``program``)."""

    name: str
    slice: str | list[PositiveInt] | None = None
    offset: list[NonNegativeInt] | None = None
    chips: list[NonNegativeInt] | None = Field(None, min_length=1)
    collective: JobCollective | None = None
    program: ProgramSpec | None = None

    @model_validator(mode="after")
    def _one_place_one_work(self) -> JobEntry:
        if (self.slice is None) == (self.chips is None):
            raise ValueError("give a job either 'slice' (with 'offset') or 'chips'")
        if self.offset is not None and self.slice is None:
            raise ValueError("'offset' places a slice: give 'slice' too")
        if (self.collective is None) == (self.program is None):
            raise ValueError("give a job either 'collective' or 'program'")
        return self


class JobsWorkload(WorkloadSpec):
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


class JobRow(TypedDict):
    """One job of a jobs record: its chips, its time together and alone (s) and the
    slowdown (together over alone)."""

    name: str
    chips: int
    time_s: float
    alone_time_s: float
    slowdown: float


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
            out.append((f"{label}: job {job['name']} time (ms)", 1e3 * job["time_s"]))
            out.append((f"{label}: job {job['name']} slowdown", job["slowdown"]))
        return out


@dataclass
class JobsResults(Results):
    """A jobs run as one set of results (ops of every job, named ``job/op``, for
    traces and the ops table; the shared network's link bytes), plus each job's
    per-link bytes (``job_link_bytes``, for the shared-link heatmap)."""

    job_link_bytes: dict[str, np.ndarray] | None = None


def _entry_error(context: WorkloadContext, index: int, problem: str) -> ConfigError:
    path: PathKey = (*context.path, "jobs", index)
    return ConfigError(
        f"{context.system.name}: {problem}",
        file=context.file,
        path=format_path(path),
        line=line_of(context.lines, path),
    )


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


def place_jobs(spec: JobsWorkload, context: WorkloadContext) -> list[Job]:
    """The workload's jobs placed on the context's system; a ConfigError names the
    entry of a job that does not fit, names a missing chip or shares one."""
    from tpusim.engine import multijob as placing

    topology, placed = context.topology, []
    for index, entry in enumerate(spec.jobs):
        try:
            program = _program(entry, index, context)
            if entry.slice is not None:
                shape = placing.parse_shape(entry.slice)
                group = placing.slice_group(topology, shape, entry.offset)
            else:
                group = placing.chips_group(topology, entry.chips or [], program.mesh)
            if program.mesh:
                placing.mesh_axes(program.mesh, group.axes)
            program = placing.local_overrides(program, group.flat[0])
        except ValueError as exc:
            raise _entry_error(context, index, f"job '{entry.name}': {exc}") from None
        placed.append(placing.Job(entry.name, group, program))
    clash = placing.overlap_problem(placed, topology)
    if clash is not None:
        raise _entry_error(context, *clash)
    return placed


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
    from tpusim.engine.multijob import run_jobs

    placed = place_jobs(spec, context)

    def simulate(jobs: list[Job]) -> JobsRun:
        return run_jobs(
            context.system,
            context.topology,
            context.routes,
            jobs,
            context.network,
        )

    together = simulate(placed)
    alone = [simulate([job]).times_s[0] for job in placed]
    users = sum((b > 0).astype(int) for b in together.link_bytes.values())
    rows: list[JobRow] = [
        {
            "name": job.name,
            "chips": int(job.chips.size),
            "time_s": t,
            "alone_time_s": a,
            "slowdown": t / a if a > 0 else 1.0,
        }
        for job, t, a in zip(placed, together.times_s, alone, strict=True)
    ]
    record = JobsRecord(
        system=context.system.name,
        workload=context.label,
        kind="jobs",
        fidelity=context.fidelity,
        chips=context.topology.num_chips,
        job_chips=sum(r["chips"] for r in rows),
        num_jobs=len(rows),
        step_time_s=together.makespan_s,
        max_slowdown=max(r["slowdown"] for r in rows),
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
