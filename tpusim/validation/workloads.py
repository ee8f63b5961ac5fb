"""Load the shipped (or a user's) tables of public whole-model training step times.

One YAML file per source under ``configs/measurements/workloads/``: a ``source`` block,
the ``split_rule`` that fixes each case's ``split`` (written before any fit; the loader
checks every case against it) and ``cases``, each exactly as its source publishes it:
chip, slice (name, chips, torus dims), slices, JAX devices per chip, model preset,
per-device batch, the global batch it gives, sequence length, MaxText's ``dtype`` and
``quantization``, ``remat_policy`` (and ``remat_tensors`` for ``custom``), the MaxText
flags that shape the run (``layout``, verbatim), the measured step time and TFLOP/s per
device, and where the numbers are.

:mod:`.workloads_translate` turns one case into ``training_step`` fields; the MaxText
names are in :mod:`.maxtext_flags`.

Every problem is a :class:`~tpusim.errors.ConfigError` (exit 2) naming ``file:line path``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, PositiveFloat, PositiveInt, field_validator, model_validator

from tpusim.config import configs_dir
from tpusim.config.limits import (
    MAX_AXIS_CHIPS,
    MAX_FLOPS,
    MAX_STEP_TOKENS,
    measured_step_problem,
)
from tpusim.config.loader import validate
from tpusim.config.types import Frozen
from tpusim.config.yamlio import PathKey, format_path, line_of, load_yaml
from tpusim.errors import ConfigError
from tpusim.validation.maxtext_flags import (
    DTYPES,
    QUANTIZATION,
    RematPlace,
    RematPolicy,
    RematTensor,
    layout_flag,
)
from tpusim.validation.measurements import (
    PositiveTime,
    SourceInfo,
    Split,
    claim_case_id,
    shipped_name,
)
from tpusim.validation.workload_mesh import dcn_mesh, device_mesh

SplitRule = Literal["alternate-by-id-within-chip-dtype"]
"""The one split rule: within each (chip, dtype) group of a file, cases sorted by id
alternate fit, holdout, fit, ... starting with fit."""


class SliceShape(Frozen):
    """A slice as published (``v6e-256``) with its chip count and torus dims."""

    name: str = Field(min_length=1)
    chips: PositiveInt
    dims: tuple[Annotated[int, Field(ge=1)], ...] = Field(min_length=1, max_length=3)

    @model_validator(mode="after")
    def _dims_hold_the_chips(self) -> SliceShape:
        if max(self.dims) > MAX_AXIS_CHIPS:
            raise ValueError(f"dims {list(self.dims)}: at most {MAX_AXIS_CHIPS:,} chips an axis")
        if math.prod(self.dims) != self.chips:
            raise ValueError(
                f"dims {list(self.dims)} hold {math.prod(self.dims)} chips, not {self.chips}"
            )
        return self


class RunSpec(Frozen):
    """One MaxText run: its slice, model, batch, sequence, dtype, remat and ``layout``
    flags, as a published case writes them or a MaxText line gives them
    (:mod:`.maxtext_run`); what :func:`~.workloads_translate.translate` reads."""

    chip: str
    slice: SliceShape
    num_slices: PositiveInt
    devices_per_chip: PositiveInt = 1
    model: str
    per_device_batch: PositiveFloat
    global_batch: PositiveInt
    seq: PositiveInt
    dtype: Literal["bfloat16", "float32"]
    quantization: Literal["int8", "fp8", "fp8_full"] | None = None
    remat_policy: RematPolicy
    remat_tensors: dict[RematTensor, RematPlace] | None = None
    layout: dict[str, Any]

    @field_validator("chip")
    @classmethod
    def _known_chip(cls, chip: str) -> str:
        return shipped_name("chips", chip)

    @field_validator("model")
    @classmethod
    def _known_model(cls, model: str) -> str:
        return shipped_name("models", model)

    @field_validator("layout")
    @classmethod
    def _known_flags(cls, layout: dict[str, Any]) -> dict[str, Any]:
        return {name: layout_flag(name, value) for name, value in layout.items()}

    @model_validator(mode="after")
    def _consistent(self) -> RunSpec:
        if (self.remat_policy == "custom") != (self.remat_tensors is not None):
            raise ValueError("remat_tensors is given exactly when remat_policy is custom")
        dcn = [v for k, v in self.layout.items() if k.startswith("dcn_")]
        if -1 not in dcn and math.prod(dcn) != self.num_slices:
            raise ValueError(f"the dcn_* axes hold {math.prod(dcn)} slices, not {self.num_slices}")
        devices = self.devices * self.num_slices
        if not math.isclose(self.per_device_batch * devices, self.global_batch):
            raise ValueError(
                f"per_device_batch {self.per_device_batch} x {devices} devices is not "
                f"global_batch {self.global_batch}"
            )
        if self.global_batch * self.seq > MAX_STEP_TOKENS:
            raise ValueError(
                f"global_batch {self.global_batch:,} x seq {self.seq:,} tokens per step is "
                f"over the limit of {MAX_STEP_TOKENS:,}"
            )
        device_mesh(self)  # ValueError naming the ICI axes that do not fit the slice
        if self.num_slices > 1:
            dcn_mesh(self)
        return self

    @property
    def devices(self) -> int:
        """JAX devices in one slice."""
        return self.slice.chips * self.devices_per_chip

    @property
    def tpusim_dtype(self) -> str:
        """The matmul dtype: MaxText's quantization when set, else its dtype."""
        if self.quantization:
            return QUANTIZATION[self.quantization]
        return DTYPES[self.dtype]


