"""The compact model's weights and their shapes (no JAX: the tests read them)."""

from __future__ import annotations

from tpusim.compile.request import CompileRequest


def param_shapes(request: CompileRequest) -> dict[str, tuple[int, ...]]:
    """Every weight's shape; per-layer weights stacked on a leading ``layers`` axis."""
    m = request.model
    a = m.attention
    L, d, hd = m.layers, m.d_model, a.head_dim
    kv = a.kv_heads or a.heads
    shapes: dict[str, tuple[int, ...]] = {
        "embed": (m.vocab, d),
        "final_norm": (d,),
        "norm1": (L, d),
        "norm2": (L, d),
        "wq": (L, d, a.heads, hd),
        "wk": (L, d, kv, hd),
        "wv": (L, d, kv, hd),
        "wo": (L, a.heads, hd, d),
    }
    if not m.tied_embeddings:
        shapes["unembed"] = (d, m.vocab)
    gates = 2 if m.mlp == "gated" else 1
    if m.moe is None:
        shapes |= {f"wi{g}": (L, d, m.d_ff) for g in range(gates)} | {"wout": (L, m.d_ff, d)}
    else:
        e, f = m.moe.experts, m.moe.d_ff
        shapes |= {"router": (L, d, e), "ewout": (L, e, f, d)}
        shapes |= {f"ewi{g}": (L, e, d, f) for g in range(gates)}
        if m.moe.shared:  # always-on experts: one dense MLP of their summed width
            width = m.moe.shared * f
            shapes |= {f"swi{g}": (L, d, width) for g in range(gates)}
            shapes |= {"swout": (L, width, d)}
    return shapes
