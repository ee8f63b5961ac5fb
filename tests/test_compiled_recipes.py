"""The v6e-32 Llama 3.1 runs shipped as compiled artifacts are the programs of their
tpu-recipes recipes: the recipe's MaxText tuning and XLA flags, checked against the
recipe's own groups copied here by hand (MaxText ``benchmarks/xla_flags_library.py``
and ``maxtext_trillium_model_configs.py`` at tag ``tpu-recipes-v0.1.4``, which
tpu-recipes ``training/trillium/Llama3.1-{8B,70B}-MaxText/v6e-32/README.md`` name),
and the module that flag set makes: no collective matmul, so the only loops are the
layer scans over the model's layers."""

from __future__ import annotations

import pytest

from tpusim.program.hlo import parse_hlo
from tpusim.program.hlo.artifact import read_artifact
from tpusim.validation.compiled import compiled_records

DENSE_VMEM_LIMIT_FLAG = ["--xla_tpu_scoped_vmem_limit_kib=98304"]
LAYOUT_FOR_ALL_REDUCE_SCATTER = [
    "--xla_tpu_use_minor_sharding_for_major_trivial_input=true",
    "--xla_tpu_relayout_group_size_threshold_for_reduce_scatter=1",
    "--xla_tpu_assign_all_reduce_scatter_layout=true",
]
DATA_PARALLEL_OVERLAP = [
    "--xla_tpu_enable_data_parallel_all_reduce_opt=true",
    "--xla_tpu_data_parallel_opt_different_sized_ops=true",
]
CF_FOR_ALL_GATHER = [
    "--xla_tpu_enable_async_collective_fusion=true",
    "--xla_tpu_enable_async_collective_fusion_fuse_all_gather=true",
    "--xla_tpu_enable_async_collective_fusion_multiple_steps=true",
    "--xla_tpu_overlap_compute_collective_tc=true",
    "--xla_enable_async_all_gather=true",
]
ENABLE_SPARSECORE_OFFLOADING_FOR_ALL_REDUCE = [
    "--xla_tpu_enable_async_collective_fusion_fuse_all_reduce=false",
    "--xla_tpu_enable_sparse_core_collective_offload_all_reduce=true",
    "--xla_tpu_enable_all_reduce_offload_tracing=true",
    "--xla_tpu_use_tc_device_shape_on_sc=true",
    "--xla_sc_enable_instruction_fusion=false",
    "--xla_sc_disjoint_spmem=false",
    "--xla_sc_disable_megacore_partitioning=true",
    "--2a886c8_chip_config_name=megachip_tccontrol",
]
HOST_OFFLOAD_FLAGS = [
    "--xla_tpu_enable_all_experimental_scheduler_features=true",
    "--xla_tpu_enable_scheduler_memory_pressure_tracking=true",
    "--xla_tpu_host_transfer_overlap_limit=24",
    "--xla_tpu_aggressive_opt_barrier_removal=ENABLED",
    "--xla_lhs_prioritize_async_depth_over_stall=ENABLED",
    "--xla_tpu_enable_ag_backward_pipelining=true",
    "--xla_should_allow_loop_variant_parameter_in_chain=ENABLED",
    "--xla_should_add_loop_invariant_op_in_chain=ENABLED",
    "--xla_max_concurrent_host_send_recv=100",
    "--xla_tpu_scheduler_percent_shared_memory_limit=100",
    "--xla_latency_hiding_scheduler_rerun=2",
]
DISABLE_COLLECTIVE_MATMUL = ["--xla_jf_spmd_threshold_for_windowed_einsum_mib=1000000"]
#: Flags libtpu 0.0.52 refuses on v6e ("not supported/recommended on platforms other
#: than TPU v5e") or that are internal to Google's runs: left out, as the notes say.
LEFT_OUT = {
    "--xla_tpu_enable_async_collective_fusion_fuse_all_gather=true",
    "--2a886c8_chip_config_name=megachip_tccontrol",
}
#: The recipes' splash attention tuning (both recipes' tuning_params).
SPLASH = [
    "use_iota_embed=true",
    "sa_block_q=2048",
    "sa_block_kv=2048",
    "sa_block_kv_compute=2048",
    "sa_block_q_dkv=2048",
    "sa_block_kv_dkv=2048",
    "sa_block_kv_dkv_compute=2048",
    "sa_block_q_dq=2048",
    "sa_block_kv_dq=2048",
    "sa_use_fused_bwd_kernel=true",
]

#: case -> (the recipe's xla_flags groups, the model's decoder layers (published)).
RECIPES = {
    "v6e-llama3.1-70b-32": (
        DENSE_VMEM_LIMIT_FLAG
        + LAYOUT_FOR_ALL_REDUCE_SCATTER
        + DATA_PARALLEL_OVERLAP
        + CF_FOR_ALL_GATHER
        + HOST_OFFLOAD_FLAGS
        + DISABLE_COLLECTIVE_MATMUL,
        80,
    ),
    "v6e-llama3.1-8b-32": (
        DENSE_VMEM_LIMIT_FLAG
        + LAYOUT_FOR_ALL_REDUCE_SCATTER
        + DATA_PARALLEL_OVERLAP
        + CF_FOR_ALL_GATHER
        + ENABLE_SPARSECORE_OFFLOADING_FOR_ALL_REDUCE
        + HOST_OFFLOAD_FLAGS
        + DISABLE_COLLECTIVE_MATMUL,
        32,
    ),
}


@pytest.mark.parametrize("case", sorted(RECIPES))
def test_the_record_is_the_recipes_program(case: str) -> None:
    """The libtpu flags are the recipe's groups less the refused and internal ones, the
    MaxText line carries the recipe's splash tuning, and the note says what differs."""
    record = compiled_records()[case].fields
    flags, _ = RECIPES[case]
    assert set(record["libtpu_flags"]) == set(flags) - LEFT_OUT
    assert set(SPLASH) <= set(record["maxtext"].split())
    left_out = LEFT_OUT & set(flags)
    assert left_out and all(f.split("=")[0].lstrip("-") in record["note"] for f in left_out)


@pytest.mark.parametrize("case", sorted(RECIPES))
def test_the_only_loops_are_the_layer_scans(case: str) -> None:
    """No windowed-einsum loop (the collective matmul the recipe turns off): two loops,
    the forward and backward scans, each over the model's layers (XLA may run one
    layer outside the loop)."""
    module = parse_hlo(read_artifact(compiled_records()[case].artifact).hlo)
    _, layers = RECIPES[case]
    trips = [
        ins.inferred_trips
        for comp in module.computations.values()
        for ins in comp.instructions.values()
        if ins.opcode == "while"
    ]
    assert len(trips) == 2
    assert all(t is not None and layers - 1 <= t <= layers for t in trips)
