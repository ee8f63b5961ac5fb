"""How a server runs a matmul whose weights are *stored* quantized (a quantized
checkpoint: fp8, int8, int4, fp4), as vLLM's TPU backend (vllm-project/tpu-inference)
does, against the training path (MaxText's AQT, :mod:`tpusim.hardware.efficiency`),
which quantizes both bf16 operands on every call.

Definition. The weights are read from HBM at their own size (1 byte an element for
fp8 and int8, 0.5 for int4 and fp4) and never quantized per step; the activations
are bf16 (:data:`ACTIVATION_DTYPE`). Then, per chip:

* **w8a8** (w4a8 for 4-bit weights) when the chip's MXU multiplies an 8-bit dtype the
  kernel may quantize the activations to (:data:`ACTIVATION_QUANT`, in order of
  preference; the chip has it when its file gives a peak for it): each activation
  block is quantized per step (a vector pass over the ``m x k`` activation,
  ``quantize_ops_per_element`` each, never over the ``k x n`` weights) and the matmul
  runs at that dtype's rate. fp8 and fp4 weights take fp8 (Ironwood, TPU 8t, 8i, and
  v6e, whose fp8 rate is its bf16 one); int8 weights int8 (v4, v5e, v5p, v6e, 8t);
  int4 weights int8 where the chip has it, else fp8 (Ironwood, 8i);
* **weight-only** (w8a16, w4a16) otherwise (fp8 on v5e; int8 on Ironwood and 8i): the
  kernel upcasts each weight tile to bf16 as it streams through VMEM
  (:data:`DEQUANTIZE_OPS_PER_ELEMENT` vector operations per weight element, overlapped
  with the MXU) and multiplies at the bf16 rate.

Sources (vllm-project/tpu-inference):

* ``tpu_inference/kernels/megablox/gmm_v2.py`` (commit b8692ff0, lines 1175-1190),
  ``gmm_v2``, which ``layers/common/linear.py``'s ``sharded_quantized_matmul`` calls
  for a quantized linear layer: "Choose lhs quantization dtype based on TPU hardware
  support": fp8 when ``tpu_info.fp8_ops_per_second > 0`` and the weights are float or
  4-bit, int8 when ``int8_ops_per_second > 0`` and they are integer, else none (the
  weights are dequantized, the activations stay bf16); the activation is quantized in
  blocks of 512 elements, "reading all elements in a block to compute scale value";
  published (code).
* ``tpu_inference/kernels/quantized_matmul/kernel.py`` (commit 07b47d2c): the weights
  arrive quantized with per-channel scales (``w_q``, ``w_scale``); the kernel
  quantizes the activation per token and applies the weight scale to the
  accumulator. Nothing quantizes the weights; published (code).
* ``tpu_inference/kernels/quantized_matmul/util.py`` (commit 0086e939),
  ``xla_quantized_matmul``: fp8 weights on a chip whose MXU lacks fp8 are cast to the
  activation dtype (``w_q.astype(x.dtype)``) and multiplied in bf16, the per-channel
  scale applied after the matmul; published (code). That the cast is hidden in the
  kernel's pipeline (one vector operation a weight, overlapped) is an assumption.

Which chip has which MXU dtype: the peaks of ``configs/chips/*.yaml`` (the chips' docs
and JAX's device table, ``/work/shared/reference/tpu-specs.md``). Two files list a
peak JAX marks "Not Available" (v4 int8 and v5p fp8, at their bf16 rate): there the
w8a8 path runs at the bf16 rate, as the weight-only one would, plus the activation
pass (an approximation).
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

ACTIVATION_QUANT: dict[str, tuple[Dtype, ...]] = {
    "fp8": ("fp8",),
    "fp4": ("fp8",),
    "int8": ("int8",),
    "int4": ("int8", "fp8"),
}
"""The 8-bit dtypes a kernel may quantize the activations to, by the weights' dtype,
the first the chip has wins (tpu-inference ``gmm_v2``: int8 for integer weights, fp8
for float or 4-bit ones; published, code)."""

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
    """The 8-bit dtype ``chip``'s MXU multiplies ``weight_dtype`` weights in (the first
    of :data:`ACTIVATION_QUANT` it gives a peak for); None: weight-only (bf16 rate)."""
    choices = ACTIVATION_QUANT.get(weight_dtype, ())
    return next((act for act in choices if act in chip.peak_flops), None)


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
    ``--kv-cache-dtype auto``, "use the model data type": tpu-inference
    ``layers/common/sharding.py``, commit b8692ff0, lines 246-247, sets ``cache_dtype =
    model_config.dtype``, bf16 for a quantized checkpoint; published, code); fp32
    weights keep an fp32 cache."""
    return ACTIVATION_DTYPE if weight_dtype in QUANTIZED else weight_dtype  # type: ignore[return-value]
