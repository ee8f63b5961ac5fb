"""Fused (flash / splash) attention as Pallas kernels run it on a TPU: the work, the
HBM traffic and the memory it keeps, per block of the kernel.

Definition. Attention of ``heads`` query heads over ``seqs`` sequences, ``q_len``
queries against ``kv_len`` keys, a Q/K head dimension ``qk_dim`` and a V (output) one
``v_dim``; K/V heads are shared by ``heads / kv_heads`` query heads (GQA; MLA trains
with its K/V materialised per head, so ``kv_heads = heads``). The kernel walks a grid
of (``block_q`` x ``block_kv``) tiles of the score matrix and computes only the tiles
the causal mask does not blank entirely:

* FLOPs: a computed tile does ``2 * block_q * block_kv * (qk_dim + v_dim)`` (Q K^T and
  P V). Causal attention at ``q_len = kv_len = L``, a multiple of the block ``B``
  (``n = L / B`` blocks), computes ``n (n + 1) / 2`` tiles: ``full / 2 + full / (2 n)``,
  half of full attention plus the diagonal blocks' waste (each diagonal tile is
  computed whole though half of it is masked). The useful FLOPs (what MFU counts) are
  the unmasked pairs: ``2 * L (L + 1) / 2 * (qk_dim + v_dim)`` per head.
* HBM traffic (forward), per query head: Q read once; K and V re-read once per
  q-block, for the tiles it computes (splash's MHA kernel maps query head ``h`` to
  K/V head ``h // group``, so every query head of a group fetches them); the output
  written once and the logsumexp (fp32, one per query row) written once.
* Backward (FlashAttention-2, Algorithm 2): the scores are recomputed from Q, K and
  the saved logsumexp, five matmuls against the forward's two, ``2 (3 qk_dim + 2
  v_dim)`` FLOPs per score: :data:`FLASH_BACKWARD_FLOP_FACTOR` x the forward's when
  ``qk_dim = v_dim``; of these the useful FLOPs (what MFU counts) are twice the
  forward's, the recomputed scores being the kernel's waste. Per query head: K and V
  read once and dK, dV written once; per computed tile Q, dO, the logsumexp and
  ``D = rowsum(dO * O)`` read and dQ read and written in fp32 (accumulated in HBM);
  ``D`` computed once from dO and O.
* Memory: the output and the logsumexp are kept for the backward (O(seq)); the
  ``seq^2`` scores never reach HBM. Blocks live in VMEM.

Takeaway: at 8k tokens causal flash attention does ~53% of full attention's FLOPs
(n = 16 blocks of 512) and moves O(seq) bytes per head instead of the naive model's
``seq^2`` scores written, read by the softmax and read again.

Worked example (Llama-3.1-8B layer, seq 8192, 32 heads of 128, one sequence): full
attention is ``2 * 8192^2 * 256 * 32 = 1.10e12`` FLOPs; causal flash computes
``136 / 256`` of it, ``5.84e11``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypedDict

AttentionKernel = Literal["flash", "naive"]
ATTENTION_KERNELS: tuple[AttentionKernel, ...] = ("flash", "naive")

SPLASH_BLOCK_Q = 512
"""Query rows per block of the splash kernel: MaxText's default ``sa_block_q: 512``
(``src/MaxText/configs/base.yml``; likewise ``sa_block_q_dkv``, ``sa_block_q_dq``),
clipped to the sequence as MaxText does (``min(sa_block_q, q_len)``)."""

SPLASH_BLOCK_KV = 512
"""Key rows per block: MaxText's default ``sa_block_kv: 512`` (and
``sa_block_kv_compute``, ``sa_block_kv_dkv``, ``sa_block_kv_dq``: 512; base.yml)."""

FLASH_BACKWARD_FLOP_FACTOR = 2.5
"""Backward over forward FLOPs of flash attention: five matmuls (S = Q K^T recomputed,
dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q) against the forward's two; T. Dao,
"FlashAttention-2", arXiv:2307.08691, section 4.1 ("the backward pass FLOPs is 2.5x
the forward"). Splash's fused backward (``sa_use_fused_bwd_kernel``) does the same;
its separate dq and dkv kernels (MaxText's default) recompute the scores twice
(seven matmuls, 3.5x): a choice this model does not offer."""

LOGSUMEXP_BYTES = 4.0
"""Bytes of the logsumexp (and of ``D``) kept per query row and head: fp32."""

DQ_ACCUMULATOR_BYTES = 4.0
"""Bytes per element of the dQ accumulator the backward reads and writes per tile (fp32)."""

VECTOR_OPS_PER_SCORE_FWD = 4.0
"""Vector-unit operations per computed score in the forward: the running max, the
subtraction, the row sum and the cast of P to bf16 (the exponential runs on the
transcendental unit; the 1/sqrt(d) scale folds into Q). Grade: assumption."""

VECTOR_OPS_PER_SCORE_BWD = 5.0
"""Vector-unit operations per computed score in the backward: subtracting the
logsumexp, ``dS = P (dP - D)`` (two), the casts of P and dS. Grade: assumption."""


class KernelFields(TypedDict):
    """The :class:`~tpusim.program.ir.Op` fields of a ``kernel`` op's work."""

    mxu_flops: float
    padded_flops: float
    pad_dims: tuple[int, ...]
    vector_ops: float
    bytes: float


@dataclass(frozen=True)
class AttentionShape:
    """One attention call, per chip (see the module docstring); ``bytes_per_element``
    of Q, K, V and the output."""

    seqs: int
    heads: int
    q_len: int
    kv_len: int
    qk_dim: int
    v_dim: int
    bytes_per_element: float
    causal: bool = True
    block_q: int = SPLASH_BLOCK_Q
    block_kv: int = SPLASH_BLOCK_KV

    @property
    def bq(self) -> int:
        """The query block, clipped to the queries."""
        return min(self.block_q, self.q_len)

    @property
    def bkv(self) -> int:
        """The key block, clipped to the keys."""
        return min(self.block_kv, self.kv_len)

    @property
    def heads_total(self) -> int:
        """Query heads over all sequences."""
        return self.seqs * self.heads


@dataclass(frozen=True)
class KernelWork:
    """What one kernel call does: ``flops`` useful and ``padded_flops`` computed on the
    MXUs (at the unpadded head dims ``pad_dims``, one per matmul of the kernel, which
    the cost model pads to the MXU), ``vector_ops`` and HBM ``bytes``."""

    flops: float
    padded_flops: float
    pad_dims: tuple[int, ...]
    vector_ops: float
    bytes: float

    def op_fields(self, times: float = 1.0) -> KernelFields:
        """The :class:`~tpusim.program.ir.Op` fields of a ``kernel`` op doing this work
        ``times`` over."""
        return {
            "mxu_flops": self.flops * times,
            "padded_flops": self.padded_flops * times,
            "pad_dims": self.pad_dims,
            "vector_ops": self.vector_ops * times,
            "bytes": self.bytes * times,
        }


def computed_tiles(a: AttentionShape) -> int:
    """Tiles of one head's score matrix the kernel computes: all of them without the
    causal mask; with it, for each q-block the kv-blocks up to its last query (the
    queries are the last ``q_len`` of the ``kv_len`` positions)."""
    num_q = -(-a.q_len // a.bq)
    num_kv = -(-a.kv_len // a.bkv)
    if not a.causal:
        return num_q * num_kv
    offset = a.kv_len - a.q_len
    return sum(
        min(num_kv, (offset + min((i + 1) * a.bq, a.q_len) - 1) // a.bkv + 1) for i in range(num_q)
    )


def useful_pairs(a: AttentionShape) -> float:
    """(query, key) pairs of one head the mask keeps: ``q_len * kv_len`` without it,
    ``q_len (kv_len - q_len) + q_len (q_len + 1) / 2`` causal."""
    if not a.causal:
        return float(a.q_len * a.kv_len)
    return a.q_len * (a.kv_len - a.q_len) + a.q_len * (a.q_len + 1) / 2


def forward(a: AttentionShape) -> KernelWork:
    """The forward kernel's work (module docstring)."""
    b, tiles, per_pair = a.bytes_per_element, computed_tiles(a), 2.0 * (a.qk_dim + a.v_dim)
    per_head = (
        a.q_len * a.qk_dim * b
        + tiles * a.bkv * (a.qk_dim + a.v_dim) * b
        + a.q_len * a.v_dim * b
        + a.q_len * LOGSUMEXP_BYTES
    )
    scores = a.heads_total * tiles * a.bq * a.bkv
    return KernelWork(
        flops=a.heads_total * useful_pairs(a) * per_pair,
        padded_flops=scores * per_pair,
        pad_dims=(a.qk_dim, a.v_dim),
        vector_ops=scores * VECTOR_OPS_PER_SCORE_FWD,
        bytes=a.heads_total * per_head,
    )


def backward(a: AttentionShape) -> KernelWork:
    """The backward kernel's work: FlashAttention-2's Algorithm 2 (module docstring)."""
    b, tiles, per_pair = a.bytes_per_element, computed_tiles(a), 2.0 * (3 * a.qk_dim + 2 * a.v_dim)
    kv = a.kv_len * (a.qk_dim + a.v_dim) * b
    per_tile = a.bq * (
        a.qk_dim * b + a.v_dim * b + 2 * LOGSUMEXP_BYTES + 2 * a.qk_dim * DQ_ACCUMULATOR_BYTES
    )
    rowsum = 2 * a.q_len * a.v_dim * b + a.q_len * LOGSUMEXP_BYTES
    scores = a.heads_total * tiles * a.bq * a.bkv
    return KernelWork(
        flops=2.0 * forward(a).flops,
        padded_flops=scores * per_pair,
        pad_dims=(a.qk_dim, a.v_dim, a.v_dim, a.qk_dim, a.qk_dim),
        vector_ops=scores * VECTOR_OPS_PER_SCORE_BWD,
        bytes=a.heads_total * (2 * kv + tiles * per_tile + rowsum),
    )


def logsumexp_bytes(a: AttentionShape) -> float:
    """HBM the forward keeps for the backward beyond Q, K, V and the output: the
    logsumexp, ``LOGSUMEXP_BYTES`` per query row and head (O(seq))."""
    return a.heads_total * a.q_len * LOGSUMEXP_BYTES
