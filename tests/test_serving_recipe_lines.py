"""Every shipped serving figure's own command lines, read as ``tpusim serve --vllm ...
--bench ...`` reads them, give the fields the figure's file states by hand (issue 41:
"accept the recipe's own words"): the chips its tensor parallelism is (vLLM counts JAX
devices, two a Ironwood chip), the weights' and KV cache's dtypes, expert parallelism,
the scheduler's limits, the stream's rate, concurrency and token counts as its client
draws them. The oracle is the transcription in ``configs/measurements/serving/``,
written from each source's prose and tables, not from this reader."""

from __future__ import annotations

import math
import shlex

import pytest

from tpusim.config.loader import load_chip
from tpusim.serving.requests import parse_token_count
from tpusim.serving.vllm_args import (
    PRESETS,
    bench_line,
    serve_line,
)
from tpusim.validation.serving import lengths
from tpusim.validation.serving_figures import load_figures


def _vllm_figures():
    """The shipped figures whose server is vLLM started from a command line."""
    return [
        f
        for f in load_figures()
        if f.server_command and f.bench_command and "vllm" in f.server_command.split("--")[0]
    ]


def _bench_model(bench: str) -> str | None:
    words = shlex.split(bench)
    for i, word in enumerate(words):
        if word.startswith("--model="):
            return word.split("=", 1)[1]
        if word == "--model":
            return words[i + 1]
    return None


def test_the_vllm_figures_are_most_of_the_shipped_ones():
    assert len(_vllm_figures()) >= 25


@pytest.mark.parametrize("figure", _vllm_figures(), ids=lambda f: f.id)
def test_the_recipe_lines_read_as_the_figure_states(figure):
    # the guide starts its server as `vllm serve $MODEL` with MODEL a local copy of the
    # checkpoint its bench line names
    model = _bench_model(figure.bench_command)
    line = figure.server_command.replace("$MODEL", model or "$MODEL")
    served, _ = serve_line(line, model_given=True)
    bench, _ = bench_line(figure.bench_command, model_given=True)

    devices = load_chip(figure.chip).tensorcores.devices
    assert served["tp_devices"] == figure.tp * devices
    assert served.get("model", figure.model) == figure.model
    if served.get("model") is None:  # a name no preset has: the served name, a path
        assert model is None or model.rsplit("/", 1)[-1].lower() not in PRESETS
    assert served.get("dtype", "bf16") == figure.weight_dtype
    assert served.get("kv_dtype") == figure.kv_dtype
    assert served["expert_parallel"] is (figure.ep is not None)
    # the pod environment USE_BATCHED_RPA_KERNEL=1 is the batched-attention profile
    assert served.get("server", figure.server) == figure.server
    assert ("server" in served) is (figure.server == "vllm-tpu-inference-batched-rpa")
    for field, stated in (("max_tokens", figure.max_tokens), ("max_sequences",
                                                              figure.max_sequences)):  # fmt: skip
        if field in served:
            assert served[field] == stated
    if "async_scheduling" in served and figure.async_scheduling is not None:
        assert served["async_scheduling"] is figure.async_scheduling

    assert bench["rate"] == figure.rate
    assert bench.get("concurrency") == figure.concurrency
    # requests: not compared. The guide's 1K/1K rows print 2 x c successes where its
    # script sends 4 x c (the figures' note); the count simulated is the figure's choice.
    if not isinstance(bench["prompt_tokens"], dict) or "sharegpt" not in bench["prompt_tokens"]:
        for said, stated in (("prompt_tokens", figure.prompt_tokens),
                             ("output_tokens", figure.output_tokens)):  # fmt: skip
            drawn = parse_token_count(bench[said])
            expected = lengths(stated, figure.random_range_ratio, figure.random_client)
            # vllm-tpu-v6e.yaml states the client's mean counts, which leave out the one
            # special token the server adds back (999 of --random-input-len 1000)
            assert drawn.kind == expected.kind
            assert drawn.a == pytest.approx(expected.a, abs=1)
            assert drawn.b == pytest.approx(expected.b, abs=1)


