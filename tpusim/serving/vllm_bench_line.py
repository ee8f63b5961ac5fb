"""A benchmark client's line (``vllm bench serve ...``, or a ``benchmark_serving.py``
script's) read into the stream fields of :class:`~tpusim.serving.options.ServeSpec`:
:data:`BENCH_FLAGS` says which field each modelled flag sets, :class:`BenchClient` how
each client draws the random dataset's lengths."""

from __future__ import annotations

import math
from dataclasses import dataclass

from tpusim.serving.requests import parse_token_count
from tpusim.serving.vllm_serve_line import model_field
from tpusim.serving.vllm_words import (
    Reader,
    field_reader,
    read_command,
    real,
    split_line,
    whole,
)

#: vLLM's benchmark defaults (``vllm bench serve --help``): the random dataset's
#: lengths and range ratio (RandomDataset.DEFAULT_INPUT_LEN, DEFAULT_OUTPUT_LEN,
#: DEFAULT_RANGE_RATIO).
BENCH_DEFAULT_INPUT_LEN, BENCH_DEFAULT_OUTPUT_LEN, BENCH_DEFAULT_RANGE_RATIO = 1024, 128, 0.0


def _rate(text: str | None) -> dict[str, object]:
    value = real("--request-rate", text)
    if value == 0:
        raise ValueError(f"--request-rate: expected a rate > 0 or inf, got {text!r}")
    return {"rate": value}


def _burstiness(text: str | None) -> dict[str, object]:
    """vLLM's burstiness is the gamma shape ``k`` (1: Poisson); tpusim's the coefficient
    of variation ``1 / sqrt(k)`` (vllm/benchmarks/serve.py ``get_request``)."""
    shape = real("--burstiness", text)
    if shape == 0 or math.isinf(shape):
        raise ValueError(f"--burstiness: expected a finite factor > 0, got {text!r}")
    return {} if shape == 1 else {"arrival": "gamma", "burstiness": 1 / math.sqrt(shape)}


def _dataset(text: str | None) -> dict[str, object]:
    if text not in ("random", "sharegpt"):
        raise ValueError(f"--dataset-name: tpusim models random and sharegpt, got {text!r}")
    return {"dataset": text}


def _prefix_len(text: str | None) -> dict[str, object]:
    if text is None or not text.strip().isdigit():
        raise ValueError(f"--random-prefix-len: expected a whole number >= 0, got {text!r}")
    return {"prefix_len": int(text)}


#: ``vllm bench serve`` flags tpusim models (``dataset`` and ``*_len`` are read
#: together by :func:`_lengths`).
BENCH_FLAGS: dict[str, Reader] = {
    "--num-prompts": field_reader("requests", "--num-prompts"),
    "--max-concurrency": field_reader("concurrency", "--max-concurrency"),
    "--request-rate": _rate,
    "--burstiness": _burstiness,
    "--seed": lambda text: {"seed": int(real("--seed", text))},
    "--dataset-name": _dataset,
    "--random-input-len": lambda t: {"input_len": whole("--random-input-len", t)},
    "--input-len": lambda t: {"input_len": whole("--input-len", t)},
    "--random-output-len": lambda t: {"output_len": whole("--random-output-len", t)},
    "--output-len": lambda t: {"output_len": whole("--output-len", t)},
    "--sharegpt-output-len": lambda t: {"output_len": whole("--sharegpt-output-len", t)},
    "--random-range-ratio": lambda t: {"range_ratio": real("--random-range-ratio", t)},
    "--random-prefix-len": _prefix_len,
    "--prefix-len": _prefix_len,
    # tpusim's requests generate exactly their output tokens, as --ignore-eos makes
    # vLLM's do.
    "--ignore-eos": lambda _: {},
}


@dataclass(frozen=True)
class BenchClient:
    """A benchmark client tpusim reads: its ``name`` (``random_client`` of a figure),
    its defaults (dataset, input and output lengths, ``--random-range-ratio``) and how
    it draws the random dataset's lengths (:meth:`lengths`)."""

    name: str
    dataset: str
    input_len: int
    output_len: int
    range_ratio: float

    def lengths(self, length: int, ratio: float) -> object:
        """The token count of ``--random-*-len length`` at ``ratio``: vLLM's random
        dataset, or InferenceX's ``sample_uniform`` (``randint(int(L r), L + 1)``,
        SemiAnalysisAI/InferenceX ``utils/bench_serving/benchmark_serving.py`` at
        89ce6098, lines 112-116), the rule vLLM's own benchmark had before mid-2025."""
        if self is VLLM_BENCH:
            return {"random": {"length": length, "range_ratio": ratio}}
        if not 0.0 <= ratio <= 1.0:
            raise ValueError(f"--random-range-ratio: expected 0 to 1, got {ratio:g}")
        low = max(1, int(length * ratio))
        return length if low == length else {"uniform": [low, length]}


