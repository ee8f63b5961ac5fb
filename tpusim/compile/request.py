"""What to compile: a :class:`CompileRequest` (model, topology, mesh, shapes), checked
without JAX.

A topology is named as libtpu names it, ``FAMILY:SHAPE`` (``v5e:4x4``, ``v6e:4x4``,
``v5p:2x2x2``, ``tpu7x:2x2x1``), or by a shipped system (``v5e-pod``, optionally with a
shape, ``v5e-pod:2x2``): the system's chip gives the family and, without a shape, the
family's :data:`DEFAULT_SHAPES` slice. The mesh has the roles of ``training_step``
(``data``, ``fsdp``, ``tensor``, ``expert``); the roles not given take size 1 and
``fsdp`` takes what is left of the devices.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Literal, get_args

from tpusim.config import load_system, shipped
from tpusim.config.loader import load_model
from tpusim.config.model import ModelSpec
from tpusim.errors import InputError, TpusimError

#: The mesh roles, in the order of the mesh's axes (as ``training_step`` names them).
MESH_AXES: tuple[str, ...] = ("data", "fsdp", "expert", "tensor")
#: libtpu's topology family of each tpusim chip (``get_topology_desc`` names).
FAMILY_OF_CHIP: dict[str, str] = {
    "v4": "v4",
    "v5e": "v5e",
    "v5p": "v5p",
    "v6e": "v6e",
    "ironwood": "tpu7x",
}
#: The slice a system name compiles for when no shape is given (small, so a compile
#: takes seconds on a CPU; assumption, any shape libtpu knows may be asked for).
DEFAULT_SHAPES: dict[str, str] = {
    "v4": "2x2x1",
    "v5e": "4x4",
    "v5p": "2x2x2",
    "v6e": "4x4",
    "tpu7x": "2x2x1",
}
#: Devices per chip libtpu shows for a family (Ironwood: its 2 TensorCores, published,
#: JAX ``get_topology_desc("tpu7x:2x2x1")`` lists 8 devices on 4 chips).
DEVICES_PER_CHIP: dict[str, int] = {"tpu7x": 2}

#: Env vars that keep libtpu from probing for TPU hardware the CPU machine lacks
#: (its warnings name them; values as for a single-host slice, assumption), and from
#: taking its one-process lock file (/tmp/libtpu_lockfile): compiling drives no TPU,
#: so two compiles on one machine need not exclude each other.
QUIET_ENV = {
    "TPU_ACCELERATOR_TYPE": "v5litepod-1",
    "TPU_WORKER_HOSTNAMES": "localhost",
    "TPU_SKIP_MDS_QUERY": "1",
    "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
}

Step = Literal["train", "decode"]
STEPS: tuple[Step, ...] = get_args(Step)
CompileDtype = Literal["bf16", "f32"]
DTYPES: tuple[CompileDtype, ...] = get_args(CompileDtype)
Remat = Literal["full", "none"]
REMATS: tuple[Remat, ...] = get_args(Remat)
_SHAPE_RE = re.compile(r"\d+(x\d+){1,2}")


@dataclass(frozen=True)
class CompileRequest:
    """One compile: ``model`` (a preset, its ``layers`` overridden when given) at
    ``batch`` sequences of ``seq`` tokens (global), a ``step`` (a training step with
    gradients and an Adam update, or one decode step over a KV cache of ``seq``) for
    ``topology`` (``FAMILY:SHAPE``) on a mesh of ``mesh`` role sizes."""

    model: ModelSpec
    topology: str
    mesh: dict[str, int]
    batch: int
    seq: int
    step: Step = "train"
    dtype: CompileDtype = "bf16"
    remat: Remat = "full"
    libtpu_flags: tuple[str, ...] = field(default_factory=tuple)

    @property
    def family(self) -> str:
        return self.topology.split(":")[0]

    @property
    def num_devices(self) -> int:
        """Devices of the slice: chips x devices per chip."""
        dims = [int(x) for x in self.topology.split(":")[1].split("x")]
        return math.prod(dims) * DEVICES_PER_CHIP.get(self.family, 1)

    def summary(self) -> dict[str, object]:
        """The request as JSON-able fields (what the artifact records)."""
        return {
            "model": self.model.name,
            "layers": self.model.layers,
            "topology": self.topology,
            "mesh": dict(self.mesh),
            "batch": self.batch,
            "seq": self.seq,
            "step": self.step,
            "dtype": self.dtype,
            "remat": self.remat,
            "libtpu_flags": list(self.libtpu_flags),
        }


def resolve_topology(name: str) -> str:
    """``FAMILY:SHAPE`` of a topology or system name; InputError naming the problem."""
    base, _, shape = name.partition(":")
    families = sorted(set(FAMILY_OF_CHIP.values()))
    if base in families:
        family = base
    elif base in shipped("systems"):
        chip = load_system(base).chip.name
        if chip not in FAMILY_OF_CHIP:
            raise InputError(
                f"--topology {name}: system {base} has chip {chip}, which libtpu does not "
                f"compile for (it knows {', '.join(families)})"
            )
        family = FAMILY_OF_CHIP[chip]
    else:
        raise InputError(
            f"--topology {name}: expected FAMILY:SHAPE ({', '.join(families)}, e.g. "
            "v5e:4x4) or a shipped system name (see tpusim systems)"
        )
    shape = shape or DEFAULT_SHAPES[family]
    if not _SHAPE_RE.fullmatch(shape):
        raise InputError(f"--topology {name}: shape '{shape}' is not like 4x4 or 2x2x2")
    return f"{family}:{shape}"


def parse_mesh(text: str, num_devices: int) -> dict[str, int]:
    """``fsdp=8,tensor=2`` -> every role's size; unnamed roles 1, ``fsdp`` (when not
    given) the devices left. InputError on an unknown role or a product that is not
    the device count."""
    sizes: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        role, eq, value = part.partition("=")
        if not eq or role not in MESH_AXES or not value.isdigit() or int(value) < 1:
            raise InputError(
                f"--mesh {text}: '{part}' is not ROLE=N with ROLE one of {', '.join(MESH_AXES)}"
            )
        sizes[role] = int(value)
    given = math.prod(sizes.values())
    if "fsdp" not in sizes and num_devices % given == 0:
        sizes["fsdp"] = num_devices // given
    mesh = {axis: sizes.get(axis, 1) for axis in MESH_AXES}
    if math.prod(mesh.values()) != num_devices:
        raise InputError(
            f"--mesh {text or '(default)'}: roles multiply to {math.prod(mesh.values())}, "
            f"the slice has {num_devices} devices"
        )
    return mesh


def make_request(
    model: str,
    topology: str,
    mesh: str = "",
    batch: int = 0,
    seq: int = 256,
    layers: int | None = None,
    **options: object,
) -> CompileRequest:
    """A checked :class:`CompileRequest`; ``batch`` 0 is one sequence per batch shard.

    Raises InputError naming the flag: an unknown model or topology, a mesh that does
    not cover the devices, a batch the batch roles do not divide, a model feature the
    compact model does not have (MLA attention).
    """
    spec = load_model(model)
    if spec.attention.kind != "gqa":
        raise InputError(
            f"--model {model}: attention '{spec.attention.kind}' is not in the compact JAX "
            "model (GQA only)"
        )
    if spec.moe is not None and spec.moe.dense_layers:
        raise InputError(
            f"--model {model}: {spec.moe.dense_layers} leading dense layers before the MoE "
            "layers are not in the compact JAX model (one layer scan)"
        )
    if layers is not None:
        if layers < 1:
            raise InputError(f"--layers {layers}: expected a whole number >= 1")
        spec = spec.model_copy(update={"layers": layers})
    resolved = resolve_topology(topology)
    request = CompileRequest(spec, resolved, {}, 1, seq)
    sizes = parse_mesh(mesh, request.num_devices)
    shards = sizes["data"] * sizes["fsdp"] * sizes["expert"]
    batch = batch or shards
    if batch % shards or seq < 1:
        raise InputError(
            f"--batch {batch} --seq {seq}: the batch must be a multiple of data x fsdp x "
            f"expert = {shards} and the sequence >= 1"
        )
    return CompileRequest(spec, resolved, sizes, batch, seq, **options)  # type: ignore[arg-type]


def libtpu_error(request: CompileRequest, exc: Exception) -> TpusimError:
    """What JAX or libtpu raised, as one line: an InputError (exit 2) for a request
    libtpu refuses (``INVALID_ARGUMENT``: a topology it does not know, a shape it
    cannot tile), else a TpusimError (exit 1)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    line = f"compile {request.model.name} for {request.topology}: libtpu: {text[:300]}"
    refused = isinstance(exc, ValueError) or text.startswith("INVALID_ARGUMENT")
    return InputError(line) if refused else TpusimError(line)
