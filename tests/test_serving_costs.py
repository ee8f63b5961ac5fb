"""Serving iteration costs and memory (issue 14): the cached, decomposed iteration time
against the engine on the whole program, the bucketing error against its bound, and
the KV capacity against the memory arithmetic done by hand."""

from __future__ import annotations

import math

import pytest

from tpusim.config.loader import load_model, load_system
from tpusim.engine import RunSettings, Simulation
from tpusim.program.builders.replica import replica_shape
from tpusim.program.builders.serving import serving_iteration
from tpusim.program.ir import ProgramError
from tpusim.serving.costs import IterationCosts, ReplicaBatch, bucket
from tpusim.serving.memory import kv_capacity, weights_bytes


def _costs(model: str, tp: int, ep: int, dtype: str = "bf16", kv: str = "hbm"):
    fields = load_model(model).builder_fields()
    shape = replica_shape(fields, tp=tp, ep=ep, replicas=1, dtype=dtype, kv_cache=kv)
    return IterationCosts(load_system("tpu8i-pod"), shape)


def _engine_s(costs: IterationCosts, batch: ReplicaBatch) -> float:
    program = serving_iteration(costs.shape, batch.per_chip(costs.shape.ep))
    settings = RunSettings(port_rows=False)
    sim = Simulation(costs.system, program, settings, topology=costs.topology, routes=costs.routes)
    return sim.run().step_time_s


BATCHES = [
    ReplicaBatch(decode=1, kv_tokens=1000),
    ReplicaBatch(decode=6, chunk_tokens=10, chunks=1, kv_tokens=6 * 700 + 300,
                 prefill_pairs=10 * (300 + 5.5)),
    ReplicaBatch(decode=0, chunk_tokens=16, chunks=2, kv_tokens=0, prefill_pairs=2 * 8 * 4.5),
]  # fmt: skip


@pytest.mark.parametrize(
    ("model", "tp", "ep", "dtype"),
    [("llama-3.1-70b", 8, 1, "bf16"), ("deepseek-v3", 1, 8, "fp8"), ("deepseek-v3", 2, 4, "fp8")],
)
@pytest.mark.parametrize("batch", BATCHES)
def test_decomposed_iteration_equals_the_engine_on_the_whole_program(model, tp, ep, dtype, batch):
    """Up to 16 tokens per chip every count is its own bucket: the cached sum of parts
    must equal the engine's run of every layer, attention included."""
    costs = _costs(model, tp, ep, dtype)
    assert costs.time_s(batch) == pytest.approx(_engine_s(costs, batch), rel=1e-9)


@pytest.mark.parametrize("tokens", [17, 35, 100, 700, 3000])
def test_bucketing_overestimates_within_its_bound(tokens):
    costs = _costs("llama-3.1-70b", 8, 1)
    batch = ReplicaBatch(decode=tokens, kv_tokens=tokens * 500)
    exact = _engine_s(costs, batch)
    error = costs.time_s(batch) / exact - 1
    assert 0 <= error <= bucket(tokens) / tokens - 1 + 1e-12


def test_bucket_grid():
    assert [bucket(x) for x in (1, 16, 17, 32, 33)] == [1, 16, 18, 32, 35]
    assert all(bucket(x) >= x for x in range(1, 5000))
    assert max(bucket(x) / x for x in range(17, 70000)) < 1.115
    assert len({bucket(x) for x in range(1, 8193)}) == 16 + 8 * 9


def test_tiered_cache_reads_sram_tokens_from_sram():
    """Tiered: the SRAM share of the KV read at SRAM bandwidth, the rest at HBM's."""
    costs = _costs("llama-3.1-70b", 8, 1, kv="tiered")
    chip = costs.system.chip
    hbm = ReplicaBatch(decode=8, kv_tokens=80_000)
    split = ReplicaBatch(decode=8, kv_tokens=80_000, sram_tokens=50_000)
    per_layer = 50_000 * costs.shape.kv_bytes_per_token_layer()
    hbm_Bps = chip.hbm.bandwidth_Bps * chip.efficiency.hbm  # streaming reaches hbm efficiency
    saved = per_layer / hbm_Bps - per_layer / chip.sram.bandwidth_Bps
    overhead = costs.costs.op_overhead_s  # one more op per layer
    expected = costs.shape.layers * (saved - overhead)
    assert costs.time_s(hbm) - costs.time_s(split) == pytest.approx(expected, rel=1e-9)


