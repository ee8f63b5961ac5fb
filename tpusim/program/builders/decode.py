"""The LLM decode step: one new token for each sequence of a batch, on one chip.

The attention is one elementwise op ``L<i>.attn.kv_read`` that reads the cache,
``batch * context * kv_heads_local * head_dim * 2 (K and V) * bytes``, from the
``kv_cache`` tier: a fused attention kernel whose scores stay on chip. Its time is
exactly the cache bytes over that tier's bandwidth (plus the per-op overhead). Its
FLOPs (``4 * batch * heads_local * context * head_dim``) are not in the program
(elementwise ops have none): at ``heads / kv_heads`` FLOPs per byte its intensity
is far below any TPU's ridge point, so it is memory-bound. The cache cannot be a
matmul operand: the cost model treats a batched matmul's second operand as shared
across the batch, while each sequence has its own K and V.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from typing import Any

from tpusim.config.model import ModelShape
from tpusim.program.builders.checks import check_decode, checked_mesh, divides
from tpusim.program.builders.mesh import axis_size, collective_axes
from tpusim.program.builders.oplist import Chain, OpList
from tpusim.program.builders.replica import replica_shape, weight_bytes
from tpusim.program.builders.roles import EXPERT, TENSOR
from tpusim.program.builders.serving import IterationBatch, serving_iteration
from tpusim.program.ir import Program, ProgramError
from tpusim.vocabulary import MemoryTier


@dataclass(frozen=True)
class DecodeShape:
    """Per-chip sizes of one decode layer: ``heads``, ``kv_heads`` and ``d_ff`` are
    tensor-local; ``tensor`` are the axes of the all-reduces (empty: left out)."""

    batch: int
    context: int
    d_model: int
    heads: int
    kv_heads: int
    head_dim: int
    d_ff: int
    dtype: str
    bytes_per_element: float
    kv_cache: MemoryTier
    tensor: tuple[str, ...]

    @property
    def act_bytes(self) -> float:
        """Bytes of one activation, ``batch * d_model`` elements."""
        return self.batch * self.d_model * self.bytes_per_element

    @property
    def cache_bytes_per_layer(self) -> float:
        """K and V of every sequence's ``context`` tokens in one layer."""
        return (
            self.batch * self.context * self.kv_heads * self.head_dim * 2 * self.bytes_per_element
        )

    def weights_per_layer(self) -> int:
        """Parameters of the QKV, output, up and down matrices and the two norm scales
        (tensor-local)."""
        d, h, kvh, hd = self.d_model, self.heads, self.kv_heads, self.head_dim
        return d * (h + 2 * kvh) * hd + h * hd * d + 2 * d * self.d_ff + 2 * d


def decode_step(
    *,
    layers: int,
    d_model: int,
    d_ff: int,
    heads: int,
    head_dim: int,
    kv_heads: int | None = None,
    batch: int,
    context: int,
    dtype: str = "bf16",
    kv_cache: MemoryTier = "hbm",
    mesh: dict[str, int],
    tensor_axis: str | None = None,
) -> Program:
    """One decode step: one new token for each of ``batch`` sequences of ``context`` tokens.

    ``batch`` is the number of sequences one model replica (one tensor-parallel group)
    serves; mesh axes other than ``tensor_axis`` are independent replicas. Tensor
    parallelism divides ``heads``, ``kv_heads`` and ``d_ff``. Per layer: a norm
    (elementwise, ``2 batch d_model`` x bytes), the QKV matmul (``m = batch``,
    ``n = (heads + 2 kv_heads)_local * head_dim``), the write of the new K and V to the
    cache, the attention, the output projection, a tensor-parallel all-reduce of
    ``batch * d_model`` activations, the MLP norm, up, activation, down, and a second
    all-reduce.

    The attention reads the KV cache as one elementwise op (see the module docstring).

    ``memory_bytes``: the weights (``layers * parameters_per_layer / tensor`` x bytes)
    in ``"hbm"``, the KV cache (``layers * batch * context * kv_heads_local * head_dim
    * 2`` x bytes) in ``kv_cache``. Raises :class:`ProgramError` naming the bad field.
    """
    sizes = dict(
        layers=layers,
        d_model=d_model,
        d_ff=d_ff,
        heads=heads,
        head_dim=head_dim,
        kv_heads=heads if kv_heads is None else kv_heads,
        batch=batch,
        context=context,
    )
    b, mesh, tp = check_decode(
        sizes, dtype=dtype, kv_cache=kv_cache, mesh=mesh, tensor_axis=tensor_axis
    )
    tensor = collective_axes(mesh, [tensor_axis])
    shape = _local_shape(sizes, tp, b, dtype, kv_cache, tensor)
    return _decode_program(shape, layers, mesh)


def _local_shape(
    sizes: dict[str, int],
    tp: int,
    bytes_per_element: float,
    dtype: str,
    kv_cache: MemoryTier,
    tensor: tuple[str, ...],
) -> DecodeShape:
    """The per-chip :class:`DecodeShape` of the checked ``sizes`` on ``tp`` chips."""
    return DecodeShape(
        batch=sizes["batch"],
        context=sizes["context"],
        d_model=sizes["d_model"],
        heads=sizes["heads"] // tp,
        kv_heads=sizes["kv_heads"] // tp,
        head_dim=sizes["head_dim"],
        d_ff=sizes["d_ff"] // tp,
        dtype=dtype,
        bytes_per_element=bytes_per_element,
        kv_cache=kv_cache,
        tensor=tensor,
    )


