"""One published workload case as the MaxText command line that compiles its step: the
``key=value`` overrides of MaxText's ``train_compile`` (the reverse of
:mod:`.workloads_translate`) and the compile topology, so XLA's own memory analysis of
the run can be made on a CPU (``tools/compile_memory.py``).

The line is MaxText's model (``model_name``; the synthetic models of MaxText's 2023
tables as their ``base_*`` shape on MaxText's default ``llama2`` block, with a plain
ReLU MLP and tied embeddings), the per-device batch, the sequence, the dtype and
quantization, the remat policy (and a ``custom`` policy's tensors) and the case's
``layout`` flags verbatim, but for the ``dcn_*`` ones: one slice is compiled, and every
shipped multi-slice case is data-parallel over DCN (same per-device shapes as one slice)
except those with ``dcn_fsdp_parallelism``, which :func:`compile_slices` counts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tpusim.validation.workloads import WorkloadCaseSpec

#: tpusim model preset -> MaxText ``model_name`` (MaxText ``configs/models/*.yml``).
MODEL_NAMES = {
    "deepseek-v3": "deepseek3-671b",
    "gpt3-175b": "gpt3-175b",
    "llama-3.1-405b": "llama3.1-405b",
    "llama-3.1-70b": "llama3.1-70b",
    "llama-3.1-8b": "llama3.1-8b",
    "llama2-70b": "llama2-70b",
    "llama2-7b": "llama2-7b",
    "llama4-scout": "llama4-17b-16e",
    "mistral-7b": "mistral-7b",
    "mixtral-8x22b": "mixtral-8x22b",
    "mixtral-8x7b": "mixtral-8x7b",
    "qwen3-235b-a22b": "qwen3-235b-a22b",
    "qwen3-coder-480b-a35b": "qwen3-480b-a35b",
}
#: tpusim chip -> libtpu's topology family (``tpusim compile``'s FAMILY:SHAPE).
FAMILIES = {"v4": "v4", "v5e": "v5e", "v5p": "v5p", "v6e": "v6e", "ironwood": "tpu7x"}
SYNTHETIC_PREFIX = "maxtext-synthetic-"


def compile_topology(spec: WorkloadCaseSpec) -> str:
    """The case's one slice as ``FAMILY:SHAPE`` (``v5p:4x4x4``); KeyError for a chip
    libtpu does not compile for."""
    return f"{FAMILIES[spec.chip]}:{'x'.join(str(d) for d in spec.slice.dims)}"


def compile_slices(spec: WorkloadCaseSpec) -> int:
    """Slices to compile for: the case's slices when it shards parameters over DCN
    (``dcn_fsdp_parallelism``), else one (data parallelism over DCN leaves every
    per-device shape as on one slice)."""
    return spec.num_slices if "dcn_fsdp_parallelism" in spec.layout else 1


def maxtext_overrides(spec: WorkloadCaseSpec) -> list[str]:
    """The case as MaxText ``key=value`` overrides (see the module docstring); KeyError
    for a model MaxText does not name."""
    out = [*_model(spec.model), f"per_device_batch_size={spec.per_device_batch:g}"]
    out += [f"max_target_length={spec.seq}", f"dtype={spec.dtype}"]
    if spec.quantization:
        out.append(f"quantization={spec.quantization}")
    out.append(f"remat_policy={spec.remat_policy}")
    out += [f"{name}={place}" for name, place in (spec.remat_tensors or {}).items()]
    for name, value in spec.layout.items():
        if name.startswith("dcn_") and compile_slices(spec) == 1:
            continue
        out.append(f"{name}={_value(value)}")
    return [*out, "dataset_type=synthetic", "enable_checkpointing=false"]


def _value(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _model(name: str) -> list[str]:
    """``model_name=...``, or a synthetic model's shape as ``base_*`` overrides."""
    if not name.startswith(SYNTHETIC_PREFIX):
        return [f"model_name={MODEL_NAMES[name]}"]
    from tpusim.config.loader import load_model

    m = load_model(name)
    attention = m.attention
    return [
        f"base_emb_dim={m.d_model}",
        f"base_num_query_heads={attention.heads}",
        f"base_num_kv_heads={attention.kv_heads}",
        f"head_dim={attention.head_dim}",
        f"base_mlp_dim={m.d_ff}",
        f"base_num_decoder_layers={m.layers}",
        f"vocab_size={m.vocab}",
        "mlp_activations=[relu]",
        "logits_via_embedding=true",
    ]
