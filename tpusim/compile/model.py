"""The compact JAX transformer compiled for a TPU topology (imports JAX: only
:mod:`tpusim.compile.driver` imports this module, and only when asked to compile).

One decoder stack, as MaxText writes it: token embedding; per layer RMSNorm, GQA
attention (RoPE left out: elementwise work of a few percent; causal mask; plain
``einsum`` softmax attention, no Pallas kernel), RMSNorm, a gated (SwiGLU) or plain MLP,
or a mixture of experts (router, top-k, capacity-factor dispatch and combine as GShard
and MaxText's non-dropless path write it, expert weights on the ``expert`` role; shared
experts as one dense MLP beside them); the
layers under one ``jax.lax.scan`` (XLA's layer-scan ``while`` loop), each rematerialised
when ``remat`` is ``full``; a final norm and the unembedding. The training step is
cross-entropy loss, ``jax.grad`` and an Adam update (first and second moments in f32);
the decode step is one token per sequence against a KV cache of ``seq`` tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from tpusim.compile.request import CompileRequest

Params = dict[str, Any]
#: Tokens an expert takes, as a multiple of its fair share (Switch Transformer's 1.25;
#: assumption for the compact model: MaxText defaults to dropless experts, which the
#: compact model does not have).
CAPACITY_FACTOR = 1.25
#: Adam's moments and step (MaxText's adam_b1, adam_b2, adam_eps defaults; assumption
#: for the rate): none changes the compiled program's cost, only its arithmetic.
ADAM_B1, ADAM_B2, ADAM_EPS, LEARNING_RATE = 0.9, 0.95, 1e-8, 1e-4


def dtype_of(request: CompileRequest) -> Any:
    return jnp.bfloat16 if request.dtype == "bf16" else jnp.float32


def _norm(x: jax.Array, scale: jax.Array) -> jax.Array:
    x32 = x.astype(jnp.float32)
    y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + 1e-6)
    return (y * scale).astype(x.dtype)


def _act(x: jax.Array, gated: bool) -> jax.Array:
    return jax.nn.silu(x) if gated else jax.nn.gelu(x)


def _attention(
    lp: Params, x: jax.Array, k_all: jax.Array, v_all: jax.Array, q_pos: jax.Array
) -> jax.Array:
    """GQA attention of queries from ``x`` over keys/values ``k_all``/``v_all``
    ([batch, len, kv_heads, head_dim]), causal by position."""
    q = jnp.einsum("bsd,dhk->bshk", x, lp["wq"])
    b, s, h, hd = q.shape
    kv = k_all.shape[2]
    q = q.reshape(b, s, kv, h // kv, hd)
    logits = jnp.einsum("bsgrk,btgk->bgrst", q, k_all).astype(jnp.float32) / hd**0.5
    mask = q_pos[:, None] >= jnp.arange(k_all.shape[1])[None, :]
    logits = jnp.where(mask, logits, -1e30)
    probs = jax.nn.softmax(logits, axis=-1).astype(x.dtype)
    out = jnp.einsum("bgrst,btgk->bsgrk", probs, v_all).reshape(b, s, h, hd)
    return jnp.einsum("bshk,hkd->bsd", out, lp["wo"])


def _mlp(lp: Params, x: jax.Array, gated: bool, prefix: str = "w") -> jax.Array:
    """The MLP of weights ``{prefix}i0``, ``{prefix}i1`` (gated) and ``{prefix}out``."""
    h = _act(jnp.einsum("bsd,df->bsf", x, lp[f"{prefix}i0"]), gated)
    if gated:
        h = h * jnp.einsum("bsd,df->bsf", x, lp[f"{prefix}i1"])
    return jnp.einsum("bsf,fd->bsd", h, lp[f"{prefix}out"])


def _moe(lp: Params, x: jax.Array, top_k: int, gated: bool) -> jax.Array:
    """Top-k routing with a capacity per expert (one group per sequence), dispatched and
    combined by one-hot einsums; the expert einsums on the ``expert`` role."""
    b, s, _ = x.shape
    e = lp["router"].shape[-1]
    capacity = max(1, int(CAPACITY_FACTOR * s * top_k / e))
    gates = jax.nn.softmax(jnp.einsum("bsd,de->bse", x, lp["router"]).astype(jnp.float32))
    weights, experts = jax.lax.top_k(gates, top_k)
    onehot = jax.nn.one_hot(experts, e, dtype=jnp.int32)  # [b, s, k, e]
    position = jnp.cumsum(onehot.reshape(b, s * top_k, e), axis=1).reshape(b, s, top_k, e)
    keep = onehot * (position <= capacity)
    slot = jax.nn.one_hot(position - 1, capacity, dtype=x.dtype) * keep[..., None]
    dispatch = slot.sum(axis=2)  # [b, s, e, c]
    combine = (slot * weights[..., None, None].astype(x.dtype)).sum(axis=2)
    xe = jnp.einsum("bsec,bsd->becd", dispatch, x)
    h = _act(jnp.einsum("becd,edf->becf", xe, lp["ewi0"]), gated)
    if gated:
        h = h * jnp.einsum("becd,edf->becf", xe, lp["ewi1"])
    ye = jnp.einsum("becf,efd->becd", h, lp["ewout"])
    return jnp.einsum("bsec,becd->bsd", combine, ye)


def _ffn(request: CompileRequest, lp: Params, x: jax.Array) -> jax.Array:
    gated = request.model.mlp == "gated"
    moe = request.model.moe
    if moe is None:
        return _mlp(lp, x, gated)
    routed = _moe(lp, x, moe.top_k, gated)
    return routed + _mlp(lp, x, gated, "sw") if moe.shared else routed


def layer_fn(request: CompileRequest, constrain: Callable[[jax.Array], jax.Array]):
    """One training layer ``(x, layer params) -> (x, None)`` for ``jax.lax.scan``."""

    def layer(x: jax.Array, lp: Params) -> tuple[jax.Array, None]:
        x = constrain(x)
        h = _norm(x, lp["norm1"])
        k = jnp.einsum("bsd,dhk->bshk", h, lp["wk"])
        v = jnp.einsum("bsd,dhk->bshk", h, lp["wv"])
        x = x + _attention(lp, h, k, v, jnp.arange(x.shape[1]))
        return x + _ffn(request, lp, _norm(x, lp["norm2"])), None

    if request.remat == "full":
        return jax.checkpoint(layer, prevent_cse=False)
    return layer


def _layers(params: Params) -> Params:
    return {k: v for k, v in params.items() if v.ndim >= 2 and k not in ("embed", "unembed")}


def _logits(request: CompileRequest, params: Params, x: jax.Array) -> jax.Array:
    x = _norm(x, params["final_norm"])
    unembed = params["embed"].T if request.model.tied_embeddings else params["unembed"]
    return jnp.einsum("bsd,dv->bsv", x, unembed)


def loss_fn(request: CompileRequest, constrain: Callable[[jax.Array], jax.Array]):
    """``(params, tokens) -> mean next-token cross-entropy``."""
    layer = layer_fn(request, constrain)

    def loss(params: Params, tokens: jax.Array) -> jax.Array:
        x = constrain(params["embed"][tokens])
        x, _ = jax.lax.scan(layer, x, _layers(params))
        logits = _logits(request, params, x).astype(jnp.float32)
        labels = jnp.roll(tokens, -1, axis=1)
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.take_along_axis(logp, labels[..., None], axis=-1).mean()

    return loss


def train_step(request: CompileRequest, constrain: Callable[[jax.Array], jax.Array]):
    """``(params, mu, nu, tokens) -> (params, mu, nu, loss)``: gradients and Adam."""
    grad = jax.value_and_grad(loss_fn(request, constrain))

    def step(params: Params, mu: Params, nu: Params, tokens: jax.Array):
        loss, grads = grad(params, tokens)
        mu = jax.tree.map(lambda m, g: ADAM_B1 * m + (1 - ADAM_B1) * g, mu, grads)
        nu = jax.tree.map(lambda n, g: ADAM_B2 * n + (1 - ADAM_B2) * g * g, nu, grads)

        def update(p: jax.Array, m: jax.Array, n: jax.Array) -> jax.Array:
            return (p - LEARNING_RATE * m / (jnp.sqrt(n) + ADAM_EPS)).astype(p.dtype)

        return jax.tree.map(update, params, mu, nu), mu, nu, loss

    return step


def decode_step(request: CompileRequest, constrain: Callable[[jax.Array], jax.Array]):
    """``(params, k_cache, v_cache, tokens, pos) -> (next tokens, k_cache, v_cache)``:
    one token per sequence at position ``pos`` against caches [layers, batch, seq,
    kv_heads, head_dim]."""

    def layer(x: jax.Array, scanned: tuple[Params, jax.Array, jax.Array, jax.Array]):
        lp, kc, vc, pos = scanned
        h = _norm(x, lp["norm1"])
        k = jnp.einsum("bsd,dhk->bshk", h, lp["wk"])
        v = jnp.einsum("bsd,dhk->bshk", h, lp["wv"])
        kc = jax.lax.dynamic_update_slice_in_dim(kc, k, pos, axis=1)
        vc = jax.lax.dynamic_update_slice_in_dim(vc, v, pos, axis=1)
        x = x + _attention(lp, h, kc, vc, pos[None])
        return constrain(x + _ffn(request, lp, _norm(x, lp["norm2"]))), (kc, vc)

    def step(
        params: Params, k_cache: jax.Array, v_cache: jax.Array, tokens: jax.Array, pos: jax.Array
    ):
        x = constrain(params["embed"][tokens])
        layers = _layers(params)
        positions = jnp.broadcast_to(pos, (request.model.layers,))
        x, (k_cache, v_cache) = jax.lax.scan(
            lambda c, s: layer(c, s), x, (layers, k_cache, v_cache, positions)
        )
        return jnp.argmax(_logits(request, params, x), axis=-1), k_cache, v_cache

    return step
