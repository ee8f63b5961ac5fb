"""The peak stage counted once per stage content against every stage counted.

Oracle: the maximum of :func:`stage_memory` over every pipeline stage, first of
equals (what :func:`peak_stage` computed before it skipped stages), and the
schedule property the skipping rests on (``in_flight`` never grows with the stage),
checked by hand counts.
"""

from __future__ import annotations

import itertools

import pytest

from tpusim.program.builders import prepare_training
from tpusim.program.builders.memory import peak_stage, stage_content, stage_memory
from tpusim.program.builders.pipeline import PipelineSchedule

SHAPE = dict(d_model=256, d_ff=1024, heads=8, head_dim=32, seq=256)


def every_stage(step):
    """The stage of most bytes over all stages, the first of equals."""
    stages = [stage_memory(step, s) for s in range(step.schedule.stages)]
    return max(stages, key=lambda m: m.total_bytes)


@pytest.mark.parametrize("kind", ["gpipe", "1f1b", "interleaved"])
def test_in_flight_never_grows_with_the_stage(kind):
    for p, v, m in itertools.product((1, 2, 3, 5, 8), (1, 2, 3), (1, 2, 4, 16)):
        s = PipelineSchedule.of(24, p, v if kind == "interleaved" else 1, m, kind)
        counts = [s.in_flight(stage) for stage in range(p)]
        assert counts == sorted(counts, reverse=True), (p, v, m, counts)


CASES = [
    # (layers, stages, virtual, microbatches, schedule, extra fields)
    (7, 4, 1, 4, "1f1b", {}),
    (8, 4, 1, 8, "gpipe", {}),
    (13, 4, 2, 4, "interleaved", {}),
    (9, 3, 1, 1, "1f1b", {"recompute": True}),
    (10, 4, 1, 2, "1f1b", {"experts": 4, "dense_layers": 3, "top_k": 2}),
    (11, 2, 3, 4, "interleaved", {"experts": 4, "dense_layers": 5, "top_k": 1}),
    (12, 4, 1, 4, "1f1b", {"remat_policy": "minimal", "vocab": 1000}),
]


def pipelined_step(layers, p, v, m, kind, extra):
    """A CASES row's step: ``layers`` over ``p`` stages of ``v`` chunks, ``m``
    microbatches (one sequence each) on the ``kind`` schedule."""
    return prepare_training(
        **SHAPE,
        layers=layers,
        batch=m,
        mesh={"pipeline": p},
        microbatches=m,
        pipeline=kind,
        virtual_stages=v,
        **extra,
    )


def mixed_step():
    """10 layers (3 dense, then 7 MoE) over 4 stages: chunks of 3, 3, 2, 2 layers."""
    return prepare_training(
        **SHAPE,
        layers=10,
        batch=4,
        mesh={"pipeline": 4},
        microbatches=4,
        experts=4,
        dense_layers=3,
        top_k=2,
    )


@pytest.mark.parametrize(("layers", "p", "v", "m", "kind", "extra"), CASES)
def test_peak_stage_is_the_peak_of_every_stage(layers, p, v, m, kind, extra):
    step = pipelined_step(layers, p, v, m, kind, extra)
    assert peak_stage(step) == every_stage(step)


def test_stage_content_tells_uneven_and_mixed_stages_apart():
    step = mixed_step()
    # chunks of 3, 3, 2, 2 layers: 0-2 dense, 3-5 and 6-7 and 8-9 MoE
    dense, moe = id(step.dense), id(step.moe)
    assert [stage_content(step, s) for s in range(4)] == [
        (((dense, 3),),),
        (((moe, 3),),),
        (((moe, 2),),),
        (((moe, 2),),),
    ]


def test_layer_runs_split_dense_from_moe_layers():
    step = mixed_step()
    assert step.layer_runs(range(0, 3)) == [(0, 3)]
    assert step.layer_runs(range(2, 6)) == [(2, 1), (3, 3)]
    assert step.layer_runs(range(6, 8)) == [(6, 2)]
    dense_only = prepare_training(**SHAPE, layers=5, batch=2, mesh={"pipeline": 2})
    assert dense_only.layer_runs(range(0, 3)) == [(0, 3)]


@pytest.mark.parametrize(("layers", "p", "v", "m", "kind", "extra"), CASES)
def test_stage_params_is_the_sum_over_the_stage_layers(layers, p, v, m, kind, extra):
    step = pipelined_step(layers, p, v, m, kind, extra)
    for stage in range(p):
        held = step.schedule.stage_layers(stage)
        want = sum(step.params(layer).total for layer in held) + step.head_params
        assert step.stage_params(stage) == want
