"""Load the shipped (or a user's) tables of public whole-model training step times, and
translate one case into ``training_step`` fields.

One YAML file per source under ``configs/measurements/workloads/``: a ``source`` block,
the ``split_rule`` that fixes each case's ``split`` (written before any fit; the loader
checks every case against it) and ``cases``, each exactly as its source publishes it:
chip, slice (name, chips, torus dims), slices, JAX devices per chip, model preset,
per-device batch, the global batch it gives, sequence length, MaxText's ``dtype`` and
``quantization``, ``remat_policy`` (and ``remat_tensors`` for ``custom``), the MaxText
flags that shape the run (``layout``, verbatim), the measured step time and TFLOP/s per
device, and where the numbers are.

:func:`translate` is the one place a case becomes ``training_step`` fields (MaxText
flags -> tpusim mesh roles and fields). A field the case needs that the current
``training_step`` lacks is listed in :attr:`Translation.missing`, never approximated
silently.

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
from tpusim.config.loader import validate
from tpusim.config.types import Frozen
from tpusim.config.yamlio import PathKey, format_path, line_of, load_yaml
from tpusim.errors import ConfigError
from tpusim.validation.measurements import (
    PositiveTime,
    SourceInfo,
    Split,
    claim_case_id,
    shipped_name,
)

SplitRule = Literal["alternate-by-id-within-chip-dtype"]
"""The one split rule: within each (chip, dtype) group of a file, cases sorted by id
alternate fit, holdout, fit, ... starting with fit."""

RematPolicy = Literal[
    "none",
    "full",
    "minimal",
    "save_dot_except_mlp",
    "save_dot_except_mlpwi",
    "save_dot_with_context_except_mlp",
    "save_qkv_proj",
    "save_out_proj",
    "qkv_proj_offloaded",
    "minimal_offloaded",
    "minimal_with_context",
    "custom",
]
"""MaxText's remat policy names (CONTRACT-21), plus ``none``."""

RematTensor = Literal[
    "decoder_layer_input",
    "context",
    "mlpwi",
    "mlpwi_0",
    "mlpwi_1",
    "mlpwo",
    "query_proj",
    "key_proj",
    "value_proj",
    "qkv_proj",
    "out_proj",
]
"""MaxText's names of the tensors a ``custom`` remat policy places."""

RematPlace = Literal["remat", "device", "offload"]

MESH_FLAGS = {
    "data": "data",
    "pipeline": "pipeline",
    "fsdp": "fsdp",
    "fsdp_transpose": "fsdp",
    "sequence": "context",
    "context": "context",
    "tensor": "tensor",
    "expert": "expert",
}
"""MaxText mesh axis (``ici_<axis>_parallelism`` / ``dcn_<axis>_parallelism``) -> the
tpusim mesh axis (named after its role) that plays it. ``fsdp_transpose`` shards
parameters and batch as ``fsdp`` does (MaxText's second FSDP axis): both fold into one
``fsdp`` axis. ``sequence`` and ``context`` are context parallelism (CONTRACT-21)."""

COST_FLAGS: dict[str, Any] = {
    "attention": Literal["flash", "dot_product", "autoselected"],
    "capacity_factor": float,
    "sparse_matmul": bool,
    "weight_dtype": Literal["bfloat16", "float32"],
}
"""Non-mesh MaxText flags that change the step's cost, and their value types
(``attention: autoselected`` is MaxText's default and leaves tpusim's)."""

RECORDED_FLAGS: dict[str, Any] = {
    "megablox": bool,
    "custom_mesh": str,
    "allow_split_physical_axes": bool,
    "fsdp_shard_on_exp": bool,
    "use_random_routing": bool,
    "num_vocab_tiling": int,
}
"""Flags kept as published but not translated: ``megablox`` (MaxText's grouped-matmul
kernel, used with ``sparse_matmul``, which is translated), the device order of the mesh
(``custom_mesh``, ``allow_split_physical_axes``), random routing (tpusim routes
tokens evenly unless told a skew), and logits computed in vocabulary tiles (memory
only, of one layer's output)."""

DTYPES = {"bfloat16": "bf16", "float32": "fp32"}
QUANTIZATION = {"int8": "int8", "fp8": "fp8", "fp8_full": "fp8"}


