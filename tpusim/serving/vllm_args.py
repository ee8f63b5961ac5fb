"""A recipe's own words as serving options: a ``vllm serve MODEL ...`` line and a
``vllm bench serve ...`` line (the ``vllm`` and ``bench`` options: ``tpusim serve
--vllm "..." --bench "..."``, or the ``serving`` workload's ``vllm:`` and ``bench:``
keys) read into the fields of :class:`~tpusim.serving.options.ServeSpec`.

A native input read at the edge (DESIGN.md): each line is split with :mod:`shlex`;
``--flag value``, ``--flag=value`` and switches are read; :data:`SERVE_FLAGS` and
:data:`BENCH_FLAGS` say which field each modelled flag sets. Every other flag is named
in one warning (never dropped silently); a value that does not parse is a ValueError
naming the flag; a value that contradicts an option given beside it (``--tp 4`` next to
``--tensor-parallel-size 8``) is a ValueError naming both. The model name (a Hugging
Face id) is mapped to a preset by :data:`PRESETS`; another name asks for ``model``.
"""

from __future__ import annotations

import itertools
import math
import re
import shlex
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from tpusim.config.types import Frozen
from tpusim.serving.requests import parse_token_count

#: A flag's reader: its value text (None for a switch) to the fields it sets.
Reader = Callable[[str | None], dict[str, object]]

#: Hugging Face model ids (lower case, organisation dropped) and the preset each is
#: served as: the same architecture (layers, widths, heads, vocabulary) by the model
#: cards; Llama 3.3 70B has Llama 3.1 70B's.
PRESETS = {
    "llama-3.1-8b": "llama-3.1-8b",
    "llama-3.1-8b-instruct": "llama-3.1-8b",
    "meta-llama-3.1-8b-instruct": "llama-3.1-8b",
    "llama-3.1-70b": "llama-3.1-70b",
    "llama-3.1-70b-instruct": "llama-3.1-70b",
    "meta-llama-3.1-70b-instruct": "llama-3.1-70b",
    "llama-3.3-70b-instruct": "llama-3.1-70b",
    "llama-3.1-405b": "llama-3.1-405b",
    "llama-3.1-405b-instruct": "llama-3.1-405b",
    "llama-2-70b-hf": "llama2-70b",
    "llama-2-70b-chat-hf": "llama2-70b",
    "mistral-7b-v0.1": "mistral-7b",
    "mistral-7b-instruct-v0.1": "mistral-7b",
    "mixtral-8x7b-v0.1": "mixtral-8x7b",
    "mixtral-8x7b-instruct-v0.1": "mixtral-8x7b",
    "mixtral-8x22b-v0.1": "mixtral-8x22b",
    "mixtral-8x22b-instruct-v0.1": "mixtral-8x22b",
    "qwen3-235b-a22b": "qwen3-235b-a22b",
    "qwen3-235b-a22b-instruct-2507": "qwen3-235b-a22b",
    "qwen3-235b-a22b-fp8": "qwen3-235b-a22b",
    "qwen3-235b-a22b-instruct-2507-fp8": "qwen3-235b-a22b",
    "qwen3-coder-480b-a35b-instruct": "qwen3-coder-480b-a35b",
    "qwen3-coder-480b-a35b-instruct-fp8": "qwen3-coder-480b-a35b",
    "deepseek-v3": "deepseek-v3",
    "llama-4-scout-17b-16e-instruct": "llama4-scout",
}
#: Checkpoints whose weights are stored quantized, and their dtype (the Qwen team's
#: ``-FP8`` releases: "fine-grained fp8 quantization with block size of 128", their
#: model cards; published). vLLM serves their weights as stored, whatever ``--dtype``
#: (the activations').
CHECKPOINT_DTYPES = {
    "qwen3-235b-a22b-fp8": "fp8",
    "qwen3-235b-a22b-instruct-2507-fp8": "fp8",
    "qwen3-coder-480b-a35b-instruct-fp8": "fp8",
}
#: vLLM's ``--dtype`` values and the dtype each is (``auto``: the checkpoint's, bf16
#: for every preset): the weights' dtype of an unquantized checkpoint.
DTYPES = {"auto": "bf16", "bfloat16": "bf16", "float32": "fp32"}
#: vLLM's ``--kv-cache-dtype`` values and the KV dtype each is (``auto``: the
#: activations', tpusim's default; every fp8 format is one byte a value).
KV_DTYPES = {"bfloat16": "bf16", "fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8"}
#: vLLM's ``--quantization`` methods tpusim models and the weights' dtype each stores
#: (``fp8``: weights quantized to fp8 when loaded, vLLM's online dynamic fp8).
QUANTIZATIONS = {"fp8": "fp8"}
#: The server's command heads read as ``vllm serve``: the CLI, and the OpenAI API
#: server module it runs (``python3 -m vllm.entrypoints.openai.api_server``, as the
#: tpu-recipes Ironwood recipes start it).
SERVE_HEADS = (
    ("vllm", "serve"),
    ("python3", "-m", "vllm.entrypoints.openai.api_server"),
    ("python", "-m", "vllm.entrypoints.openai.api_server"),
)
#: vLLM's benchmark defaults (``vllm bench serve --help``): the random dataset's
#: lengths and range ratio (RandomDataset.DEFAULT_INPUT_LEN, DEFAULT_OUTPUT_LEN,
#: DEFAULT_RANGE_RATIO).
BENCH_DEFAULT_INPUT_LEN, BENCH_DEFAULT_OUTPUT_LEN, BENCH_DEFAULT_RANGE_RATIO = 1024, 128, 0.0


