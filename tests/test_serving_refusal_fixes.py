"""No refusal of ``tpusim serve`` suggests a change that silently alters the workload
(issue 41): every refusal that names a fix ("drop X", "give Y", "use Z", "needs W") is
run, then run again with the fix applied, and the run's JSON shows what the message
said would run. A last test finds every such message in the sources and checks each
one is among the cases."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import assert_one_error_line, run
from tpusim.serving.options import ServeOptions
from tpusim.serving.run import stream_of

BASE = ("--model", "llama-3.1-8b", "--tp", "2", "--prompt-tokens", "256",
        "--output-tokens", "16", "--json")  # fmt: skip
ROOT = Path(__file__).resolve().parent.parent
HF = ROOT / "tests" / "fixtures" / "hf"


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> str:
    """Three requests at 0, 0.5 and 1 s (a measured rate of (3 - 1) / 1 s = 2/s)."""
    path = tmp_path_factory.mktemp("trace") / "t.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n0,256,16\n0.5,256,16\n1.0,256,16\n")
    return str(path)


def _plot(tmp: Path) -> str:
    return str(tmp / "curve")


#: (id, system, refused flags, a fragment of the refusal, the fix's flags, the check of
#: the fixed run's JSON). ``{trace}`` and ``{plot}`` are filled in by the test.
CASES = [
    ("trace-rate", "tpu8i-pod", ("--trace", "{trace}", "--rate", "5"), "drop --rate",
     ("--trace", "{trace}"),
     lambda r: r["requests"] == 3 and r["measured_rate_per_s"] == pytest.approx(2.0)),
    ("trace-requests", "tpu8i-pod", ("--trace", "{trace}", "--requests", "20"),
     "drop --requests", ("--trace", "{trace}"), lambda r: r["requests"] == 3),
    ("split-replicas", "tpu8i-pod", ("--disaggregate", "1:1", "--replicas", "2"),
     "drop --replicas", ("--disaggregate", "1:1", "--requests", "10"),
     lambda r: (r["prefill_replicas"], r["decode_replicas"]) == (1, 1)),
    ("burstiness-arrival", "tpu8i-pod", ("--rate", "5", "--burstiness", "2"),
     "give --arrival gamma", ("--rate", "5", "--burstiness", "2", "--arrival", "gamma",
                              "--requests", "20"),
     lambda r: r["rate_per_s"] == 5),
    ("gamma-rate", "tpu8i-pod", ("--concurrency", "4", "--arrival", "gamma"), "give --rate",
     ("--concurrency", "4", "--arrival", "gamma", "--rate", "5", "--requests", "20"),
     lambda r: r["rate_per_s"] == 5 and r["concurrency"] == 4),
    ("sram-tier", "v6e-pod", ("--kv-cache", "sram"), "use hbm",
     ("--kv-cache", "hbm", "--requests", "10"), lambda r: r["kv_cache"] == "hbm"),
    ("capacity-slos", "tpu8i-pod", ("--find-capacity",),
     "--find-capacity needs --slo-ttft and --slo-tpot",
     ("--find-capacity", "--slo-ttft", "2 s", "--slo-tpot", "1 s", "--requests", "125"),
     lambda r: r["trials"] > 0 and "capacity_rate_per_s" in r),
    ("prefix-tokens", "tpu8i-pod", ("--prefix-hit-rate", "0.5"), "needs --prefix-tokens",
     ("--prefix-hit-rate", "0.5", "--prefix-tokens", "64", "--requests", "20"),
     lambda r: r["prefix_tokens"] == 64 and r["prefix_hits"] > 0),
    ("draft-tokens", "tpu8i-pod", ("--acceptance-rate", "0.5"), "needs --draft-tokens",
     ("--acceptance-rate", "0.5", "--draft-tokens", "2", "--requests", "10"),
     lambda r: (r["draft_tokens"], r["acceptance"]) == (2, 0.5)),
    ("rates-split", "tpu8i-pod", ("--rates", "1,2", "--disaggregate", "1:1"),
     "drop --disaggregate", ("--rates", "1,2", "--requests", "10"),
     lambda r: [p["rate_per_s"] for p in r["curve"]] == [1, 2]),
    ("plot-rates", "tpu8i-pod", ("--plot", "{plot}"), "give --rates",
     ("--plot", "{plot}", "--rates", "1", "--requests", "10"),
     lambda r: Path(r["plot"]).is_file() and len(r["curve"]) == 1),
    ("rates-rate", "tpu8i-pod", ("--rates", "1,2", "--rate", "3"), "drop --rate",
     ("--rates", "1,2", "--requests", "10"),
     lambda r: [p["rate_per_s"] for p in r["curve"]] == [1, 2]),
    ("systems-rates", "tpu8i-pod,v6e-pod", (), "several systems need --rates",
     ("--rates", "1", "--requests", "10"),
     lambda r: [s["system"] for s in r["systems"]] == ["tpu8i-pod", "v6e-pod"]),
    ("more-chips", "v5e-pod", ("--tp", "1"), "give the replica more chips",
     ("--tp", "2", "--requests", "5"), lambda r: r["tp"] == 2 and r["chips"] == 2),
    ("capacity-requests", "tpu8i-pod",
     ("--find-capacity", "--slo-ttft", "2 s", "--slo-tpot", "1 s", "--requests", "20"),
     "steady state and needs at least",
     ("--find-capacity", "--slo-ttft", "2 s", "--slo-tpot", "1 s", "--requests", "125"),
     lambda r: r["trials"] > 0 and r["capacity_limited_by"] in ("slo", "utilisation")),
    ("bench-dataset", "tpu8i-pod",
     ("--bench", "vllm bench serve --dataset-name sharegpt --random-input-len 300"),
     "need --dataset-name random",
     ("--bench", "vllm bench serve --dataset-name random --random-input-len 300 "
      "--num-prompts 5"),
     lambda r: r["total_tokens_per_s"] * r["duration_s"] == pytest.approx(5 * (300 + 128))),
    ("quantized-config", "tpu8i-pod", ("--model", str(HF / "bad-quantized" / "config.json")),
     "drop the key and give --dtype",
     ("--model", str(HF / "tiny-dense" / "config.json"), "--dtype", "fp8", "--requests", "5"),
     lambda r: r["dtype"] == "fp8" and r["model"] == "tiny-dense"),
    ("vllm-model", "tpu8i-pod", ("--vllm", "vllm serve acme/Unknown-8B -tp 4"), "give --model",
     ("--vllm", "vllm serve acme/Unknown-8B -tp 4", "--model", "llama-3.1-8b", "--requests", "5"),
     lambda r: r["model"] == "llama-3.1-8b" and r["tp"] == 2),  # -tp 4: 4 devices, 2 8i chips
    ("jetstream-client", "v5e-pod",
     ("--bench", "python JetStream/benchmarks/benchmark_serving.py --num-prompts 5"),
     "give the stream as options",
     ("--rate", "inf", "--requests", "5", "--prompt-tokens", "300", "--output-tokens", "20"),
     lambda r: r["requests"] == 5 and r["output_tokens"] == 100),
    ("legacy-bench", "tpu8i-pod",
     ("--bench", "python benchmarks/benchmark_serving.py --num-prompts 5"),
     "give --dataset-name, and with random --random-input-len",
     ("--bench", "python benchmarks/benchmark_serving.py --num-prompts 5 --dataset-name random "
      "--random-input-len 300 --random-output-len 20 --random-range-ratio 1"),
     lambda r: r["total_tokens_per_s"] * r["duration_s"] == pytest.approx(5 * (300 + 20))),
    ("expert-parallel-kernel", "tpu8i-pod",
     ("--model", "mixtral-8x7b", "--server", "vllm-tpu-torchxla", "--expert-parallel"),
     "drop --expert-parallel",
     ("--model", "mixtral-8x7b", "--server", "vllm-tpu-torchxla", "--requests", "5"),
     lambda r: r["model"] == "mixtral-8x7b" and r["server"] == "vllm-tpu-torchxla"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("system", "refused", "says", "fixed", "check"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_applying_the_fix_runs_what_the_refusal_says(
    capsys, tmp_path, trace, system, refused, says, fixed, check
):
    fill = {"{trace}": trace, "{plot}": _plot(tmp_path)}
    refused = [fill.get(a, a) for a in refused]
    fixed = [fill.get(a, a) for a in fixed]
    # a line names the model; the bench line gives the token counts
    base = BASE[2:] if "--vllm" in refused else BASE
    if "--bench" in refused:
        base = (*BASE[:4], "--json")
    line = assert_one_error_line(*run(capsys, "serve", system, *base, *refused))
    assert says in line
    code, out, err = run(capsys, "serve", system, *base, *fixed)
    assert code == 0, err
    assert check(json.loads(out))


def test_gamma_burstiness_fix_draws_gamma_arrivals():
    """``give --arrival gamma``: the stream's gaps then have the coefficient of variation
    the burstiness names (2: a gamma of shape 1/4; 4,000 gaps)."""
    options = ServeOptions(
        model="llama-3.1-8b", rate=5, arrival="gamma", burstiness=2, requests=4001
    )
    gaps = np.diff([r.arrival_at for r in stream_of(options)(5.0)])
    assert gaps.std() / gaps.mean() == pytest.approx(2.0, rel=0.1)
    assert 1 / gaps.mean() == pytest.approx(5.0, rel=0.1)


FIX_WORDS = re.compile(r"; drop |; give |; use |\(give |needs? |give --")
SOURCES = ("tpusim/serving/options.py", "tpusim/cli/serve.py", "tpusim/serving/memory.py",
           "tpusim/serving/vllm_args.py", "tpusim/serving/vllm_serve_line.py",
           "tpusim/serving/vllm_bench_line.py", "tpusim/serving/vllm_words.py",
           "tpusim/serving/chip_options.py", "tpusim/config/hf_config.py")  # fmt: skip


def _fix_messages() -> list[str]:
    """Every string literal in the sources (adjacent literals joined) naming a fix."""
    found = []
    for source in SOURCES:
        text = (ROOT / source).read_text()
        for statement in re.findall(r"(?:f?\"[^\"\n]*\"\s*)+", text):
            literal = "".join(re.findall(r"\"([^\"\n]*)\"", statement))
            if FIX_WORDS.search(literal) and not literal.startswith(("The ", "Whether")):
                found.append(literal)
    return found


def test_every_refusal_naming_a_fix_is_a_case():
    """Each message (by its option names as the sources write them) contains the
    fragment of one case, its flags written as field names."""
    fragments = [case[3].replace("--", "").replace("-", "_") for case in CASES]
    messages = _fix_messages()
    assert len(messages) >= 10
    for message in messages:
        plain = message.replace("--", "").replace("-", "_")
        assert any(f in plain for f in fragments), message
