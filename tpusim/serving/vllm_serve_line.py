"""A ``vllm serve MODEL ...`` line (or the OpenAI API server module's) read into the
fields of :class:`~tpusim.serving.options.ServeSpec`: :data:`SERVE_FLAGS` says which
field each modelled flag sets; the model name (a Hugging Face id) is mapped to a
preset by :data:`PRESETS`, its checkpoint's stored dtype by :data:`CHECKPOINT_DTYPES`."""

from __future__ import annotations

from tpusim.serving.vllm_words import (
    Reader,
    command_words,
    field_reader,
    read_command,
    real,
)

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
    "deepseek-v3-0324": "deepseek-v3",
    "deepseek-r1": "deepseek-v3",
    "deepseek-r1-0528": "deepseek-v3",
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
    # DeepSeek's releases: "DeepSeek-V3 natively supports FP8 weight format with 128x128
    # block scaling" (README_WEIGHTS.md of deepseek-ai/DeepSeek-V3, its config.json's
    # quantization_config quant_method fp8); R1 is released on V3's deepseek_v3
    # config.json, FP8 weights likewise
    "deepseek-v3": "fp8",
    "deepseek-v3-0324": "fp8",
    "deepseek-r1": "fp8",
    "deepseek-r1-0528": "fp8",
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


def _dtype(text: str | None) -> dict[str, object]:
    if text not in DTYPES:
        raise ValueError(f"--dtype: tpusim serves {', '.join(DTYPES)}, got {text!r}")
    return {DTYPE_FLAG: DTYPES[text]}


def _utilization(text: str | None) -> dict[str, object]:
    value = real("--gpu-memory-utilization", text)
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


#: The keys ``--dtype`` and ``--quantization`` are read under, resolved with the
#: model's checkpoint into ``dtype`` by :func:`serve_line`.
DTYPE_FLAG, QUANTIZATION = "dtype_flag", "quantization"


#: ``vllm serve`` flags tpusim models, each with the fields it sets.
SERVE_FLAGS: dict[str, Reader] = {
    # vLLM counts JAX devices: an Ironwood chip is two (ServeSpec.tp_devices)
    "--tensor-parallel-size": field_reader("tp_devices", "--tensor-parallel-size"),
    "-tp": field_reader("tp_devices", "-tp"),
    "--data-parallel-size": field_reader("replicas", "--data-parallel-size"),
    "-dp": field_reader("replicas", "-dp"),
    "--max-num-batched-tokens": field_reader("max_tokens", "--max-num-batched-tokens"),
    "--max-num-seqs": field_reader("max_sequences", "--max-num-seqs"),
    "--block-size": field_reader("block_size", "--block-size"),
    "--gpu-memory-utilization": _utilization,
    "--max-model-len": field_reader("max_model_len", "--max-model-len"),
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
#: Environment settings of the server's command that choose its profile (each value's
#: profile, None: the default's). ``USE_BATCHED_RPA_KERNEL=1`` (set in the pod of the
#: Ironwood tpu-recipes) runs tpu-inference's batched ragged paged attention kernel,
#: whose terms are calibrated apart (configs/servers/vllm-tpu-inference-batched-rpa.yaml);
#: ``0`` is its default per-request kernel.
SERVER_ENVIRONMENT: dict[str, dict[str, str | None]] = {
    "USE_BATCHED_RPA_KERNEL": {"1": "vllm-tpu-inference-batched-rpa", "0": None},
}


def environment(env: list[str]) -> tuple[dict[str, object], list[str]]:
    """The fields ``NAME=value`` words set (:data:`SERVER_ENVIRONMENT`) and the words
    not modelled. Raises ValueError on a value of a modelled name that is not known."""
    values: dict[str, object] = {}
    unmodelled = []
    for word in env:
        name, value = word.split("=", 1)
        if name not in SERVER_ENVIRONMENT:
            unmodelled.append(word)
            continue
        known = SERVER_ENVIRONMENT[name]
        if value not in known:
            raise ValueError(f"{name}: tpusim models {' or '.join(known)}, got {value!r}")
        server = known[value]
        values |= {"server": server} if server else {}
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


def model_field(names: list[str], given: bool) -> dict[str, object]:
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
    expert-parallel only with ``--enable-expert-parallel``, as in vLLM; the server
    profile is the one its environment chooses (:data:`SERVER_ENVIRONMENT`), if any."""
    env, words = command_words(line, SERVE_HEADS)
    positional, named, values, unmodelled = read_command(words, SERVE_FLAGS)
    names = positional[:1] or named
    checkpoint = CHECKPOINT_DTYPES.get(_key(names[0])) if names else None
    quantized, flag = values.pop(QUANTIZATION, None), values.pop(DTYPE_FLAG, None)
    if quantized and checkpoint and quantized != checkpoint:
        raise ValueError(f"--quantization {quantized} of a {checkpoint} checkpoint ({names[0]})")
    weights = quantized or checkpoint or flag
    values |= {"dtype": weights} if weights else {}
    values.setdefault("expert_parallel", False)
    chosen, unread = environment(env)
    values |= chosen | model_field(names, model_given)
    return values, unread + unmodelled + positional[1:]