def _whole(flag: str, text: str | None) -> int:
    if text is None or not text.strip().isdigit() or int(text) < 1:
        raise ValueError(f"{flag}: expected a whole number >= 1, got {text!r}")
    return int(text)


def _real(flag: str, text: str | None) -> float:
    try:
        value = float(text or "")
    except ValueError:
        raise ValueError(f"{flag}: expected a number, got {text!r}") from None
    if math.isnan(value) or value < 0:
        raise ValueError(f"{flag}: expected a number >= 0, got {text!r}")
    return value


def _field(field: str, flag: str) -> Reader:
    return lambda text: {field: _whole(flag, text)}


def _dtype(text: str | None) -> dict[str, object]:
    if text not in DTYPES:
        raise ValueError(f"--dtype: tpusim serves {', '.join(DTYPES)}, got {text!r}")
    return {DTYPE_FLAG: DTYPES[text]}


def _utilization(text: str | None) -> dict[str, object]:
    value = _real("--gpu-memory-utilization", text)
    if not 0 < value <= 1:
        raise ValueError(f"--gpu-memory-utilization: expected a fraction in (0, 1], got {text!r}")
    return {"hbm_utilization": value}


def _kv_dtype(text: str | None) -> dict[str, object]:
    if text == "auto":
        return {}
    if text not in KV_DTYPES:
        raise ValueError(
            f"--kv-cache-dtype: tpusim models auto, {', '.join(KV_DTYPES)}, got {text!r}"
        )
    return {"kv_dtype": KV_DTYPES[text]}


def _quantization(text: str | None) -> dict[str, object]:
    if text not in QUANTIZATIONS:
        raise ValueError(f"--quantization: tpusim models {', '.join(QUANTIZATIONS)}, got {text!r}")
    return {QUANTIZATION: QUANTIZATIONS[text]}


#: The serve line's ``--dtype`` and ``--quantization``, read with its model's checkpoint
#: into ``dtype`` (:func:`_weights_dtype`).
DTYPE_FLAG, QUANTIZATION = "dtype_flag", "quantization"


