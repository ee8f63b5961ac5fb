"""Custom calls (Pallas kernels and other targets), costed from what the module says.

A ``custom-call`` runs code XLA's HLO does not show. In the order tried:

1. a ``cost_estimate`` in its ``backend_config`` (what JAX's ``tpu_custom_call``
   serialises from a Pallas kernel's ``CostEstimate``: ``{"flops": ..,
   "transcendentals": .., "bytes_accessed": ..}``, ``jax/_src/tpu_custom_call.py``):
   a ``kernel`` op of those FLOPs (at the MXU rate of its first operand's dtype) and
   bytes;
2. a flash / splash attention kernel, recognised by its name or its metadata
   ``op_name`` (``flash``, ``splash``, ``mha``) with Q, K, V as its first three
   operands (``[..., heads, len, head_dim]``, Q and K of one head dimension, K and V of
   one length; a paged or ragged kernel lays its operands out otherwise and stays
   unknown): the causal flash kernel of
   :mod:`tpusim.program.builders.attention` (forward; the backward when the name says
   ``bwd``, ``backward``, ``dq`` or ``dkv``; causal by assumption, as MaxText trains);
   a megablox grouped matmul (``gmm``, ``tgmm``, by name or metadata): the matmul
   its two floating-point operands' shapes say (:func:`_grouped_matmul`);
3. a target in :data:`ANNOTATION_TARGETS` (sharding markers): by its bytes, as any
   data movement, but for :data:`ALLOCATION_TARGETS` (an uninitialised buffer): none;
4. anything else: the memory traffic of its operands and results, and *unknown*:
   counted in ``HloModule.unknown_ops`` as ``custom-call:<target>`` (``tpusim hlo``
   warns on stderr and reports it in ``unknown_ops``).
"""

from __future__ import annotations

import math
import re

from tpusim.program.builders import attention as flash
from tpusim.program.builders.attention import KernelWork
from tpusim.program.hlo.parse import Computation, Instruction
from tpusim.program.hlo.shapes import Shape

ANNOTATION_TARGETS = frozenset(
    {
        "Sharding",
        "SPMDFullToShardShape",
        "SPMDShardToFullShape",
        "AllocateBuffer",
        # XLA's TPU backend: markers of an async collective fusion (:mod:`.fusions`),
        # a concatenation of adjacent buffers by bitcast, gather index annotations.
        "AsyncCollectiveStart",
        "AsyncCollectiveDone",
        "ConcatBitcast",
        "AssumeGatherIndicesInBound",
        "GatherScatterIndicesBitpacked",
        # tokens that order a SparseCore async call (``call-start``) with its done
        "PrepareAsyncCallStart",
        "PrepareAsyncCallDone",
    }
)
"""Custom-call targets XLA uses as annotations or data movement (no kernel runs):
costed by their bytes."""
ALLOCATION_TARGETS = frozenset({"AllocateBuffer"})
"""Custom-call targets that only allocate a buffer, left uninitialised: no data moves
(JAX lowers ``lax.empty`` on TPU to ``AllocateBuffer``, ``jax/_src/lax/lax.py``
``_empty_custom_call_lower``; XLA's TPU backend makes one where a buffer is written
before it is read, such as the stack a layer scan fills)."""

_ATTENTION = re.compile(r"flash|splash|mha", re.IGNORECASE)
_GROUPED = re.compile(r"(?<![a-z])t?gmm(?![a-z])|megablox", re.IGNORECASE)
#: Element-type prefixes of floating-point data (bf16, f16, f32, f8e4m3fn, ...).
_FLOATS = frozenset({"bf", "f1", "f3", "f6", "f8", "f4"})
_DKV = re.compile(r"(?<![a-z])dkv(?![a-z])", re.IGNORECASE)
_DQ = re.compile(r"(?<![a-z])dq(?![a-z])", re.IGNORECASE)
_BACKWARD = re.compile(r"bwd|backward|dkv|(?<![a-z])dq(?![a-z])", re.IGNORECASE)
_ESTIMATE = re.compile(r'cost_estimate\\?"\s*:\s*\{([^}]*)\}')


def target(ins: Instruction) -> str:
    """The ``custom_call_target`` of ``ins``, unquoted ('' when absent)."""
    return ins.attrs.get("custom_call_target", "").strip('"')


def _estimate(ins: Instruction, key: str) -> float | None:
    found = _ESTIMATE.search(ins.attrs.get("backend_config", ""))
    if not found:
        return None
    value = re.search(rf'{key}\\?"\s*:\s*(?:\\?")?(\d+(?:\.\d*)?(?:[eE]\d+)?)', found.group(1))
    return float(value.group(1)) if value else None