#: ``vllm bench serve`` (its defaults: ``vllm bench serve --help``,
#: RandomDataset.DEFAULT_INPUT_LEN, DEFAULT_OUTPUT_LEN, DEFAULT_RANGE_RATIO).
VLLM_BENCH = BenchClient(
    "vllm", "random", BENCH_DEFAULT_INPUT_LEN, BENCH_DEFAULT_OUTPUT_LEN, BENCH_DEFAULT_RANGE_RATIO
)
#: InferenceX's ``benchmark_serving.py`` (the tpu-recipes Ironwood recipes' client;
#: defaults at 89ce6098: ``--dataset-name sharegpt``, ``--random-input-len 1024``,
#: ``--random-output-len 128``, ``--random-range-ratio 1.0``, lines 790-1012).
INFERENCEX_BENCH = BenchClient("inferencex", "sharegpt", 1024, 128, 1.0)
#: vLLM's ``benchmarks/benchmark_serving.py`` before ``vllm bench serve`` (the older
#: recipes' client): InferenceX's is a copy of it and draws lengths by the same rule
#: (:func:`tpusim.serving.requests.random_dataset`: "before, the range was [L R, L]");
#: its defaults are not read here (0: the line must give the dataset, and with the
#: random dataset the lengths and the range ratio).
LEGACY_BENCH = BenchClient("vllm-benchmark_serving", "", 0, 0, math.nan)


def _bench_words(line: str) -> tuple[BenchClient, list[str], list[str]]:
    """The client of a bench line, its environment and its words after the command:
    ``vllm bench serve``, or ``python3 PATH/benchmark_serving.py`` (InferenceX's when
    PATH names it, else vLLM's older script; JetStream's client is not vLLM's)."""
    env, words = split_line(line)
    if tuple(words[:3]) == ("vllm", "bench", "serve"):
        return VLLM_BENCH, env, words[3:]
    if len(words) > 1 and words[0] in ("python", "python3"):
        script = words[1]
        if script.endswith("benchmark_serving.py") and "jetstream" in script.lower():
            raise ValueError(
                f"{script}: JetStream's benchmark client is not read; give the stream as "
                "options (rate, prompt_tokens, output_tokens)"
            )
        if script.endswith("benchmark_serving.py"):
            inferencex = "inferencex" in script.lower()
            return INFERENCEX_BENCH if inferencex else LEGACY_BENCH, env, words[2:]
    raise ValueError(
        "expected a line starting 'vllm bench serve' or 'python3 .../benchmark_serving.py', "
        f"got {line!r}"
    )


def bench_line(line: str, model_given: bool = False) -> tuple[dict[str, object], list[str]]:
    """The fields a ``vllm bench serve ...`` line (or InferenceX's client's) sets and
    its unmodelled flags and environment."""
    client, env, words = _bench_words(line)
    positional, named, values, unmodelled = read_command(words, BENCH_FLAGS)
    values.setdefault("rate", math.inf)  # both clients' --request-rate default
    if values["rate"] == math.inf:  # vLLM: burstiness only at a finite rate
        values = {k: v for k, v in values.items() if k not in ("arrival", "burstiness")}
    lengths = _lengths(values, client)
    return lengths | model_field(named, model_given), env + unmodelled + positional


def _lengths(read: dict[str, object], client: BenchClient = VLLM_BENCH) -> dict[str, object]:
    """The token counts of the bench line's dataset (the client's default dataset when
    none is named)."""
    values = {k: v for k, v in read.items() if k not in _LENGTH_KEYS}
    dataset = read.get("dataset", client.dataset)
    ratio = read.get("range_ratio", client.range_ratio)
    assert isinstance(ratio, float)
    given = "input_len" in read and "output_len" in read and not math.isnan(ratio)
    if client is LEGACY_BENCH and (not dataset or (dataset == "random" and not given)):
        raise ValueError(
            f"{client.name}: give --dataset-name, and with random --random-input-len, "
            "--random-output-len and --random-range-ratio (the script's defaults are not read)"
        )
    if dataset == "sharegpt":
        if "input_len" in read or "range_ratio" in read or "prefix_len" in read:
            raise ValueError("--random-* lengths need --dataset-name random")
        output = read.get("output_len")
        values["prompt_tokens"] = {"sharegpt": "prompt"}
        values["output_tokens"] = output if output else {"sharegpt": "output"}
        return values
    for key, field, default in (
        ("input_len", "prompt_tokens", client.input_len),
        ("output_len", "output_tokens", client.output_len),
    ):
        length = read.get(key, default)
        assert isinstance(length, int)
        values[field] = client.lengths(length, ratio)
    prefix = read.get("prefix_len", 0)
    if isinstance(prefix, int) and prefix > 0:
        values |= _prefixed(values["prompt_tokens"], prefix)
    return values


def _prefixed(prompt: object, prefix: int) -> dict[str, object]:
    """vLLM's ``--random-prefix-len P``: one random prefix of P tokens before every
    sampled prompt (RandomDataset.sample), so prompts are P longer and all share it
    (tpusim's prefix cache holds it; every request hits it)."""
    count = parse_token_count(prompt)  # type: ignore[arg-type]
    low, high = int(count.a) + prefix, int(count.b if count.kind == "uniform" else count.a) + prefix
    shifted: object = low if low == high else {"uniform": [low, high]}
    return {"prompt_tokens": shifted, "prefix_tokens": prefix, "prefix_hit_rate": 1.0}


_LENGTH_KEYS = ("dataset", "input_len", "output_len", "range_ratio", "prefix_len")