#: ``vllm serve`` flags tpusim models, each with the fields it sets.
SERVE_FLAGS: dict[str, Reader] = {
    # vLLM counts JAX devices: an Ironwood chip is two (ServeSpec.tp_devices)
    "--tensor-parallel-size": _field("tp_devices", "--tensor-parallel-size"),
    "-tp": _field("tp_devices", "-tp"),
    "--data-parallel-size": _field("replicas", "--data-parallel-size"),
    "-dp": _field("replicas", "-dp"),
    "--max-num-batched-tokens": _field("max_tokens", "--max-num-batched-tokens"),
    "--max-num-seqs": _field("max_sequences", "--max-num-seqs"),
    "--block-size": _field("block_size", "--block-size"),
    "--gpu-memory-utilization": _utilization,
    "--dtype": _dtype,
    "--kv-cache-dtype": _kv_dtype,
    "--quantization": _quantization,
    "-q": _quantization,
    "--enable-expert-parallel": lambda _: {"expert_parallel": True},
    "--no-enable-expert-parallel": lambda _: {"expert_parallel": False},
    "--async-scheduling": lambda _: {"async_scheduling": True},
    "--no-async-scheduling": lambda _: {"async_scheduling": False},
    # tpusim's prefix cache holds only the shared prefix a workload declares (the
    # bench line's --random-prefix-len); off, that prefix is never a hit.
    "--enable-prefix-caching": lambda _: {PREFIX_CACHING: True},
    "--no-enable-prefix-caching": lambda _: {PREFIX_CACHING: False},
}
#: The serve line's prefix caching (on by default in vLLM V1), read with the bench line.
PREFIX_CACHING = "prefix_caching"
#: Switches (flags that take no value) among the flags read.
SWITCHES = {
    "--async-scheduling",
    "--no-async-scheduling",
    "--enable-prefix-caching",
    "--no-enable-prefix-caching",
    "--ignore-eos",
    "--enable-expert-parallel",
    "--no-enable-expert-parallel",
    "--trust-remote-code",
    "--disable-log-requests",
    "--save-result",
    "--disable-tqdm",
}


def _rate(text: str | None) -> dict[str, object]:
    value = _real("--request-rate", text)
    if value == 0:
        raise ValueError(f"--request-rate: expected a rate > 0 or inf, got {text!r}")
    return {"rate": value}


def _burstiness(text: str | None) -> dict[str, object]:
    """vLLM's burstiness is the gamma shape ``k`` (1: Poisson); tpusim's the coefficient
    of variation ``1 / sqrt(k)`` (vllm/benchmarks/serve.py ``get_request``)."""
    shape = _real("--burstiness", text)
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
    "--num-prompts": _field("requests", "--num-prompts"),
    "--max-concurrency": _field("concurrency", "--max-concurrency"),
    "--request-rate": _rate,
    "--burstiness": _burstiness,
    "--seed": lambda text: {"seed": int(_real("--seed", text))},
    "--dataset-name": _dataset,
    "--random-input-len": lambda t: {"input_len": _whole("--random-input-len", t)},
    "--input-len": lambda t: {"input_len": _whole("--input-len", t)},
    "--random-output-len": lambda t: {"output_len": _whole("--random-output-len", t)},
    "--output-len": lambda t: {"output_len": _whole("--output-len", t)},
    "--sharegpt-output-len": lambda t: {"output_len": _whole("--sharegpt-output-len", t)},
    "--random-range-ratio": lambda t: {"range_ratio": _real("--random-range-ratio", t)},
    "--random-prefix-len": _prefix_len,
    "--prefix-len": _prefix_len,
    # tpusim's requests generate exactly their output tokens, as --ignore-eos makes
    # vLLM's do.
    "--ignore-eos": lambda _: {},
}


#: A leading ``NAME=value`` word of a shell line: the command's environment.
_ENVIRONMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def _split(line: str) -> tuple[list[str], list[str]]:
    """The environment assignments leading ``line`` (``NAME=value`` words, as a shell
    reads them) and its other words."""
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise ValueError(f"cannot split {line!r}: {exc}") from None
    env = list(itertools.takewhile(_ENVIRONMENT.match, words))
    return env, words[len(env) :]


