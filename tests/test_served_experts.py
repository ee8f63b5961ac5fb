"""A served MoE model's routed experts run the serving engine's grouped matmul
(tpu-inference's ``GMM_EP`` backend, ``kernels/megablox/gmm_v2.py``): each active expert's weights
stream from HBM once per step, the MXU keeps up with the few rows a decode step routes
to each expert, and the kernel's compute rate is the server profile's
``expert_efficiency`` rather than training's megablox and shape terms.

Oracles: Qwen3-Coder-480B-A35B's published shape (hidden 6144, 160 experts of
intermediate 2560, top-8, 62 layers), bytes counted by hand, Ironwood's published HBM
bandwidth (7,380 GB/s) and its published fp8 / bf16 peaks."""

from __future__ import annotations

import math

import pytest

from tpusim.config.loader import load_model, load_system
from tpusim.engine.handlers import matmul_cost
from tpusim.hardware import ChipCostModel
from tpusim.hardware.quantized import served_matmul
from tpusim.program.builders.replica import replica_shape
from tpusim.program.builders.serving import active_experts, layer_program

D_MODEL, EXPERT_FF, EXPERTS, TOP_K = 6144, 2560, 160, 8
IRONWOOD_HBM_BPS = 7380e9
TP = 4


@pytest.fixture(scope="module")
def served():
    system = load_system("ironwood-pod")
    fields = load_model("qwen3-coder-480b-a35b").builder_fields()
    shape = replica_shape(fields, tp=TP, ep=1, replicas=1, dtype="fp8", kv_cache="hbm")
    return system, shape, ChipCostModel(system.chip)


def _routed(shape, tokens: int):
    ops = layer_program(shape, tokens).ops
    return [op for op in ops if op.name.endswith((".moe.up", ".moe.down"))]


@pytest.mark.parametrize("tokens", [1, 4, 16, 64])
def test_decode_experts_wait_on_the_weight_stream(served, tokens):
    """At decode sizes the experts' time is their weight bytes (the expected distinct
    experts of ``tokens`` uniformly routed tokens, each 3 x 6144 x 2560 / tp fp8 bytes)
    over the HBM bandwidth, plus the few activation rows (within 2%), sets their time."""
    _, shape, costs = served
    unique = EXPERTS * (1 - (1 - TOP_K / EXPERTS) ** tokens)
    assert active_experts(shape, tokens) == math.ceil(unique)
    hbm_Bps = IRONWOOD_HBM_BPS * costs.terms.hbm
    weight_bytes = math.ceil(unique) * 3 * D_MODEL * EXPERT_FF / TP  # fp8: 1 byte
    routed = [matmul_cost(costs, op) for op in _routed(shape, tokens)]
    assert sum(c.memory_s for c in routed) == pytest.approx(weight_bytes / hbm_Bps, rel=0.02)
    for cost in routed:  # the weight stream, not the MXU, sets the time
        assert cost.compute_s < cost.memory_s <= cost.time_s


def test_prefill_experts_run_at_the_kernel_rate(served):
    """A prefill chunk's experts are compute-bound at the roofline's rate divided by the
    op's efficiency (the server's expert_efficiency): halving it doubles the compute,
    with no shape or megablox term (the padded flops over the achievable rate, after the
    activations' quantization pass)."""
    import dataclasses

    _, shape, costs = served
    up = next(op for op in _routed(shape, 8192) if op.name.endswith(".moe.up"))
    base = matmul_cost(costs, up)
    half = matmul_cost(costs, dataclasses.replace(up, efficiency=0.5))
    assert half.compute_s == pytest.approx(2 * base.compute_s, rel=1e-9)
    # Ironwood runs fp8 weights w8a8 on its fp8 MXU path, quantizing each routed
    # activation row on the vector unit first (hardware/quantized.py)
    served_mm = served_matmul(costs.chip, "fp8", costs.terms.quantize_ops_per_element)
    assert served_mm.mxu_dtype == "fp8" and not served_mm.overlapped
    activations = up.batch * up.m * up.k
    quantize_s = activations * served_mm.ops_per_activation / costs.terms.vector_flops
    mxu_s = base.padded_flops / costs.achievable_flops("fp8")
    assert base.compute_s == pytest.approx(mxu_s + quantize_s, rel=1e-9)


def test_training_grouped_matmul_keeps_its_terms(served):
    """A training step's grouped matmul (weights not stored) still pays the shape term
    and the megablox term: its compute is the dense product's over grouped_matmul."""
    _, _, costs = served
    dense = costs.matmul(4096, 2560, 6144, "bf16")
    grouped = costs.matmul(4096, 2560, 6144, "bf16", grouped=True)
    assert grouped.compute_s == pytest.approx(dense.compute_s / costs.terms.grouped_matmul)
