"""Scenarios: systems x workloads (x sweeps), run in-process, written to a folder.

::

    name: demo
    fidelity: flow
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
fits that topology). A mesh axis of size ``auto`` takes the chips the other axes leave;
``batch_per_shard`` (training) sets the global batch from the batch-sharding axes.

Top level, besides ``systems`` and ``workloads``: ``flow_tolerance`` (see
:func:`tpusim.network.make_network`), ``assumptions`` (all-in power per chip and price
per chip-hour, keyed by chip name, for energy and cost columns), ``plots`` and
``claims`` (write figures and the vendor-claims table). Errors name the file, the YAML
path and the line.
"""

from __future__ import annotations

import itertools
import math
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    BeforeValidator,
    Field,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    model_validator,
)

from tpusim.config.loader import System, load_system, validate
from tpusim.config.types import Bytes, Frozen, Power
from tpusim.config.yamlio import PathKey, format_path, line_of, load_yaml
from tpusim.errors import ConfigError, InputError, SimulationError, TpusimError
from tpusim.program.yaml_program import ProgramSpec, program_from_data
from tpusim.units import format_bytes, parse_bytes

Fidelity = Literal["analytic", "flow", "packet"]


class SweepRange(Frozen):
    """Geometric values ``from``, ``from * factor``, ... up to ``to`` (sizes with units
    or plain numbers)."""

    start: float | int | str = Field(alias="from")
    stop: float | int | str = Field(alias="to")
    factor: float = Field(gt=1)

    def values(self) -> list[float | int]:
        as_bytes = isinstance(self.start, str) or isinstance(self.stop, str)
        lo = parse_bytes(self.start) if as_bytes else float(self.start)
        hi = parse_bytes(self.stop) if as_bytes else float(self.stop)
        if not 0 < lo <= hi:
            raise ValueError("a range needs 0 < from <= to")
        count = math.floor(math.log(hi / lo) / math.log(self.factor) + 1e-9) + 1
        out = [lo * self.factor**k for k in range(count)]
        integral = not as_bytes and all(float(v).is_integer() for v in out)
        return [round(v) for v in out] if integral or as_bytes else out


def _sweep_value(value: Any) -> Any:
    """A mapping is a range: validated here so its error names the range's key."""
    if isinstance(value, dict):
        try:
            return SweepRange.model_validate(value)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(p) for p in error["loc"])
            raise ValueError(
                f"a range takes from, to and factor ({where}: {error['msg']})"
            ) from None
    return value


Sweep = dict[str, Annotated[list[Any] | SweepRange, BeforeValidator(_sweep_value)]]


class _Variants(Frozen):
    """What every workload kind takes besides its own fields: a ``sweep`` of some of
    them and ``per_system`` overrides."""

    sweep: Sweep = Field(default_factory=dict)
    per_system: dict[str, dict[str, Any]] = Field(default_factory=dict)


class CollectiveWorkload(_Variants):
    kind: Literal["collective"]
    name: str
    op: Literal[
        "all-reduce",
        "all-gather",
        "reduce-scatter",
        "all-to-all",
        "collective-permute",
        "broadcast",
    ]
    bytes: Bytes
    axes: list[str] = Field(default_factory=list)
    chips: PositiveInt | None = None
    algorithm: (
        Literal["ring", "bidir-ring", "torus", "halving-doubling", "direct", "hierarchical"] | None
    ) = None


class TopologyWorkload(_Variants):
    """The system's topology metrics (diameter, mean hops, bisection, hop histogram)."""

    kind: Literal["topology"]
    name: str


class _Model(_Variants):
    name: str
    layers: PositiveInt
    d_model: PositiveInt
    d_ff: PositiveInt
    heads: PositiveInt
    head_dim: PositiveInt
    dtype: Literal["fp32", "bf16", "fp8", "int8", "int4", "fp4"] = "bf16"
    mesh: dict[str, PositiveInt | Literal["auto"]]
    tensor_axis: str | None = None

    @model_validator(mode="after")
    def _one_auto(self) -> _Model:
        if sum(v == "auto" for v in self.mesh.values()) > 1:
            raise ValueError("at most one mesh axis can be 'auto'")
        return self


