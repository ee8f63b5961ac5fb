"""Pipeline parallelism in the training step against its closed forms.

Oracles, computed here and not with the builder's helpers: the op costs of one
iteration from the chip's roofline (:class:`ChipCostModel`), the schedule's
``(m v + p - 1) / (m v)`` step-time factor with the collective-permutes taken out
("no communication"), and the activations GPipe and 1F1B hold by hand.
"""

from __future__ import annotations

import pytest

from tpusim.config.loader import load_system
from tpusim.engine import Simulation
from tpusim.hardware import ChipCostModel
from tpusim.program.builders import prepare_training
from tpusim.program.builders.emit import emit_program
from tpusim.program.builders.memory import stage_memory
from tpusim.program.builders.pipeline import PipelineSchedule

SHAPE = dict(d_model=512, d_ff=2048, heads=8, head_dim=64, seq=512)
BF16 = 2


def line_system(tmp_path, chips: int):
    """A 1-D torus of ``chips`` Ironwood chips (the pipeline axis)."""
    path = tmp_path / f"ring-{chips}.yaml"
    path.write_text(
        f"name: ring-{chips}\ndescription: test ring\nchip: ironwood\n"
        f"topology: {{kind: torus, dims: [{chips}]}}\nchips: {chips}\n"
    )
    return load_system(str(path))


def op_time_s(costs: ChipCostModel, op) -> float:
    """An op's time by the roofline alone (independent of the engine's timeline)."""
    if op.kind == "matmul":
        return costs.matmul(op.m, op.n, op.k, op.dtype, op.memory, op.batch, op.grouped).time_s
    if op.kind == "kernel":
        work = (op.mxu_flops, op.padded_flops, op.vector_ops, op.bytes)
        return costs.kernel(*work, op.dtype, op.memory, op.pad_dims).time_s
    return costs.elementwise(op.bytes, op.memory, op.gather, op.vector).time_s


def loop_compute_s(program, costs, iteration: int = 0) -> float:
    """Roofline time of the compute ops of forward + backward iteration ``iteration``."""
    ops = [op for op in program.ops if op.name.startswith(f"i{iteration}.")]
    return sum(op_time_s(costs, op) for op in ops if op.kind != "collective")


def simulate(system, **kwargs):
    plan = prepare_training(**SHAPE, **kwargs)
    program = emit_program(plan)
    results = Simulation(system, program).run()
    return plan, program, results


def without_communication_s(program, results, costs) -> float:
    """Step time minus the (synchronous) permutes and the optimiser."""
    permutes = sum(
        r.end_at - r.start_at
        for r in results.ops
        if ".permute." in r.name and r.unit == "ici" and r.chips.startswith("spmd")
    )
    optimizer = next(op for op in program.ops if op.name == "optimizer")
    return results.step_time_s - permutes - op_time_s(costs, optimizer)


@pytest.mark.parametrize(("schedule", "virtual"), [("1f1b", 1), ("gpipe", 1), ("interleaved", 2)])
def test_step_is_bubble_factor_times_bubble_free_time(tmp_path, schedule, virtual):
    p, m, layers = 4, 6, 8
    system = line_system(tmp_path, p)
    costs = ChipCostModel(system.chip)
    plan, program, results = simulate(
        system, layers=layers, batch=m * 2, mesh={"pipeline": p}, microbatches=m,
        pipeline=schedule, virtual_stages=virtual,
    )  # fmt: skip
    per_chunk_s = loop_compute_s(program, costs)
    bubble_free_s = m * virtual * per_chunk_s  # every microbatch through the stage's chunks
    factor = (m * virtual + p - 1) / (m * virtual)
    assert without_communication_s(program, results, costs) == pytest.approx(
        factor * bubble_free_s, rel=1e-9
    )
    assert plan.schedule.bubble_fraction == pytest.approx((p - 1) / (m * virtual + p - 1))


def test_interleaving_divides_the_bubble_by_v(tmp_path):
    p, m, layers = 4, 4, 16
    system = line_system(tmp_path, p)
    costs = ChipCostModel(system.chip)
    bubbles = {}
    for v, schedule in ((1, "1f1b"), (2, "interleaved"), (4, "interleaved")):
        _, program, results = simulate(
            system, layers=layers, batch=m, mesh={"pipeline": p}, microbatches=m,
            pipeline=schedule, virtual_stages=v,
        )  # fmt: skip
        bubble_free_s = m * v * loop_compute_s(program, costs)
        bubbles[v] = without_communication_s(program, results, costs) - bubble_free_s
    assert bubbles[1] / bubbles[2] == pytest.approx(2, rel=1e-9)
    assert bubbles[1] / bubbles[4] == pytest.approx(4, rel=1e-9)