def _tokens(line: str, heads: tuple[tuple[str, ...], ...]) -> tuple[list[str], list[str]]:
    """The environment assignments of ``line`` and its words after its command, one of
    ``heads`` (``vllm serve``)."""
    env, words = _split(line)
    for head in heads:
        if tuple(words[: len(head)]) == head:
            return env, words[len(head) :]
    starts = " or ".join(repr(" ".join(head)) for head in heads)
    raise ValueError(f"expected a line starting {starts}, got {line!r}")


def _flags(words: list[str]) -> tuple[list[str], list[tuple[str, str | None]]]:
    """The positional words and the (flag, value) pairs of ``words``: ``--f=v``,
    ``--f v`` (the next word when it is not a flag) or a switch of :data:`SWITCHES`."""
    positional: list[str] = []
    pairs: list[tuple[str, str | None]] = []
    i = 0
    while i < len(words):
        word = _dashed(words[i])
        if not word.startswith("-"):
            positional.append(word)
        elif "=" in word:
            pairs.append(tuple(word.split("=", 1)))  # type: ignore[arg-type]
        elif word in SWITCHES or i + 1 == len(words) or words[i + 1].startswith("--"):
            pairs.append((word, None))
        else:
            pairs.append((word, words[i + 1]))
            i += 1
        i += 1
    return positional, pairs


def _dashed(word: str) -> str:
    """``--a_b=v`` as ``--a-b=v``: vLLM's parser takes a flag's underscores as dashes
    (FlexibleArgumentParser); other words unchanged."""
    if not word.startswith("--"):
        return word
    flag, eq, value = word.partition("=")
    return flag.replace("_", "-") + eq + value


def _read(
    pairs: list[tuple[str, str | None]], table: Mapping[str, Reader]
) -> tuple[dict[str, object], list[str]]:
    """The fields the modelled flags set and the names of the others."""
    values: dict[str, object] = {}
    unmodelled = []
    for flag, text in pairs:
        if flag not in table:
            unmodelled.append(flag)
            continue
        values |= table[flag](text)
    return values, unmodelled


def _key(name: str) -> str:
    """A Hugging Face model id (or a path ending in one) as :data:`PRESETS` keys it."""
    return name.rstrip("/").rsplit("/", 1)[-1].lower()


def preset_of(name: str) -> str:
    """The preset a Hugging Face model id is served as. Raises ValueError."""
    key = _key(name)
    if key not in PRESETS:
        raise ValueError(f"{name!r} matches no preset (tpusim models lists them); give model")
    return PRESETS[key]


def _model(names: list[str], given: bool) -> dict[str, object]:
    """The ``model`` field of a line naming ``names`` (the first counts): its preset;
    nothing when none is named, or when it matches none and ``model`` is ``given``."""
    if not names or (given and _key(names[0]) not in PRESETS):
        return {}
    return {"model": preset_of(names[0])}


def serve_line(line: str, model_given: bool = False) -> tuple[dict[str, object], list[str]]:
    """The fields a ``vllm serve MODEL ...`` line (or the API server module's, a head of
    :data:`SERVE_HEADS`) sets and its unmodelled flags and environment (``model_given``:
    a model is given beside the line). The weights' dtype is ``--quantization``'s, else
    the checkpoint's (:data:`CHECKPOINT_DTYPES`), else ``--dtype``'s; experts are
    expert-parallel only with ``--enable-expert-parallel``, as in vLLM."""
    env, words = _tokens(line, SERVE_HEADS)
    positional, pairs = _flags(words)
    named = [text for flag, text in pairs if flag == "--model" and text]
    values, unmodelled = _read([p for p in pairs if p[0] != "--model"], SERVE_FLAGS)
    names = positional[:1] or named
    checkpoint = CHECKPOINT_DTYPES.get(_key(names[0])) if names else None
    quantized, flag = values.pop(QUANTIZATION, None), values.pop(DTYPE_FLAG, None)
    if quantized and checkpoint and quantized != checkpoint:
        raise ValueError(f"--quantization {quantized} of a {checkpoint} checkpoint ({names[0]})")
    weights = quantized or checkpoint or flag
    values |= {"dtype": weights} if weights else {}
    values.setdefault("expert_parallel", False)
    return values | _model(names, model_given), env + unmodelled + positional[1:]


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
    env, words = _split(line)
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
    positional, pairs = _flags(words)
    named = [text for flag, text in pairs if flag == "--model" and text]
    values, unmodelled = _read([p for p in pairs if p[0] != "--model"], BENCH_FLAGS)
    values.setdefault("rate", math.inf)  # both clients' --request-rate default
    if values["rate"] == math.inf:  # vLLM: burstiness only at a finite rate
        values = {k: v for k, v in values.items() if k not in ("arrival", "burstiness")}
    lengths = _lengths(values, client)
    return lengths | _model(named, model_given), env + unmodelled + positional


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