class TrainingWorkload(_Model):
    """``batch`` is the global batch in sequences; or ``batch_per_shard`` sequences per
    shard of the batch axes (data, fsdp, expert), which keeps the work per chip the same
    on systems of different sizes."""

    kind: Literal["training_step"]
    seq: PositiveInt
    batch: PositiveInt | None = None
    batch_per_shard: PositiveInt | None = None
    data_axis: str | None = "data"
    fsdp_axis: str | None = None
    experts: int = Field(0, ge=0)
    expert_axis: str | None = None
    top_k: PositiveInt = 2

    @model_validator(mode="after")
    def _one_batch(self) -> TrainingWorkload:
        if (self.batch is None) == (self.batch_per_shard is None):
            raise ValueError("give exactly one of 'batch' and 'batch_per_shard'")
        return self


class DecodeWorkload(_Model):
    """``batch`` sequences per model replica (tensor-parallel group)."""

    kind: Literal["decode_step"]
    batch: PositiveInt
    context: PositiveInt
    kv_heads: PositiveInt | None = None
    kv_cache: Literal["hbm", "sram"] = "hbm"


class ProgramWorkload(ProgramSpec, _Variants):
    kind: Literal["program"]


class HloWorkload(_Variants):
    """An XLA-compiled HLO module (a path, relative to the scenario file) replayed."""

    kind: Literal["hlo"]
    name: str
    path: str


Workload = Annotated[
    CollectiveWorkload
    | TopologyWorkload
    | TrainingWorkload
    | DecodeWorkload
    | ProgramWorkload
    | HloWorkload,
    Field(discriminator="kind"),
]

_NOT_FIELDS = ("sweep", "per_system")


class Assumptions(Frozen):
    """Figures nothing publishes, keyed by chip name: all-in power per chip (energy
    columns) and price per chip-hour in US dollars (cost columns). A chip missing here
    falls back to its file's ``power.typical``; without a price there is no cost."""

    power_per_chip_W: dict[str, Power] = Field(default_factory=dict, alias="power_per_chip")
    price_per_chip_hour_usd: dict[str, PositiveFloat] = Field(
        default_factory=dict, alias="price_per_chip_hour_usd"
    )


class ScenarioSpec(Frozen):
    name: str
    description: str = ""
    fidelity: Fidelity = "flow"
    flow_tolerance: float | None = Field(None, ge=0, lt=1)
    systems: list[str] = Field(min_length=1)
    workloads: list[Workload] = Field(min_length=1)
    assumptions: Assumptions = Field(default_factory=Assumptions)
    plots: bool = False
    claims: bool = False


