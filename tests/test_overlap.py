"""XLA-like overlap against closed forms: the exposed/hidden breakdown per collective
kind, HBM shared with collective DMAs, the backward tensor all-reduce beside the weight
gradient, collective matmul (windowed reduce-scatter) and the no-overlap switch."""

from __future__ import annotations

import json

import pytest

from tests.helpers import run as run_cli
from tpusim.config import load_system
from tpusim.engine import Simulation, simulate_collective
from tpusim.hardware import ChipCostModel
from tpusim.program import Op, Program
from tpusim.program.builders import training_step
from tpusim.program.builders.oplist import OpList
from tpusim.program.builders.passes import PassOptions, emit_steps
from tpusim.program.builders.template import LayerStep
from tpusim.results.overlap import (
    COLLECTIVE_KINDS,
    breakdown,
    breakdown_columns,
    column,
    purposes,
)
from tpusim.results.simulation import OpRecord

SYSTEM = "ironwood-256"
EXPOSED = "exposed_communication_time_s"
MESH = {"data": 64, "tensor": 4}


def run(*ops: Op, mesh: dict[str, int] | None = None):
    return Simulation(SYSTEM, Program("p", tuple(ops), mesh=mesh)).run()


def alone_s(op: Op, mesh: dict[str, int] | None = None) -> float:
    return run(op, mesh=mesh).step_time_s


MATMUL = Op("mm", "matmul", m=8192, n=8192, k=8192)


def test_breakdown_splits_concurrent_exposed_time_and_counts_hidden_time_whole():
    """By hand on made-up records: compute [0, 4]; an all-gather [2, 6] and an
    all-reduce [3, 8]. Hidden: all-gather 2 (2..4), all-reduce 1 (3..4); exposed: 4..6
    shared by both (1 each), 6..8 the all-reduce's alone (2)."""
    ops = [
        OpRecord("mm", "matmul", "spmd", "tensorcore", 0.0, 4.0, 1.0),
        OpRecord("ag", "collective", "spmd", "ici", 2.0, 6.0, 0.0, "all-gather"),
        OpRecord("ag", "collective", "spmd", "x+", 2.0, 6.0, 0.0, "all-gather"),
        OpRecord("ar", "collective", "spmd", "ici", 3.0, 8.0, 0.0, "all-reduce"),
        OpRecord("ar", "collective", "chip 7", "ici", 0.0, 9.0, 0.0, "all-reduce"),
    ]
    got = breakdown(ops)
    assert set(got) == set(breakdown_columns())
    assert got["hidden_all_gather_s"] == 2.0 and got["exposed_all_gather_s"] == 1.0
    assert got["hidden_all_reduce_s"] == 1.0 and got["exposed_all_reduce_s"] == 3.0
    assert sum(v for k, v in got.items() if k.startswith("exposed")) == 4.0  # 4..8
    window = breakdown(ops, 5.0, 7.0)  # 5..6 shared, 6..7 the all-reduce alone
    assert window["exposed_all_gather_s"] == 0.5 and window["exposed_all_reduce_s"] == 1.5


def test_a_collective_counts_under_the_role_that_issued_it():
    """By hand: compute [0, 2]; a tensor all-reduce [1, 3] and a context all-gather
    [1, 4]. Hidden: 1 each (1..2); exposed: 2..3 shared (0.5 each), 3..4 the
    gather's alone (1). A collective no role issued counts under its kind only."""
    ops = [
        OpRecord("mm", "matmul", "spmd", "tensorcore", 0.0, 2.0, 1.0),
        OpRecord("ar", "collective", "spmd", "ici", 1.0, 3.0, 0.0, "all-reduce", "tensor"),
        OpRecord("ag", "collective", "spmd", "ici", 1.0, 4.0, 0.0, "all-gather", "context"),
    ]
    got = breakdown(ops)
    assert (got["hidden_tensor_s"], got["exposed_tensor_s"]) == (1.0, 0.5)
    assert (got["hidden_context_s"], got["exposed_context_s"]) == (1.0, 1.5)
    assert got["exposed_data_s"] == got["hidden_fsdp_s"] == 0.0
    plain = OpRecord("x", "collective", "spmd", "ici", 1.0, 3.0, 0.0, "all-reduce")
    anonymous = breakdown([ops[0], plain])
    assert anonymous["exposed_all_reduce_s"] == 1.0
    by_role = [anonymous[column(side, p)] for p in purposes() for side in ("exposed", "hidden")]
    assert sum(by_role) == 0.0


