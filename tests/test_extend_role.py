"""A parallelism role added from this file alone (registered here, removed after):
``replica``, a second data-parallel axis (as a DCN data axis is), outermost in the
planner's meshes. A training step on it, the training_step workload run from a
scenario and the planner's candidates use it, its ``replica_axis`` field comes with
the registration and its collectives are reported under its own purpose
(``exposed_replica_s``, ``hidden_replica_s``); its effect is checked against counts
by hand and against the data role's on the same mesh.

Oracles: a plain MLP, MHA layer holds ``4 D H HD + 2 D FF + 2 D`` parameters (Q, K,
V, O, the MLP's two matrices, two norm scales); every one of them is replicated over
a data-like axis and its bf16 gradient all-reduced over it once per step; the batch
is split over it. The planner's meshes are the ordered factorisations of the chip
count over the roles it searches: ``C(k + r - 1, r - 1)`` for ``2^k`` chips over
``r`` roles.
"""

from __future__ import annotations

import json
import math

import pytest

from tests.helpers import run
from tpusim.config.loader import load_chip
from tpusim.engine import Simulation
from tpusim.planner.candidates import layouts, searched_roles
from tpusim.planner.memory import prune
from tpusim.planner.search import classes
from tpusim.program import ProgramError
from tpusim.program.builders import prepare_training, training_step
from tpusim.program.builders.emit import emit_program
from tpusim.program.builders.memory import saved_bytes
from tpusim.program.builders.roles import ROLES, PlannerCandidates, Role
from tpusim.results.overlap import COLLECTIVE_KINDS, column
from tpusim.workloads.training_step import TrainingWorkload

D, FF, H, HD, SEQ, LAYERS, BATCH = 64, 128, 4, 16, 32, 2, 16
P_LAYER = 4 * D * H * HD + 2 * D * FF + 2 * D
BF16 = 2
SHAPE = dict(d_model=D, d_ff=FF, heads=H, head_dim=HD, seq=SEQ, layers=LAYERS)

REPLICA = Role(
    "replica",
    "a second data-parallel axis (another slice's replicas)",
    frozenset({"batch"}),
    frozenset({"all-reduce"}),
    frozenset({"activations"}),
    PlannerCandidates(-1),
)


@pytest.fixture(autouse=True)
def replica_role():
    ROLES.register("replica", REPLICA)
    yield REPLICA
    ROLES.unregister("replica")


def test_a_mesh_axis_named_after_the_new_role_splits_the_batch_and_syncs_gradients():
    n = 4
    step = prepare_training(**SHAPE, batch=BATCH, mesh={"replica": n})
    alone = prepare_training(**SHAPE, batch=BATCH, mesh={"data": 1})
    assert step.local_params == alone.local_params == LAYERS * P_LAYER
    assert step.dense.seqs == BATCH // n
    assert saved_bytes(step.dense) == pytest.approx(saved_bytes(alone.dense) / n, rel=1e-12)
    collectives = [op for op in emit_program(step).ops if op.kind == "collective"]
    assert {op.collective for op in collectives} == REPLICA.collectives
    assert {op.axes for op in collectives} == {("replica",)}
    assert sum(op.size_bytes for op in collectives) == LAYERS * P_LAYER * BF16


def test_the_new_role_with_data_shards_the_batch_over_both():
    step = prepare_training(**SHAPE, batch=BATCH, mesh={"replica": 2, "data": 4})
    assert step.dense.seqs == BATCH // 8
    assert set(step.dense_axes) == {"data", "replica"}


def test_the_workload_runs_it_from_a_scenario(capsys, tmp_path):
    """batch_per_shard counts the new role's shards with the data axis's (2 x 128 of
    the 256 chips, one sequence each): the run's tokens per step are theirs."""
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: t\ndescription: t\nnetwork: {fidelity: analytic}\nsystems: [ironwood-256]\n"
        "workloads:\n  - name: step\n    kind: training_step\n"
        f"    layers: {LAYERS}\n    d_model: {D}\n    d_ff: {FF}\n    heads: {H}\n"
        f"    head_dim: {HD}\n    seq: {SEQ}\n    batch_per_shard: 1\n"
        "    mesh: {replica: 2, data: 128}\n"
    )
    code, out, err = run(
        capsys, "run", str(path), "--json", "--quiet", "--out", str(tmp_path / "o")
    )
    assert code == 0, err
    row = json.loads(out)["results"][0]
    tokens = row["tokens_per_s"] * row["step_time_s"]
    assert tokens == pytest.approx(2 * 128 * SEQ, rel=1e-12)


