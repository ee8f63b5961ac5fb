"""The replay of a scheduled HLO module follows XLA's schedule (:mod:`tpusim.program.hlo.
schedule`): hand-written modules of one async all-gather and two matmuls, timed in
closed form.

Each matmul carries XLA's estimate (``estimated_cycles``) and is replayed with XLA's
costs at a 1 GHz clock, so it takes exactly ``CYCLES`` ns; the all-gather's time ``C``
is that of the same all-gather replayed alone. The closed forms: a collective started
before two matmuls and waited for after them is hidden (``max(2 T, C)``); one waited for
before them is exposed (``C + 2 T``), whether or not the matmuls use its result.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tpusim.engine import RunSettings, Simulation
from tpusim.network import NetworkSettings
from tpusim.program.hlo import hlo_to_program, parse_hlo, replay_program

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "hlo_schedule"
CLOCK_HZ = 1e9
#: XLA's estimate of each matmul, cycles (1 ms at CLOCK_HZ).
CYCLES = 1_000_000
T_S = CYCLES / CLOCK_HZ
HEADER = "HloModule sched{scheduled}, num_partitions=2"
PARAMS = (
    "ENTRY %main (a: bf16[1024,1024], b: bf16[1024,1024], x: bf16[{rows},1024]) -> bf16[] {{",
    "  %a = bf16[1024,1024]{{1,0}} parameter(0)",
    "  %b = bf16[1024,1024]{{1,0}} parameter(1)",
    "  %x = bf16[{rows},1024]{{1,0}} parameter(2)",
)
START = (
    "  %ags = (bf16[{rows},1024]{{1,0}}, bf16[{gathered},1024]{{1,0}}) all-gather-start(%x), "
    "channel_id=1, replica_groups={{{{0,1}}}}, dimensions={{0}}, use_global_device_ids=true"
)
DONE = "  %agd = bf16[{gathered},1024]{{1,0}} all-gather-done(%ags)"
ESTIMATE = 'backend_config={{"window_config":{{"estimated_cycles":"' + str(CYCLES) + '"}}}}'
DOT1 = (
    "  %d1 = bf16[1024,1024]{{1,0}} dot(%a, %b), lhs_contracting_dims={{1}}, "
    "rhs_contracting_dims={{0}}, " + ESTIMATE
)
DOT2 = (
    "  %d2 = bf16[1024,1024]{{1,0}} dot(%d1, %b), lhs_contracting_dims={{1}}, "
    "rhs_contracting_dims={{0}}, " + ESTIMATE
)
#: d1 reads the gathered array: a consumer of the all-gather.
DOT1_USES = (
    "  %d1 = bf16[{gathered},1024]{{1,0}} dot(%agd, %b), lhs_contracting_dims={{1}}, "
    "rhs_contracting_dims={{0}}, " + ESTIMATE
)
#: A second matmul independent of the first.
DOT2_ALONE = DOT2.replace("%d1, %b", "%a, %b")
ROOT = "  ROOT %t = (bf16[1024,1024]{{1,0}}, bf16[{gathered},1024]{{1,0}}) tuple({root})\n}}"


def module_text(body: list[str], rows: int, scheduled: bool = True, root: str = "%d2, %agd") -> str:
    """A 2-device module: ``body`` (lines of the templates above) between the
    parameters and the root, ``rows`` rows of 1024 bf16 gathered per device."""
    fields = {"rows": rows, "gathered": 2 * rows, "root": root}
    header = HEADER.format(scheduled=", is_scheduled=true" if scheduled else "")
    lines = [header, "", *PARAMS, *body, ROOT]
    return "\n".join(line.format(**fields) for line in lines) + "\n"


def step_s(text: str) -> float:
    """The module replayed on v5e-pod (analytic network) with XLA's op costs."""
    module = parse_hlo(text, "sched.hlo")
    program = replay_program(module, hlo_to_program(module), 256, clock_hz=CLOCK_HZ)
    return (
        Simulation("v5e-pod", program, RunSettings(NetworkSettings.of("analytic")))
        .run()
        .step_time_s
    )


def gather_s(rows: int) -> float:
    """The all-gather alone: started and waited for, nothing else."""
    return step_s(module_text([START, DONE], rows, root="%a, %agd"))


@pytest.fixture(scope="module", params=[256, 65536], ids=["short", "long"])
def rows(request) -> int:
    """A gather shorter than one matmul (0.5 MiB per device) and one longer than two
    (128 MiB per device on a v5e link)."""
    return int(request.param)


def test_the_closed_form_parts_are_what_the_sizes_say():
    assert step_s(module_text([DOT1, DOT2], 256, root="%d2, %x")) == pytest.approx(2 * T_S)
    short, long = gather_s(256), gather_s(65536)
    assert 0 < short < T_S < 2 * T_S < long  # both regimes below are exercised


def test_a_collective_started_before_the_matmuls_is_hidden_under_them(rows):
    text = module_text([START, DOT1, DOT2, DONE], rows)
    assert step_s(text) == pytest.approx(max(2 * T_S, gather_s(rows)), rel=1e-9)


def test_a_start_waits_for_the_tensorcore_ops_before_it(rows):
    """Placed after the first matmul, the gather starts when that matmul ends."""
    text = module_text([DOT1, START, DOT2, DONE], rows)
    assert step_s(text) == pytest.approx(T_S + max(T_S, gather_s(rows)), rel=1e-9)


def test_a_consumer_right_after_the_start_serializes(rows):
    text = module_text([START, DONE, DOT1_USES, DOT2_ALONE], rows)
    assert step_s(text) == pytest.approx(gather_s(rows) + 2 * T_S, rel=1e-9)


def test_the_tensorcore_waits_at_the_done_even_for_ops_that_do_not_use_it(rows):
    """XLA's order is the TensorCore's: matmuls after the ``-done`` wait for the
    collective although they do not read it."""
    text = module_text([START, DONE, DOT1, DOT2], rows)
    assert step_s(text) == pytest.approx(gather_s(rows) + 2 * T_S, rel=1e-9)


def test_an_unscheduled_module_runs_by_data_dependencies(rows):
    """Without ``is_scheduled=true`` nothing but the operands orders the ops: the
    matmuls that do not read the gather run under it."""
    text = module_text([START, DONE, DOT1, DOT2], rows, scheduled=False)
    assert step_s(text) == pytest.approx(max(2 * T_S, gather_s(rows)), rel=1e-9)


def test_compute_runs_in_the_module_order():
    """Two independent matmuls listed in the order d2-like, d1-like: the program's
    TensorCore ops come after one another in the module's order."""
    body = [DOT1, DOT2_ALONE]
    module = parse_hlo(module_text(body, 256, root="%d2, %x"), "sched.hlo")
    ops = {op.name: op for op in hlo_to_program(module).ops}
    assert ops["d2"].after == ("d1",)


#: XLA's TPU form of an async all-gather (start, continuation, done fusions), as a
#: ``str.format`` template of ``rows``, ``gathered`` and the matmul's ``estimate``.
FUSED_MODULE = (FIXTURES / "async_collective_fusion.hlo.template").read_text()


def test_an_async_collective_fusion_runs_under_its_continuation(rows):
    """XLA's TPU form of an async collective: a start fusion, a continuation fusion
    that computes while the transfer proceeds (it carries the collective's buffers),
    a done fusion. The continuation's matmul does not wait for the transfer."""
    fields = {"rows": rows, "gathered": 2 * rows, "estimate": ESTIMATE.format()}
    text = FUSED_MODULE.format(**fields)
    assert step_s(text) == pytest.approx(max(T_S, gather_s(rows)), rel=1e-9)