class Scenario:
    """A validated scenario file: its systems loaded, its workloads expanded by sweeps."""

    def __init__(self, file: str | Path):
        self.file = str(file)
        self.data, self.lines = load_yaml(file)
        self.spec = validate(ScenarioSpec, self.data, self.file, self.lines)
        self.systems = [self._system(i, name) for i, name in enumerate(self.spec.systems)]
        self.runs = [run for i, w in enumerate(self.spec.workloads) for run in self._expand(i, w)]
        self._check_names()

    def _error(self, problem: str, path: PathKey) -> ConfigError:
        return ConfigError(
            problem, file=self.file, path=format_path(path), line=line_of(self.lines, path)
        )

    def _system(self, index: int, name: str) -> System:
        try:
            return load_system(name, base=Path(self.file).parent)
        except ConfigError as exc:
            if exc.file and exc.path:  # the system file itself is broken: it says where
                raise
            raise self._error(exc.problem, ("systems", index)) from None

    def _check_names(self) -> None:
        """``per_system`` keys name systems of the scenario (by their ``name``);
        assumptions name its chips."""
        names = [s.name for s in self.systems]
        for i, workload in enumerate(self.spec.workloads):
            for name in workload.per_system:
                if name not in names:
                    raise self._error(
                        f"'{name}' is not one of the scenario's systems ({', '.join(names)})",
                        ("workloads", i, "per_system", name),
                    )
        chips = sorted({s.chip.name for s in self.systems})
        for key in ("power_per_chip", "price_per_chip_hour_usd"):
            for name in (self.data.get("assumptions") or {}).get(key) or {}:
                if name not in chips:
                    raise self._error(
                        f"'{name}' is not a chip of the scenario's systems ({', '.join(chips)})",
                        ("assumptions", key, name),
                    )

    def _sweep_values(self, index: int, name: str, values: Any) -> list[tuple[Any, str]]:
        """(value, label) pairs of one swept field."""
        if isinstance(values, SweepRange):
            try:
                expanded = values.values()
            except Exception as exc:  # bad units or bounds
                raise self._error(str(exc), ("workloads", index, "sweep", name)) from None
            as_bytes = isinstance(values.start, str) or isinstance(values.stop, str)
            return [(v, format_bytes(v) if as_bytes else str(v)) for v in expanded]
        return [(v, str(v)) for v in values]

    def _expand(self, index: int, workload: Any) -> Iterator[tuple[int, Any]]:
        """The workload once per point of its sweep's cross product (validated again)."""
        raw = self.data["workloads"][index]
        fields = list(workload.sweep)
        for name in fields:
            if name in _NOT_FIELDS or name not in type(workload).model_fields:
                raise self._error(
                    f"sweep over '{name}', which is not a field of a {workload.kind} workload",
                    ("workloads", index, "sweep", name),
                )
        axes = [self._sweep_values(index, f, workload.sweep[f]) for f in fields]
        for point in itertools.product(*axes):
            data = {k: v for k, v in raw.items() if k != "sweep"} | {
                f: value for f, (value, _) in zip(fields, point, strict=True)
            }
            label = ",".join(f"{f}={text}" for f, (_, text) in zip(fields, point, strict=True))
            expanded = validate(type(workload), data, self.file, self.lines, ("workloads", index))
            yield index, (expanded, f"{workload.name}[{label}]" if label else workload.name)

    def for_system(self, index: int, workload: Any, system: System) -> Any:
        """``workload`` with its ``per_system`` override for ``system`` and its mesh's
        ``auto`` axis and ``batch_per_shard`` resolved for the system's chip count."""
        override = workload.per_system.get(system.name)
        if override:
            data = workload.model_dump(by_alias=True, exclude=set(_NOT_FIELDS)) | override
            prefix: PathKey = ("workloads", index, "per_system", system.name)
            workload = validate(type(workload), data, self.file, self.lines, prefix)
        mesh = getattr(workload, "mesh", None)
        if not mesh:
            return workload
        fixed = math.prod(v for v in mesh.values() if v != "auto")
        resolved = dict(mesh)
        for name, size in mesh.items():
            if size == "auto":
                if system.num_chips % fixed:
                    raise self._error(
                        f"{system.name}: {system.num_chips} chips do not divide by the "
                        f"other mesh axes ({fixed} chips)",
                        ("workloads", index, "mesh", name),
                    )
                resolved[name] = system.num_chips // fixed
        update: dict[str, Any] = {"mesh": resolved}
        if getattr(workload, "batch_per_shard", None):
            axes = {workload.data_axis, workload.fsdp_axis, workload.expert_axis} - {None}
            shards = math.prod(resolved.get(a, 1) for a in axes)
            update["batch"] = workload.batch_per_shard * shards
        return workload.model_copy(update=update)


def _program(workload: Any, file: str, index: int, scenario: Scenario) -> Any:
    from tpusim.program.builders import decode_step, training_step
    from tpusim.program.ir import ProgramError

    fields = workload.model_dump(exclude={"kind", "name", "sweep", "per_system"})
    fields.pop("batch_per_shard", None)
    try:
        if workload.kind == "training_step":
            return training_step(**fields)
        if workload.kind == "decode_step":
            return decode_step(**fields)
    except ProgramError as exc:
        raise scenario._error(str(exc), ("workloads", index)) from None
    # the expanded workload (sweep point and per_system override applied), as YAML data
    data = workload.model_dump(by_alias=True, exclude={"kind", "sweep", "per_system"})
    return program_from_data(data, file, scenario.lines, ("workloads", index))


def _hlo_program(workload: Any, file: str, num_chips: int) -> Any:
    from tpusim.program.hlo import load_hlo, replay_program

    path = Path(workload.path)
    module, program = load_hlo(path if path.is_absolute() else Path(file).parent / path)
    return replay_program(module, program, num_chips)


