"""Roofline cost of one op on one chip, with the MXU tile padding made visible.

Definition: an op takes ``max(compute_s, memory_s) + overhead_s`` where

* ``compute_s = padded_flops / (peak_flops[dtype] * efficiency)``: the MXUs do the
  padded work, not the useful work, so a matmul whose dimensions are not multiples of
  the MXU tile pays for the whole tile; ``efficiency`` is the shared ``mxu`` term (or
  the chip file's own ``efficiency.matmul[dtype]``) times the streamed-rows shape term
  (:mod:`tpusim.hardware.efficiency`); for vector work, the ops over the chip's
  ``efficiency.vector`` rate;
* ``memory_s = bytes / bandwidth`` of the memory tier the operands live in (HBM's
  times the shared ``hbm`` term, ``gather_hbm`` for a row gather);
* ``overhead_s`` is a fixed per-op cost (launch, pipeline fill, DMA set-up).

Takeaway: a head dimension of 64 on a 256x256 MXU (v6e, Ironwood, TPU 8t/8i) uses a
quarter of it, on a 128x128 MXU (v4, v5e, v5p) half; ``OpCost.mxu_utilization``
reports the fraction. Worked example (``ideal=True``, the roofline): an 8192^3 bf16
matmul on Ironwood is ``2 * 8192**3 / 2307e12 = 477 us`` of compute against
``3 * 2 * 8192**2 / 7380e9 = 55 us`` of HBM traffic, so it is compute-bound; with
the shipped terms (``mxu`` 0.8235, shape 8192 / 8448) the compute is 597 us.

Everything here is a pure function of the chip spec: no simulation state. The record
an op's cost is, :class:`~tpusim.hardware.opcost.OpCost`, lives in
:mod:`tpusim.hardware.opcost`.
"""

from __future__ import annotations

import math

from tpusim.config.chip import ChipSpec
from tpusim.hardware.efficiency import (
    EIGHT_BIT,
    ELEMENT_BYTES,
    IDEAL,
    EfficiencyTerms,
    chip_terms,
)
from tpusim.hardware.opcost import OpCost, check_non_negative, check_positive, pad_to
from tpusim.hardware.quantized import ACTIVATION_BYTES, QUANTIZED, served_matmul
from tpusim.vocabulary import MEMORY_TIERS, Dtype, MemoryTier

Memory = MemoryTier
"""A memory tier an op's operands live in (the vocabulary's ``MemoryTier``)."""
MEMORIES: tuple[Memory, ...] = MEMORY_TIERS

DTYPE_BYTES: dict[Dtype, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    "fp4": 0.5,
}
"""Bytes per element of each dtype a chip may give a peak for."""

FLOPS_PER_MAC = 2.0
"""FLOPs of one multiply-accumulate (a multiply and an add), the convention of every
published peak FLOP/s."""

TENSORCORE_REDUCTION_PASSES = 3.0
"""HBM passes of a reduction on the TensorCore: read two operands, write one. (With a
CAE the reduction happens in-line as the data streams: one pass.)"""

SUBLANES = 8
"""Rows of a vector register: the streamed (``m``) dimension of a matmul pads to this."""

GROUPED_FULL_TILE_SHARE = 2.0 / 3.0
"""Useful share of a grouped matmul's streamed rows at which its groups hold a whole
tile each: with ``groups x tile / 2`` rows of padding (half a tile per group on
average), ``m / (m + groups x tile / 2) >= 2/3`` exactly when ``m >= groups x tile``
(derived)."""

DEFAULT_OP_OVERHEAD_S = 0.5e-6
"""Fixed cost of one op, in seconds (an assumption, not a published number).

Order of magnitude from the XLA-PI figures for a matmul: a pipeline latency of about
200 cycles at about 2 GHz (0.1 us) plus a DMA set-up of about 0.6 us, most of which a
well-pipelined program hides behind the previous op; 0.5 us sits between the two.
These figures are not from a chip's published spec and are not checked by any test.
Override it per model with ``ChipCostModel(chip, op_overhead_s=...)``.
"""


