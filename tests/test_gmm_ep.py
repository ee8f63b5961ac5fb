"""tpu-inference's GMM_EP MoE kernel as tpusim derives it (tpusim/program/builders/gmm_ep.py):
token buckets, row tiles, the busiest device's reached experts, and a tiny MoE layer whose
weights, rows and unpermute bytes are counted by hand."""

from __future__ import annotations

import numpy as np
import pytest

from tpusim.config.loader import load_chip
from tpusim.hardware import ChipCostModel
from tpusim.program.builders.gmm_ep import (
    GmmEp,
    busiest_device,
    expected_max_binomial,
    padded_tokens,
    row_tile,
)
from tpusim.program.builders.oplist import Chain, OpList
from tpusim.program.builders.replica import replica_shape
from tpusim.program.builders.serving import moe_mlp
from tpusim.serving.servers import load_server
from tpusim.serving.service import with_moe_kernel


def test_token_buckets_are_powers_of_two_from_the_floor():
    # tpu_runner.py: get_token_paddings(min_token_size=16, ..., padding_gap=0) doubles
    assert [padded_tokens(t) for t in (1, 15, 16, 17, 64, 65, 8192)] == [
        16,
        16,
        16,
        32,
        64,
        128,
        8192,
    ]
    assert padded_tokens(3, 4) == 4 and padded_tokens(5, 4) == 8


def test_row_tile_follows_calculate_tiling():
    # 128 * lhs_mod // rhs_mod, mod = min(ceil(16 / bits), 2)
    assert row_tile(8, 8) == 128  # fp8 x fp8 (Ironwood quantizes the activations)
    assert row_tile(16, 8) == 64  # bf16 activations x fp8 weights (v5e, v6e without fp8)
    assert row_tile(16, 16) == 128
    assert row_tile(8, 4) == 128  # 4-bit weights count as 8-bit (mod capped at 2)


def test_expected_max_of_binomials_by_hand():
    # two Binomial(2, 1/2): P(max = 0) = 1/16, P(max <= 1) = 9/16: E = 8/16 + 2 * 7/16
    assert expected_max_binomial(2, 0.5, 2) == pytest.approx(22 / 16)
    assert expected_max_binomial(20, 1.0, 8) == pytest.approx(20)
    assert expected_max_binomial(20, 0.0, 8) == pytest.approx(0)


def test_busiest_device_matches_sampled_routing():
    """16 tokens, top-8 of 160 experts over 8 devices of 20: the expected maximum of
    reached experts against uniform routing sampled (distinct experts per token)."""
    rng = np.random.default_rng(0)
    trials = 4000
    most = np.empty(trials)
    for i in range(trials):
        chosen = np.argsort(rng.random((16, 160)), axis=1)[:, :8].ravel()
        reached = np.zeros(160, dtype=bool)
        reached[chosen] = True
        most[i] = reached.reshape(8, 20).sum(axis=1).max()
    load = busiest_device(1, 8, 160, 8, GmmEp(cores=2, tile_m=128))
    assert load.experts == pytest.approx(most.mean(), rel=0.03)
    assert load.rows == 16  # 16 padded tokens x 8 / 8 devices


def test_tiny_moe_layer_by_hand():
    """4 experts of d_ff 512 over one chip of 2 cores (2 experts a core), top-2,
    d_model 256, fp8 weights, buckets from 4 tokens: one token is padded to 4; each
    expert is reached with p = 1 - (1/2)^4 = 15/16; a core's reached experts have
    expected maximum 2 - (1 + 31^2) / 256^2; rounded, 2 experts of 128 padded rows
    each, on both cores."""
    fields = {
        "layers": 1,
        "d_model": 256,
        "heads": 2,
        "kv_heads": 2,
        "head_dim": 128,
        "d_ff": 512,
        "mlp": "gated",
        "experts": 4,
        "top_k": 2,
        "expert_d_ff": 512,
    }
    shape = replica_shape(fields, tp=1, ep=1, replicas=1, dtype="fp8", kv_cache="hbm")
    kernel = GmmEp(cores=2, tile_m=128, min_tokens=4)
    load = busiest_device(1, 2, 4, 2, kernel)
    assert load.experts == pytest.approx(2 - (1 + 31**2) / 256**2)
    assert load.padded_rows == pytest.approx(load.experts * 128)
    out = OpList()
    import dataclasses

    moe_mlp(Chain(out), dataclasses.replace(shape, moe_kernel=kernel), 1, "L0")
    ops = {op.name: op for op in out.ops}
    up, down = ops["L0.moe.up"], ops["L0.moe.down"]
    assert (up.batch, up.m, up.k, up.n) == (4, 128, 256, 1024)  # 2 experts x 2 cores
    assert (down.batch, down.m, down.k, down.n) == (4, 128, 512, 256)
    assert up.own_weights and up.weights_stored and up.dtype == "fp8"
    # every core reads the 4 x 3 = 12 token rows of d_model (T' k + T') in bf16
    assert ops["L0.moe.unpermute"].bytes == 2 * 4 * 3 * 256 * 2
    # weight-bound: the busiest core's 2 experts' 3 x 256 x 512 fp8 weights on each core
    costs = ChipCostModel(load_chip("ironwood"))
    weights_bytes = 4 * (256 * 1024 + 512 * 256)
    got = costs.matmul(
        128, 1024, 256, "fp8", batch=4, grouped=True, weights_stored=True, own_weights=True
    ).bytes
    got += costs.matmul(
        128, 256, 512, "fp8", batch=4, grouped=True, weights_stored=True, own_weights=True
    ).bytes
    activations = 2 * 4 * 128 * (256 + 1024 + 512 + 256)
    assert got == weights_bytes + activations