@dataclass
class CollectiveLinks:
    """Per-link bytes of the largest run of one collective workload on one system."""

    system: str
    workload: str
    op: str
    bytes: float
    time_s: float
    link_bytes: np.ndarray


@dataclass
class ScenarioRun:
    """What :func:`run_scenario` produced. Unpacks as ``rows, details``.

    ``rows``: one summary dict per system x workload point; ``details``: (system,
    label, :class:`~tpusim.engine.Results`) of each simulated program; ``collectives``:
    per-link bytes of each collective workload's largest size per system;
    ``topologies``: system name -> Topology; ``wall_s``: seconds the run took.
    """

    rows: list[dict[str, Any]]
    details: list[Any]
    collectives: list[CollectiveLinks] = field(default_factory=list)
    topologies: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0

    def __iter__(self) -> Iterator[Any]:
        return iter((self.rows, self.details))


def _tokens_per_step(workload: Any) -> float | None:
    """Tokens one step of the whole system processes (training: global batch x seq;
    decode: one token per sequence of every replica)."""
    if workload.kind == "training_step":
        return float(workload.batch * workload.seq)
    if workload.kind == "decode_step":
        tp = workload.mesh.get(workload.tensor_axis, 1) if workload.tensor_axis else 1
        replicas = math.prod(workload.mesh.values()) // tp
        return float(workload.batch * replicas)
    return None


def _economics(
    row: dict[str, Any], system: System, assumptions: Assumptions, tokens: float | None
) -> None:
    """Energy and cost columns of a program row, where power and price are known."""
    step, chips = row["step_time_s"], system.num_chips
    chip = system.chip
    power = assumptions.power_per_chip_W.get(chip.name)
    if power is None and chip.power is not None:
        power = chip.power.typical_W
    row["chip_hours_per_step"] = chips * step / 3600.0
    if tokens:
        row["tokens_per_s"] = tokens / step
        row["tokens_per_s_per_chip"] = tokens / step / chips
    if power is not None:
        row["power_per_chip_W"] = power
        row["energy_per_step_J"] = power * chips * step
        if tokens:
            row["energy_per_token_J"] = row["energy_per_step_J"] / tokens
    price = assumptions.price_per_chip_hour_usd.get(chip.name)
    if price is not None:
        row["cost_per_step_usd"] = price * row["chip_hours_per_step"]
        if tokens:
            row["cost_per_million_tokens_usd"] = row["cost_per_step_usd"] / tokens * 1e6


def run_scenario(scenario: Scenario, progress: bool = True, jobs: int = 1) -> ScenarioRun:
    """Every system x workload; returns a :class:`ScenarioRun` (unpacks as rows, details).

    ``jobs`` > 1 runs that many systems at once in worker processes (each system's
    workloads in order in one process, so its route cache is shared); the rows come
    back in the scenario's order and are the same numbers as in-process.
    """
    began = time.perf_counter()
    names = [s.name for s in scenario.systems]
    if jobs > 1 and len(names) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # largest systems first, so the pool ends evenly
        order = sorted(range(len(names)), key=lambda i: -scenario.systems[i].num_chips)
        context = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
        with ProcessPoolExecutor(max_workers=min(jobs, len(names)), mp_context=context) as pool:
            futures = {i: pool.submit(_run_system_file, scenario.file, i, progress) for i in order}
            parts = [_raise_failure(futures[i].result()) for i in range(len(names))]
    else:
        parts = [_run_system(scenario, i, progress) for i in range(len(names))]
    out = ScenarioRun([], [])
    for part in parts:
        out.rows += part.rows
        out.details += part.details
        out.collectives += part.collectives
        out.topologies |= part.topologies
    out.wall_s = time.perf_counter() - began
    return out


def _run_system_file(file: str, index: int, progress: bool) -> ScenarioRun | tuple[int, str]:
    """:func:`_run_system` in a worker process (the scenario is loaded there again); a
    tpusim error comes back as (exit code, message), which always pickles."""
    try:
        return _run_system(Scenario(file), index, progress)
    except TpusimError as exc:
        return exc.exit_code, str(exc)


def _raise_failure(part: ScenarioRun | tuple[int, str]) -> ScenarioRun:
    if isinstance(part, ScenarioRun):
        return part
    code, message = part
    raise (InputError if code == 2 else SimulationError)(message)