def _layout_flag(name: str, value: Any) -> Any:
    """``value`` checked against flag ``name``'s type; ValueError naming the flag."""
    if name.startswith(("ici_", "dcn_")) and name.endswith("_parallelism"):
        axis = name[4 : -len("_parallelism")]
        if axis not in MESH_FLAGS:
            raise ValueError(f"unknown MaxText mesh axis '{axis}' in flag {name}")
        if isinstance(value, bool) or not isinstance(value, int) or (value < 1 and value != -1):
            raise ValueError(f"{name}: {value!r} must be a positive integer or -1")
        return value
    kind = COST_FLAGS.get(name, RECORDED_FLAGS.get(name))
    if kind is None:
        known = sorted([*COST_FLAGS, *RECORDED_FLAGS])
        raise ValueError(
            f"unknown MaxText flag '{name}' (known: ici_/dcn_<axis>_parallelism, "
            f"{', '.join(known)})"
        )
    from pydantic import TypeAdapter, ValidationError

    try:
        return TypeAdapter(kind).validate_python(value, strict=kind is not float)
    except ValidationError:
        raise ValueError(f"{name}: {value!r} is not a valid value") from None


class SliceShape(Frozen):
    """A slice as published (``v6e-256``) with its chip count and torus dims."""

    name: str = Field(min_length=1)
    chips: PositiveInt
    dims: tuple[Annotated[int, Field(ge=1)], ...] = Field(min_length=1, max_length=3)

    @model_validator(mode="after")
    def _dims_hold_the_chips(self) -> SliceShape:
        if math.prod(self.dims) != self.chips:
            raise ValueError(
                f"dims {list(self.dims)} hold {math.prod(self.dims)} chips, not {self.chips}"
            )
        return self


class WorkloadCaseSpec(Frozen):
    """One published run as written in the YAML file."""

    id: str = Field(min_length=1)
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
    measured_step_time: PositiveTime
    measured_tflops_per_device: PositiveFloat | None = None
    where: str = Field(min_length=1)
    split: Split
    note: str = ""

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
        return {name: _layout_flag(name, value) for name, value in layout.items()}

    @model_validator(mode="after")
    def _consistent(self) -> WorkloadCaseSpec:
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
    want = rule_splits(spec.cases)
    for index, case in enumerate(spec.cases):
        if case.split != want[case.id]:
            path: PathKey = ("cases", index, "split")
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


@dataclass(frozen=True)
class Translation:
    """A case as ``training_step`` fields: ``fields`` (with ``mesh`` in chips) and the
    CONTRACT-21 fields the case needs that the current ``training_step`` lacks."""

    fields: dict[str, Any]
    missing: tuple[str, ...]


def device_mesh(spec: WorkloadCaseSpec) -> dict[str, int]:
    """MaxText's ICI mesh over one slice's devices, by tpusim role axis (fsdp and
    fsdp_transpose multiplied): ``-1`` takes the devices the other axes leave.

    Raises ValueError when the axes do not divide the slice's devices."""
    sizes: dict[str, int] = {}
    rest_axis = None
    for axis, role in MESH_FLAGS.items():
        value = spec.layout.get(f"ici_{axis}_parallelism", 1)
        if value == -1:
            if rest_axis is not None:
                raise ValueError("more than one ici_*_parallelism is -1")
            rest_axis = role
            value = 1
        sizes[role] = sizes.get(role, 1) * value
    fixed = math.prod(sizes.values())
    if spec.devices % fixed:
        raise ValueError(f"the ici axes ({fixed} devices) do not divide {spec.devices} devices")
    if rest_axis is None and fixed != spec.devices:
        raise ValueError(f"the ici axes hold {fixed} devices, the slice {spec.devices}")
    if rest_axis is not None:
        sizes[rest_axis] *= spec.devices // fixed
    return sizes


