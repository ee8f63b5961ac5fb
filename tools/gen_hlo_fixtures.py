"""Generate the HLO fixtures of ``tests/test_hlo.py`` with JAX on CPU.

For each small program and device count it writes ``tests/fixtures/hlo/<name>_<n>.hlo.txt``
(the compiled per-device module text, ``jax.jit(f).lower(...).compile().as_text()``) and
``<name>_<n>.json`` with ``{"devices": n, "cost_analysis": {...}}`` from
``compiled.cost_analysis()``, so the tests need no JAX. Run::

    python tools/gen_hlo_fixtures.py [--out tests/fixtures/hlo] [--devices 4 8]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

MAX_DEVICES = 8
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={MAX_DEVICES}"
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

try:
    shard_map = jax.shard_map
except AttributeError:  # older JAX
    from jax.experimental.shard_map import shard_map  # type: ignore[no-redef]


def _mesh(shape: tuple[int, ...], names: tuple[str, ...]) -> Mesh:
    n = int(np.prod(shape))
    return Mesh(np.array(jax.devices()[:n]).reshape(shape), names)


def _sds(shape, dtype, mesh, spec):
    return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, spec))


def data_parallel(n: int):
    """Linear regression step: batch sharded, weights replicated; the gradient is a psum."""
    mesh = _mesh((n,), ("data",))

    def step(w, x, y):
        def loss(w):
            return jnp.mean((x @ w - y) ** 2)

        g = jax.grad(loss)(w)
        return w - 0.01 * g

    args = (
        _sds((256, 128), jnp.float32, mesh, P()),
        _sds((64 * n, 256), jnp.float32, mesh, P("data")),
        _sds((64 * n, 128), jnp.float32, mesh, P("data")),
    )
    out = NamedSharding(mesh, P())
    return jax.jit(step, out_shardings=out), args


def tensor_parallel(n: int):
    """Megatron MLP: column-parallel then row-parallel matmul; the output needs a reduction."""
    mesh = _mesh((n,), ("model",))

    def mlp(x, w1, w2):
        return jax.nn.relu(x @ w1) @ w2

    args = (
        _sds((128, 256), jnp.float32, mesh, P()),
        _sds((256, 128 * n), jnp.float32, mesh, P(None, "model")),
        _sds((128 * n, 256), jnp.float32, mesh, P("model", None)),
    )
    return jax.jit(mlp, out_shardings=NamedSharding(mesh, P())), args


def tensor_parallel_rs(n: int):
    """Row-parallel matmul whose output stays sharded: a reduce-scatter."""
    mesh = _mesh((n,), ("model",))

    def f(x, w):
        return x @ w

    args = (
        _sds((128, 64 * n), jnp.float32, mesh, P(None, "model")),
        _sds((64 * n, 32 * n), jnp.float32, mesh, P("model", None)),
    )
    return jax.jit(f, out_shardings=NamedSharding(mesh, P(None, "model"))), args


def fsdp(n: int):
    """FSDP forward: weights sharded on their rows, gathered before use (shard_map)."""
    mesh = _mesh((n,), ("fsdp",))

    def layer(x, w1, w2):
        w1 = jax.lax.all_gather(w1, "fsdp", tiled=True)
        h = jnp.tanh(x @ w1)
        w2 = jax.lax.all_gather(w2, "fsdp", tiled=True)
        return h @ w2

    f = shard_map(
        layer,
        mesh=mesh,
        in_specs=(P("fsdp"), P("fsdp"), P("fsdp")),
        out_specs=P("fsdp"),
    )
    args = (
        _sds((32 * n, 128), jnp.float32, mesh, P("fsdp")),
        _sds((128, 256), jnp.float32, mesh, P("fsdp")),
        _sds((256, 128), jnp.float32, mesh, P("fsdp")),
    )
    return jax.jit(f), args


def transformer(n: int):
    """One training step of a tiny transformer block on a 2D (data, model) mesh."""
    mesh = _mesh((2, n // 2), ("data", "model"))
    d, h, f, s = 64, 4, 256, 32

    def block(p, x):
        q = x @ p["wq"]
        k = x @ p["wk"]
        v = x @ p["wv"]
        b = x.shape[0]
        q = q.reshape(b, s, h, d // h)
        k = k.reshape(b, s, h, d // h)
        v = v.reshape(b, s, h, d // h)
        att = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / 4.0, axis=-1)
        o = jnp.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, s, d)
        x = x + o @ p["wo"]
        y = jax.nn.gelu(x @ p["w1"]) @ p["w2"]
        return x + y

    def step(p, x):
        loss = lambda p: jnp.mean(block(p, x) ** 2)  # noqa: E731
        g = jax.grad(loss)(p)
        return jax.tree.map(lambda a, b: a - 0.01 * b, p, g)

    col, row = P(None, "model"), P("model", None)
    specs = {"wq": col, "wk": col, "wv": col, "wo": row, "w1": col, "w2": row}
    shapes = {"wq": (d, d), "wk": (d, d), "wv": (d, d), "wo": (d, d), "w1": (d, f), "w2": (f, d)}
    p = {k: _sds(shapes[k], jnp.float32, mesh, specs[k]) for k in specs}
    x = _sds((8, s, d), jnp.float32, mesh, P("data"))
    out = {k: NamedSharding(mesh, specs[k]) for k in specs}
    return jax.jit(step, out_shardings=out), (p, x)


def all_to_all(n: int):
    """MoE-style dispatch: shard_map all_to_all, expert matmul, all_to_all back."""
    mesh = _mesh((n,), ("expert",))

    def f(x, w):
        y = jax.lax.all_to_all(x, "expert", 0, 0, tiled=True)
        y = y @ w[0]
        return jax.lax.all_to_all(y, "expert", 0, 0, tiled=True)

    g = shard_map(f, mesh=mesh, in_specs=(P("expert"), P("expert")), out_specs=P("expert"))
    args = (
        _sds((64 * n, 128), jnp.float32, mesh, P("expert")),
        _sds((n, 128, 128), jnp.float32, mesh, P("expert")),
    )
    return jax.jit(g), args


def ppermute(n: int):
    """Ring pipeline: matmul then pass activations to the next device, a few times (a loop)."""
    mesh = _mesh((n,), ("stage",))
    perm = [(i, (i + 1) % n) for i in range(n)]

    def f(x, w):
        def body(_, x):
            return jax.lax.ppermute(jnp.tanh(x @ w), "stage", perm)

        return jax.lax.fori_loop(0, 5, body, x)

    g = shard_map(f, mesh=mesh, in_specs=(P("stage"), P()), out_specs=P("stage"))
    args = (
        _sds((16 * n, 128), jnp.float32, mesh, P("stage")),
        _sds((128, 128), jnp.float32, mesh, P()),
    )
    return jax.jit(g), args


PROGRAMS = {
    "data_parallel": data_parallel,
    "tensor_parallel": tensor_parallel,
    "tensor_parallel_rs": tensor_parallel_rs,
    "fsdp": fsdp,
    "transformer": transformer,
    "all_to_all": all_to_all,
    "ppermute": ppermute,
}


def _cost(compiled) -> dict[str, float]:
    cost = compiled.cost_analysis()
    if isinstance(cost, (list, tuple)):
        cost = cost[0] if cost else {}
    return {k: float(v) for k, v in (cost or {}).items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).parent.parent / "tests/fixtures/hlo"))
    parser.add_argument("--devices", type=int, nargs="+", default=[4, 8])
    ns = parser.parse_args(argv)
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    for n in ns.devices:
        if n > MAX_DEVICES:
            print(f"skipping {n} devices (> {MAX_DEVICES})", file=sys.stderr)
            continue
        for name, make in PROGRAMS.items():
            fn, args = make(n)
            compiled = fn.lower(*args).compile()
            stem = f"{name}_{n}"
            # XLA's debug info names this script by absolute path: keep fixtures portable
            root = str(Path(__file__).resolve().parent.parent) + "/"
            (out / f"{stem}.hlo.txt").write_text(compiled.as_text().replace(root, ""))
            meta = {"devices": n, "program": name, "jax": jax.__version__}
            meta["cost_analysis"] = _cost(compiled)
            (out / f"{stem}.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
            print(f"{stem}: flops={meta['cost_analysis'].get('flops')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
