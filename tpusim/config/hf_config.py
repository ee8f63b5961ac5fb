"""A Hugging Face ``config.json`` read as a model preset (:class:`~tpusim.config.model.
ModelSpec`): the shape keys transformers' decoder configs share (Llama, Mistral, Qwen,
Mixtral, Qwen-MoE, DeepSeek-V2/V3), through :func:`~tpusim.config.loader.load_model`,
so ``serve``, training steps and ``plan`` take ``--model path/config.json`` alike.

Read (the HF key, then the preset field): ``num_hidden_layers`` layers, ``hidden_size``
d_model, ``intermediate_size`` d_ff, ``num_attention_heads`` and ``num_key_value_heads``
(absent: as many as the heads) and ``head_dim`` (absent: hidden_size / heads),
``vocab_size``, ``tie_word_embeddings``, ``max_position_embeddings`` context_length;
experts from ``num_local_experts``, ``num_experts`` or ``n_routed_experts``,
``num_experts_per_tok`` top_k, ``moe_intermediate_size`` the expert width (absent:
intermediate_size, as Mixtral's), ``n_shared_experts`` (or one
``shared_expert_intermediate_size`` expert, Qwen2-MoE) and ``first_k_dense_replace``
dense layers; MLA from ``q_lora_rank``, ``kv_lora_rank``, ``qk_rope_head_dim`` and
``qk_nope_head_dim`` (the head_dim); ``torch_dtype`` (or ``dtype``) is recorded in the
description (the served dtype is the run's ``dtype``); an fp8 ``quantization_config``
(``quant_method: fp8``) is the checkpoint's stored dtype, which a run serves unless
it gives ``dtype``. The MLP is gated (SwiGLU or
GeGLU: every decoder family above; an assumption for others), biases are not counted.

Refused, one :class:`~tpusim.errors.ConfigError` naming the key: a missing or
non-integer shape key, a multimodal wrapper (``text_config``), weights quantized by
another method than fp8 (``quantization_config``: give the run's ``dtype``), MoE layers
interleaved with dense ones other than the first k (``decoder_sparse_step``,
``mlp_only_layers``, ``interleave_moe_layer_step``), an MLA ``v_head_dim`` unlike
``qk_nope_head_dim`` and a ``torch_dtype`` that is not a float type.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tpusim.errors import ConfigError

#: ``torch_dtype`` values read (the weights' float type as released).
FLOAT_DTYPES = ("bfloat16", "float16", "float32")
#: Keys whose value tpusim cannot express, with the value each must keep (None:
#: absent or empty).
UNEXPRESSED: dict[str, object] = {
    "text_config": None,
    "mlp_only_layers": None,
    "decoder_sparse_step": 1,
    "interleave_moe_layer_step": 1,
}

#: ``quantization_config.quant_method`` values read, and the weights' dtype each stores.
QUANT_METHODS = {"fp8": "fp8"}
#: What to do instead, by refused key.
HINTS = {
    "quantization_config": " (the weights' dtype is the run's --dtype: drop the key and "
    "give --dtype)",
    "text_config": " (a multimodal wrapper: give its text model's config)",
}


class _Reader:
    """The config's keys, each read once, a problem raised naming its key."""

    def __init__(self, data: dict[str, Any], file: str):
        self.data, self.file = data, file

    def fail(self, key: str, problem: str) -> ConfigError:
        return ConfigError(problem, file=self.file, path=key)

    def whole(self, key: str, default: int | None = None, *, optional: bool = False) -> int:
        value = self.data.get(key, default)
        if optional and (value is None or (value == 0 and type(value) is int)):
            return 0
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            what = "required key is missing" if key not in self.data else f"got {value!r}"
            raise self.fail(key, f"expected a whole number >= 1 ({what})")
        return value

    def first(self, *keys: str) -> int:
        """The first of ``keys`` present (0: none)."""
        for key in keys:
            if self.data.get(key) is not None:
                return self.whole(key)
        return 0


def _check_unexpressed(r: _Reader) -> None:
    for key, neutral in UNEXPRESSED.items():
        value = r.data.get(key)
        if value not in (None, [], {}, neutral, 0):
            raise r.fail(
                key, f"{value!r} cannot be expressed by a tpusim model preset{HINTS.get(key, '')}"
            )
    dtype = r.data.get("torch_dtype", r.data.get("dtype", "bfloat16"))
    if dtype not in FLOAT_DTYPES:
        raise r.fail("torch_dtype", f"expected one of {', '.join(FLOAT_DTYPES)}, got {dtype!r}")


