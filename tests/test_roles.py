"""Parallelism roles (tpusim.program.builders.roles): each shipped role's declared
collectives and memory effect against a training step built on a mesh of that role
alone, with the numbers counted by hand.

Oracles: parameters written out from the shape (Q, K, V, O of ``D x H HD``, a plain
MLP of ``2 D FF``, two norm scales of ``D``), activations saved per layer as
:mod:`tpusim.program.builders.memory` documents them (``tokens (6 D + 4 H HD)``
elements of bf16, the MLP hidden before and after its activation, the flash
kernel's fp32 logsumexp per query row and head), gradients all-reduced in bf16.
"""

from __future__ import annotations

import pytest

from tpusim.errors import InputError
from tpusim.program.builders import prepare_training
from tpusim.program.builders.emit import emit_program
from tpusim.program.builders.memory import saved_bytes
from tpusim.program.builders.roles import MEMORY, ROLES, SHARDS, roles_that
from tpusim.program.ir import ProgramError
from tpusim.registry import DuplicateEntryError

D, FF, H, HD, SEQ, LAYERS, BATCH, N = 64, 128, 4, 16, 32, 4, 8, 4
BF16 = 2
DENSE = dict(d_model=D, d_ff=FF, heads=H, head_dim=HD, seq=SEQ, layers=LAYERS, batch=BATCH)
EXPERTS, TOP_K = 4, 1
MOE = DENSE | dict(experts=EXPERTS, top_k=TOP_K)


def attention_params(heads: int) -> int:
    return 4 * D * heads * HD


def activations(tokens: int, heads: int, ff: int, top_k: int = 0) -> float:
    """Saved bytes of one layer (bf16, flash) for ``tokens`` local tokens."""
    rows = tokens * (top_k or 1)
    dispatched = rows * D if top_k else 0
    elements = tokens * (6 * D + 4 * heads * HD) + 2 * rows * ff + dispatched
    return elements * BF16 + tokens * heads * 4


