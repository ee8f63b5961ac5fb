"""How the compact model's arrays are sharded over the mesh (imports JAX).

The layout is MaxText's default logical rules: weights' ``embed`` (``d_model``) axis on
``fsdp``, their heads, MLP and vocabulary axes on ``tensor``, experts on ``expert``;
the batch on ``data``, ``fsdp`` and ``expert`` together. An axis whose size a role does
not divide is left unsharded on that role (as MaxText does for a 1-sized dimension).
"""

from __future__ import annotations

import math

from jax.sharding import Mesh, NamedSharding, PartitionSpec

from tpusim.compile.request import CompileRequest

Axis = str | tuple[str, ...] | None
BATCH: tuple[str, ...] = ("data", "fsdp", "expert")
#: The roles of each weight's axes (per-layer weights lead with the layer axis).
WEIGHT_AXES: dict[str, tuple[Axis, ...]] = {
    "embed": ("tensor", "fsdp"),
    "unembed": ("fsdp", "tensor"),
    "final_norm": (None,),
    "norm1": (None, None),
    "norm2": (None, None),
    "wq": (None, "fsdp", "tensor", None),
    "wk": (None, "fsdp", "tensor", None),
    "wv": (None, "fsdp", "tensor", None),
    "wo": (None, "tensor", None, "fsdp"),
    "wi0": (None, "fsdp", "tensor"),
    "wi1": (None, "fsdp", "tensor"),
    "wout": (None, "tensor", "fsdp"),
    "router": (None, "fsdp", None),
    "ewi0": (None, "expert", "fsdp", "tensor"),
    "ewi1": (None, "expert", "fsdp", "tensor"),
    "ewout": (None, "expert", "tensor", "fsdp"),
    "swi0": (None, "fsdp", "tensor"),
    "swi1": (None, "fsdp", "tensor"),
    "swout": (None, "tensor", "fsdp"),
}
#: The KV cache [layers, batch, seq, kv_heads, head_dim].
CACHE_AXES: tuple[Axis, ...] = (None, BATCH, None, "tensor", None)


def _size(mesh: Mesh, axis: Axis) -> int:
    names = (axis,) if isinstance(axis, str) else axis or ()
    return math.prod(mesh.shape[n] for n in names)


def sharding(mesh: Mesh, shape: tuple[int, ...], axes: tuple[Axis, ...]) -> NamedSharding:
    """``axes`` for an array of ``shape``, each axis kept where its roles divide it."""
    fitted = [a if dim % _size(mesh, a) == 0 else None for dim, a in zip(shape, axes, strict=True)]
    return NamedSharding(mesh, PartitionSpec(*fitted))


def weight_sharding(mesh: Mesh, name: str, shape: tuple[int, ...]) -> NamedSharding:
    return sharding(mesh, shape, WEIGHT_AXES[name])


def batch_sharding(mesh: Mesh, rank: int) -> NamedSharding:
    """Batch-sharded, the other axes replicated: tokens and activations."""
    return NamedSharding(mesh, PartitionSpec(BATCH, *([None] * (rank - 1))))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec())


def cache_shape(request: CompileRequest) -> tuple[int, ...]:
    """The decode step's KV cache: (layers, batch, seq, KV heads, head dim)."""
    m = request.model
    heads = m.attention.kv_heads or m.attention.heads
    return (m.layers, request.batch, request.seq, heads, m.attention.head_dim)


def cache_sharding(mesh: Mesh, request: CompileRequest) -> NamedSharding:
    return sharding(mesh, cache_shape(request), CACHE_AXES)