def _decode_program(shape: DecodeShape, layers: int, mesh: dict[str, int]) -> Program:
    """``layers`` decode layers of ``shape`` in a chain, with the weights in HBM and the
    KV cache in its tier (``memory_bytes``)."""
    out = OpList()
    chain = Chain(out)
    for layer in range(layers):
        decode_layer(chain, shape, f"L{layer}")
    b, kv_cache = shape.bytes_per_element, shape.kv_cache
    memory = {"hbm": float(layers * shape.weights_per_layer() * b)}
    memory[kv_cache] = memory.get(kv_cache, 0.0) + float(layers * shape.cache_bytes_per_layer)
    return Program(
        name=(
            f"decode_step[L{layers},d{shape.d_model},B{shape.batch},ctx{shape.context},"
            f"kv:{kv_cache}]"
        ),
        ops=tuple(out.ops),
        mesh=mesh,
        memory_bytes=memory,
    )


def decode_layer(chain: Chain, s: DecodeShape, prefix: str) -> None:
    """One layer's ops, each after the previous one."""
    b, act = s.bytes_per_element, s.act_bytes
    mm = {"dtype": s.dtype, "memory": "hbm"}
    kv_new = s.batch * s.kv_heads * s.head_dim * 2 * b
    chain.add(f"{prefix}.attn.norm", "elementwise", bytes=2 * act)
    chain.add(
        f"{prefix}.attn.qkv",
        "matmul",
        m=s.batch,
        k=s.d_model,
        n=(s.heads + 2 * s.kv_heads) * s.head_dim,
        **mm,
    )
    cache = dict(memory=s.kv_cache, vector=False)  # a cache copy or read: no vector work
    chain.add(f"{prefix}.attn.kv_write", "elementwise", bytes=kv_new, **cache)
    chain.add(f"{prefix}.attn.kv_read", "elementwise", bytes=s.cache_bytes_per_layer, **cache)
    chain.add(f"{prefix}.attn.out", "matmul", m=s.batch, k=s.heads * s.head_dim, n=s.d_model, **mm)
    tensor_allreduce(chain, s, f"{prefix}.attn.tp_allreduce")
    chain.add(f"{prefix}.mlp.norm", "elementwise", bytes=2 * act)
    chain.add(f"{prefix}.mlp.up", "matmul", m=s.batch, k=s.d_model, n=s.d_ff, **mm)
    chain.add(f"{prefix}.mlp.act", "elementwise", bytes=2 * s.batch * s.d_ff * b)
    chain.add(f"{prefix}.mlp.down", "matmul", m=s.batch, k=s.d_ff, n=s.d_model, **mm)
    tensor_allreduce(chain, s, f"{prefix}.mlp.tp_allreduce")


def tensor_allreduce(chain: Chain, s: DecodeShape, name: str) -> None:
    """The synchronous all-reduce of the activations over the tensor axis, if any."""
    if s.tensor:
        chain.add(
            name, "collective", collective="all-reduce", size_bytes=s.act_bytes, axes=s.tensor
        )


#: The shape fields of a whole model (beyond :func:`decode_step`'s: the
#: :class:`~tpusim.config.model.ModelShape` features it does not take) and their
#: neutral values, and the expert axis: a decode step whose fields are all neutral is
#: built by :func:`decode_step`.
MODEL_FIELDS: dict[str, object] = {
    name: value
    for name, value in ModelShape.neutral().items()
    if name not in inspect.signature(decode_step).parameters
} | {EXPERT.field: None}


def model_decode_step(
    *,
    batch: int,
    context: int,
    dtype: str = "bf16",
    kv_cache: MemoryTier = "hbm",
    mesh: dict[str, int],
    tensor_axis: str | None = None,
    expert_axis: str | None = None,
    **shape: Any,
) -> Program:
    """One decode step of a whole model (``shape``: a preset's builder fields: GQA or
    MLA attention, gated MLP, experts with ``top_k`` routing, LM head over ``vocab``),
    built as a serving iteration of ``batch`` decode sequences of ``context`` tokens per
    model replica (:func:`~tpusim.program.builders.serving.serving_iteration`).

    A model replica is ``tensor_axis`` x ``expert_axis`` chips; the other mesh axes are
    independent replicas (chips in mesh order). The weights are stored in ``dtype``
    (as a server stores a quantized checkpoint, bf16 activations), and so is the KV
    cache. ``memory_bytes``: the weights in HBM, the KV cache in ``kv_cache``. Raises
    :class:`ProgramError` naming the bad field.
    """
    mesh = checked_mesh(mesh)
    tp = axis_size(mesh, TENSOR.field, tensor_axis)
    ep = axis_size(mesh, EXPERT.field, expert_axis)
    if tensor_axis is not None and tensor_axis == expert_axis:
        raise ProgramError(f"expert_axis '{expert_axis}' is also tensor_axis")
    chips = math.prod(mesh.values())
    divides("the mesh's chips", chips, tp * ep, "tensor x expert axis sizes")
    replicas = chips // (tp * ep)  # the cache in ``dtype`` too (serving's follows vLLM)
    s = replica_shape(
        shape, tp=tp, ep=ep, replicas=replicas, dtype=dtype, kv_cache=kv_cache, kv_dtype=dtype
    )
    share = -(-batch // ep)
    step = IterationBatch(tokens=share, sequences=share, kv_tokens=share * context)
    program = serving_iteration(s, step)
    cache = float(s.layers * step.kv_tokens * s.kv_bytes_per_token_layer())
    memory = {"hbm": float(weight_bytes(s))}
    memory[kv_cache] = memory.get(kv_cache, 0.0) + cache
    name = f"decode_step[L{s.layers},d{s.d_model},B{batch},ctx{context},kv:{kv_cache}]"
    return Program(name=name, ops=program.ops, memory_bytes=memory)