def test_served_qwen3_coder_decode_reads_whole_experts_per_core():
    """Qwen3-Coder-480B on 4 Ironwood chips (8 cores, 20 experts each), one decode token
    padded to 16: the busiest core's reached experts' whole gate, up and down weights
    (3 x 6144 x 2560 fp8 bytes each) are what the chip's two cores stream."""
    from tpusim.config.loader import load_model

    model = load_model("qwen3-coder-480b-a35b")
    shape = replica_shape(
        model.builder_fields(), tp=4, ep=1, replicas=1, dtype="fp8", kv_cache="hbm", kv_dtype="fp8"
    )
    chip = load_chip("ironwood")
    served = with_moe_kernel(shape, load_server("vllm-tpu-inference"), chip)
    assert served.moe_kernel == GmmEp(cores=2, tile_m=128, min_tokens=16)
    out = OpList()
    moe_mlp(Chain(out), served, 1, "L0")
    ops = {op.name: op for op in out.ops}
    experts = round(busiest_device(1, 8, 160, 8, served.moe_kernel).experts)
    assert ops["L0.moe.up"].batch == 2 * experts
    assert ops["L0.moe.up"].n == 2 * 2560 and ops["L0.moe.up"].k == 6144


def test_dense_model_keeps_its_shape():
    from tpusim.config.loader import load_model

    model = load_model("llama-3.1-8b")
    shape = replica_shape(
        model.builder_fields(), tp=1, ep=1, replicas=1, dtype="bf16", kv_cache="hbm"
    )
    chip = load_chip("ironwood")
    assert with_moe_kernel(shape, load_server("vllm-tpu-inference"), chip) is shape


def test_moe_token_time_is_derived_from_the_published_layer_time():
    """The shipped per-token MoE routing time is (7.3 ms - 1.1 ms psum - the kernel's
    structural work) / 8192 tokens, the structural work counted by hand for that layer
    (tpu-inference PR 1516's shapes, one 8192-token sequence on Ironwood's 8 cores):
    65536 routed rows a core over 160 experts (409.6 each) pad to 4 tiles of 128, 81920
    rows by 6144 x (2 x 320 + 320) at 82.35% of the bf16 core peak (2307 / 2 TFLOP/s),
    then the unpermute's 65536 + 8192 rows of 6144 bf16 at 7380 / 2 GB/s."""
    import math

    rows = 160 * math.ceil(8192 * 8 / 160 / 128) * 128
    assert rows == 81920
    compute_s = 2 * rows * 6144 * 960 / (2307e12 / 2 * 0.8235)
    unpermute_s = (65536 + 8192) * 6144 * 2 / (7380e9 / 2)
    per_token_s = (7.3e-3 - 1.1e-3 - compute_s - unpermute_s) / 8192
    term = load_server("vllm-tpu-inference").terms.moe_token_time
    assert term is not None and term.grade == "derived"
    assert term.value == pytest.approx(per_token_s, rel=0.01)


def test_profile_fits_no_moe_term():
    """The shipped profile derives its MoE costs: no fixed time per MoE layer nor
    experts' efficiency, and the kernel named with its source."""
    profile = load_server("vllm-tpu-inference")
    assert profile.terms.moe_layer_time is None and profile.terms.expert_efficiency is None
    assert profile.moe_kernel is not None and profile.moe_kernel.value == "gmm_ep"
    assert profile.moe_kernel.url.startswith("https://github.com/vllm-project/tpu-inference")


def test_experts_the_cores_do_not_divide_stay_tensor_parallel():
    """Mixtral's 8 experts on 8 Ironwood chips (16 cores): GMM_EP cannot shard whole
    experts, so the shape keeps the tensor-parallel experts."""
    from tpusim.config.loader import load_model

    model = load_model("mixtral-8x7b")
    shape = replica_shape(
        model.builder_fields(), tp=8, ep=1, replicas=1, dtype="bf16", kv_cache="hbm"
    )
    chip = load_chip("ironwood")
    assert with_moe_kernel(shape, load_server("vllm-tpu-inference"), chip) is shape
    two = replica_shape(
        model.builder_fields(), tp=2, ep=1, replicas=1, dtype="bf16", kv_cache="hbm"
    )
    assert with_moe_kernel(two, load_server("vllm-tpu-inference"), chip).moe_kernel == GmmEp(2, 128)
