"""Quantized serving as servers run it (issue 41, part 2): weights stored in their
dtype and read at its size, activations quantized per step only on a native 8-bit MXU
path, a KV cache dtype of its own. Oracles: weight bytes counted by hand from the
models' published shapes over the chips' published HBM bandwidths, the chips'
published peaks, and the closed forms of the cost model's documented terms."""

from __future__ import annotations

import pytest

from tpusim.config.loader import load_system
from tpusim.hardware import ChipCostModel
from tpusim.hardware.quantized import default_kv_dtype, native_activation_dtype
from tpusim.program.builders.replica import replica_shape
from tpusim.serving.costs import ReplicaBatch
from tpusim.serving.options import ServeOptions
from tpusim.serving.service import Deployment, Service

QWEN3_32B = """\
name: qwen3-32b-shaped
full_name: Qwen3 32B (shape)
description: "dense, GQA (8 KV heads), SwiGLU"
layers: 64
d_model: 5120
vocab: 151936
context_length: 40960
attention: {kind: gqa, heads: 64, kv_heads: 8, head_dim: 128}
mlp: gated
d_ff: 25600
published: {parameters: 32.8e9}
"""

# Weight matrices of every layer and the LM head, by hand from the published shapes:
# QKV d x (heads + 2 kv_heads) x head_dim, output heads x head_dim x d, gated MLP 3 d d_ff.
LLAMA_8B_MATRICES = 32 * (4096 * (32 + 16) * 128 + 32 * 128 * 4096 + 3 * 4096 * 14336)
LLAMA_8B_HEAD = 128256 * 4096
QWEN_32B_MATRICES = 64 * (5120 * (64 + 16) * 128 + 64 * 128 * 5120 + 3 * 5120 * 25600)
QWEN_32B_HEAD = 151936 * 5120
#: Bytes per element of the weights as stored.
STORED_BYTES = {"bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
SEQUENCES, CONTEXT = 4, 256


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "qwen3-32b-shaped.yaml"
    path.write_text(QWEN3_32B)
    return str(path)


def _step_s(system: str, model: str, dtype: str, tp: int, kv_dtype: str | None = None):
    """A decode step of SEQUENCES sequences of CONTEXT tokens, engine time alone."""
    deployment = Deployment(
        system=system, model=model, dtype=dtype, tp=tp, overheads=False, kv_dtype=kv_dtype
    )
    batch = ReplicaBatch(decode=SEQUENCES, kv_tokens=SEQUENCES * CONTEXT)
    return Service(deployment).costs.time_s(batch)


def _hbm_bound_s(system, matrices, head, layers, dtype, tp):
    """Hand count: the matrices in the stored dtype, the LM head in bf16 (the
    embedding lookup reads a few rows), the bf16 KV of the batch (8 KV heads of 128),
    per chip, over the published HBM bandwidth."""
    weights = (matrices * STORED_BYTES[dtype] + head * 2.0) / tp
    kv = SEQUENCES * CONTEXT * layers * 2 * (8 // tp) * 128 * 2.0
    return (weights + kv) / load_system(system).chip.hbm.bandwidth_Bps


def _mxu_push_bound_s(system, matrices, head, tp, mxu_dtype):
    """The MXU's own bound on 8 streamed rows (the batch pads to 8 sublanes): each
    weight takes 2 x 8 FLOPs at the shipped rate ``peak x mxu (0.8235) x 8 / (8 +
    S)`` (S the MXU side; the documented shape term of tpusim.hardware.efficiency)."""
    chip = load_system(system).chip
    side = chip.tensorcores.mxu_size
    rate = chip.peak_flops[mxu_dtype] * 0.8235 * 8 / (8 + side)
    return 2 * 8 * (matrices + head) / tp / rate


# (system, model, tp, MXU dtype of an fp8 checkpoint): Llama 3.1 8B where a chip's
# HBM holds it (v5e: 16 GiB holds bf16 on two chips), the Qwen3-32B shape otherwise.
CHIPS = [
    ("v5e-pod", "llama", 2, "bf16"),
    ("v6e-pod", "llama", 1, "fp8"),
    ("ironwood-256", "qwen", 1, "fp8"),
    ("tpu8i-1024", "qwen", 1, "fp8"),
]


def _model(name, qwen):
    if name == "llama":
        return "llama-3.1-8b", LLAMA_8B_MATRICES, LLAMA_8B_HEAD, 32
    return qwen, QWEN_32B_MATRICES, QWEN_32B_HEAD, 64


@pytest.mark.parametrize(("system", "model", "tp", "mxu_dtype"), CHIPS)
def test_fp8_decode_is_faster_than_bf16_and_reads_its_weights_once(
    system, model, tp, mxu_dtype, qwen
):
    """A memory-bound decode step in fp8 is faster than in bf16 on every chip, never
    faster than its hand-counted bytes allow, and within 20% of the larger of that
    bound and the MXU's on 8 rows (v5e multiplies fp8 weights in bf16, v6e in fp8 at
    its bf16 rate)."""
    name, matrices, head, layers = _model(model, qwen)
    fp8_s = _step_s(system, name, "fp8", tp)
    bf16_s = _step_s(system, name, "bf16", tp)
    assert fp8_s < 0.8 * bf16_s
    hbm_s = _hbm_bound_s(system, matrices, head, layers, "fp8", tp)
    bound_s = max(hbm_s, _mxu_push_bound_s(system, matrices, head, tp, mxu_dtype))
    assert hbm_s < fp8_s < 1.2 * bound_s


@pytest.mark.parametrize("system", ["ironwood-256", "tpu8i-1024"])
def test_fp8_decode_on_a_native_fp8_chip_is_its_weight_bytes_over_hbm(system, qwen):
    """Ironwood and TPU 8i multiply fp8 natively: the step is the hand-counted bytes
    (1 byte a matrix weight) over HBM, within 20% (op overheads, the bf16 LM head)."""
    hbm_s = _hbm_bound_s(system, QWEN_32B_MATRICES, QWEN_32B_HEAD, 64, "fp8", 1)
    assert hbm_s < _step_s(system, qwen, "fp8", 1) < 1.2 * hbm_s


def test_bf16_decode_on_ironwood_is_its_weight_bytes_over_hbm(qwen):
    """The same step in bf16 (2 bytes a weight) on Ironwood, within 10%."""
    hbm_s = _hbm_bound_s("ironwood-256", QWEN_32B_MATRICES, QWEN_32B_HEAD, 64, "bf16", 1)
    assert hbm_s < _step_s("ironwood-256", qwen, "bf16", 1) < 1.1 * hbm_s


def test_int4_decode_on_v6e_reads_half_a_byte_a_weight():
    """int4 weights (0.5 bytes) on v6e's int8 MXU path: faster than fp8, within 20% of
    the hand-counted bytes over HBM."""
    hbm_s = _hbm_bound_s("v6e-pod", LLAMA_8B_MATRICES, LLAMA_8B_HEAD, 32, "int4", 1)
    int4_s = _step_s("v6e-pod", "llama-3.1-8b", "int4", 1)
    assert int4_s < _step_s("v6e-pod", "llama-3.1-8b", "fp8", 1)
    assert hbm_s < int4_s < 1.2 * hbm_s


@pytest.mark.parametrize(
    ("chip", "weights", "native"),
    [
        ("v5e", "int8", "int8"),  # 393 TOP/s int8
        ("v5e", "fp8", None),  # no fp8 peak: upcast to bf16
        ("v5e", "int4", "int8"),  # integer weights: int8 activations (w4a8)
        ("v6e", "fp8", "fp8"),  # fp8 918 TFLOP/s (bf16's rate)
        ("v6e", "int8", "int8"),  # 1836 TOP/s
        ("ironwood", "fp8", "fp8"),  # 4614 TFLOP/s
        ("ironwood", "int8", None),  # no int8 peak: upcast to bf16
        ("ironwood", "int4", "fp8"),  # 4-bit weights take fp8 without int8
        ("tpu8i", "fp8", "fp8"),  # 8808 TFLOP/s
        ("tpu8i", "fp4", "fp8"),  # fp4 weights, fp8 activations
        ("tpu8i", "int4", "fp8"),
    ],
)
def test_native_path_follows_the_published_peaks(chip, weights, native):
    """tpu-inference's gmm_v2 rule on the chips' published peaks."""
    system = {"v5e": "v5e-pod", "v6e": "v6e-pod", "ironwood": "ironwood-256"}
    spec = load_system(system.get(chip, "tpu8i-1024")).chip
    assert native_activation_dtype(spec, weights) == native


def test_training_quantizes_both_operands_serving_only_the_activation():
    """MaxText's on-the-fly fp8 (training) spends quantize_ops_per_element on every
    element of both operands; a served fp8 matmul on Ironwood only on the activation's
    m x k, and reads the weights at 1 byte and the bf16 activations at 2."""
    costs = ChipCostModel(load_system("ironwood-256").chip)
    m, n, k = 64, 8192, 4096
    q, vector = costs.terms.quantize_ops_per_element, costs.terms.vector_flops
    training = costs.matmul(m, n, k, "fp8")
    served = costs.matmul(m, n, k, "fp8", weights_stored=True)
    assert training.compute_s - served.compute_s == pytest.approx(k * n * q / vector, rel=1e-9)
    assert training.bytes == m * k + k * n + m * n
    assert served.bytes == 2 * m * k + k * n + 2 * m * n


def test_weight_only_upcast_runs_at_the_bf16_rate():
    """fp8 weights on v5e (no fp8 MXU): the matmul is bf16's with the weights' bytes
    halved (the upcast, one vector operation a weight, hides under the MXU here)."""
    costs = ChipCostModel(load_system("v5e-pod").chip)
    m, n, k = 512, 4096, 4096
    bf16 = costs.matmul(m, n, k, "bf16")
    fp8 = costs.matmul(m, n, k, "fp8", weights_stored=True)
    assert fp8.compute_s == pytest.approx(bf16.compute_s, rel=1e-12)
    assert bf16.bytes - fp8.bytes == k * n


def test_kv_dtype_defaults_to_the_activations_and_sets_the_cache():
    """vLLM's --kv-cache-dtype auto: bf16 for a quantized checkpoint; an fp8 cache
    holds twice the tokens per byte (Llama 3.1 8B: 32 layers x 2 x 8 x 128 per token)."""
    assert default_kv_dtype("fp8") == "bf16"
    assert default_kv_dtype("int4") == "bf16"
    assert default_kv_dtype("fp32") == "fp32"
    base = {"system": "ironwood-256", "model": "llama-3.1-8b", "dtype": "fp8", "tp": 1}
    auto = Service(Deployment(**base)).capacity
    fp8 = Service(Deployment(**base, kv_dtype="fp8")).capacity
    assert auto.bytes_per_token_per_chip == 32 * 2 * 8 * 128 * 2
    assert fp8.bytes_per_token_per_chip == 32 * 2 * 8 * 128 * 1
    assert fp8.tokens == pytest.approx(2 * auto.tokens, abs=2 * 16)


def test_kv_dtype_sets_the_attention_reads():
    """An fp8 cache halves the attention's KV read and the new tokens' write: the step
    shortens by the hand count of the bytes saved over HBM (both are memory-bound)."""
    system, kv_tokens = "ironwood-256", 64 * 4096
    times = {}
    for kv in ("bf16", "fp8"):
        deployment = Deployment(system, "llama-3.1-8b", tp=1, dtype="fp8", kv_dtype=kv,
                                overheads=False)  # fmt: skip
        batch = ReplicaBatch(decode=64, kv_tokens=kv_tokens)
        times[kv] = Service(deployment).costs.time_s(batch)
    saved = (kv_tokens + 64) * 32 * 2 * 8 * 128 * 1.0  # read the cache, write 64 tokens
    expected = saved / load_system(system).chip.hbm.bandwidth_Bps
    assert times["bf16"] - times["fp8"] == pytest.approx(expected, rel=1e-6)


def test_kv_dtype_reaches_the_deployment_and_the_row():
    options = ServeOptions(model="llama-3.1-8b", dtype="fp8", kv_dtype="fp8", tp=1)
    service = Service(options.deployment("ironwood-256"))
    assert service.describe()["kv_dtype"] == "fp8"
    assert service.describe()["dtype"] == "fp8"


def test_replica_shape_splits_weights_activations_and_kv():
    fields = {"layers": 2, "d_model": 256, "heads": 4, "kv_heads": 2, "head_dim": 64,
              "d_ff": 512, "vocab": 1000}  # fmt: skip
    shape = replica_shape(fields, tp=1, ep=1, replicas=1, dtype="int4", kv_cache="hbm")
    assert (shape.weight_bytes_per_element, shape.activation_bytes) == (0.5, 2.0)
    assert (shape.kv_dtype, shape.kv_bytes_per_element) == ("bf16", 2.0)