class ChipCostModel:
    """Roofline costs of ops on one chip of ``chip``'s generation.

    By default the chip's ``efficiency:`` terms apply (:mod:`tpusim.hardware.efficiency`:
    matmul fraction per dtype with the streamed-rows shape term, HBM fraction, vector
    bound); ``ideal=True`` costs at the roofline itself (every term 1). ``efficiency``
    further scales the matmul rate (1.0 = no change). ``op_overhead_s`` is the fixed
    cost added to every op, in seconds (:data:`DEFAULT_OP_OVERHEAD_S`, an assumption).
    Raises ValueError for an efficiency outside (0, 1] or a negative overhead.
    """

    def __init__(
        self,
        chip: ChipSpec,
        efficiency: float = 1.0,
        op_overhead_s: float = DEFAULT_OP_OVERHEAD_S,
        ideal: bool = False,
    ):
        if not 0.0 < efficiency <= 1.0:
            raise ValueError(f"efficiency must be in (0, 1], got {efficiency}")
        check_non_negative(op_overhead_s=op_overhead_s)
        self.chip = chip
        self.efficiency = efficiency
        self.op_overhead_s = op_overhead_s
        self.terms: EfficiencyTerms = IDEAL if ideal else chip_terms(chip)

    @property
    def mxu_size(self) -> int:
        """Side of the square MXU weight tile, in elements."""
        return self.chip.tensorcores.mxu_size

    def memory_bandwidth_Bps(self, memory: Memory, nominal: bool = False) -> float:
        """Achievable bandwidth of ``memory`` in B/s (HBM's times the chip's ``hbm``
        efficiency unless ``nominal``); ValueError if unknown or not given for the chip."""
        if memory not in MEMORIES:
            raise ValueError(f"unknown memory '{memory}' (choose from {', '.join(MEMORIES)})")
        bandwidth_Bps = (self.chip.hbm if memory == "hbm" else self.chip.sram).bandwidth_Bps
        if bandwidth_Bps is None:
            raise ValueError(f"chip {self.chip.name} gives no {memory.upper()} bandwidth")
        return bandwidth_Bps * (self.terms.hbm if memory == "hbm" and not nominal else 1.0)

    def achievable_flops(self, dtype: Dtype) -> float:
        """Achievable FLOP/s of a large matmul in ``dtype`` (peak x the chip's matmul
        term x ``efficiency``); ValueError naming the chip's dtypes.

        fp32 without a published peak runs at the bf16 rate: XLA's default precision
        computes an f32 dot on a TPU MXU as one bf16 pass.
        """
        fraction = self.terms.matmul_fraction(dtype) * self.efficiency
        if dtype == "fp32" and dtype not in self.chip.peak_flops:
            dtype = "bf16"
        if dtype not in self.chip.peak_flops:
            raise ValueError(
                f"chip {self.chip.name} has no peak for dtype '{dtype}' "
                f"(has {', '.join(self.chip.peak_flops)})"
            )
        return self.chip.peak_flops[dtype] * fraction

    def vector_s(self, ops: float) -> float:
        """Seconds the vector unit needs for ``ops`` elementwise operations (0 when the
        chip gives no vector bound or in the ideal mode)."""
        rate = self.terms.vector_flops
        return ops / rate if rate else 0.0

    def matmul(
        self,
        m: int,
        n: int,
        k: int,
        dtype: Dtype = "bf16",
        operands: Memory = "hbm",
        batch: int = 1,
        grouped: bool = False,
        weights_stored: bool = False,
        own_weights: bool = False,
    ) -> OpCost:
        """``batch`` products of an (m x k) by a shared (k x n) matrix on the TensorCore
        (``own_weights``: each product by its own (k x n) matrix, as a MoE layer's active
        experts are: the weights' traffic and any per-weight work count ``batch`` times).

        The MXU holds an S x S weight tile (S = ``mxu_size``), so the contraction ``k``
        and the output width ``n`` pad up to multiples of S; the rows ``m`` stream
        through the array and pad only to a multiple of 8 sublanes (one MXU push is an
        [8, S] x [S, S] product; the scaling book's TPU chapter). Traffic counts the
        unpadded bytes (padding happens in the MXU, not in memory): each batch's input
        and output once and the weights once, since they stay resident across the
        batch, at the operands' dtype. The rate is :meth:`achievable_flops` times the
        shape term of the ``m`` rows padded to the sublanes
        (:meth:`~tpusim.hardware.efficiency.EfficiencyTerms.rows`), times the
        ``grouped_matmul`` term for a grouped (megablox) matmul of a training step (a
        served model's experts run at their kernel's own rate: :meth:`_matmul_rate`).
        An 8-bit matmul adds
        the vector work of quantizing both operands (:meth:`quantize_s`: MaxText's
        on-the-fly quantization). ``weights_stored`` with a quantized ``dtype``: the
        weights are stored in ``dtype`` (a served checkpoint) and the activations are
        bf16; :mod:`tpusim.hardware.quantized` says how the chip runs it (w8a8 or
        weight-only). Times in seconds; ValueError for an unknown dtype or
        non-positive sizes.
        """
        check_positive(m=m, n=n, k=k, batch=batch)
        inputs, outputs = batch * m * k, batch * m * n
        weights = (batch if own_weights else 1) * k * n
        mxu_dtype, act_bytes, vector, overlapped = self._operands(
            dtype, weights_stored, inputs, weights
        )
        rate = self._matmul_rate(mxu_dtype, m, grouped, weights_stored)
        s = self.mxu_size
        flops = FLOPS_PER_MAC * batch * m * n * k
        padded = FLOPS_PER_MAC * batch * pad_to(m, SUBLANES) * pad_to(n, s) * pad_to(k, s)
        nbytes = act_bytes * (inputs + outputs) + DTYPE_BYTES[dtype] * weights
        mxu_s, vector_s = padded / rate, self.vector_s(vector)
        compute_s = max(mxu_s, vector_s) if overlapped else mxu_s + vector_s
        memory_s = nbytes / self.memory_bandwidth_Bps(operands)
        return self._cost(compute_s, memory_s, flops, padded, nbytes, "tensorcore")

    def _matmul_rate(self, mxu_dtype: Dtype, m: int, grouped: bool, stored: bool) -> float:
        """:meth:`matmul`'s FLOP/s: the achievable rate times the shape term of the
        ``m`` rows (and the megablox term when ``grouped``).

        A served model's experts (``grouped`` on ``stored`` weights) run the serving
        engine's grouped-matmul kernel instead: tpu-inference at b8692ff picks
        ``MoEBackend.GMM_EP`` under ``--enable-expert-parallel`` unless
        ``USE_MOE_EP_KERNEL=1`` (``layers/jax/moe/utils.py:select_moe_backend``; the
        Qwen3-Coder guides set 0), whose ``gmm_v2`` (``kernels/megablox/gmm_v2.py``,
        ``fill_metadata``: ``should_process = group_size > 0``) pipelines each expert's
        weight tiles from HBM and skips the experts no token was routed to, so a decode
        step's few rows per expert wait on the weight stream, not on the MXU weight
        loads that the shape term (derived from XLA's dense GEMMs) charges. (The fused
        EP kernel, ``kernels/fused_moe/v1/kernel.py``, would fetch every local expert's
        weights, routed or not.) Its rate is the roofline, times the server profile's
        ``expert_efficiency`` given as the op's efficiency (fitted on the serving
        figures), with neither the shape term nor MaxText's megablox term."""
        rate = self.achievable_flops(mxu_dtype)
        if not (grouped and stored):
            rate *= self.terms.rows(pad_to(m, SUBLANES))
            if grouped:
                rate *= self.terms.grouped_matmul
        return rate

    def _operands(
        self, dtype: Dtype, weights_stored: bool, inputs: int, weights: int
    ) -> tuple[Dtype, float, float, bool]:
        """How :meth:`matmul` runs: (the MXU dtype, bytes per activation element, vector
        operations, whether they overlap the MXU) for ``inputs`` activation and
        ``weights`` weight elements: on the fly (both quantized for an 8-bit dtype) or
        on stored weights (:mod:`tpusim.hardware.quantized`)."""
        if weights_stored and dtype in QUANTIZED:
            served = served_matmul(self.chip, dtype, self.terms.quantize_ops_per_element)
            vector = inputs * served.ops_per_activation + weights * served.ops_per_weight
            return served.mxu_dtype, ACTIVATION_BYTES, vector, served.overlapped
        return dtype, DTYPE_BYTES[dtype], (inputs + weights) * self.quantize_ops(dtype), False

    def grouped_matmul(
        self,
        m: int,
        n: int,
        k: int,
        efficiency: float,
        dtype: Dtype = "bf16",
        operands: Memory = "hbm",
        batch: int = 1,
        rows_in_k: bool = False,
        dropless_rows: int = 0,
        weights_stored: bool = False,
        own_weights: bool = False,
    ) -> OpCost:
        """A grouped (megablox) matmul whose groups of rows pad to tiles: ``efficiency``
        the useful share of the rows it streams; the rows are ``m`` (the forward and
        input-gradient products) or, with ``rows_in_k``, the contraction ``k`` (the
        weight gradient). Its ``compute_s`` includes the padding (not to be divided
        again); the memory traffic is the useful rows'.

        The compute is :meth:`matmul`'s over ``efficiency``: the tile padding on top
        of the rows' own sublane or MXU padding and shape term. That falls as the rows
        grow while the padding dominates (a nearly empty group is charged its padding
        against the shape term of its few rows), which made dropping tokens slower
        than dropless (MoE capacity, issue 33). With ``dropless_rows`` (the rows
        before a capacity dropped some, more than the op's) the compute is instead
        :meth:`matmul`'s of the streamed rows (useful plus padding, growing with the
        useful ones), and never more than that of the dropless rows: a kernel given
        fewer rows is never slower than given more. ``weights_stored`` and
        ``own_weights`` as :meth:`matmul`'s (a served MoE layer's experts)."""
        rows = k if rows_in_k else m

        def at_rows(r: int) -> OpCost:
            shape = (m, n, r) if rows_in_k else (r, n, k)
            return self.matmul(*shape, dtype, operands, batch, True, weights_stored, own_weights)

        dense = at_rows(rows)
        compute_s = dense.compute_s / efficiency
        padded = dense.padded_flops / efficiency
        if dropless_rows > rows:
            cost = at_rows(math.ceil(rows / efficiency * (1.0 - 1e-12)))
            pad = rows / efficiency - rows  # at most the dropless rows' padding
            ceiling = at_rows(dropless_rows).compute_s
            compute_s = min(cost.compute_s, ceiling * (dropless_rows + pad) / dropless_rows)
            padded = cost.padded_flops
        return self._cost(compute_s, dense.memory_s, dense.flops, padded, dense.bytes, "tensorcore")

    def quantize_s(self, dtype: Dtype, elements: float) -> float:
        """Seconds the vector unit spends quantizing ``elements`` operand elements of an
        8-bit matmul (``quantize_ops_per_element`` each; 0 for other dtypes)."""
        return self.vector_s(elements * self.quantize_ops(dtype))

    def quantize_ops(self, dtype: Dtype) -> float:
        """Vector operations per operand element an on-the-fly ``dtype`` matmul spends
        quantizing (``quantize_ops_per_element`` for 8-bit dtypes, else 0)."""
        return self.terms.quantize_ops_per_element if dtype in EIGHT_BIT else 0.0

    def elementwise(
        self, bytes: float, memory: Memory = "hbm", gather: bool = False, vector: bool = False
    ) -> OpCost:
        """An op on the TensorCore vector unit moving ``bytes`` (reads plus writes).

        The slower of its memory traffic (at the streaming HBM fraction, or the
        ``gather_hbm`` one for a row gather or scatter such as a MoE permute) and its
        vector work with ``vector`` (a training layer's fusions: norms, activations,
        residuals), ``vector_ops_per_element`` per 2-byte element moved; none for a
        gather, which only moves rows, or a plain read or copy (the default)."""
        check_non_negative(bytes=bytes)
        bandwidth_Bps = self.memory_bandwidth_Bps(memory)
        if gather and memory == "hbm":
            bandwidth_Bps *= self.terms.gather_hbm / self.terms.hbm
        per_element = self.terms.vector_ops_per_element if vector and not gather else 0.0
        ops = bytes / ELEMENT_BYTES * per_element
        return self._cost(self.vector_s(ops), bytes / bandwidth_Bps, 0.0, 0.0, bytes, "tensorcore")

    def kernel(
        self,
        flops: float,
        padded_flops: float,
        vector_ops: float,
        bytes: float,
        dtype: Dtype = "bf16",
        memory: Memory = "hbm",
        pad_dims: tuple[int, ...] = (),
    ) -> OpCost:
        """A fused kernel (flash attention, a Pallas call) whose MXU work, vector work
        and memory traffic are known: ``padded_flops`` on the MXUs at the large-matmul
        rate of ``dtype`` (its blocks are large: no shape term), ``vector_ops`` on the
        vector unit, ``bytes`` to ``memory``; the slowest of the three plus the
        overhead. ``flops`` is the useful part. ``pad_dims`` are the head dimensions of
        the kernel's matmuls, each taking an equal share of FLOPs per unit of dimension:
        the MXU pads each to its tile, so the work grows by ``sum(pad(d)) / sum(d)``."""
        check_non_negative(
            flops=flops, padded_flops=padded_flops, vector_ops=vector_ops, bytes=bytes
        )
        if pad_dims:
            padded_flops *= sum(pad_to(d, self.mxu_size) for d in pad_dims) / sum(pad_dims)
        mxu_s = padded_flops / self.achievable_flops(dtype) if padded_flops else 0.0
        compute_s = max(mxu_s, self.vector_s(vector_ops))
        memory_s = bytes / self.memory_bandwidth_Bps(memory)
        return self._cost(compute_s, memory_s, flops, padded_flops, bytes, "tensorcore")

    def embedding_lookup(self, rows: int, row_bytes: float, memory: Memory = "hbm") -> OpCost:
        """Gather ``rows`` rows of ``row_bytes`` each from ``memory``.

        Runs on the SparseCores where the chip has any (they gather without the MXU),
        else on the TensorCore; either way the cost is the gathered bytes over the
        bandwidth, plus the overhead.
        """
        check_non_negative(rows=rows, row_bytes=row_bytes)
        sparse = self.chip.sparsecores is not None and self.chip.sparsecores.count > 0
        nbytes = rows * row_bytes
        memory_s = nbytes / self.memory_bandwidth_Bps(memory)
        return self._cost(0.0, memory_s, 0.0, 0.0, nbytes, "sparsecore" if sparse else "tensorcore")

    def reduction(self, bytes: float) -> OpCost:
        """Sum two HBM buffers of ``bytes`` each into one (the reduce step of a collective).

        With a CAE the reduction happens in-line as the data streams, one pass over
        ``bytes`` of HBM; on the TensorCore it reads two operands and writes one,
        three passes. ``OpCost.bytes`` is the HBM traffic, at the nominal bandwidth: the
        collective terms (launch, step sync, link efficiency) were calibrated with it, as
        :mod:`tpusim.collectives.offload` prices the reduce steps.
        """
        check_non_negative(bytes=bytes)
        cae = self.chip.cae is not None
        nbytes = bytes if cae else TENSORCORE_REDUCTION_PASSES * bytes
        memory_s = nbytes / self.memory_bandwidth_Bps("hbm", nominal=True)
        return self._cost(0.0, memory_s, 0.0, 0.0, nbytes, "cae" if cae else "tensorcore")

    def _cost(
        self,
        compute_s: float,
        memory_s: float,
        flops: float,
        padded_flops: float,
        nbytes: float,
        unit: str,
    ) -> OpCost:
        return OpCost(
            time_s=max(compute_s, memory_s) + self.op_overhead_s,
            compute_s=compute_s,
            memory_s=memory_s,
            overhead_s=self.op_overhead_s,
            flops=flops,
            padded_flops=padded_flops,
            bytes=nbytes,
            bound="compute" if compute_s > memory_s else "memory",
            unit=unit,
        )
