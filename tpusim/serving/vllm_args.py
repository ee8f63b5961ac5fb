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

import math
import shlex
import warnings
from collections.abc import Callable, Mapping

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
    "deepseek-v3": "deepseek-v3",
    "llama-4-scout-17b-16e-instruct": "llama4-scout",
}
#: vLLM's ``--dtype`` values and the dtype each is (``auto``: the checkpoint's, bf16
#: for every preset).
DTYPES = {"auto": "bf16", "bfloat16": "bf16", "float32": "fp32"}
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
    return {"dtype": DTYPES[text]}


#: ``vllm serve`` flags tpusim models, each with the fields it sets.
SERVE_FLAGS: dict[str, Reader] = {
    "--tensor-parallel-size": _field("tp", "--tensor-parallel-size"),
    "-tp": _field("tp", "-tp"),
    "--data-parallel-size": _field("replicas", "--data-parallel-size"),
    "-dp": _field("replicas", "-dp"),
    "--max-num-batched-tokens": _field("max_tokens", "--max-num-batched-tokens"),
    "--max-num-seqs": _field("max_sequences", "--max-num-seqs"),
    "--block-size": _field("block_size", "--block-size"),
    "--dtype": _dtype,
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


def _tokens(line: str, head: tuple[str, ...]) -> list[str]:
    """The words of ``line`` after its command ``head`` (``vllm serve``)."""
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise ValueError(f"cannot split {line!r}: {exc}") from None
    if tuple(words[: len(head)]) != head:
        raise ValueError(f"expected a line starting {' '.join(head)!r}, got {line!r}")
    return words[len(head) :]


def _flags(words: list[str]) -> tuple[list[str], list[tuple[str, str | None]]]:
    """The positional words and the (flag, value) pairs of ``words``: ``--f=v``,
    ``--f v`` (the next word when it is not a flag) or a switch of :data:`SWITCHES`."""
    positional: list[str] = []
    pairs: list[tuple[str, str | None]] = []
    i = 0
    while i < len(words):
        word = words[i]
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


def preset_of(name: str) -> str:
    """The preset a Hugging Face model id is served as. Raises ValueError."""
    key = name.rstrip("/").rsplit("/", 1)[-1].lower()
    if key not in PRESETS:
        raise ValueError(f"{name!r} matches no preset (tpusim models lists them); give model")
    return PRESETS[key]


def _model(names: list[str], given: bool) -> dict[str, object]:
    """The ``model`` field of a line naming ``names`` (the first counts): its preset;
    nothing when none is named, or when it matches none and ``model`` is ``given``."""
    if not names or (given and names[0].rstrip("/").rsplit("/", 1)[-1].lower() not in PRESETS):
        return {}
    return {"model": preset_of(names[0])}


def serve_line(line: str, model_given: bool = False) -> tuple[dict[str, object], list[str]]:
    """The fields a ``vllm serve MODEL ...`` line sets and its unmodelled flags
    (``model_given``: a model is given beside the line)."""
    positional, pairs = _flags(_tokens(line, ("vllm", "serve")))
    named = [text for flag, text in pairs if flag == "--model" and text]
    values, unmodelled = _read([p for p in pairs if p[0] != "--model"], SERVE_FLAGS)
    return values | _model(positional[:1] or named, model_given), unmodelled + positional[1:]


def bench_line(line: str, model_given: bool = False) -> tuple[dict[str, object], list[str]]:
    """The fields a ``vllm bench serve ...`` line sets and its unmodelled flags."""
    positional, pairs = _flags(_tokens(line, ("vllm", "bench", "serve")))
    named = [text for flag, text in pairs if flag == "--model" and text]
    values, unmodelled = _read([p for p in pairs if p[0] != "--model"], BENCH_FLAGS)
    values.setdefault("rate", math.inf)  # vLLM's --request-rate default
    if values["rate"] == math.inf:  # vLLM: burstiness only at a finite rate
        values = {k: v for k, v in values.items() if k not in ("arrival", "burstiness")}
    return _lengths(values) | _model(named, model_given), unmodelled + positional


def _lengths(read: dict[str, object]) -> dict[str, object]:
    """The token counts of the bench line's dataset (random by default, as vLLM's)."""
    values = {k: v for k, v in read.items() if k not in _LENGTH_KEYS}
    ratio = read.get("range_ratio", BENCH_DEFAULT_RANGE_RATIO)
    if read.get("dataset", "random") == "sharegpt":
        if "input_len" in read or "range_ratio" in read or "prefix_len" in read:
            raise ValueError("--random-* lengths need --dataset-name random")
        output = read.get("output_len")
        values["prompt_tokens"] = {"sharegpt": "prompt"}
        values["output_tokens"] = output if output else {"sharegpt": "output"}
        return values
    for key, field, default in (
        ("input_len", "prompt_tokens", BENCH_DEFAULT_INPUT_LEN),
        ("output_len", "output_tokens", BENCH_DEFAULT_OUTPUT_LEN),
    ):
        length = read.get(key, default)
        values[field] = {"random": {"length": length, "range_ratio": ratio}}
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
