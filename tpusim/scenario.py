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

``sweep`` maps any field of a workload to a list of values; a workload with several
swept fields runs their cross product. Errors name the file, the YAML path and the line.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, PositiveInt

from tpusim.config.loader import System, load_system, validate
from tpusim.config.types import Bytes, Frozen
from tpusim.config.yamlio import PathKey, format_path, line_of, load_yaml
from tpusim.errors import ConfigError, InputError
from tpusim.program.yaml_program import ProgramSpec, program_from_data

Fidelity = Literal["analytic", "flow", "packet"]


class CollectiveWorkload(Frozen):
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
    sweep: dict[str, list[Any]] = Field(default_factory=dict)


class _Model(Frozen):
    name: str
    layers: PositiveInt
    d_model: PositiveInt
    d_ff: PositiveInt
    heads: PositiveInt
    head_dim: PositiveInt
    batch: PositiveInt
    dtype: Literal["fp32", "bf16", "fp8", "int8", "int4", "fp4"] = "bf16"
    mesh: dict[str, PositiveInt]
    tensor_axis: str | None = None
    sweep: dict[str, list[Any]] = Field(default_factory=dict)


class TrainingWorkload(_Model):
    kind: Literal["training_step"]
    seq: PositiveInt
    data_axis: str | None = "data"
    fsdp_axis: str | None = None
    experts: int = Field(0, ge=0)
    expert_axis: str | None = None
    top_k: PositiveInt = 2


class DecodeWorkload(_Model):
    kind: Literal["decode_step"]
    context: PositiveInt
    kv_heads: PositiveInt | None = None
    kv_cache: Literal["hbm", "sram"] = "hbm"


class ProgramWorkload(ProgramSpec):
    kind: Literal["program"]
    sweep: dict[str, list[Any]] = Field(default_factory=dict)


class HloWorkload(Frozen):
    """An XLA-compiled HLO module (a path, relative to the scenario file) replayed."""

    kind: Literal["hlo"]
    name: str
    path: str
    sweep: dict[str, list[Any]] = Field(default_factory=dict)


Workload = Annotated[
    CollectiveWorkload | TrainingWorkload | DecodeWorkload | ProgramWorkload | HloWorkload,
    Field(discriminator="kind"),
]


class ScenarioSpec(Frozen):
    name: str
    description: str = ""
    fidelity: Fidelity = "flow"
    systems: list[str] = Field(min_length=1)
    workloads: list[Workload] = Field(min_length=1)


class Scenario:
    """A validated scenario file: its systems loaded, its workloads expanded by sweeps."""

    def __init__(self, file: str | Path):
        self.file = str(file)
        self.data, self.lines = load_yaml(file)
        self.spec = validate(ScenarioSpec, self.data, self.file, self.lines)
        self.systems = [self._system(i, name) for i, name in enumerate(self.spec.systems)]
        self.runs = [run for i, w in enumerate(self.spec.workloads) for run in self._expand(i, w)]

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

    def _expand(self, index: int, workload: Any) -> Iterator[tuple[int, Any]]:
        """The workload once per point of its sweep's cross product (validated again)."""
        raw = self.data["workloads"][index]
        fields = list(workload.sweep)
        for name in fields:
            if name == "sweep" or name not in type(workload).model_fields:
                raise self._error(
                    f"sweep over '{name}', which is not a field of a {workload.kind} workload",
                    ("workloads", index, "sweep", name),
                )
        for values in itertools.product(*(workload.sweep[f] for f in fields)):
            point = {k: v for k, v in raw.items() if k != "sweep"} | dict(
                zip(fields, values, strict=True)
            )
            label = ",".join(f"{f}={v}" for f, v in zip(fields, values, strict=True))
            expanded = validate(type(workload), point, self.file, self.lines, ("workloads", index))
            yield index, (expanded, f"{workload.name}[{label}]" if label else workload.name)


def _program(workload: Any, file: str, index: int, scenario: Scenario) -> Any:
    from tpusim.program.builders import decode_step, training_step
    from tpusim.program.ir import ProgramError

    fields = workload.model_dump(exclude={"kind", "name", "sweep"})
    try:
        if workload.kind == "training_step":
            return training_step(**fields)
        if workload.kind == "decode_step":
            return decode_step(**fields)
    except ProgramError as exc:
        raise scenario._error(str(exc), ("workloads", index)) from None
    raw = {k: v for k, v in scenario.data["workloads"][index].items() if k not in ("kind", "sweep")}
    return program_from_data(raw, file, scenario.lines, ("workloads", index))


def _hlo_program(workload: Any, file: str, num_chips: int) -> Any:
    from tpusim.program.hlo import load_hlo, replay_program

    path = Path(workload.path)
    module, program = load_hlo(path if path.is_absolute() else Path(file).parent / path)
    return replay_program(module, program, num_chips)


def run_scenario(
    scenario: Scenario, progress: bool = True
) -> tuple[list[dict[str, Any]], list[Any]]:
    """Every system x workload; returns summary rows and (label, Results) for op tables."""
    from tpusim.collectives.runner import run_collective
    from tpusim.engine import Simulation
    from tpusim.topology import build_topology

    rows: list[dict[str, Any]] = []
    details: list[Any] = []
    total = len(scenario.systems) * len(scenario.runs)
    for n, (system, (index, (workload, label))) in enumerate(
        itertools.product(scenario.systems, scenario.runs), start=1
    ):
        if progress:
            print(f"[{n}/{total}] {system.name} {label}", file=sys.stderr, flush=True)
        try:
            if workload.kind == "collective":
                result, _ = run_collective(
                    build_topology(system),
                    workload.op,
                    workload.bytes,
                    chip=system.chip,
                    system_name=system.name,
                    axes=workload.axes or None,
                    chips=workload.chips,
                    algorithm=workload.algorithm,
                    fidelity=scenario.spec.fidelity,
                )
                rows.append(
                    {
                        "system": system.name,
                        "workload": label,
                        "kind": "collective",
                        **result.record(),
                        "step_time_s": result.time_s,
                    }
                )
                continue
            if workload.kind == "hlo":
                program = _hlo_program(workload, scenario.file, system.num_chips)
            else:
                program = _program(workload, scenario.file, index, scenario)
            results = Simulation(system, program, scenario.spec.fidelity).run()
        except ValueError as exc:
            raise scenario._error(f"{system.name}: {exc}", ("workloads", index)) from None
        except InputError as exc:
            if isinstance(exc, ConfigError):
                raise
            raise scenario._error(f"{system.name}: {exc}", ("workloads", index)) from None
        row = {"system": system.name, "workload": label, "kind": workload.kind, **results.summary()}
        row["workload"] = label
        if workload.kind == "training_step":
            row["tokens_per_s"] = workload.batch * workload.seq / results.step_time_s
        if workload.kind == "decode_step":
            row["per_token_latency_s"] = results.step_time_s
            row["tokens_per_s"] = workload.batch / results.step_time_s
        rows.append(row)
        details.append((system.name, label, results))
    return rows, details


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