def test_async_all_reduce_under_a_longer_matmul_is_fully_hidden():
    ar = Op("ar", "collective", collective="all-reduce", size_bytes=2**22, overlap=True)
    alone, _ = simulate_collective(SYSTEM, "all-reduce", 2**22)
    result = run(MATMUL, ar)
    got = result.communication_breakdown()
    assert alone.time_s < alone_s(MATMUL)
    assert got["exposed_all_reduce_s"] == 0.0
    assert got["hidden_all_reduce_s"] == pytest.approx(alone.time_s, rel=1e-9)
    assert result.step_time_s == pytest.approx(alone_s(MATMUL), rel=1e-9)


def test_synchronous_all_reduce_before_a_matmul_is_fully_exposed():
    ar = Op("ar", "collective", collective="all-reduce", size_bytes=2**26)
    mm = Op("mm", "matmul", m=8192, n=8192, k=8192, after=("ar",))
    alone, _ = simulate_collective(SYSTEM, "all-reduce", 2**26)
    got = run(ar, mm).communication_breakdown()
    assert got["exposed_all_reduce_s"] == pytest.approx(alone.time_s, rel=1e-9)
    assert got["hidden_all_reduce_s"] == 0.0


def test_async_all_reduce_longer_than_the_matmul_is_hidden_for_the_matmul_only():
    ar = Op("ar", "collective", collective="all-reduce", size_bytes=2**30, overlap=True)
    alone, _ = simulate_collective(SYSTEM, "all-reduce", 2**30)
    mm = alone_s(MATMUL)
    got = run(MATMUL, ar).communication_breakdown()
    assert alone.time_s > mm
    assert got["hidden_all_reduce_s"] == pytest.approx(mm, rel=1e-9)
    assert got["exposed_all_reduce_s"] == pytest.approx(alone.time_s - mm, rel=1e-9)


def test_memory_bound_op_beside_a_permute_shares_hbm_with_its_dma():
    """An elementwise op of B bytes beside an async permute from chip 0 to chip 1 (one
    link, far longer than the op; the op starts after a small matmul, once the permute
    is in flight): the DMA reads what it sends and writes what it receives at the
    link's rate, so the op runs at HBM - 2 x link bandwidth: B / (HBM - 2 W) + overhead, HBM the
    bandwidth streaming ops reach."""
    system = load_system(SYSTEM)
    sim = Simulation(
        system,
        Program(
            "p",
            (
                Op(
                    "p",
                    "collective",
                    collective="collective-permute",
                    size_bytes=2**30,
                    num_chips=2,
                    pairs=((0, 1),),
                    overlap=True,
                ),
                Op("x", "matmul", m=128, n=128, k=128),
                Op("e", "elementwise", bytes=1e9, after=("x",)),
            ),
        ),
    )
    result = sim.run()
    links = sim.topology.links
    w = float(sum(links.bandwidth_Bps[(links.src == 0) & (links.dst == 1)]))
    cost = ChipCostModel(system.chip).elementwise(1e9)
    # the HBM bandwidth streaming ops reach (the chip's efficiency term applied)
    hbm = ChipCostModel(system.chip).memory_bandwidth_Bps("hbm")
    expected = 1e9 / (hbm - 2 * w) + cost.overhead_s
    (row,) = [r for r in result.ops if r.name == "e"]
    assert row.end_at - row.start_at == pytest.approx(expected, rel=1e-9)
    assert expected > cost.time_s * 1.01  # the contention shows
    alone = Simulation(system, Program("q", (Op("e", "elementwise", bytes=1e9),))).run()
    assert alone.step_time_s == pytest.approx(cost.time_s, rel=1e-12)


