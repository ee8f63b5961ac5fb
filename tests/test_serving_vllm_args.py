"""A recipe's own words (issue 41): ``tpusim serve --vllm "vllm serve ..." --bench "vllm
bench serve ..."`` and the workload's ``vllm:``/``bench:`` keys read into the serving
options as the flags table of docs/serving.md says; every flag not modelled named in one
warning; contradictions and bad values refused naming the flag."""

from __future__ import annotations

import json
import math
import warnings

import pytest

from tests.helpers import assert_one_error_line, run
from tpusim.serving.options import ServeSpec
from tpusim.workloads.serving import ServingWorkload

VLLM = (
    "vllm serve meta-llama/Llama-3.3-70B-Instruct --seed 42 --disable-log-requests "
    "--gpu-memory-utilization 0.98 --max-num-batched-tokens 512 --max-num-seqs 256 "
    "--tensor-parallel-size 8 --max-model-len 2048 --async-scheduling "
    "--no-enable-prefix-caching"
)
BENCH = (
    "vllm bench serve --backend vllm --model meta-llama/Llama-3.3-70B-Instruct "
    "--dataset-name random --random-input-len 1000 --random-output-len 1000 "
    "--random-range-ratio 0.1 --num-prompts 3000 --max-concurrency 64 "
    "--request-rate inf --ignore-eos --percentile-metrics ttft,tpot --seed 100"
)


def _spec(**given) -> tuple[ServeSpec, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spec = ServeSpec.model_validate(given)
    return spec, [str(w.message) for w in caught]


def test_the_recipe_lines_are_the_options_the_table_says():
    """Each modelled flag sets its field (docs/serving.md's table, by hand)."""
    spec, said = _spec(vllm=VLLM, bench=BENCH)
    assert spec.model == "llama-3.1-70b"  # Llama 3.3 70B: Llama 3.1 70B's shape
    # vLLM's --tensor-parallel-size counts JAX devices: chips once the system is known
    assert (spec.tp, spec.tp_devices, spec.max_tokens, spec.max_sequences) == (None, 8, 512, 256)
    assert (spec.async_scheduling, spec.hbm_utilization, spec.max_model_len) == (True, 0.98, 2048)
    assert spec.expert_parallel is False  # no --enable-expert-parallel
    assert (spec.requests, spec.concurrency, spec.seed) == (3000, 64, 100)
    assert spec.rate == math.inf
    assert (spec.prompt().kind, spec.prompt().a, spec.prompt().b) == ("uniform", 900, 1100)
    assert (spec.output().a, spec.output().b) == (900, 1100)
    assert spec.vllm is None and spec.bench is None  # read into the fields
    assert said == [
        "not modelled, ignored: vllm: --seed --disable-log-requests; "
        "bench: --backend --percentile-metrics"
    ]


def test_vllm_bench_defaults_are_vllms():
    """No dataset flags: vLLM's random dataset of 1024 in, 128 out, ratio 0."""
    spec, _ = _spec(model="llama-3.1-8b", bench="vllm bench serve --max-concurrency 8")
    assert (spec.prompt().kind, spec.prompt().a) == ("fixed", 1024)
    assert spec.output().a == 128
    assert spec.offered_rate_per_s == math.inf


def test_vllm_burstiness_is_the_gamma_shape():
    """vLLM's --burstiness k is the gamma shape; tpusim's burstiness its CV 1/sqrt(k)."""
    bench = "vllm bench serve --request-rate 4 --burstiness 4"
    spec, _ = _spec(model="llama-3.1-8b", bench=bench)
    assert (spec.arrival, spec.burstiness, spec.rate) == ("gamma", 0.5, 4.0)


def test_vllm_burstiness_at_rate_inf_is_ignored_as_vllm_does():
    """vLLM's get_request: burstiness "only takes effect when request_rate is not inf"."""
    spec, _ = _spec(model="llama-3.1-8b", bench="vllm bench serve --burstiness 4")
    assert spec.arrival == "poisson" and spec.offered_rate_per_s == math.inf


@pytest.mark.parametrize(
    ("caching", "prefix_tokens", "hit_rate"),
    [("", 200, 1.0), ("--enable-prefix-caching", 200, 1.0), ("--no-enable-prefix-caching", 0, 0)],
)
def test_a_random_prefix_is_one_shared_prefix(caching, prefix_tokens, hit_rate):
    """--random-prefix-len 200: every prompt is 200 longer ([900, 1100] + 200) and
    starts with the same prefix, a cache hit unless the server turns caching off."""
    spec, _ = _spec(
        model="llama-3.1-8b",
        vllm=f"vllm serve meta-llama/Llama-3.1-8B {caching}",
        bench="vllm bench serve --random-input-len 1000 --random-range-ratio 0.1 "
        "--random-prefix-len 200",
    )
    assert (spec.prompt().a, spec.prompt().b) == (1100, 1300)
    assert (spec.prefix_tokens, spec.prefix_hit_rate) == (prefix_tokens, hit_rate)


def test_sharegpt_dataset_reads_as_sharegpt_lengths():
    spec, _ = _spec(model="llama-3.1-8b", bench="vllm bench serve --dataset-name sharegpt")
    assert spec.prompt().mean == pytest.approx(161.31)
    assert spec.output().mean == pytest.approx(337.99)


def test_the_yaml_keys_read_the_same_lines():
    spec, _ = _spec(vllm=VLLM, bench=BENCH)
    with pytest.warns(UserWarning, match="not modelled, ignored: vllm: --seed"):
        workload = ServingWorkload.model_validate(
            {"name": "recipe", "kind": "serving", "vllm": VLLM, "bench": BENCH}
        )
    for field in ("model", "tp", "max_tokens", "max_sequences", "requests", "concurrency"):
        assert getattr(workload, field) == getattr(spec, field)


def test_recipe_words_run_as_the_flags_they_stand_for(capsys):
    """The same run from the lines and from tpusim's own flags: vLLM's -tp 2 is two JAX
    devices, one TPU 8i chip (two TensorCores, no megacore)."""
    system = ("serve", "tpu8i-pod", "--json")
    lines = run(capsys, *system, "--vllm", "vllm serve meta-llama/Llama-3.1-8B-Instruct -tp 2",
                "--bench", "vllm bench serve --num-prompts 24 --max-concurrency 6 "
                "--random-input-len 300 --random-output-len 20")  # fmt: skip
    flags = run(capsys, *system, "--model", "llama-3.1-8b", "--tp", "1", "--requests", "24",
                "--concurrency", "6", "--prompt-tokens", "300",
                "--output-tokens", "20")  # fmt: skip
    assert lines[0] == flags[0] == 0
    assert json.loads(lines[1]) == json.loads(flags[1])


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (("--requests", "10"), "--bench sets --requests to 3000"),
        (("--prompt-tokens", "999"), "--bench sets --prompt-tokens"),
    ],
)
def test_a_value_contradicting_a_flag_is_refused(capsys, extra, says):
    argv = ("serve", "tpu8i-pod", "--vllm", VLLM, "--bench", BENCH, *extra)
    assert says in assert_one_error_line(*run(capsys, *argv))


