"""A MoE layer's routed experts as vLLM's tpu-inference runs them with its ``GMM_EP``
backend (``--enable-expert-parallel``, ``USE_MOE_EP_KERNEL=0``): every TensorCore of the
replica (a *device*: vLLM's ``--tensor-parallel-size`` counts them) holds
``experts / devices`` whole experts, sees every token of the step, gathers the rows
routed to its experts and runs them through two grouped matmuls (``gmm_v2``), and a
``psum`` over the devices adds the results. The layer waits for the busiest device.

Definition (one MoE layer, ``T`` tokens in the step, ``E`` experts, top-``k``,
``D`` devices, ``G = E / D`` experts a device):

* the runner pads the step's tokens to a bucket: ``T' = max(min_tokens,
  2^ceil(log2 T))`` (``tpu_runner.py`` ``get_token_paddings``, exponential buckets from
  16), and the padded tokens are routed like real ones (``fused_moe_func`` at the
  recipes' commit has no valid-token mask; a later commit routes padding to expert 0
  "especially useful when we have a low number of tokens ... padding tokens may
  activate unnecessary expert weights and slow down the gmm kernel");
* an expert is reached by ``T'`` tokens' top-``k`` with probability
  ``p = 1 - (1 - k/E)^T'`` (uniform routing); a device's reached experts are
  ``Binomial(G, p)`` and the busiest of ``D`` devices has their expected maximum
  ``a`` (:func:`expected_max_binomial`, exact for independent devices);
* ``gmm_v2`` reads the weights of the reached experts only (``fill_metadata`` skips
  empty groups), whole: the busiest device reads ``a x 3 x d_model x d_ff`` weights;
* every device then reads the whole unpermuted ``T' k x d_model`` array (the
  ``ragged_scatter`` output, its rows of other devices masked) and writes the ``T' x
  d_model`` sum over the top-``k``, whatever its share of the rows;
* its rows, ``T' k / D`` on average, are split in groups of ``n = rows / a`` and each
  group is padded to whole row tiles of ``tile_m`` (``calculate_tiling``: 128 x
  ``lhs_mod / rhs_mod``, 64 for bf16 activations against 8-bit weights, 128 when both
  are 8-bit or both 16-bit): ``a x ceil(n / tile_m) x tile_m`` rows reach the MXU.

The op the chip runs is the busiest device's work times the chip's TensorCores (each
core is one device running at its share of the chip's FLOP/s and HBM bandwidth), so
the chip-level roofline gives the busiest device's time. Sources: vllm-project/
tpu-inference at bbcb941f (2026-04-25, the recipes' nightly images):
``tpu_inference/layers/common/fused_moe_gmm.py`` (``fused_moe_func``,
``expert_parallel_gmm``, ``moe_gmm_local``), ``tpu_inference/kernels/megablox/gmm_v2.py``
(``calculate_tiling``, ``fill_metadata``, ``kernel_main``) and
``tpu_inference/runner/tpu_runner.py`` lines 462-471 with ``runner/utils.py``
``get_token_paddings``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: Smallest token bucket of tpu-inference's runner: ``min_token_size=max(16, ...)``
#: (``tpu_runner.py`` line 468 at bbcb941f; published, code).
MIN_TOKEN_BUCKET = 16
#: ``gmm_v2``'s row tile for bf16 activations against bf16 weights
#: (``calculate_tiling``: ``bf16_bf16_tile_m = 128``; published, code).
BF16_TILE_M = 128


@dataclass(frozen=True)
class GmmEp:
    """The kernel's parameters on one chip: ``cores`` devices a chip (its TensorCores),
    ``tile_m`` rows a tile, ``min_tokens`` the smallest token bucket."""

    cores: int
    tile_m: int
    min_tokens: int = MIN_TOKEN_BUCKET


def row_tile(activation_bits: int, weight_bits: int) -> int:
    """``gmm_v2``'s ``tile_m``: ``128 x lhs_mod // rhs_mod`` with ``mod = min(ceil(16 /
    bits), 2)`` of the activations as the kernel multiplies them (8 when it quantizes
    them) and of the weights."""

    def mod(bits: int) -> int:
        return min(-(-16 // bits), 2)

    return BF16_TILE_M * mod(activation_bits) // mod(weight_bits)


def padded_tokens(tokens: int, min_tokens: int = MIN_TOKEN_BUCKET) -> int:
    """The runner's bucket of ``tokens``: the next power of two, at least ``min_tokens``."""
    return max(min_tokens, 1 << max(0, math.ceil(math.log2(max(tokens, 1)))))


def expected_max_binomial(n: int, p: float, draws: int) -> float:
    """``E[max]`` of ``draws`` independent ``Binomial(n, p)`` counts:
    ``sum_x (1 - F(x)^draws)`` over ``x = 0 .. n - 1``."""
    cdf, total, prob = 0.0, 0.0, (1.0 - p) ** n
    for x in range(n):
        cdf += prob
        total += 1.0 - min(cdf, 1.0) ** draws
        prob *= (n - x) / (x + 1) * (p / (1.0 - p)) if p < 1.0 else 0.0
    return total


@dataclass(frozen=True)
class BusiestDevice:
    """The busiest device's share of one MoE layer: ``experts`` reached (expected
    maximum), ``rows`` routed to it (mean) and ``padded_rows`` the MXU runs (whole row
    tiles per group), ``tiles`` of them (the length of ``gmm_v2``'s ``gm`` grid axis)."""

    experts: float
    rows: float
    padded_rows: float
    tiles: float


def busiest_device(
    tokens: int, top_k: int, experts: int, devices: int, kernel: GmmEp
) -> BusiestDevice:
    """The busiest of ``devices`` devices for ``tokens`` tokens of the step (see the
    module docstring). Raises ValueError when ``devices`` does not divide ``experts``."""
    if experts % devices:
        raise ValueError(f"{devices} devices do not divide {experts} experts")
    padded = padded_tokens(tokens, kernel.min_tokens)
    per_device = experts // devices
    reached = 1.0 - (1.0 - top_k / experts) ** padded
    active = max(1.0, expected_max_binomial(per_device, reached, devices))
    rows = padded * top_k / devices
    tiles = active * math.ceil(rows / active / kernel.tile_m)
    return BusiestDevice(active, rows, tiles * kernel.tile_m, tiles)