def collective_matmul_ops(tp_rows: int, windowed: bool, phase: str = "fwd") -> list[Op]:
    """A projection and its tensor all-reduce: forward the matmul then the all-reduce;
    backward (templates reversed) the matmul's gradients, the all-reduce, a norm."""
    out = OpList()
    act = 4 * tp_rows * 8192 * 2.0
    mm = LayerStep("out", "matmul", m=4 * tp_rows, k=8192, n=8192)
    ar = LayerStep("ar", "collective", bytes=act, collective="all-reduce", axes=("tensor",))
    norm = LayerStep("norm", "elementwise", bytes=2**20)
    ordered = [mm, ar] if phase == "fwd" else [mm, ar, norm]
    emit_steps(out, ordered, "L0", phase, [None], PassOptions(True, windowed, MESH, "bf16"))  # type: ignore[arg-type]
    return out.ops


def test_collective_matmul_costs_first_chunk_plus_max_of_chunk_and_permute_per_step():
    """tp = 4: four row chunks of the projection, three reduce-scatter permutes of
    act / 4, then the all-gather of act: c + 3 max(c, p) + ag, each alone."""
    ops = collective_matmul_ops(8192, windowed=True)
    chunks = [o for o in ops if o.kind == "matmul"]
    permutes = [o for o in ops if o.collective == "collective-permute"]
    (gather,) = [o for o in ops if o.collective == "all-gather"]
    act = 4 * 8192 * 8192 * 2.0
    assert [o.m for o in chunks] == [8192] * 4
    assert [o.size_bytes for o in permutes] == [act / 4] * 3 and gather.size_bytes == act
    c = alone_s(Op("c", "matmul", m=8192, k=8192, n=8192))
    p = alone_s(permutes[0].__class__(**{**vars(permutes[0]), "after": ()}), MESH)
    ag = alone_s(Op("g", "collective", collective="all-gather", size_bytes=act,
                    axes=("tensor",)), MESH)  # fmt: skip
    step = run(*ops, mesh=MESH).step_time_s
    assert step == pytest.approx(c + 3 * max(c, p) + ag, rel=1e-6)
    plain = run(*collective_matmul_ops(8192, windowed=False), mesh=MESH).step_time_s
    assert step < plain


def test_backward_tensor_all_reduce_runs_beside_the_weight_gradient():
    """Backward: the all-reduce of the input gradient waits for it only; the weight
    gradient runs on beside it and the norm after waits for both: input + max(weight,
    all-reduce) + norm."""
    ops = collective_matmul_ops(8192, windowed=False, phase="bwd")
    by = {o.name: o for o in ops}
    ar = by["L0.ar.bwd"]
    assert ar.overlap and ar.after == ("L0.out.bwd_input",)
    grad_in, grad_w = by["L0.out.bwd_input"], by["L0.out.bwd_weight"]
    t_in = alone_s(Op("i", "matmul", m=grad_in.m, k=grad_in.k, n=grad_in.n))
    t_w = alone_s(Op("w", "matmul", m=grad_w.m, k=grad_w.k, n=grad_w.n))
    t_ar = alone_s(Op("a", "collective", collective="all-reduce", size_bytes=ar.size_bytes,
                      axes=("tensor",)), MESH)  # fmt: skip
    assert by["L0.norm.bwd"].after == ("L0.ar.bwd", "L0.out.bwd_weight")
    t_norm = alone_s(Op("n", "elementwise", bytes=by["L0.norm.bwd"].bytes, vector=True))
    step = run(*ops, mesh=MESH).step_time_s
    assert step == pytest.approx(t_in + max(t_w, t_ar) + t_norm, rel=1e-6)


SHAPE = dict(layers=2, d_model=1024, d_ff=4096, heads=8, head_dim=128, seq=512, batch=64)


def test_without_async_collectives_every_collective_holds_the_core_and_the_step_is_a_sum():
    fields = dict(SHAPE, mesh={"data": 16, "fsdp": 4, "tensor": 4}, fsdp_axis="fsdp")
    program = training_step(**fields, async_collectives=False)
    assert not any(o.overlap for o in program.ops if o.kind == "collective")
    result = Simulation(SYSTEM, program).run()
    assert result.step_time_s == pytest.approx(
        result.compute_time_s + result.communication_time_s, rel=1e-9
    )
    got = result.communication_breakdown()
    assert sum(v for k, v in got.items() if k.startswith("hidden")) == 0.0
    overlapped = Simulation(SYSTEM, training_step(**fields)).run()
    assert overlapped.step_time_s < result.step_time_s