def test_an_ironwood_recipe_is_its_chips_not_its_devices():
    """The tpu-recipes Ironwood server line: --tensor-parallel-size=8 on a 2x2x1 node
    pool (4 chips; the recipe divides its throughput by 4 chips)."""
    (figure,) = [f for f in load_figures() if f.id == "qwen3-coder-480b-ironwood4-1k1k-2026-04-08"]
    served, ignored = serve_line(figure.server_command)
    assert served["tp_devices"] == 8 and load_chip("ironwood").tensorcores.devices == 2
    assert (served["model"], served["dtype"], served["kv_dtype"]) == (
        "qwen3-coder-480b-a35b",
        "fp8",
        "fp8",
    )
    assert served["hbm_utilization"] == 0.8
    assert "--download-dir" in ignored and "--gpu-memory-utilization" not in ignored


def test_the_inferencex_client_draws_from_the_low_end_to_the_length():
    """InferenceX's sample_uniform: randint(int(L r), L + 1), lengths 819 to 1024 at
    L 1024, r 0.8 (not vLLM's [0.2 L, 1.8 L])."""
    bench, _ = bench_line(
        "python3 /ubench/inferencex/utils/bench_serving/benchmark_serving.py "
        "--dataset-name=random --random-input-len=1024 --random-output-len=8192 "
        "--random-range-ratio=0.8 --num-prompts=320 --max-concurrency=64"
    )
    assert bench["prompt_tokens"] == {"uniform": [819, 1024]}
    assert bench["output_tokens"] == {"uniform": [6553, 8192]}
    assert (bench["rate"], bench["concurrency"], bench["requests"]) == (math.inf, 64, 320)


def test_environment_before_the_command_is_named_not_dropped():
    served, ignored = serve_line(
        "USE_BATCHED_RPA_KERNEL=1 MODEL_IMPL_TYPE=vllm vllm serve "
        "meta-llama/Llama-3.1-8B --tensor_parallel_size=4"
    )
    assert served["tp_devices"] == 4  # vLLM reads a flag's underscores as dashes
    assert ignored[:1] == ["MODEL_IMPL_TYPE=vllm"]  # not modelled: named


@pytest.mark.parametrize(
    ("value", "server"), [("1", "vllm-tpu-inference-batched-rpa"), ("0", None)]
)
def test_the_batched_attention_kernel_chooses_its_profile(value, server):
    """USE_BATCHED_RPA_KERNEL=1 runs tpu-inference's batched RPA kernel: its own
    profile; 0 is the default kernel, the default profile (no server set)."""
    served, ignored = serve_line(f"USE_BATCHED_RPA_KERNEL={value} vllm serve x/Llama-3.1-8B")
    assert served.get("server") == server
    assert ignored == []
    with pytest.raises(ValueError, match="USE_BATCHED_RPA_KERNEL: tpusim models 1 or 0"):
        serve_line("USE_BATCHED_RPA_KERNEL=yes vllm serve x/Llama-3.1-8B")


def test_a_server_given_beside_a_line_choosing_another_is_refused_verbatim():
    """The refusal names both profiles as they are spelled, not rewritten as flags."""
    from tpusim.cli.serve import flagged

    text = "vllm sets server to 'vllm-tpu-inference-batched-rpa', which contradicts server 'x'"
    assert flagged(text, ("vllm", "server")) == (
        "--vllm sets --server to 'vllm-tpu-inference-batched-rpa', which contradicts --server 'x'"
    )


@pytest.mark.parametrize(
    ("line", "dtype"),
    [
        ("vllm serve Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8 --dtype bfloat16", "fp8"),
        ("vllm serve Qwen/Qwen3-Coder-480B-A35B-Instruct", "bf16"),
        ("vllm serve meta-llama/Llama-3.1-70B --quantization fp8", "fp8"),
        ("vllm serve meta-llama/Llama-3.1-70B --dtype float32", "fp32"),
        ("vllm serve deepseek-ai/DeepSeek-V3", "fp8"),
        ("vllm serve deepseek-ai/DeepSeek-R1-0528 --dtype bfloat16", "fp8"),
    ],
)
def test_the_weights_dtype_is_the_checkpoints_or_the_quantizations(line, dtype):
    """An -FP8 checkpoint is served as stored whatever --dtype (the activations');
    --quantization fp8 quantizes bf16 weights when loaded."""
    served, _ = serve_line(line)
    assert served.get("dtype", "bf16") == dtype


def test_a_quantization_tpusim_does_not_model_is_refused():
    served, _ = serve_line("vllm serve Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8 -q fp8")
    assert served["dtype"] == "fp8"
    with pytest.raises(ValueError, match="--quantization: tpusim models fp8, got 'awq'"):
        serve_line("vllm serve meta-llama/Llama-3.1-70B --quantization awq")