def test_gpipe_and_1f1b_take_the_same_time_and_hold_the_closed_form_activations(tmp_path):
    p, m, layers = 4, 8, 8
    system = line_system(tmp_path, p)
    kwargs = dict(layers=layers, batch=m, mesh={"pipeline": p}, microbatches=m)
    gpipe_plan, _, gpipe = simulate(system, pipeline="gpipe", **kwargs)
    onef_plan, _, onef = simulate(system, pipeline="1f1b", **kwargs)
    assert gpipe.step_time_s == onef.step_time_s
    d, h, hd, seq, ff = 512, 8, 64, 512, 2048
    tokens = seq  # one sequence per microbatch
    # flash attention keeps the fp32 logsumexp (4 bytes per query row and head), not the scores
    per_layer = (tokens * (6 * d + 4 * h * hd) + 2 * tokens * ff) * BF16 + h * seq * 4
    stage_layers = layers // p
    assert stage_memory(gpipe_plan, 0).activations_bytes == m * stage_layers * per_layer
    for stage in range(p):
        in_flight = min(m, p - stage)
        want = in_flight * stage_layers * per_layer
        assert stage_memory(onef_plan, stage).activations_bytes == want


def test_recompute_keeps_layer_inputs_and_one_layer(tmp_path):
    p, m = 2, 4
    plan = prepare_training(**SHAPE, layers=4, batch=m, mesh={"pipeline": p}, microbatches=m,
                         recompute=True)  # fmt: skip
    d, h, hd, seq, ff = 512, 8, 64, 512, 2048
    full = (seq * (6 * d + 4 * h * hd) + 2 * seq * ff) * BF16 + h * seq * 4  # flash: logsumexp
    memory = stage_memory(plan, 0)
    assert memory.activations_bytes == min(m, p) * 2 * seq * d * BF16
    assert memory.buffers_bytes == full


def test_uneven_layers_balance_within_one():
    s = PipelineSchedule.of(61, 16, 1, 8, "1f1b")
    assert sum(s.chunk_layers) == 61
    assert max(s.chunk_layers) - min(s.chunk_layers) == 1
    assert [s.stage_layers(0)[0], s.stage_layers(15)[-1]] == [0, 60]
    v = PipelineSchedule.of(10, 2, 2, 4, "interleaved")
    assert v.chunk_layers == (3, 3, 2, 2) and v.stage_layers(0) == [0, 1, 2, 6, 7]


def test_schedule_orders_hold_what_in_flight_says():
    for kind, v in (("gpipe", 1), ("1f1b", 1), ("interleaved", 2)):
        s = PipelineSchedule.of(16, 4, v, 8, kind)
        for stage in range(4):
            held = s.held(stage)
            assert max(held) == s.in_flight(stage) and held[-1] == 0 and min(held) >= 0


def test_memory_timeline_rises_with_forwards_and_falls_with_backwards(tmp_path):
    """Stage 0 of a 4-stage 1F1B pipeline of 8 layers (2 a stage), 8 microbatches: one
    point per layer of each of its 16 forwards and backwards, then the end; its
    activations peak at the schedule's in-flight count (4) of 2 layers' kept bytes,
    rise by one layer's kept bytes per forward layer and end at 0."""
    from tpusim.program.builders.memory import MEMORY_PARTS, kept_bytes, memory_timeline
    from tpusim.report import workload_plots as plots_workloads

    p, m = 4, 8
    plan = prepare_training(**SHAPE, layers=8, batch=m, mesh={"pipeline": p}, microbatches=m)
    points = memory_timeline(plan, 0)
    peak = stage_memory(plan, 0)
    activations = [parts["activations"] for _, parts in points]
    one_layer = kept_bytes(plan, 0)
    assert max(activations) == pytest.approx(4 * 2 * one_layer) == peak.activations_bytes
    assert activations[:3] == pytest.approx([one_layer, 2 * one_layer, 2 * one_layer + one_layer])
    assert activations[-1] == 0 and points[-1][0] == 1.0
    assert len(points) == 2 * m * 2 + 1
    assert all(list(parts) == list(MEMORY_PARTS) for _, parts in points)
    fig = plots_workloads.memory_timeline(points, 192e9, path=tmp_path / "memory")
    assert (tmp_path / "memory.png").stat().st_size > 10_000
    assert fig.axes[0].get_ylabel() == "HBM per chip (GB)"


def test_memory_timeline_of_one_stage_peaks_at_the_memory_model():
    """One stage, no accumulation, full remat under FSDP: the layer-by-layer timeline's
    highest total is the memory model's peak (every layer has one shape), the
    gradients appear at the first backward (scan's stacked gradient buffer) and the
    loss point holds the logits."""
    from tpusim.program.builders.memory import logits_bytes, memory_timeline, peak_stage

    plan = prepare_training(**SHAPE, layers=4, batch=8, mesh={"fsdp": 8}, recompute=True)
    points = memory_timeline(plan, 0)
    totals = [sum(parts.values()) for _, parts in points]
    assert max(totals) == pytest.approx(peak_stage(plan).total_bytes)
    grads = [parts["gradients"] for _, parts in points]
    assert grads[:4] == [0.0] * 4 and grads[5] == peak_stage(plan).gradients_bytes
    assert points[4][1]["buffers"] == logits_bytes(plan) and len(points) == 4 + 1 + 4 + 1