@pytest.mark.parametrize(
    ("option", "line", "says"),
    [
        ("--vllm", "vllm serve meta-llama/Llama-3.1-8B --max-num-seqs lots", "--max-num-seqs"),
        ("--vllm", "vllm serve meta-llama/Llama-3.1-8B --dtype float16", "--dtype"),
        ("--bench", "vllm bench serve --request-rate fast", "--request-rate"),
        ("--bench", "vllm bench serve --random-range-ratio 1.5", "range_ratio"),
        ("--bench", "vllm bench serve --dataset-name sonnet", "--dataset-name"),
        ("--bench", "vllm bench serve --burstiness 0", "--burstiness"),
        ("--vllm", "vllm bench serve", "vllm serve"),
        ("--vllm", "vllm serve 'unclosed", "cannot split"),
    ],
)
def test_an_unreadable_line_is_one_line_naming_the_flag(capsys, option, line, says):
    argv = ("serve", "tpu8i-pod", "--model", "llama-3.1-8b", option, line)
    message = assert_one_error_line(*run(capsys, *argv))
    assert says in message


def test_an_unknown_model_runs_once_model_is_given(capsys):
    """The refusal's fix: --model with the line runs that preset."""
    line = "vllm serve acme/Unknown-8B -tp 2"
    argv = ("serve", "tpu8i-pod", "--vllm", line, "--requests", "5", "--json")
    assert "give --model" in assert_one_error_line(*run(capsys, *argv))
    code, out, err = run(capsys, *argv, "--model", "llama-3.1-8b")
    assert code == 0, err
    assert json.loads(out)["model"] == "llama-3.1-8b" and json.loads(out)["tp"] == 1  # 2 devices


def test_tensor_parallel_devices_contradicting_tp_is_refused(capsys):
    """-tp 8 is 8 JAX devices, 4 TPU 8i chips: --tp 2 beside it is refused, --tp 4 runs."""
    argv = ("serve", "tpu8i-pod", "--vllm", "vllm serve meta-llama/Llama-3.1-8B -tp 8",
            "--requests", "5", "--json")  # fmt: skip
    message = assert_one_error_line(*run(capsys, *argv, "--tp", "2"))
    assert "8 devices (vLLM's --tensor-parallel-size) are 4 chip(s) of tpu8i" in message
    code, out, err = run(capsys, *argv, "--tp", "4")
    assert code == 0, err
    assert json.loads(out)["tp"] == 4


def test_max_model_len_rejects_the_longer_requests_as_vllm_does():
    """vLLM refuses a request whose prompt and output exceed --max-model-len (and
    tpusim rejects one whose prompt + output + 1 exceed the context, the rule the
    model's context already had): prompts uniform on [100, 1000] with 500 output tokens
    under a limit of 1,000 reject exactly the prompts of 500 tokens or more."""
    from tpusim.serving.options import ServeOptions
    from tpusim.serving.run import serve, stream_of

    options = ServeOptions.model_validate(
        {"model": "llama-3.1-8b", "tp": 1, "requests": 200, "rate": 50,
         "prompt_tokens": {"uniform": [100, 1000]}, "output_tokens": 500,
         "vllm": "vllm serve meta-llama/Llama-3.1-8B --max-model-len 1000"}
    )  # fmt: skip
    prompts = [r.prompt_tokens for r in stream_of(options)(50.0)]
    row = serve(options, "tpu8i-pod")
    assert row["rejected"] == sum(p + 500 + 1 > 1000 for p in prompts) > 0
    assert row["completed"] == 200 - row["rejected"]


def test_a_stream_longer_than_max_model_len_is_one_line(capsys):
    argv = ("serve", "tpu8i-pod", "--model", "llama-3.1-8b", "--tp", "1", "--requests", "5",
            "--prompt-tokens", "1000", "--output-tokens", "600")  # fmt: skip
    message = assert_one_error_line(*run(capsys, *argv, "--max-model-len", "1500"))
    assert "1,600 tokens exceed max_model_len of 1,500" in message
    code, out, err = run(capsys, *argv, "--max-model-len", "1601", "--json")
    assert code == 0, err
    assert json.loads(out)["rejected"] == 0