class RecipeWords(Frozen):
    """The ``vllm`` and ``bench`` options: a recipe's command lines, read into the
    other options as they are validated (they are then None)."""

    vllm: str | None = Field(
        None, description='a "vllm serve MODEL ..." line, read into these options'
    )
    bench: str | None = Field(
        None, description='a "vllm bench serve ..." line, read into these options'
    )

    @model_validator(mode="before")
    @classmethod
    def _read_words(cls, data: object) -> object:
        try:
            return read_words(data)
        except WordsError as exc:
            raise PydanticCustomError("value_error", str(exc), {"mentions": exc.mentions}) from None


class WordsError(ValueError):
    """A line that cannot be read; ``mentions``: the options its message names."""

    def __init__(self, message: str, mentions: tuple[str, ...]):
        super().__init__(message)
        self.mentions = mentions


def read_words(data: object) -> object:
    """``data`` (the options as given) with its ``vllm`` and ``bench`` lines read into
    fields: a field given beside them must agree. Warns once naming every flag not
    modelled. Raises ValueError (the flag, or both options, named)."""
    if not isinstance(data, dict) or not (data.get("vllm") or data.get("bench")):
        return data
    out = {k: v for k, v in data.items() if k not in ("vllm", "bench")}
    ignored: list[str] = []
    for key, reader in (("vllm", serve_line), ("bench", bench_line)):
        if data.get(key):
            if not isinstance(data[key], str):
                raise WordsError(f"{key}: expected the command line as one string", (key,))
            try:
                values, unmodelled = reader(data[key], "model" in data)
            except ValueError as exc:
                # the key is named as its option unless the message quotes the line,
                # whose own words must not be rewritten as options
                mentions = () if key in str(exc) else (key, "model")
                raise WordsError(f"{key}: {exc}", mentions) from None
            _merge(out, values, key)
            if unmodelled:
                ignored.append(f"{key}: {' '.join(dict.fromkeys(unmodelled))}")
    if not out.pop(PREFIX_CACHING, True):
        if data.get("prefix_tokens"):
            raise WordsError(
                "vllm: --no-enable-prefix-caching contradicts prefix_tokens (a cached prefix)",
                ("vllm", "prefix_tokens"),
            )
        out.pop("prefix_hit_rate", None)  # the prefix is sent, never found in the cache
        out.pop("prefix_tokens", None)
    if ignored:
        warnings.warn(f"not modelled, ignored: {'; '.join(ignored)}", stacklevel=2)
    return out


def _merge(out: dict[str, object], values: dict[str, object], source: str) -> None:
    """Add ``values`` (read from ``source``) to ``out``; raise ValueError on a field
    both give differently."""
    for field, value in values.items():
        if field in out and not _same(out[field], value):
            raise WordsError(
                f"{source} sets {field} to {value!r}, which contradicts {field} {out[field]!r}",
                (source, field),
            )
        out[field] = value


def _same(given: object, read: object) -> bool:
    """Whether an option as given (flags give text) is the value read."""
    if given == read:
        return True
    try:
        return float(str(given)) == float(str(read))
    except ValueError:
        return str(given).lower() == str(read).lower()
