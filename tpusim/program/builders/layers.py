"""Per-layer op templates of the training step, and how a template becomes ops.

A template (:class:`LayerStep`) is one op of a layer's forward pass; the same list,
reversed, drives the backward pass. :func:`emit_step` turns one template into the
forward op or into its backward op(s): a matmul ``(batch, m, k, n)`` becomes a
gradient of its first operand ``(batch, m, n, k)`` (``.bwd_input``) then of its
second ``(batch, k, m, n)`` (``.bwd_weight``); an elementwise op moves
:data:`BACKWARD_ELEMENTWISE_FACTOR` times its forward bytes; a fused kernel (flash
attention) becomes its backward kernel (``.bwd``).

Blocks: attention is grouped-query (``kv_heads`` K/V heads, MHA when equal to
``heads``) or DeepSeek's multi-head latent attention (``mla``: Q and KV through
low-rank latents, K/V materialised from the KV latent as DeepSeek trains), computed
by one fused causal kernel (``attention_kernel: flash``, :mod:`.attention`) or with
its scores and softmax through HBM (``naive``); the MLP is
``plain`` (up, activation, down) or ``gated`` (SwiGLU: gate, up, activation, down);
a MoE layer runs a router, the routed experts behind a dispatch and a combine
all-to-all, and ``shared`` always-on experts as a tensor-sharded dense MLP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

from tpusim.program.builders import attention as flash
from tpusim.program.builders.attention import AttentionKernel, KernelWork
from tpusim.program.builders.oplist import OpList

Phase = Literal["fwd", "bwd"]
StepPhase = Literal["both", "fwd", "bwd"]
MlpKind = Literal["plain", "gated"]
AttentionKind = Literal["gqa", "mla"]

BACKWARD_ELEMENTWISE_FACTOR = 1.5
"""Backward bytes of an elementwise op over its forward bytes (3 passes against 2)."""

DROPLESS = -1.0
"""``capacity_factor`` of a dropless MoE (MaxText's default ``capacity_factor: -1``)."""

GMM_TILE_ROWS = 512
"""Rows of one megablox grouped-matmul tile (published: MaxText's ``sparse_matmul``,
``tile_size = (512, 1024, 1024)`` for (m, k, n), ``MaxText/layers/moe.py``); each
expert's group of rows pads up to it."""


@dataclass(frozen=True)
class LayerShape:
    """Per-chip sizes of one transformer layer (tensor- and expert-local).

    ``seqs`` sequences of ``seq`` tokens (``tokens`` in all), ``heads`` and
    ``kv_heads`` local heads of ``head_dim``, ``d_ff`` local MLP width (of a dense
    layer; of one expert when ``experts > 0``), ``rows`` MLP rows (``tokens * top_k``
    for MoE), ``bytes_per_element`` of the dtype; ``tensor`` and ``expert`` are the
    axes of the tensor-parallel all-reduces and the MoE all-to-alls (empty: left
    out). ``shared_d_ff`` is the local width of the shared experts together;
    ``q_lora_rank``, ``kv_lora_rank`` and ``rope_head_dim`` shape MLA.
    ``kv_seq`` is the keys each query attends over (the whole sequence under context
    parallelism, where ``seq`` is the chip's slice of it; 0: ``seq``);
    ``sequence_shards`` the tensor axis size under sequence parallelism (norms,
    residuals and the layer input are split over it; 1 without).
    ``attention_kernel`` is ``flash`` (fused, :mod:`.attention`) or ``naive`` (scores
    and softmax through HBM).
    """

    seqs: int
    seq: int
    d_model: int
    heads: int
    head_dim: int
    d_ff: int
    experts: int
    top_k: int
    bytes_per_element: float
    tensor: tuple[str, ...]
    expert: tuple[str, ...]
    kv_heads: int = 0
    mlp: MlpKind = "plain"
    attention: AttentionKind = "gqa"
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    rope_head_dim: int = 0
    shared_d_ff: int = 0
    attention_kernel: AttentionKernel = "flash"
    kv_seq: int = 0
    sequence_shards: int = 1

    @property
    def keys(self) -> int:
        """Keys per query row: ``kv_seq``, or ``seq`` when it is 0."""
        return self.kv_seq or self.seq

    local_experts: int = 0
    capacity_factor: float = DROPLESS
    routing_skew: float = 0.0
    sparse_matmul: bool = True

    @property
    def tokens(self) -> int:
        return self.seqs * self.seq

    @property
    def rows(self) -> int:
        return self.tokens * self.top_k if self.experts else self.tokens

    @property
    def kv(self) -> int:
        """Local K/V heads (``heads`` when not set: multi-head attention)."""
        return self.kv_heads or self.heads

    @property
    def mlp_matrices(self) -> int:
        """Weight matrices of one MLP: 3 when gated (SwiGLU), else 2."""
        return 3 if self.mlp == "gated" else 2

    @property
    def act_bytes(self) -> float:
        """Bytes of one activation, ``tokens * d_model`` elements."""
        return self.tokens * self.d_model * self.bytes_per_element

    @property
    def qk_dim(self) -> int:
        """Head dimension of Q and K (MLA adds the rope part)."""
        return self.head_dim + (self.rope_head_dim if self.attention == "mla" else 0)

    @property
    def balanced_keys(self) -> int:
        """The keys a chip's queries see on average: ``seq`` without context
        parallelism; with it (``keys`` > ``seq``), load-balanced causal attention
        (MaxText's ``context_parallel_load_balance``) gives every chip the work of a
        query slice in the middle of the sequence, ``(keys + seq) / 2`` positions."""
        return (self.keys + self.seq) // 2

    @property
    def attention_call(self) -> flash.AttentionShape:
        """The layer's causal self-attention as one fused kernel call."""
        return flash.AttentionShape(
            seqs=self.seqs,
            heads=self.heads,
            q_len=self.seq,
            kv_len=self.balanced_keys,
            qk_dim=self.qk_dim,
            v_dim=self.head_dim,
            bytes_per_element=self.bytes_per_element,
        )


@dataclass(frozen=True)
class LayerStep:
    """One forward op of a layer; ``phase`` says in which pass it appears; a matmul's
    ``useful`` share of its FLOPs counts as model FLOPs (padding, dispatch einsums
    do not) and ``efficiency`` divides its compute time (a grouped matmul's)."""

    name: str
    kind: Literal["matmul", "elementwise", "collective", "embedding", "kernel"]
    batch: int = 1
    m: int = 0
    k: int = 0
    n: int = 0
    bytes: float = 0.0
    collective: str = ""
    axes: tuple[str, ...] = ()
    phase: StepPhase = "both"
    useful: float = 1.0
    efficiency: float = 1.0
    work: KernelWork | None = None
    work_bwd: KernelWork | None = None

    @property
    def forward_flops(self) -> float:
        """Useful FLOPs of the forward op (0 for ops without MXU work)."""
        if self.kind == "kernel":
            return self.work.flops if self.work else 0.0
        return 2.0 * self.batch * self.m * self.k * self.n if self.kind == "matmul" else 0.0


def layer_steps(s: LayerShape) -> list[LayerStep]:
    """The forward templates of one layer: attention then the dense MLP or MoE."""
    mlp = moe_steps(s) if s.experts else mlp_steps(s, "mlp", s.tokens, s.d_ff)
    return [
        *attention_steps(s),
        LayerStep("mlp.norm", "elementwise", bytes=2 * s.act_bytes),
        *collective_step("mlp.tp_allreduce", "all-reduce", s.act_bytes, s.tensor, "bwd"),
        *mlp,
        *collective_step("mlp.tp_allreduce", "all-reduce", s.act_bytes, s.tensor, "fwd"),
        LayerStep("mlp.residual", "elementwise", bytes=3 * s.act_bytes),
    ]


def attention_steps(s: LayerShape) -> list[LayerStep]:
    """Norm, projections, the attention proper, output projection, residual; the
    tensor-parallel all-reduce after the block (forward) and at its input (backward)."""
    act = s.act_bytes
    return [
        LayerStep("attn.norm", "elementwise", bytes=2 * act),
        *collective_step("attn.tp_allreduce", "all-reduce", act, s.tensor, "bwd"),
        *(mla_projections(s) if s.attention == "mla" else gqa_projections(s)),
        *(flash_steps(s) if s.attention_kernel == "flash" else naive_steps(s)),
        LayerStep("attn.out", "matmul", m=s.tokens, k=s.heads * s.head_dim, n=s.d_model),
        *collective_step("attn.tp_allreduce", "all-reduce", act, s.tensor, "fwd"),
        LayerStep("attn.residual", "elementwise", bytes=3 * act),
    ]


def flash_steps(s: LayerShape) -> list[LayerStep]:
    """One fused causal attention kernel (:mod:`.attention`), forward and backward."""
    call = s.attention_call
    return [
        LayerStep("attn.flash", "kernel", work=flash.forward(call), work_bwd=flash.backward(call))
    ]


def naive_steps(s: LayerShape) -> list[LayerStep]:
    """Scores, softmax and context through HBM: the ``seq^2`` scores are written by the
    score matmul, read and written by the softmax and read by the context matmul (no
    causal mask: every score is computed)."""
    b, h = s.bytes_per_element, s.heads
    return [
        LayerStep("attn.scores", "matmul", batch=s.seqs * h, m=s.seq, k=s.qk_dim, n=s.keys),
        LayerStep("attn.softmax", "elementwise", bytes=2 * s.seqs * h * s.seq * s.keys * b),
        LayerStep("attn.context", "matmul", batch=s.seqs * h, m=s.seq, k=s.keys, n=s.head_dim),
    ]


def gqa_projections(s: LayerShape) -> list[LayerStep]:
    """One fused Q, K, V projection: ``heads + 2 kv_heads`` heads of ``head_dim``."""
    n = (s.heads + 2 * s.kv) * s.head_dim
    return [LayerStep("attn.qkv", "matmul", m=s.tokens, k=s.d_model, n=n)]


def mla_projections(s: LayerShape) -> list[LayerStep]:
    """MLA: Q through its latent (``q_lora_rank``; straight from ``d_model`` when 0)
    and K/V up from the KV latent (``kv_lora_rank``) plus one shared rope key; the
    latent projections and their norms are replicated over the tensor axis."""
    t, b, h = s.tokens, s.bytes_per_element, s.heads
    q_dim = h * (s.head_dim + s.rope_head_dim)
    steps: list[LayerStep] = []
    if s.q_lora_rank:
        steps += [
            LayerStep("attn.q_down", "matmul", m=t, k=s.d_model, n=s.q_lora_rank),
            LayerStep("attn.q_norm", "elementwise", bytes=2 * t * s.q_lora_rank * b),
            LayerStep("attn.q_up", "matmul", m=t, k=s.q_lora_rank, n=q_dim),
        ]
    else:
        steps.append(LayerStep("attn.q", "matmul", m=t, k=s.d_model, n=q_dim))
    kv_down = s.kv_lora_rank + s.rope_head_dim
    return [
        *steps,
        LayerStep("attn.kv_down", "matmul", m=t, k=s.d_model, n=kv_down),
        LayerStep("attn.kv_norm", "elementwise", bytes=2 * t * s.kv_lora_rank * b),
        LayerStep("attn.kv_up", "matmul", m=t, k=s.kv_lora_rank, n=h * 2 * s.head_dim),
    ]


def mlp_steps(s: LayerShape, block: str, rows: int, width: int) -> list[LayerStep]:
    """Up (and gate) projection, activation, down projection of ``rows`` rows at a
    local width of ``width``; SwiGLU's activation reads gate and up, writes one."""
    b = s.bytes_per_element
    if s.mlp == "gated":
        return [
            LayerStep(f"{block}.gate", "matmul", m=rows, k=s.d_model, n=width),
            LayerStep(f"{block}.up", "matmul", m=rows, k=s.d_model, n=width),
            LayerStep(f"{block}.act", "elementwise", bytes=3 * rows * width * b),
            LayerStep(f"{block}.down", "matmul", m=rows, k=width, n=s.d_model),
        ]
    return [
        LayerStep(f"{block}.up", "matmul", m=rows, k=s.d_model, n=width),
        LayerStep(f"{block}.act", "elementwise", bytes=2 * rows * width * b),
        LayerStep(f"{block}.down", "matmul", m=rows, k=width, n=s.d_model),
    ]


def moe_steps(s: LayerShape) -> list[LayerStep]:
    """Router, the shared experts (a dense MLP), dispatch, the local experts, combine
    and the combine's weighted sum (``(top_k + 1) a``).

    ``rows = tokens * top_k`` routed rows per chip on average; the busiest chip gets
    ``1 + routing_skew`` times the mean (see :func:`expert_rows`), and an SPMD step
    runs at its pace. Dropless with ``sparse_matmul`` (megablox, MaxText's default):
    the tokens sorted by expert (``moe.permute``: reads the ``tokens``, writes the
    ``rows``, of ``d_model`` each) and, behind an expert axis, sorted again by local
    expert after the dispatch all-to-all (``moe.local_permute``, read + write of the
    chip's rows); the experts as grouped matmuls of the chip's rows at
    :func:`grouped_matmul_efficiency`; the mirror ``unpermute`` ops after. With
    ``capacity_factor`` ``cf > 0`` an expert keeps at most ``cf`` times its mean rows
    (the rest dropped): sparse, the chip computes ``min(1 + skew, cf)`` x rows;
    dense dispatch (``sparse_matmul: false``, MaxText's einsum dispatch) pads every
    expert to its capacity: ``cf`` x rows through the experts and the all-to-alls and a
    dispatch and a combine einsum (one-hot masks over each sequence's tokens,
    ``seqs x (cf seq top_k) x seq x d_model``, not model FLOPs)."""
    rows, b = s.rows, s.bytes_per_element
    busy = expert_rows(s)
    moved = busy * s.d_model * b
    shared = mlp_steps(s, "moe.shared", s.tokens, s.shared_d_ff) if s.shared_d_ff else []
    experts = mlp_steps(s, "moe", busy, s.d_ff)
    useful, eff = rows / busy, grouped_matmul_efficiency(s) if s.sparse_matmul else 1.0
    experts = [_scaled(st, useful, eff) for st in experts]
    before, after = _dispatch_ops(s, busy)
    return [
        LayerStep("moe.router", "matmul", m=s.tokens, k=s.d_model, n=s.experts),
        *shared,
        *before[:1],
        *collective_step("moe.dispatch", "all-to-all", moved, s.expert, "both"),
        *before[1:],
        *experts,
        *after[:-1],
        *collective_step("moe.combine", "all-to-all", moved, s.expert, "both"),
        *after[-1:],
        LayerStep("moe.combine_sum", "elementwise", bytes=(s.top_k + 1) * s.act_bytes),
    ]


def expert_rows(s: LayerShape) -> int:
    """Rows the busiest chip's experts compute: ``rows (1 + routing_skew)``
    dropless, capped at ``capacity_factor * rows`` with a capacity, and exactly that
    with dense dispatch (padded to capacity). ``routing_skew`` is the busiest expert
    chip's routed rows over the mean, minus 1 (0: perfect balance)."""
    rows, cf = s.rows, s.capacity_factor
    if not s.sparse_matmul:
        return math.ceil(cf * rows)
    wanted = rows * (1.0 + s.routing_skew)
    return math.ceil(wanted if cf <= 0 else min(wanted, cf * rows))


def dropped_fraction(s: LayerShape) -> float:
    """Share of the busiest expert chip's routed rows dropped over capacity:
    ``max(0, 1 - cf / (1 + skew))``; 0 dropless."""
    if s.capacity_factor <= 0:
        return 0.0
    return max(0.0, 1.0 - s.capacity_factor / (1.0 + s.routing_skew))


def grouped_matmul_efficiency(s: LayerShape) -> float:
    """Useful over padded rows of the experts' grouped matmul on the busiest chip:
    each of its ``E_local`` groups pads to :data:`GMM_TILE_ROWS`, half a tile on
    average (derived, assuming group sizes uniform modulo the tile):
    ``rows / (rows + E_local * GMM_TILE_ROWS / 2)``, with ``E_local = experts /
    expert-axis size`` taken as ``experts`` without an expert axis."""
    local = s.local_experts or s.experts
    busy = expert_rows(s)
    return busy / (busy + local * GMM_TILE_ROWS / 2)


def _scaled(step: LayerStep, useful: float, efficiency: float) -> LayerStep:
    if step.kind != "matmul":
        return step
    return replace(step, useful=useful, efficiency=efficiency)


def _dispatch_ops(s: LayerShape, busy: int) -> tuple[list[LayerStep], list[LayerStep]]:
    """What sorts the rows before the experts (the first one before the dispatch
    all-to-all) and after them (the last one after the combine): see :func:`moe_steps`."""
    d, b = s.d_model, s.bytes_per_element
    if not s.sparse_matmul:
        rows = math.ceil(s.capacity_factor * s.seq * s.top_k)
        return (
            [LayerStep("moe.dispatch_einsum", "matmul", s.seqs, rows, s.seq, d, useful=0.0)],
            [LayerStep("moe.combine_einsum", "matmul", s.seqs, rows, s.seq, d, useful=0.0)],
        )
    permute = LayerStep("moe.permute", "elementwise", bytes=(s.tokens + s.rows) * d * b)
    unpermute = LayerStep("moe.unpermute", "elementwise", bytes=2 * s.rows * d * b)
    if not s.expert:
        return [permute], [unpermute]
    local = 2 * busy * d * b
    return (
        [permute, LayerStep("moe.local_permute", "elementwise", bytes=local)],
        [LayerStep("moe.local_unpermute", "elementwise", bytes=local), unpermute],
    )


def collective_step(
    name: str, op: str, size_bytes: float, axes: tuple[str, ...], phase: StepPhase
) -> list[LayerStep]:
    """A synchronous collective template, or none when its group is one chip."""
    if not axes:
        return []
    return [LayerStep(name, "collective", bytes=size_bytes, collective=op, axes=axes, phase=phase)]


def emit_step(
    out: OpList, step: LayerStep, prefix: str, phase: Phase, after: list[str | None], dtype: str
) -> str:
    """Add ``step``'s op(s) for ``phase`` under ``prefix``; return the last op's name.

    An embedding template (``m`` rows of ``bytes`` each) is a lookup forward and a
    scatter-add of the same bytes (an elementwise op) backward."""
    name = f"{prefix}.{step.name}.{phase}"
    if step.kind == "collective":
        return out.add(
            name,
            "collective",
            after,
            collective=step.collective,
            size_bytes=step.bytes,
            axes=step.axes,
        )
    if step.kind == "embedding":
        if phase == "fwd":
            return out.add(name, "embedding", after, rows=step.m, row_bytes=step.bytes)
        return out.add(name, "elementwise", after, bytes=step.m * step.bytes * 2)
    if step.kind == "kernel":
        work = step.work if phase == "fwd" else step.work_bwd
        assert work is not None
        return out.add(name, "kernel", after, dtype=dtype, **work.op_fields())
    if step.kind == "elementwise":
        scale = 1.0 if phase == "fwd" else BACKWARD_ELEMENTWISE_FACTOR
        return out.add(name, "elementwise", after, bytes=step.bytes * scale)
    if phase == "fwd":
        return out.add(
            name, "matmul", after, m=step.m, k=step.k, n=step.n, **step_shape(step, dtype)
        )
    return _matmul_backward(out, step, prefix, after, dtype)


def _matmul_backward(
    out: OpList, step: LayerStep, prefix: str, after: list[str | None], dtype: str
) -> str:
    """The input gradient then the weight gradient of a forward matmul."""
    shape = step_shape(step, dtype)
    grad_in = out.add(
        f"{prefix}.{step.name}.bwd_input", "matmul", after, m=step.m, k=step.n, n=step.k, **shape
    )
    return out.add(
        f"{prefix}.{step.name}.bwd_weight",
        "matmul",
        [grad_in],
        m=step.k,
        k=step.m,
        n=step.n,
        **shape,
    )


def step_shape(step: LayerStep, dtype: str) -> dict[str, int | str | float]:
    """The matmul op fields of ``step`` besides its sizes: batch, dtype, efficiency."""
    shape: dict[str, int | str | float] = {"batch": step.batch, "dtype": dtype}
    if step.efficiency != 1.0:
        shape["efficiency"] = step.efficiency
    return shape