def test_the_planner_searches_it_outermost_and_keeps_its_split_apart():
    roles = [r.name for r in searched_roles()]
    assert roles[0] == "replica"
    model = SHAPE | {"layers": 1, "global_batch": 4, "seq": SEQ}
    known = set(TrainingWorkload.model_fields)
    found = list(layouts(4, 4, model, known, lambda mesh: True))
    meshes = {tuple(layout.mesh.items()) for layout in found}
    # data, fsdp, tensor and replica (one layer: no pipeline; no experts, short seq)
    assert len(meshes) == math.comb(2 + 4 - 1, 4 - 1)
    assert (("replica", 2), ("fsdp", 2)) in meshes
    assert all(next(iter(dict(m))) == "replica" for m in meshes if ("replica", 2) in m)
    base = SHAPE | {"layers": 1, "global_batch": 4}
    report = prune(found, base, load_chip("ironwood"))
    with_replica = [f for f in report.fitting if "replica" in f.layout.mesh]
    assert with_replica
    for f in with_replica:
        shards = math.prod(f.layout.mesh.get(r, 1) for r in ("data", "fsdp", "replica"))
        assert f.step.dense.seqs * f.layout.microbatches * shards == 4
    for group in classes(report.fitting).values():
        assert len({f.layout.roles["replica"] for f in group}) == 1


TP = 4
MESH_WITH_TP = {"dcn": 64, "tensor": TP}
SYSTEM = "ironwood-256"


def test_the_new_role_brings_its_axis_field_to_the_builder_and_the_workload():
    """``replica_axis`` (from the registration alone) names the axis ``dcn`` for the
    role: the batch is split over it and the gradients (every parameter, the
    tensor-sharded matrices at 1/TP, the norms whole) all-reduced over it, issued by
    the new role."""
    assert "replica_axis" in TrainingWorkload.field_names()
    step = prepare_training(**SHAPE, batch=64, mesh=MESH_WITH_TP, replica_axis="dcn")
    assert step.dense.seqs == 64 // 64
    grads = [op for op in emit_program(step).ops if op.axes == ("dcn",)]
    assert {op.role for op in grads} == {"replica"}
    local = (4 * D * H * HD + 2 * D * FF) / TP + 2 * D
    assert sum(op.size_bytes for op in grads) == LAYERS * local * BF16
    with pytest.raises(ProgramError, match="replica_axis: Input should be a valid string"):
        prepare_training(**SHAPE, batch=64, mesh=MESH_WITH_TP, replica_axis=3)


def test_its_collectives_count_under_its_own_purpose():
    """The same step with the data role on an axis of the same size: the new role's
    exposed and hidden gradient time is what data's is there (the roles have the same
    effect), reported under ``replica``, with nothing under ``data``."""
    mine = Simulation(
        SYSTEM, training_step(**SHAPE, batch=64, mesh=MESH_WITH_TP, replica_axis="dcn")
    ).run()
    data = Simulation(
        SYSTEM, training_step(**SHAPE, batch=64, mesh={"data": 64, "tensor": TP})
    ).run()
    got, want = mine.communication_breakdown(), data.communication_breakdown()
    assert got["exposed_replica_s"] + got["hidden_replica_s"] > 0
    assert got["exposed_data_s"] == got["hidden_data_s"] == 0.0
    for side in ("exposed", "hidden"):
        assert got[f"{side}_replica_s"] == pytest.approx(want[f"{side}_data_s"], rel=1e-12)
        assert got[f"{side}_tensor_s"] == pytest.approx(want[f"{side}_tensor_s"], rel=1e-12)
        kinds = sum(got[column(side, kind)] for kind in COLLECTIVE_KINDS)
        assert got[f"{side}_replica_s"] + got[f"{side}_tensor_s"] == pytest.approx(kinds)


def test_a_scenario_names_its_axis_and_reports_its_purpose(capsys, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: t\ndescription: t\nplots: false\nnetwork: {fidelity: analytic}\n"
        f"systems: [{SYSTEM}]\nworkloads:\n  - name: step\n    kind: training_step\n"
        f"    layers: {LAYERS}\n    d_model: {D}\n    d_ff: {FF}\n    heads: {H}\n"
        f"    head_dim: {HD}\n    seq: {SEQ}\n    batch: 64\n"
        "    mesh: {dcn: 64, tensor: 4}\n    replica_axis: dcn\n"
    )
    code, out, err = run(
        capsys, "run", str(path), "--json", "--quiet", "--out", str(tmp_path / "o")
    )
    assert code == 0, err
    row = json.loads(out)["results"][0]
    assert row["exposed_replica_s"] + row["hidden_replica_s"] > 0
    assert row["exposed_data_s"] == row["hidden_data_s"] == 0.0