def _checkpoint_dtype(r: _Reader) -> str | None:
    """The weights' stored dtype of a quantized checkpoint (``quantization_config``'s
    ``quant_method``: fp8, vLLM's and the Qwen and DeepSeek fp8 releases' block-wise
    e4m3 weights, one byte each); None without one. Raises ConfigError for another
    method (its scales and packing are not modelled)."""
    config = r.data.get("quantization_config")
    if config in (None, {}):
        return None
    method = config.get("quant_method") if isinstance(config, dict) else None
    if method not in QUANT_METHODS:
        raise r.fail(
            "quantization_config",
            f"quant_method {method!r}: tpusim reads {', '.join(QUANT_METHODS)}"
            f"{HINTS['quantization_config']}",
        )
    return QUANT_METHODS[method]


def _attention(r: _Reader, d_model: int) -> dict[str, object]:
    heads = r.whole("num_attention_heads")
    if r.data.get("kv_lora_rank"):
        head_dim = r.whole("qk_nope_head_dim")
        if r.data.get("v_head_dim", head_dim) != head_dim:
            raise r.fail("v_head_dim", "must equal qk_nope_head_dim (one head_dim in tpusim)")
        return {
            "kind": "mla",
            "heads": heads,
            "head_dim": head_dim,
            "q_lora_rank": r.whole("q_lora_rank"),
            "kv_lora_rank": r.whole("kv_lora_rank"),
            "rope_head_dim": r.whole("qk_rope_head_dim"),
        }
    if d_model % heads and r.data.get("head_dim") is None:
        raise r.fail("head_dim", f"required: hidden_size {d_model} is not a multiple of heads")
    return {
        "kind": "gqa",
        "heads": heads,
        "kv_heads": r.whole("num_key_value_heads", heads),
        "head_dim": r.whole("head_dim", d_model // heads),
    }


def _moe(r: _Reader, d_ff: int) -> dict[str, object] | None:
    experts = r.first("num_local_experts", "num_experts", "n_routed_experts")
    if not experts:
        return None
    shared = r.whole("n_shared_experts", optional=True)
    if not shared and r.data.get("shared_expert_intermediate_size"):
        shared = 1
    return {
        "experts": experts,
        "top_k": r.whole("num_experts_per_tok"),
        "d_ff": r.whole("moe_intermediate_size", d_ff),
        "shared": shared,
        "dense_layers": r.whole("first_k_dense_replace", optional=True),
    }


def model_data(data: dict[str, Any], file: str, name: str) -> dict[str, Any]:
    """The preset's data (:class:`~tpusim.config.model.ModelSpec` keys) of the config
    ``data`` read from ``file``. Raises ConfigError naming the key."""
    r = _Reader(data, file)
    _check_unexpressed(r)
    d_model, d_ff = r.whole("hidden_size"), r.whole("intermediate_size")
    dtype = data.get("torch_dtype", data.get("dtype", "bfloat16"))
    out: dict[str, Any] = {
        "name": name,
        "full_name": str(data.get("_name_or_path") or name),
        "description": f"from {Path(file).name} ({data.get('model_type', '?')}, {dtype})",
        "layers": r.whole("num_hidden_layers"),
        "d_model": d_model,
        "vocab": r.whole("vocab_size"),
        "tied_embeddings": bool(data.get("tie_word_embeddings", False)),
        "context_length": r.whole("max_position_embeddings", 4096),
        "attention": _attention(r, d_model),
        "mlp": "gated",
        "d_ff": d_ff,
    }
    moe = _moe(r, d_ff)
    if moe is not None:
        out["moe"] = moe
    checkpoint = _checkpoint_dtype(r)
    if checkpoint is not None:
        out["checkpoint_dtype"] = checkpoint
    return out


def read_config(path: Path) -> dict[str, Any]:
    """The JSON object of ``path``. Raises ConfigError."""
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read ({exc.strerror or exc})", file=str(path)) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"not a JSON config.json ({exc})", file=str(path)) from None
    if not isinstance(data, dict):
        raise ConfigError("expected a JSON object of keys to values", file=str(path))
    return data