class WorkloadCaseSpec(RunSpec):
    """One published run as written in the YAML file: the run, its id, the measured
    step (and TFLOP/s per device), where it is published and its split."""

    id: str = Field(min_length=1)
    measured_step_time: PositiveTime
    measured_tflops_per_device: PositiveFloat | None = None
    where: str = Field(min_length=1)
    split: Split
    note: str = ""

    @model_validator(mode="after")
    def _measured(self) -> WorkloadCaseSpec:
        problem = measured_step_problem(self.measured_step_time)
        if problem is not None:
            raise ValueError(f"measured_step_time {problem}")
        tflops = self.measured_tflops_per_device
        if tflops is not None and tflops * 1e12 > MAX_FLOPS:
            raise ValueError(f"measured_tflops_per_device {tflops:g} is over {MAX_FLOPS:g} FLOP/s")
        return self


class WorkloadFile(Frozen):
    """A whole file: the source block, the split rule and the cases."""

    source: SourceInfo
    split_rule: SplitRule
    cases: tuple[WorkloadCaseSpec, ...] = Field(min_length=1)


@dataclass(frozen=True)
class WorkloadCase:
    """One published run: its spec, its source key and where it is written (file,
    index in the file's ``cases``, line)."""

    spec: WorkloadCaseSpec
    source: str
    file: str
    index: int
    line: int | None

    @property
    def path(self) -> str:
        """The case's YAML path (``cases[3]``)."""
        return format_path(("cases", self.index))

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def measured_s(self) -> float:
        """The measured step time in seconds."""
        return float(self.spec.measured_step_time)

    @property
    def split(self) -> Split:
        return self.spec.split


def rule_splits(cases: Sequence[WorkloadCaseSpec]) -> dict[str, Split]:
    """Case id -> the split ``alternate-by-id-within-chip-dtype`` gives it."""
    groups: dict[tuple[str, str], list[str]] = {}
    for case in cases:
        groups.setdefault((case.chip, case.tpusim_dtype), []).append(case.id)
    out: dict[str, Split] = {}
    for ids in groups.values():
        for i, case_id in enumerate(sorted(ids)):
            out[case_id] = "fit" if i % 2 == 0 else "holdout"
    return out


def shipped_workload_files() -> list[Path]:
    """The shipped files (``configs/measurements/workloads/*.yaml``), sorted by name."""
    return sorted((configs_dir() / "measurements" / "workloads").glob("*.yaml"))


def load_workload_file(file: Path) -> list[WorkloadCase]:
    """Every case of one file, validated, each split checked against the file's rule.

    Raises ConfigError (``file:line path: problem``) on a bad or missing value, an
    unknown key or MaxText flag, or a split the rule does not give.
    """
    data, lines = load_yaml(file)
    spec = validate(WorkloadFile, data, str(file), lines)
    first: dict[str, int] = {}
    for index, case in enumerate(spec.cases):
        if case.id in first:
            path: PathKey = ("cases", index, "id")
            raise ConfigError(
                f"duplicate case id '{case.id}' (first at cases[{first[case.id]}])",
                file=str(file),
                path=format_path(path),
                line=line_of(lines, path),
            )
        first[case.id] = index
    want = rule_splits(spec.cases)
    for index, case in enumerate(spec.cases):
        if case.split != want[case.id]:
            path = ("cases", index, "split")
            raise ConfigError(
                f"split {case.split} breaks the file's split_rule {spec.split_rule}, "
                f"which gives {want[case.id]}",
                file=str(file),
                path=format_path(path),
                line=line_of(lines, path),
            )
    return [
        WorkloadCase(case, spec.source.key, str(file), i, line_of(lines, ("cases", i)))
        for i, case in enumerate(spec.cases)
    ]


def load_workload_cases(paths: Sequence[Path] | None = None) -> list[WorkloadCase]:
    """All cases of ``paths`` (default: every shipped file), in file order.

    Raises ConfigError on a bad file or a case id repeated across files.
    """
    files = shipped_workload_files() if paths is None else [Path(p) for p in paths]
    out: list[WorkloadCase] = []
    seen: dict[str, WorkloadCase] = {}
    for file in files:
        for case in load_workload_file(file):
            claim_case_id(seen, case, case.id, f"{case.path}.id")
            out.append(case)
    return out
