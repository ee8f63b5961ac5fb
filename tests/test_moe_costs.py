"""MoE costs by hand arithmetic: routing skew, capacity factor (dropless, token
dropping, dense dispatch), permute/unpermute, grouped-matmul tile padding and the
expert-weight dtype of the FSDP gathers; bad values exit 2 in one line."""

from __future__ import annotations

import math

import pytest

from tests.helpers import assert_one_error_line, run
from tpusim.program import ProgramError
from tpusim.program.builders import prepare_training, training_step
from tpusim.program.builders.emit import useful_flops
from tpusim.program.builders.mlp import GMM_TILE_ROWS, dropped_fraction

D, SEQ, TOP_K, EXPERTS, EP = 1024, 512, 2, 8, 4
MOE = dict(
    layers=1, d_model=D, d_ff=4096, heads=8, head_dim=128, seq=SEQ, batch=16,
    experts=EXPERTS, top_k=TOP_K, expert_d_ff=1024, mesh={"data": 4, "expert": EP},
)  # fmt: skip
TOKENS = SEQ  # 16 sequences over 4 x 4 batch shards: one per chip
ROWS = TOKENS * TOP_K
LOCAL = EXPERTS // EP
SKEW_LIMIT = r"routing_skew must be between 0 and min\(experts, expert chips\) - 1 = 3"
BF16 = 2


def ops(**extra):
    return {op.name: op for op in training_step(**MOE, **extra).ops}


def test_dropless_skew_paces_the_experts_and_the_all_to_alls_by_the_busiest_chip():
    by = ops(routing_skew=0.25)
    busy = math.ceil(ROWS * 1.25)
    assert by["L0.moe.up.fwd"].m == busy and by["L0.moe.down.fwd"].m == busy
    assert by["L0.moe.dispatch.fwd"].size_bytes == busy * D * BF16
    assert by["L0.moe.combine.bwd"].size_bytes == busy * D * BF16
    assert by["L0.moe.permute.fwd"].bytes == (TOKENS + ROWS) * D * BF16
    assert by["L0.moe.local_permute.fwd"].bytes == 2 * busy * D * BF16
    assert by["L0.moe.unpermute.fwd"].bytes == 2 * ROWS * D * BF16
    gmm = busy / (busy + LOCAL * GMM_TILE_ROWS / 2)
    assert by["L0.moe.up.fwd"].efficiency == pytest.approx(gmm, rel=1e-12)
    assert by["L0.moe.up.bwd_weight"].efficiency == pytest.approx(gmm, rel=1e-12)
    assert by["L0.moe.router.fwd"].efficiency == 1.0


def test_model_flops_do_not_count_skew_padding_or_dispatch_einsums():
    base = useful_flops(prepare_training(**MOE))
    for extra in (
        {"routing_skew": 0.5},
        {"capacity_factor": 1.5, "sparse_matmul": False},
        {"capacity_factor": 1.25, "routing_skew": 0.5},
    ):
        assert useful_flops(prepare_training(**MOE, **extra)) == pytest.approx(base, rel=1e-12)


def test_capacity_drops_the_rows_over_it_on_the_busiest_chip():
    by = ops(capacity_factor=1.25, routing_skew=0.5)
    assert by["L0.moe.up.fwd"].m == math.ceil(1.25 * ROWS)  # min(1.5, 1.25) x rows
    shape = prepare_training(**MOE, capacity_factor=1.25, routing_skew=0.5).moe
    assert dropped_fraction(shape) == pytest.approx(1 - 1.25 / 1.5, rel=1e-12)
    assert dropped_fraction(prepare_training(**MOE, routing_skew=0.5).moe) == 0.0


def test_dense_dispatch_pads_to_capacity_and_adds_the_one_hot_einsums():
    by = ops(capacity_factor=1.5, sparse_matmul=False, routing_skew=3.0)
    padded = math.ceil(1.5 * ROWS)  # skew does not change padded buffers
    assert by["L0.moe.up.fwd"].m == padded and by["L0.moe.up.fwd"].efficiency == 1.0
    assert by["L0.moe.dispatch.fwd"].size_bytes == padded * D * BF16
    einsum = by["L0.moe.dispatch_einsum.fwd"]
    assert (einsum.batch, einsum.m, einsum.k, einsum.n) == (1, math.ceil(1.5 * SEQ * TOP_K), SEQ, D)
    assert "L0.moe.combine_einsum.fwd" in by
    assert not any("permute" in name for name in by)


