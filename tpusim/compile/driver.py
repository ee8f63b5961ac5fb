"""Compile a :class:`~tpusim.compile.request.CompileRequest` for its TPU topology on the
CPU and collect what tpusim replays (imports JAX and libtpu).

libtpu reads ``LIBTPU_INIT_ARGS`` once, when JAX first asks it for a topology, so
the request's flags are set in the environment before that.
"""

from __future__ import annotations

import os
import time
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import jax
import jax.numpy as jnp
from jax.experimental import mesh_utils, topologies
from jax.sharding import Mesh

from tpusim import package_version
from tpusim.compile import model, sharding
from tpusim.compile.request import MESH_AXES, QUIET_ENV, CompileRequest, libtpu_error
from tpusim.compile.shapes import param_shapes


def versions() -> dict[str, str]:
    out = {"tpusim": package_version()}
    for name in ("jax", "jaxlib", "libtpu"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = ""
    return out


def make_mesh(request: CompileRequest) -> Mesh:
    """The request's mesh over the topology's devices: JAX's ``create_device_mesh``
    order, which keeps each role on neighbouring chips, splitting a physical axis
    where a role's size is no product of whole axes (an expert role of 8 on a 4x4
    slice)."""
    flags = " ".join(request.libtpu_flags)
    if flags:
        os.environ["LIBTPU_INIT_ARGS"] = flags
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    topology = topologies.get_topology_desc(platform="tpu", topology_name=request.topology)
    shape = tuple(request.mesh[a] for a in MESH_AXES)
    try:
        devices = mesh_utils.create_device_mesh(shape, devices=topology.devices)
    except (ValueError, AssertionError, NotImplementedError):
        devices = mesh_utils.create_device_mesh(
            shape, devices=topology.devices, allow_split_physical_axes=True
        )
    return Mesh(devices, MESH_AXES)


def _abstract(mesh: Mesh, request: CompileRequest, dtype: Any) -> dict[str, Any]:
    shapes = param_shapes(request)
    return {
        name: jax.ShapeDtypeStruct(
            shape, dtype, sharding=sharding.weight_sharding(mesh, name, shape)
        )
        for name, shape in shapes.items()
    }


def _train(mesh: Mesh, request: CompileRequest) -> Any:
    params = _abstract(mesh, request, model.dtype_of(request))
    moments = _abstract(mesh, request, jnp.float32)
    tokens = jax.ShapeDtypeStruct(
        (request.batch, request.seq), jnp.int32, sharding=sharding.batch_sharding(mesh, 2)
    )
    constrain = _constrain(mesh)
    p_sh = {k: v.sharding for k, v in params.items()}
    out = (p_sh, p_sh, p_sh, sharding.replicated(mesh))
    step = jax.jit(
        model.train_step(request, constrain), out_shardings=out, donate_argnums=(0, 1, 2)
    )
    return step.lower(params, moments, moments, tokens)


def _decode(mesh: Mesh, request: CompileRequest) -> Any:
    params = _abstract(mesh, request, model.dtype_of(request))
    cache_sh = sharding.cache_sharding(mesh, request)
    shape = sharding.cache_shape(request)
    cache = jax.ShapeDtypeStruct(shape, model.dtype_of(request), sharding=cache_sh)
    tokens = jax.ShapeDtypeStruct(
        (request.batch, 1), jnp.int32, sharding=sharding.batch_sharding(mesh, 2)
    )
    pos = jax.ShapeDtypeStruct((), jnp.int32, sharding=sharding.replicated(mesh))
    out = (sharding.batch_sharding(mesh, 2), cache_sh, cache_sh)
    step = jax.jit(
        model.decode_step(request, _constrain(mesh)), out_shardings=out, donate_argnums=(1, 2)
    )
    return step.lower(params, cache, cache, tokens, pos)


def _constrain(mesh: Mesh):
    def constrain(x: jax.Array) -> jax.Array:
        return jax.lax.with_sharding_constraint(x, sharding.batch_sharding(mesh, x.ndim))

    return constrain


def memory_of(compiled: Any) -> dict[str, float]:
    stats = compiled.memory_analysis()
    names = [n for n in dir(stats) if n.endswith("_in_bytes")]
    return {n: float(getattr(stats, n)) for n in sorted(names)}


def cost_of(compiled: Any) -> dict[str, float]:
    cost = compiled.cost_analysis()
    if isinstance(cost, list):  # older JAX: one dict per computation
        cost = cost[0] if cost else {}
    return {k: float(v) for k, v in sorted(cost.items()) if "{" not in k}


def devices_of(mesh: Mesh) -> list[list[int]]:
    """[id, x, y, z, core on chip] of each device, in the module's device-id order (the
    mesh's devices flattened: a jitted program's device assignment)."""
    return [[d.id, *list(d.coords), d.core_on_chip] for d in mesh.devices.flat]


def compile_artifact(request: CompileRequest) -> dict[str, Any]:
    """Compile ``request`` and return the artifact (see
    :mod:`tpusim.program.hlo.artifact` for its fields)."""
    start = time.perf_counter()
    try:
        mesh = make_mesh(request)
        lowered = _train(mesh, request) if request.step == "train" else _decode(mesh, request)
        compiled = lowered.compile()
    except (RuntimeError, ValueError) as exc:  # JaxRuntimeError is a RuntimeError
        raise libtpu_error(request, exc) from None
    seconds = time.perf_counter() - start
    return {
        "request": request.summary(),
        "topology": request.topology,
        "mesh": {
            "axes": list(MESH_AXES),
            "shape": [request.mesh[a] for a in MESH_AXES],
            "devices": devices_of(mesh),
        },
        "hlo": compiled.as_text(),
        "cost_analysis": cost_of(compiled),
        "memory_analysis": memory_of(compiled),
        "versions": versions(),
        "compile_time_s": seconds,
    }