#: Role -> (model, local parameters of the largest stage, saved bytes of one layer),
#: counted by hand for a mesh of that role alone of N chips.
HAND = {
    "data": (DENSE, LAYERS * (attention_params(H) + 2 * D * FF + 2 * D), None),
    "fsdp": (DENSE, LAYERS * (attention_params(H) + 2 * D * FF + 2 * D) / N, None),
    "tensor": (DENSE, LAYERS * ((attention_params(H) + 2 * D * FF) / N + 2 * D), None),
    "pipeline": (DENSE, LAYERS // N * (attention_params(H) + 2 * D * FF + 2 * D), None),
    "context": (DENSE, LAYERS * (attention_params(H) + 2 * D * FF + 2 * D) / N, None),
    "expert": (
        MOE,
        LAYERS * (attention_params(H) + 2 * D + D * EXPERTS + EXPERTS // N * 2 * D * FF),
        None,
    ),
}

#: Role -> saved bytes of one layer on a chip of the role's mesh.
HAND_ACTIVATIONS = {
    "data": activations(BATCH * SEQ // N, H, FF),
    "fsdp": activations(BATCH * SEQ // N, H, FF),
    "tensor": activations(BATCH * SEQ, H // N, FF // N),
    "pipeline": activations(BATCH * SEQ, H, FF),
    "context": activations(BATCH * SEQ // N, H, FF),
    "expert": activations(BATCH * SEQ // N, H, FF, TOP_K),
}

SHIPPED = ("data", "fsdp", "tensor", "expert", "pipeline", "context")


def step_on(role: str):
    model = HAND[role][0]
    return prepare_training(**model, mesh={role: N})


def single_chip(role: str):
    return prepare_training(**HAND[role][0], mesh={"data": 1})


def test_shipped_roles_are_registered_in_lookup_order():
    assert ROLES.names()[: len(SHIPPED)] == SHIPPED
    assert [ROLES.get(r).field for r in SHIPPED] == [f"{r}_axis" for r in SHIPPED]
    for _, role in ROLES.items():
        assert role.shards <= set(SHARDS) and role.memory <= set(MEMORY)
    assert [r.name for r in roles_that("batch")][:3] == ["data", "fsdp", "expert"]


@pytest.mark.parametrize("role", SHIPPED)
def test_local_parameters_match_the_hand_count(role):
    assert step_on(role).local_params == pytest.approx(HAND[role][1], rel=1e-12)


@pytest.mark.parametrize("role", SHIPPED)
def test_saved_activations_match_the_hand_count(role):
    step = step_on(role)
    assert saved_bytes(step.shape(LAYERS - 1)) == pytest.approx(HAND_ACTIVATIONS[role], 1e-12)


@pytest.mark.parametrize("role", SHIPPED)
def test_declared_memory_effect_is_what_the_axis_shrinks(role):
    """A role declares ``weights`` exactly when its axis shrinks the parameters a chip
    holds, ``activations`` exactly when it shrinks a layer's saved activations."""
    alone, one = step_on(role), single_chip(role)
    layer = LAYERS - 1
    shrinks = {
        "weights": alone.local_params < one.local_params,
        "activations": saved_bytes(alone.shape(layer)) < saved_bytes(one.shape(layer)),
    }
    assert ROLES.get(role).memory == {k for k, v in shrinks.items() if v}


@pytest.mark.parametrize("role", SHIPPED)
def test_declared_collectives_are_those_on_the_roles_axis(role):
    program = emit_program(step_on(role))
    found = {op.collective for op in program.ops if op.kind == "collective" and role in op.axes}
    assert found == ROLES.get(role).collectives


def test_data_axis_all_reduces_every_gradient_once():
    program = emit_program(step_on("data"))
    reduced = [op for op in program.ops if op.kind == "collective" and "data" in op.axes]
    per_layer = attention_params(H) + 2 * D * FF + 2 * D
    assert sum(op.size_bytes for op in reduced) == LAYERS * per_layer * BF16


def test_fsdp_axis_reduce_scatters_every_gradient_once():
    program = emit_program(step_on("fsdp"))
    scattered = [op for op in program.ops if op.collective == "reduce-scatter"]
    per_layer = attention_params(H) + 2 * D * FF + 2 * D
    assert sum(op.size_bytes for op in scattered) == LAYERS * per_layer * BF16


def test_pipeline_axis_permutes_one_activation_per_loop_iteration_each_way():
    """The loop runs ``m + p - 1`` iterations (one microbatch, N stages); each passes
    the microbatch's activation on in the forward and its gradient back."""
    program = emit_program(step_on("pipeline"))
    permutes = [op for op in program.ops if op.collective == "collective-permute"]
    assert {op.size_bytes for op in permutes} == {BATCH * SEQ * D * BF16}
    assert len(permutes) == 2 * (1 + N - 1)


def test_a_second_role_under_a_taken_name_is_refused():
    with pytest.raises(DuplicateEntryError, match="parallelism role 'data'"):
        ROLES.register("data", ROLES.get("fsdp"))
    with pytest.raises(InputError, match="unknown parallelism role 'dta'"):
        ROLES.get("dta")


def test_axes_two_roles_may_not_share_name_both_fields():
    with pytest.raises(ProgramError, match="tensor_axis 'x' is also fsdp_axis"):
        prepare_training(**DENSE, mesh={"x": 2}, fsdp_axis="x", tensor_axis="x")
    shared = prepare_training(**MOE, mesh={"data": 2}, expert_axis="data")
    assert shared.local_experts == EXPERTS // 2


def test_an_axis_without_a_role_names_every_role():
    with pytest.raises(ProgramError) as exc:
        prepare_training(**DENSE, mesh={"x": 2})
    for role in SHIPPED:
        assert role in str(exc.value) and f"{role}_axis" in str(exc.value)


def test_every_maxtext_mesh_axis_translates_to_a_registered_role():
    from tpusim.validation.maxtext_flags import MESH_FLAGS

    assert set(MESH_FLAGS.values()) <= set(ROLES.names())
    assert set(ROLES.names()[: len(SHIPPED)]) <= set(MESH_FLAGS.values())