def test_expert_weights_gathered_in_their_own_dtype():
    fields = dict(MOE, mesh={"fsdp": 4, "expert": EP}, fsdp_axis="fsdp", data_axis=None)
    plan = prepare_training(**fields)
    params = plan.params(0)
    assert params.expert == LOCAL * 2 * D * 1024  # plain MLP: up and down
    gather = "L0.weights.allgather.fwd"
    bf16 = {o.name: o for o in training_step(**fields).ops}[gather]
    fp32 = {o.name: o for o in training_step(**fields, expert_weight_dtype="fp32").ops}[gather]
    assert bf16.size_bytes == params.total * BF16
    assert fp32.size_bytes == params.dense * BF16 + params.expert * 4


@pytest.mark.parametrize(
    "extra, words",
    [
        ({"capacity_factor": 0.0}, "capacity_factor must be > 0 or -1"),
        ({"capacity_factor": -0.5}, "capacity_factor must be > 0 or -1"),
        ({"sparse_matmul": False}, "needs capacity_factor > 0"),
        ({"routing_skew": -0.1}, "routing_skew: Input should be greater than or equal to 0"),
        ({"routing_skew": 1e15}, SKEW_LIMIT),
        ({"expert_weight_dtype": "fp64"}, "expert_weight_dtype: Input should be 'fp32', 'bf16'"),
    ],
)
def test_bad_moe_fields_are_refused_naming_the_field(extra, words):
    with pytest.raises(ProgramError, match=words):
        prepare_training(**MOE, **extra)


def test_capacity_factor_zero_in_a_scenario_exits_2_in_one_line(capsys, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: t\ndescription: t\nnetwork: {fidelity: flow}\nsystems: [ironwood-256]\nworkloads:\n"
        "  - name: moe\n    kind: training_step\n    layers: 1\n    d_model: 512\n"
        "    d_ff: 1024\n    heads: 8\n    head_dim: 64\n    seq: 256\n    batch: 256\n"
        "    experts: 8\n    mesh: {data: 64, expert: 4}\n    capacity_factor: 0\n"
    )
    code, out, err = run(capsys, "run", str(path), "--out", str(tmp_path / "o"), "--quiet")
    line = assert_one_error_line(code, out, err)
    assert "capacity_factor must be > 0 or -1" in line and "s.yaml" in line


def test_experts_on_the_fsdp_axis_are_routed_not_gathered():
    """``expert_axis`` naming the fsdp axis: dropless with uniform routing, each
    all-to-all moves the chip's tokens x top_k rows of d_model (counted by hand); the
    FSDP gather brings the dense weights only (attention 4 d^2, two norms, the router),
    and the expert gradients are not reduce-scattered."""
    moe = dict(MOE, mesh={"fsdp": 4}, fsdp_axis="fsdp", expert_axis="fsdp", batch=4)
    program = training_step(**moe)
    by = {op.name: op for op in program.ops}
    tokens = 4 // 4 * SEQ
    assert by["L0.moe.dispatch.fwd"].axes == ("fsdp",)
    assert by["L0.moe.dispatch.fwd"].size_bytes == tokens * TOP_K * D * BF16
    assert by["L0.moe.combine.bwd"].size_bytes == tokens * TOP_K * D * BF16
    dense = 4 * D * D + 2 * D + D * EXPERTS
    assert by["L0.weights.allgather.fwd"].size_bytes == dense * BF16
    assert by["L0.grad.reduce_scatter"].size_bytes == dense * BF16  # bf16 gradients
    assert by["L0.moe.up.fwd"].m == tokens * TOP_K


def test_fsdp_shard_on_exp_is_plain_fsdp():
    """MaxText's ``fsdp_shard_on_exp`` only picks the dimension the FSDP shards of the
    expert weights split (``ici_expert_parallelism`` stays 1): the translation is the
    plain FSDP mesh, with no expert axis."""
    from tpusim.validation.workloads import load_workload_cases
    from tpusim.validation.workloads_translate import translate

    case = {c.id: c for c in load_workload_cases()}["iw-deepseek-v3-128-bf16"]
    assert case.spec.layout["fsdp_shard_on_exp"] is True
    fields = translate(case.spec).fields
    assert fields["mesh"] == {"fsdp": 128} and "expert_axis" not in fields
    assert translate(case.spec).missing == ()


def test_dropping_tokens_never_pads_more_than_dropless():
    """With a capacity the busiest chip computes fewer rows, and at most one padded tile
    per group that holds a row: the expert matmul's padded rows (rows / efficiency) fall
    with the capacity, down to a single tile's worth for one row."""
    padded = {}
    for cf in (-1, 0.1, 0.001):
        up = ops(capacity_factor=cf)["L0.moe.up.fwd"]
        padded[cf] = up.m / up.efficiency
    assert padded[0.001] <= padded[0.1] <= padded[-1]
    few = ops(capacity_factor=0.001)["L0.moe.up.fwd"]
    rows = math.ceil(0.001 * ROWS)  # 2: each in its own group at worst
    assert few.m == rows and padded[0.001] == pytest.approx(rows * (1 + GMM_TILE_ROWS / 2))