def test_kv_capacity_is_the_memory_arithmetic_by_hand():
    """Llama 3.1 70B, bf16, TP 8 on TPU 8i (288 GB HBM), token budget 8192, 256 seqs."""
    model = load_model("llama-3.1-70b")
    shape = replica_shape(model.builder_fields(), tp=8, ep=1, replicas=1, dtype="bf16",
                          kv_cache="hbm")  # fmt: skip
    cap = kv_capacity(shape, load_system("tpu8i-pod").chip,
                      max_tokens=8192, max_sequences=256)  # fmt: skip
    norms = 80 * 2 * 8192 + 8192  # replicated on every chip
    weights = (model.parameters() + 7 * norms) * 2 / 8
    acts = 8192 * (2 * 8192 + 2 * 28672 // 8) * 2 + 256 * math.ceil(128256 / 8) * 4
    per_token = 80 * 2 * (8 // 8) * 128 * 2
    free = 0.9 * 288e9 - weights - acts
    assert cap.weights_bytes == pytest.approx(weights, rel=1e-12)
    assert cap.tokens == math.floor(free / per_token / 16) * 16
    assert 5.8e6 < cap.tokens < 6.0e6


def test_expert_parallel_weights_add_up_to_the_published_shape():
    """DeepSeek-V3 on EP 8: the chips hold every parameter once, plus 7 more copies of
    everything but the routed experts; in fp8 the matrices take 1 byte, the norms,
    routers, embedding and LM head (kept bf16) 2."""
    model = load_model("deepseek-v3")
    shape = replica_shape(model.builder_fields(), tp=1, ep=8, replicas=1, dtype="fp8",
                          kv_cache="hbm")  # fmt: skip
    routed = model.moe_layers * 256 * 3 * 7168 * 2048
    expected = model.parameters() + 7 * (model.parameters() - routed)
    # per chip, by hand: 61 layers' norms (2 x 7168 + the 1536 and 512 low-rank ones),
    # 58 routers of 7168 x 256, the embedding and LM head (2 x 129280 x 7168), final norm
    bf16_per_chip = 61 * (2 * 7168 + 1536 + 512) + 58 * 7168 * 256 + 2 * 129280 * 7168 + 7168
    assert 8 * weights_bytes(shape) == pytest.approx(expected + 8 * bf16_per_chip, rel=1e-12)


def test_shape_errors_name_the_field():
    fields = load_model("llama-3.1-70b").builder_fields()
    with pytest.raises(ProgramError, match=r"kv_heads \(8\) is not divisible"):
        replica_shape(fields, tp=16, ep=1, replicas=1, dtype="bf16", kv_cache="hbm")
    with pytest.raises(ProgramError, match=r"ep \(2\) needs a mixture-of-experts"):
        replica_shape(fields, tp=1, ep=2, replicas=1, dtype="bf16", kv_cache="hbm")


def test_a_moe_decode_reads_every_active_expert_s_weights():
    """Mixtral 8x7B on one chip, 64 decode tokens: under uniform routing all 8 experts
    are active (1 - (1 - 2/8)^64 ~ 1), so one MoE layer's expert matmuls read 8 x
    3 x 4096 x 14336 weights (bf16: 2 bytes), not one expert's: the hand count."""
    from tpusim.hardware import ChipCostModel
    from tpusim.program.builders.serving import layer_program

    costs = _costs("mixtral-8x7b", tp=1, ep=1)
    ops = {op.name: op for op in layer_program(costs.shape, 64).ops}
    model = ChipCostModel(costs.system.chip)
    up, down = ops["moe.moe.up"], ops["moe.moe.down"]
    assert up.batch == down.batch == 8 and up.own_weights and down.own_weights
    rows = math.ceil(64 * 2 / 8)
    bytes_up = 2 * (8 * rows * 4096 + 8 * 4096 * 2 * 14336 + 8 * rows * 2 * 14336)
    bytes_down = 2 * (8 * rows * 14336 + 8 * 14336 * 4096 + 8 * rows * 4096)
    shape_up = (up.m, up.n, up.k, up.dtype, up.memory, up.batch, False, True, True)
    shape_down = (down.m, down.n, down.k, down.dtype, down.memory, down.batch, False, True, True)
    assert model.matmul(*shape_up).bytes == bytes_up
    assert model.matmul(*shape_down).bytes == bytes_down
    # a memory-bound layer: the experts' weights over HBM bound its time from below
    weights_s = 2 * 8 * 3 * 4096 * 14336 / costs.system.chip.hbm.bandwidth_Bps
    assert costs.layer_times_s(64)[2] >= weights_s
