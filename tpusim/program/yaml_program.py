"""An inline program written in YAML: a list of ops with ``after:`` dependencies.

::

    name: overlap-demo
    mesh: {data: 16, model: 16}              # optional logical mesh
    memory: {hbm: 12 GiB}                    # resident bytes per chip
    ops:
      - {name: fwd, kind: matmul, m: 8192, n: 8192, k: 8192, dtype: bf16}
      - {name: grads, kind: collective, collective: all-reduce, bytes: 256 MiB,
         axes: [data], overlap: true}
      - {name: update, kind: elementwise, bytes: 1 GiB, after: [fwd, grads]}
    overrides:                               # MPMD: per chip index
      0: {slowdown: 1.5}

Quantities take units (``bytes: 256 MiB``). Errors name the file, the YAML path
(``ops[2].after[0]``) and the line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, PositiveInt

from tpusim.collectives.registry import AlgorithmName
from tpusim.config.loader import validate
from tpusim.config.types import Bandwidth, Bytes, Frozen
from tpusim.config.yamlio import PathKey, format_path, line_of, load_yaml
from tpusim.errors import ConfigError
from tpusim.program.ir import DEFAULT_HOST_BANDWIDTH_BPS, ChipOverride, Op, Program, ProgramError
from tpusim.vocabulary import Dtype, MemoryTier, OpKind
from tpusim.vocabulary import Op as CollectiveOp


class OpSpec(Frozen):
    """One op as written in YAML (see :class:`tpusim.program.ir.Op`)."""

    name: str
    kind: OpKind
    after: list[str] = Field(default_factory=list)
    m: PositiveInt = 1
    n: PositiveInt = 1
    k: PositiveInt = 1
    batch: PositiveInt = 1
    dtype: Dtype = "bf16"
    memory: MemoryTier = "hbm"
    bytes: Bytes | None = None
    rows: int = Field(0, ge=0)
    row_bytes: Bytes | None = None
    collective: CollectiveOp | None = None
    axes: list[str] = Field(default_factory=list)
    algorithm: AlgorithmName | None = None
    overlap: bool = False
    bandwidth: Bandwidth | None = None

    def to_op(self) -> Op:
        if self.kind == "collective" and (self.collective is None or self.bytes is None):
            raise ValueError("a collective op needs 'collective' and 'bytes'")
        if self.kind == "kernel":
            raise ValueError("kind 'kernel' is made by the builders and the HLO importer")
        if self.kind in ("elementwise", "host_transfer") and self.bytes is None:
            raise ValueError(f"a {self.kind} op needs 'bytes'")
        return Op(
            name=self.name,
            kind=self.kind,
            after=tuple(self.after),
            m=self.m,
            n=self.n,
            k=self.k,
            batch=self.batch,
            dtype=self.dtype,
            memory=self.memory,
            bytes=0.0 if self.kind == "collective" else (self.bytes or 0.0),
            rows=self.rows,
            row_bytes=self.row_bytes or 0.0,
            collective=self.collective or "",
            size_bytes=self.bytes or 0.0,
            axes=tuple(self.axes),
            algorithm=self.algorithm,
            overlap=self.overlap,
            bandwidth_Bps=self.bandwidth or DEFAULT_HOST_BANDWIDTH_BPS,
        )


class OverrideSpec(Frozen):
    slowdown: float = Field(1.0, gt=0)
    extra_ops: list[OpSpec] = Field(default_factory=list)


class ProgramSpec(Frozen):
    name: str = "program"
    mesh: dict[str, PositiveInt] | None = None
    memory: dict[MemoryTier, Bytes] = Field(default_factory=dict)
    ops: list[OpSpec] = Field(min_length=1)
    overrides: dict[int, OverrideSpec] = Field(default_factory=dict)


def program_from_data(
    data: Any, file: str, lines: dict[PathKey, int], prefix: PathKey = ()
) -> Program:
    """A Program from parsed YAML at ``prefix`` of ``file``; ConfigError on any problem."""
    spec = validate(ProgramSpec, data, file, lines, prefix)
    names = {op.name for op in spec.ops}
    for i, op in enumerate(spec.ops):
        for j, dep in enumerate(op.after):
            if dep not in names:
                path = (*prefix, "ops", i, "after", j)
                raise ConfigError(
                    f"op '{op.name}' comes after unknown op '{dep}'",
                    file=file,
                    path=_text(path),
                    line=line_of(lines, path),
                )
    ops = []
    for i, op in enumerate(spec.ops):
        try:
            ops.append(op.to_op())
        except ValueError as exc:
            path = (*prefix, "ops", i)
            raise ConfigError(
                str(exc), file=file, path=_text(path), line=line_of(lines, path)
            ) from None
    try:
        overrides = {
            chip: ChipOverride(o.slowdown, tuple(x.to_op() for x in o.extra_ops))
            for chip, o in spec.overrides.items()
        }
        memory = {str(tier): nbytes for tier, nbytes in spec.memory.items()}
        return Program(spec.name, tuple(ops), spec.mesh, memory, overrides)
    except (ProgramError, ValueError) as exc:
        path = (*prefix, "ops")
        raise ConfigError(
            str(exc), file=file, path=_text(path), line=line_of(lines, path)
        ) from None


def _text(path: PathKey) -> str:

    return format_path(path)


def load_program(file: str | Path) -> Program:
    """Read an inline program YAML file."""
    data, lines = load_yaml(file)
    return program_from_data(data, str(file), lines)
