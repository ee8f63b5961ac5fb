"""How a server runs a matmul whose weights are *stored* quantized (a quantized
checkpoint: fp8, int8, int4, fp4), as vLLM's TPU backend (vllm-project/tpu-inference)
does, against the training path (MaxText's AQT, :mod:`tpusim.hardware.efficiency`),
which quantizes both bf16 operands on every call.

Definition. The weights are read from HBM at their own size (1 byte an element for
fp8 and int8, 0.5 for int4 and fp4) and never quantized per step; the activations
are bf16 (:data:`ACTIVATION_DTYPE`). Then, per chip:

* **w8a8** when the chip's MXU has a faster path for the 8-bit dtype the kernel
  quantizes the activations to (:data:`ACTIVATION_QUANT`) than for bf16 (a larger
  published peak: int8 on v5e, v5p and v6e; fp8 on Ironwood, TPU 8t and 8i): each
  token's activation row is quantized per step (a vector pass over the ``m x k``
  activation, ``quantize_ops_per_element`` each, never over the ``k x n`` weights)
  and the matmul runs at that dtype's rate;
* **weight-only** (w8a16, w4a16) otherwise (fp8 on v5e, v5p and v6e, whose fp8 peak is
  bf16's or absent; int8 and int4 on Ironwood and 8i): the kernel upcasts each weight
  tile to bf16 as it streams through VMEM (:data:`DEQUANTIZE_OPS_PER_ELEMENT` vector
  operations per weight element, overlapped with the MXU) and multiplies at the bf16
  rate.

Sources (vllm-project/tpu-inference):

* ``tpu_inference/layers/common/linear.py`` (commit 021776b4),
  ``sharded_quantized_matmul``: the Pallas kernel is called with
  ``x_q_dtype=w_q.dtype``, i.e. the activations are quantized to the weights' dtype
  per step (w8a8); published (code).
* ``tpu_inference/kernels/quantized_matmul/kernel.py`` (commit 07b47d2c): the weights
  arrive quantized with a per-channel scale (``w_q``, ``w_scale``); the activation's
  per-token abs-max is taken over ``x`` (``jnp.max(jnp.abs(x), axis=-1)``) and
  ``quantize_array`` scales and casts the activation block inside the kernel; the
  weight scale multiplies the accumulator. Nothing quantizes the weights; published
  (code).
* ``tpu_inference/kernels/quantized_matmul/util.py`` (commit 0086e939),
  ``xla_quantized_matmul``: fp8 weights on a chip whose MXU lacks fp8 are cast to the
  activation dtype (``w_q.astype(x.dtype)``) and multiplied in bf16, the per-channel
  scale applied after the matmul; published (code). That the same happens for int8
  and int4 weights on a chip without that MXU path, and that the cast is hidden in the
  kernel's pipeline, is an assumption.
* The activation dtype of 4-bit weights (int4 -> int8, fp4 -> fp8): the kernel
  quantizes activations to an 8-bit dtype of the weights' family (tpu-inference's
  ``_get_x_q_dtype``: integer weights -> int8, float weights -> fp8; no 4-bit
  activations); published (code).

Which chip has which native MXU dtype: the peaks of ``configs/chips/*.yaml`` (from
the chips' docs and JAX's device table; ``/work/shared/reference/tpu-specs.md``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tpusim.config.chip import ChipSpec
from tpusim.vocabulary import Dtype

ACTIVATION_DTYPE: Dtype = "bf16"
"""The dtype of a quantized checkpoint's activations: vLLM's ``--dtype auto`` takes the
checkpoint's ``torch_dtype``, bf16 for the fp8, int8 and 4-bit checkpoints served on
TPUs (published default)."""

ACTIVATION_BYTES = 2.0
"""Bytes of one :data:`ACTIVATION_DTYPE` element."""

ACTIVATION_QUANT: dict[str, Dtype] = {"fp8": "fp8", "fp4": "fp8", "int8": "int8", "int4": "int8"}
"""The 8-bit dtype a w8a8 kernel quantizes the activations to, by the weights' dtype
(tpu-inference ``_get_x_q_dtype``: the weights' family, 8 bits; published, code)."""

QUANTIZED: frozenset[str] = frozenset(ACTIVATION_QUANT)
"""Weight dtypes stored quantized (narrower than the bf16 activations)."""

DEQUANTIZE_OPS_PER_ELEMENT = 1.0
"""Vector operations per weight element to upcast a quantized weight tile to bf16 (one
convert; the per-channel scale multiplies the output, not the weights, as
``xla_quantized_matmul`` does). An assumption."""


@dataclass(frozen=True)
class ServedMatmul:
    """How a chip runs a matmul on stored quantized weights: the MXU dtype (bf16 for
    weight-only), the vector operations per activation element (the per-step
    quantization, w8a8) and per weight element (the in-kernel upcast, weight-only),
    and whether that vector work overlaps the MXU (the upcast does; the activation
    pass, which starts with an abs-max over the whole row, does not)."""

    mxu_dtype: Dtype
    ops_per_activation: float
    ops_per_weight: float
    overlapped: bool

    @property
    def w8a8(self) -> bool:
        """Whether the activations are quantized per step."""
        return self.mxu_dtype != ACTIVATION_DTYPE


def native_activation_dtype(chip: ChipSpec, weight_dtype: str) -> Dtype | None:
    """The 8-bit dtype ``chip``'s MXU multiplies ``weight_dtype`` weights in, when its
    published peak for it exceeds bf16's; None: weight-only (bf16 rate)."""
    act = ACTIVATION_QUANT.get(weight_dtype)
    peaks = chip.peak_flops
    if act is None or act not in peaks:
        return None
    return act if peaks[act] > peaks.get("bf16", 0.0) else None


def served_matmul(
    chip: ChipSpec, weight_dtype: str, quantize_ops_per_element: float
) -> ServedMatmul:
    """How ``chip`` runs a matmul whose weights are stored in ``weight_dtype`` (one of
    :data:`QUANTIZED`); ``quantize_ops_per_element``: the chip's vector operations to
    quantize one element (the shared cost term)."""
    act = native_activation_dtype(chip, weight_dtype)
    if act is not None:
        return ServedMatmul(act, quantize_ops_per_element, 0.0, overlapped=False)
    return ServedMatmul(ACTIVATION_DTYPE, 0.0, DEQUANTIZE_OPS_PER_ELEMENT, overlapped=True)


def default_kv_dtype(weight_dtype: str) -> Dtype:
    """The KV cache dtype when none is given: the activations' (vLLM's
    ``--kv-cache-dtype auto``: "use the model data type", bf16 for a quantized
    checkpoint; published default); fp32 weights keep an fp32 cache."""
    return ACTIVATION_DTYPE if weight_dtype in QUANTIZED else weight_dtype  # type: ignore[return-value]
