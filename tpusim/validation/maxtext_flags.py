"""MaxText's vocabulary in the published workload tables: remat policy and tensor
names, mesh axis flags (and the tpusim role each one plays), the other flags that
change a step's cost or are only recorded, and the dtype names; :func:`layout_flag`
checks one ``layout`` flag's value."""

from __future__ import annotations

from typing import Literal, cast

from pydantic import TypeAdapter, ValidationError

from tpusim.program.builders.roles import CONTEXT, DATA, EXPERT, FSDP, PIPELINE, TENSOR

RematPolicy = Literal[
    "none",
    "full",
    "minimal",
    "save_dot_except_mlp",
    "save_dot_except_mlpwi",
    "save_dot_with_context_except_mlp",
    "save_qkv_proj",
    "save_out_proj",
    "qkv_proj_offloaded",
    "minimal_offloaded",
    "minimal_with_context",
    "custom",
]
"""MaxText's remat policy names (CONTRACT-21), plus ``none``."""

RematTensor = Literal[
    "decoder_layer_input",
    "context",
    "mlpwi",
    "mlpwi_0",
    "mlpwi_1",
    "mlpwo",
    "query_proj",
    "key_proj",
    "value_proj",
    "qkv_proj",
    "out_proj",
]
"""MaxText's names of the tensors a ``custom`` remat policy places."""

RematPlace = Literal["remat", "device", "offload"]

MESH_FLAGS = {
    "data": DATA.name,
    "pipeline": PIPELINE.name,
    "fsdp": FSDP.name,
    "fsdp_transpose": FSDP.name,
    "sequence": CONTEXT.name,
    "context": CONTEXT.name,
    "tensor": TENSOR.name,
    "expert": EXPERT.name,
}
"""MaxText mesh axis (``ici_<axis>_parallelism`` / ``dcn_<axis>_parallelism``) -> the
tpusim mesh axis (named after its role) that plays it. ``fsdp_transpose`` shards
parameters and batch as ``fsdp`` does (MaxText's second FSDP axis): both fold into one
``fsdp`` axis. ``sequence`` and ``context`` are context parallelism (CONTRACT-21)."""

DCN_REST_AXIS = "data"
"""The MaxText mesh axis whose ``dcn_<axis>_parallelism`` defaults to -1 (takes the
slices the other DCN axes leave; MaxText's ``base.yml``: ``dcn_data_parallelism:
-1``): MaxText's axis name, a key of :data:`MESH_FLAGS`."""

COST_FLAGS: dict[str, object] = {
    "attention": Literal["flash", "dot_product", "autoselected"],
    "capacity_factor": float,
    "sparse_matmul": bool,
    "weight_dtype": Literal["bfloat16", "float32"],
}
"""Non-mesh MaxText flags that change the step's cost, and their value types
(``attention: autoselected`` is MaxText's default and leaves tpusim's)."""

RECORDED_FLAGS: dict[str, object] = {
    "megablox": bool,
    "custom_mesh": str,
    "allow_split_physical_axes": bool,
    "fsdp_shard_on_exp": bool,
    "use_random_routing": bool,
    "num_vocab_tiling": int,
    # MaxText's later name (2026) of fsdp_shard_on_exp: the expert dimension of the MoE
    # weights sharded over the fsdp axis. Recorded only: workloads_translate checks the
    # old name alone, so a case with shard_exp_on_fsdp: true is not yet flagged
    "shard_exp_on_fsdp": bool,
    # MoE weights sharded over both the fsdp and fsdp_transpose axes (2-D FSDP)
    "use_2d_fsdp_sharding": bool,
    # with MoE weights on fsdp and fsdp_transpose, gather them in two all-gathers
    "moe_fsdp_use_two_stage_all_gather": bool,
}
"""Flags kept as published but not translated: ``megablox`` (MaxText's grouped-matmul
kernel, used with ``sparse_matmul``, which is translated), the device order of the mesh
(``custom_mesh``, ``allow_split_physical_axes``), the dimension the FSDP shards of the
expert weights split (``fsdp_shard_on_exp``: the expert dimension instead of the
embedding one, MaxText's ``wi_kernel_axes``; the weights are still all-gathered over the
fsdp axis before use, with ``ici_expert_parallelism`` 1, so the step is the plain FSDP
one), random routing (tpusim routes
tokens evenly unless told a skew), and logits computed in vocabulary tiles (memory
only, of one layer's output)."""

DTYPES = {"bfloat16": "bf16", "float32": "fp32"}
QUANTIZATION = {"int8": "int8", "fp8": "fp8", "fp8_full": "fp8"}


def layout_flag(name: str, value: object) -> object:
    """``value`` checked against flag ``name``'s type; ValueError naming the flag."""
    if name.startswith(("ici_", "dcn_")) and name.endswith("_parallelism"):
        axis = name[4 : -len("_parallelism")]
        if axis not in MESH_FLAGS:
            raise ValueError(f"unknown MaxText mesh axis '{axis}' in flag {name}")
        if isinstance(value, bool) or not isinstance(value, int) or (value < 1 and value != -1):
            raise ValueError(f"{name}: {value!r} must be a positive integer or -1")
        return value
    kind = COST_FLAGS.get(name, RECORDED_FLAGS.get(name))
    if kind is None:
        known = sorted([*COST_FLAGS, *RECORDED_FLAGS])
        raise ValueError(
            f"unknown MaxText flag '{name}' (known: ici_/dcn_<axis>_parallelism, "
            f"{', '.join(known)})"
        )

    try:
        # A Literal or a class: a type form, which the dict's ``object`` cannot say.
        adapter = TypeAdapter(cast("type[object]", kind))
        return adapter.validate_python(value, strict=kind is not float)
    except ValidationError:
        raise ValueError(f"{name}: {value!r} is not a valid value") from None