def _operand(comp: Computation, ins: Instruction, index: int):
    src = comp.instructions.get(ins.operands[index]) if index < len(ins.operands) else None
    return src.shape if src is not None else None


def _float_operands(comp: Computation, ins: Instruction) -> list[Shape]:
    """The operands holding floating-point arrays, in order: a Pallas call's data,
    after its scalar-prefetch and mask operands (integers)."""
    shapes = (_operand(comp, ins, i) for i in range(len(ins.operands)))
    return [s for s in shapes if s is not None and not s.is_tuple and s.dtype[:2] in _FLOATS]


def _attention_shape(comp: Computation, ins: Instruction) -> flash.AttentionShape | None:
    """Q, K, V of a flash-attention call (its first three floating-point operands), or
    None when they are not that."""
    data = _float_operands(comp, ins)
    if len(data) < 3:
        return None
    q, k, v = data[:3]
    if min(len(q.dims), len(k.dims), len(v.dims)) < 3:
        return None
    if not q.num_elements or not k.num_elements or not v.num_elements:
        return None
    if q.dims[-1] != k.dims[-1] or k.dims[-2] != v.dims[-2] or q.dims[:-3] != k.dims[:-3]:
        return None
    return flash.AttentionShape(
        seqs=math.prod(q.dims[:-3]),
        heads=q.dims[-3],
        q_len=q.dims[-2],
        kv_len=k.dims[-2],
        qk_dim=q.dims[-1],
        v_dim=v.dims[-1],
        bytes_per_element=q.bytes / q.num_elements,
    )


def _grouped_matmul(comp: Computation, ins: Instruction) -> KernelWork | None:
    """A megablox grouped matmul (``gmm``: lhs [m, k] by per-group rhs [groups, k, n];
    ``tgmm``: lhs [k, m] by rhs [m, n] into [groups, k, n]): 2 x lhs elements x n
    FLOPs, each lhs row through one group's weights; bytes: operands and result."""
    data = _float_operands(comp, ins)
    out = ins.shape.leaves()[0] if ins.shape.leaves() else None
    if len(data) < 2 or out is None or len(data[0].dims) != 2 or len(out.dims) not in (2, 3):
        return None
    flops = 2.0 * data[0].num_elements * out.dims[-1]
    nbytes = sum(s.bytes for s in data[:2]) + ins.shape.bytes
    return KernelWork(flops, flops, (), 0.0, nbytes)


def custom_call_work(comp: Computation, ins: Instruction) -> KernelWork | None:
    """The kernel work of a custom call the module describes (cases 1 and 2 of the
    module docstring), or None (an annotation or an unknown kernel)."""
    if ins.opcode != "custom-call":
        return None
    flops = _estimate(ins, "flops")
    if flops is not None:
        nbytes = _estimate(ins, "bytes_accessed") or 0.0
        return KernelWork(flops, flops, (), 0.0, nbytes)
    label = f"{ins.name} {ins.attrs.get('metadata', '')}"
    if _GROUPED.search(label):
        return _grouped_matmul(comp, ins)
    if not _ATTENTION.search(label):
        return None
    shape = _attention_shape(comp, ins)
    if shape is None:
        return None
    if not _BACKWARD.search(label):
        return flash.forward(shape)
    return _split_backward(flash.backward(shape), label)


def _split_backward(work: KernelWork, label: str) -> KernelWork:
    """A backward split into a dQ and a dK/dV kernel (splash attention's ``dq`` and
    ``dkv``): each recomputes the scores and dP, the dQ kernel then does dQ (3 of the
    fused backward's 5 matmuls), the dK/dV kernel dK and dV (4 of 5): that share of
    the fused backward's work (derived from FlashAttention-2's Algorithm 2)."""
    share = 4 / 5 if _DKV.search(label) else 3 / 5 if _DQ.search(label) else 1.0
    if share == 1.0:
        return work
    return KernelWork(
        work.flops * share,
        work.padded_flops * share,
        work.pad_dims,
        work.vector_ops * share,
        work.bytes * share,
    )


def unknown_custom_call(comp: Computation, ins: Instruction) -> str | None:
    """``custom-call:<target>`` for a custom call costed only by its bytes (case 4),
    else None."""
    if ins.opcode != "custom-call" or target(ins) in ANNOTATION_TARGETS:
        return None
    if custom_call_work(comp, ins) is not None:
        return None
    return f"custom-call:{target(ins) or '?'}"