def chip_mesh(spec: WorkloadCaseSpec) -> dict[str, int]:
    """:func:`device_mesh` in chips: a chip's ``devices_per_chip`` devices (its
    TensorCores) are one tpusim chip, taken out of the ``-1`` axis (else the first
    role axis they divide). Axes of one chip are left out; an all-one mesh keeps
    ``fsdp: 1``. Raises ValueError when no axis divides by the devices per chip."""
    sizes = device_mesh(spec)
    per_chip = spec.devices_per_chip
    if per_chip > 1:
        rest = next(
            (MESH_FLAGS[a] for a in MESH_FLAGS if spec.layout.get(f"ici_{a}_parallelism") == -1),
            None,
        )
        order = [rest] if rest else []
        order += [r for r in dict.fromkeys(MESH_FLAGS.values()) if r != rest]
        axis = next((r for r in order if sizes[r] % per_chip == 0), None)
        if axis is None:
            raise ValueError(f"no mesh axis divides by {per_chip} devices per chip")
        sizes[axis] //= per_chip
    mesh = {role: size for role, size in sizes.items() if size > 1}
    return mesh or {"fsdp": 1}


def translate(spec: WorkloadCaseSpec, available: set[str] | None = None) -> Translation:
    """``spec`` as ``training_step`` fields (see :data:`MESH_FLAGS`): the mesh in
    chips, the global batch in sequences, the dtype, remat, attention kernel and MoE
    flags; ``available`` is the set of ``training_step`` fields (default: the current
    :class:`~tpusim.workloads.training_step.TrainingWorkload`'s). Raises ValueError for
    a mesh the slice cannot hold."""
    if available is None:
        from tpusim.workloads.training_step import TrainingWorkload

        available = set(TrainingWorkload.model_fields)
    mesh = chip_mesh(spec)
    fields: dict[str, Any] = {
        "model": spec.model,
        "seq": spec.seq,
        "batch": spec.global_batch,
        "dtype": spec.tpusim_dtype,
        "mesh": mesh,
    }
    wanted = {**_remat_fields(spec, available), **_flag_fields(spec)}
    missing = [name for name in wanted if name not in available]
    if "context" in mesh and not _context_role(available):
        missing.append("context_axis")
    if spec.num_slices > 1:
        missing.append("num_slices")
    if spec.layout.get("fsdp_shard_on_exp"):
        # MaxText then shards the experts over the fsdp axis and routes tokens to
        # them (expert parallelism on that axis); tpusim's fsdp gathers every weight
        missing.append("fsdp_shard_on_exp")
    fields.update({k: v for k, v in wanted.items() if k in available})
    return Translation(fields, tuple(missing))


def _context_role(available: set[str]) -> bool:
    """Whether a mesh axis named ``context`` plays the context role (CONTRACT-21)."""
    from tpusim.program.builders.mesh import ROLES

    return "context" in ROLES or "context_axis" in available


def _remat_fields(spec: WorkloadCaseSpec, available: set[str]) -> dict[str, Any]:
    """``remat_policy`` (and ``remat_tensors``); ``full`` and ``none`` are the old
    ``recompute: true/false`` when the field is not there yet (the same thing)."""
    if "remat_policy" not in available and spec.remat_policy in ("full", "none"):
        return {"recompute": spec.remat_policy == "full"}
    out: dict[str, Any] = {"remat_policy": spec.remat_policy}
    if spec.remat_tensors is not None:
        out["remat_tensors"] = dict(spec.remat_tensors)
    return out


def _flag_fields(spec: WorkloadCaseSpec) -> dict[str, Any]:
    """The cost flags as CONTRACT-21 fields (the MaxText default where not given)."""
    layout, out = spec.layout, {}
    attention = layout.get("attention")
    if attention in ("flash", "dot_product"):
        out["attention_kernel"] = "flash" if attention == "flash" else "naive"
    if "capacity_factor" in layout:
        out["capacity_factor"] = layout["capacity_factor"]
    if "sparse_matmul" in layout:
        out["sparse_matmul"] = layout["sparse_matmul"]
    if layout.get("weight_dtype") == "float32" and _has_experts(spec.model):
        out["expert_weight_dtype"] = "fp32"
    if layout.get("weight_dtype") == "bfloat16":
        out["weight_dtype"] = "bf16"
    if layout.get("num_vocab_tiling", 1) > 1:
        out["num_vocab_tiling"] = layout["num_vocab_tiling"]
    return out


def _has_experts(model: str) -> bool:
    from tpusim.config.loader import load_model

    return load_model(model).moe is not None