def test_collective_matmul_keeps_the_flops_and_windows_every_tensor_all_reduce():
    fields = dict(SHAPE, mesh={"data": 64, "tensor": 4})
    plain = training_step(**fields)
    windowed = training_step(**fields, collective_matmul=True)
    assert windowed.flops_per_chip == pytest.approx(plain.flops_per_chip, rel=1e-12)
    ars = [o for o in windowed.ops if o.collective == "all-reduce" and o.role == "tensor"]
    assert not ars
    permutes = [o for o in windowed.ops if o.collective == "collective-permute"]
    # 2 layers x (2 forward + 2 backward) windowed all-reduces x (tp - 1) permutes
    assert len(permutes) == 2 * 4 * 3


STEP = """name: t
description: t
plots: false  # figures are tests/test_plots.py's; these tests read rows and CSVs
network: {fidelity: flow}
systems: [ironwood-256]
workloads:
  - name: step
    kind: training_step
    layers: 8
    d_model: 512
    d_ff: 2048
    heads: 8
    head_dim: 64
    seq: 256
    mlp: gated
    vocab: 4000
    batch: 512
    mesh: {data: 16, fsdp: 4, tensor: 4}
    fsdp_axis: fsdp
"""


def step_row(capsys, tmp_path, extra: str) -> dict:
    path = tmp_path / f"s{len(extra)}.yaml"
    path.write_text(STEP + extra)
    code, out, err = run_cli(capsys, "run", str(path), "--json", "--out", str(tmp_path / "o"),
                             "--quiet")  # fmt: skip
    assert code == 0, err
    (row,) = json.loads(out)["results"]
    return row


def test_training_row_reports_the_breakdown_and_reuse_extrapolates_it(capsys, tmp_path):
    """The exposed columns sum to the step's exposed communication (nothing else idles
    the core); the layers' reuse gives the same columns as the whole step simulated."""
    reused = step_row(capsys, tmp_path, "")
    whole = step_row(capsys, tmp_path, "    reuse: false\n")
    exposed = sum(reused[column("exposed", kind)] for kind in COLLECTIVE_KINDS)
    assert exposed == pytest.approx(reused[EXPOSED], rel=1e-6)
    for name in breakdown_columns():
        assert reused[name] == pytest.approx(whole[name], rel=1e-6, abs=1e-12), name
    assert reused["hidden_all_gather_s"] > 0 and reused["exposed_all_reduce_s"] > 0
    # every collective of the step has a purpose: the purposes sum as the kinds do
    by_role = sum(reused[f"exposed_{p}_s"] for p in purposes())
    assert by_role == pytest.approx(exposed, rel=1e-9)
    hidden = sum(reused[column("hidden", kind)] for kind in COLLECTIVE_KINDS)
    assert sum(reused[f"hidden_{p}_s"] for p in purposes()) == pytest.approx(hidden, rel=1e-9)
    assert reused["hidden_fsdp_s"] > 0 and reused["exposed_tensor_s"] > 0


def test_a_context_axis_counts_as_context():
    """Mesh {context: 4, data: 64}: the context role issues the K/V all-gathers and
    their gradients' reduce-scatters, and (sharding the weights as over fsdp) the
    weight gathers and gradient reduce-scatters; data the gradient all-reduces. So
    context's columns are the all-gathers' and reduce-scatters', data's the
    all-reduces' (none counts as "other")."""
    fields = dict(SHAPE, mesh={"context": 4, "data": 64})
    program = training_step(**fields)
    roles = {(o.role, o.collective) for o in program.ops if o.kind == "collective"}
    assert roles == {
        ("context", "all-gather"),
        ("context", "reduce-scatter"),
        ("data", "all-reduce"),
    }
    assert all(o.role == "context" for o in program.ops if ".cp_kv." in o.name)
    got = Simulation(SYSTEM, program).run().communication_breakdown()
    for side in ("exposed", "hidden"):
        gathers = got[column(side, "all-gather")] + got[column(side, "reduce-scatter")]
        assert got[f"{side}_context_s"] == pytest.approx(gathers, rel=1e-12)
        assert got[f"{side}_data_s"] == pytest.approx(got[column(side, "all-reduce")], rel=1e-12)
    assert got["exposed_context_s"] + got["hidden_context_s"] > 0