def _run_system(scenario: Scenario, system_index: int, progress: bool) -> ScenarioRun:
    """Every workload of the scenario on one of its systems."""
    from tpusim.engine import Simulation, run_collective
    from tpusim.network.routes import RouteCache
    from tpusim.report import topology_summary
    from tpusim.topology import build_topology

    spec = scenario.spec
    system = scenario.systems[system_index]
    out = ScenarioRun([], [])
    began = time.perf_counter()
    total = len(scenario.runs)
    topology = out.topologies[system.name] = build_topology(system)
    routes = RouteCache(topology)
    largest: dict[str, CollectiveLinks] = {}
    for n, (index, (workload, label)) in enumerate(scenario.runs, start=1):
        if progress:
            print(
                f"[{system.name} {n}/{total}] {label} ({time.perf_counter() - began:.1f} s)",
                file=sys.stderr,
                flush=True,
            )
        try:
            workload = scenario.for_system(index, workload, system)
            if workload.kind == "topology":
                record = topology_summary(system, topology)
                row = {"system": system.name, "workload": label, "kind": "topology"}
                row |= {k: v for k, v in record.items() if not isinstance(v, dict)}
                row["system"] = system.name
                out.rows.append(row)
                continue
            if workload.kind == "collective":
                result, network = run_collective(
                    topology,
                    workload.op,
                    workload.bytes,
                    chip=system.chip,
                    system_name=system.name,
                    axes=workload.axes or None,
                    chips=workload.chips,
                    algorithm=workload.algorithm,
                    fidelity=spec.fidelity,
                    routes=routes,
                    flow_tolerance=spec.flow_tolerance,
                )
                out.rows.append(
                    {
                        "system": system.name,
                        "workload": label,
                        "kind": "collective",
                        **result.record(),
                        "step_time_s": result.time_s,
                    }
                )
                seen = largest.get(workload.name)
                if seen is None or workload.bytes >= seen.bytes:
                    largest[workload.name] = CollectiveLinks(
                        system.name,
                        workload.name,
                        workload.op,
                        workload.bytes,
                        result.time_s,
                        np.array(network.link_bytes, dtype=float),
                    )
                continue
            if workload.kind == "hlo":
                program = _hlo_program(workload, scenario.file, system.num_chips)
            else:
                program = _program(workload, scenario.file, index, scenario)
            results = Simulation(
                system, program, spec.fidelity, flow_tolerance=spec.flow_tolerance
            ).run()
        except ValueError as exc:
            raise scenario._error(f"{system.name}: {exc}", ("workloads", index)) from None
        except InputError as exc:
            if isinstance(exc, ConfigError):
                raise
            raise scenario._error(f"{system.name}: {exc}", ("workloads", index)) from None
        row = {"system": system.name, "workload": label, "kind": workload.kind}
        row |= results.summary()
        row["workload"] = label
        row["chips"] = system.num_chips
        if workload.kind == "decode_step":
            row["per_token_latency_s"] = results.step_time_s
        _economics(row, system, spec.assumptions, _tokens_per_step(workload))
        out.rows.append(row)
        out.details.append((system.name, label, results))
    out.collectives.extend(largest.values())
    return out


def write_outputs(
    out: Path, scenario: Scenario, rows: list[dict[str, Any]], details: list[Any]
) -> None:
    """summary.csv, ops.csv, links.csv (links that carried bytes), one trace per
    simulated program, resolved.yaml."""
    import pandas as pd
    import yaml

    from tpusim.results.trace import write_trace

    out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(out / "summary.csv", index=False)
    for system, label, results in details:
        safe = f"{system}-{label}".replace("/", "_").replace(",", "_").replace("=", "-")
        write_trace(out / f"trace-{safe}.json", results.ops)
    if details:
        for name, table in (("ops", "ops_frame"), ("links", "links_frame")):
            frames = [
                getattr(results, table)().assign(system=system, workload=label)
                for system, label, results in details
            ]
            merged = pd.concat(frames)
            columns = ["system", "workload"] + [
                c for c in merged if c not in ("system", "workload")
            ]
            merged[columns].to_csv(out / f"{name}.csv", index=False)
    resolved = scenario.spec.model_dump(mode="json", by_alias=True)
    (out / "resolved.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False))
