"""Forms XLA's TPU backend prints, hand-written: host-offload copies, loops whose trip
count only the induction variable says, mesh replica groups with a separate device
order, an instruction over several lines."""

from __future__ import annotations

import re

import pytest

from tpusim.program.hlo import hlo_to_program, parse_hlo
from tpusim.program.hlo.replica_groups import parse_replica_groups, with_device_ids

HOST_COPIES = """HloModule offload, num_partitions=1

ENTRY %main (p: f32[1024,256]) -> f32[1024,256] {
  %p = f32[1024,256]{1,0:T(8,128)} parameter(0)
  %cs = (f32[1024,256]{1,0:T(8,128)S(5)}, f32[1024,256]{1,0:T(8,128)}, u32[]{:S(2)}) copy-start(%p)
  %n = f32[1024,256]{1,0:T(8,128)} negate(%p)
  %cd = f32[1024,256]{1,0:T(8,128)S(5)} copy-done(%cs)
  %back = (f32[1024,256]{1,0}, f32[1024,256]{1,0:S(5)}, u32[]{:S(2)}) copy-start(%cd)
  %cd2 = f32[1024,256]{1,0:T(8,128)} copy-done(%back)
  %local = (f32[1024,256]{1,0:S(1)}, f32[1024,256]{1,0}, u32[]) copy-start(%p)
  %cd3 = f32[1024,256]{1,0:S(1)} copy-done(%local)
  ROOT %a = f32[1024,256]{1,0:T(8,128)} add(%n, %cd2)
}
"""


def test_host_offload_copies_are_async_host_transfers():
    """A copy-start to host memory (S(5)) and one back: two overlapping host transfers
    of the array (1024 x 256 x 4 bytes), the second after the first; a copy between
    device memories (S(1)) stays free."""
    program = hlo_to_program(parse_hlo(HOST_COPIES))
    hosts = [op for op in program.ops if op.kind == "host_transfer"]
    assert [(op.name, op.bytes, op.overlap) for op in hosts] == [
        ("cs", 1024 * 256 * 4, True),
        ("back", 1024 * 256 * 4, True),
    ]
    assert hosts[1].after == ("cs",)
    assert "local" not in {op.name for op in program.ops}


LOOP = """HloModule loop

%body (p: (s32[], f32[8,8])) -> (s32[], f32[8,8]) {
  %p = (s32[], f32[8,8]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %x = f32[8,8]{1,0} get-tuple-element(%p), index=1
  %d = f32[8,8]{1,0} dot(%x, %x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %c = s32[] copy(%i)
  %step = s32[] constant(STEP)
  %next = s32[] OP(%c, %step)
  ROOT %t = (s32[], f32[8,8]{1,0}) tuple(%next, %d)
}

%cond (p: (s32[], f32[8,8])) -> pred[] {
  %p = (s32[], f32[8,8]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %limit = s32[] constant(LIMIT)
  ROOT %lt = pred[] compare(%i, %limit), direction=DIR
}

ENTRY %main (x: f32[8,8]) -> (s32[], f32[8,8]) {
  %x = f32[8,8]{1,0} parameter(0)
  %start = s32[] constant(START)
  %s = s32[] bitcast(%start)
  %init = (s32[], f32[8,8]{1,0}) tuple(%s, %x)
  ROOT %w = (s32[], f32[8,8]{1,0}) while(%init), condition=%cond, body=%body
}
"""


def _python_trips(start: int, direction: str, limit: int, step: int) -> int:
    """The iterations of the loop, run in Python (the oracle)."""
    test = {
        "LT": lambda i: i < limit,
        "LE": lambda i: i <= limit,
        "GT": lambda i: i > limit,
        "GE": lambda i: i >= limit,
        "NE": lambda i: i != limit,
    }[direction]
    i, n = start, 0
    while test(i) and n < 10_000:
        i, n = i + step, n + 1
    return n


@pytest.mark.parametrize(
    ("start", "direction", "limit", "step"),
    [
        (0, "LT", 80, 1),
        (0, "LE", 9, 2),
        (3, "LT", 10, 3),
        (10, "GT", 0, -1),
        (10, "GE", 1, -3),
        (0, "NE", 12, 4),
        (5, "LT", 5, 1),
    ],
)
def test_the_trip_count_is_read_from_the_induction_variable(start, direction, limit, step):
    op = "add" if step > 0 else "subtract"
    text = (
        LOOP.replace("START", str(start))
        .replace("LIMIT", str(limit))
        .replace("DIR", direction)
        .replace("STEP", str(abs(step)))
        .replace("OP", op)
    )
    module = parse_hlo(text)
    trips = _python_trips(start, direction, limit, step)
    assert module.computations["main"].instructions["w"].inferred_trips == trips
    assert module.flops_per_chip == pytest.approx(trips * 2 * 8 * 8 * 8 + trips, abs=trips)
    assert not module.unknown_ops


def test_a_loop_of_unknown_trip_count_is_named():
    """A limit that is a parameter, not a constant: run once, named in unknown_ops."""
    text = LOOP.replace(
        "%limit = s32[] constant(LIMIT)", "%limit = s32[] get-tuple-element(%p), index=0"
    )
    text = text.replace("START", "0").replace("DIR", "LT").replace("STEP", "1").replace("OP", "add")
    module = parse_hlo(text)
    assert module.computations["main"].instructions["w"].inferred_trips is None
    assert module.unknown_ops == {"while (trip count unknown, run once)": 1}


def test_mesh_groups_with_a_separate_device_order():
    """mesh [2,1,2] over devices iota [2,2] transposed (0, 2, 1, 3): along axis_0 the
    groups pair mesh positions (0, j) and (1, j), devices {0, 1} and {2, 3}."""
    text = with_device_ids("mesh['axis_0'=2,'axis_1'=1,'axis_2'=2]", "([2,2]T(1,0)) {'axis_0'}")
    assert parse_replica_groups(text) == [[0, 1], [2, 3]]
    with pytest.raises(ValueError, match="unknown replica group syntax"):
        with_device_ids("{{0,1}}", "(0,1) {'a'}")


def test_an_instruction_over_several_lines_is_one_instruction():
    """A Pallas call's frontend_attributes may hold newlines (kernel metadata): the
    instruction continues until its brackets close."""
    text = (
        "HloModule m\n\nENTRY %e (p: f32[4]) -> f32[4] {\n"
        "  %p = f32[4]{0} parameter(0)\n"
        '  ROOT %n = f32[4]{0} negate(%p), frontend_attributes={k={\n"x":"1\n'
        '"}}, metadata={op_name="n"}\n}\n'
    )
    root = parse_hlo(text).computations["e"].root
    assert root.opcode == "negate" and root.line == 5 and root.attrs["metadata"]


def test_sparsecore_collectives_run_on_the_sparsecore_engine():
    """The fixture compiled with the SparseCore offload flags: its collectives on the
    ``sparsecore`` thread carry engine ``sparsecore``; a simulation on a chip with
    SparseCores (v5p: 4) runs them with that engine's model, one without (v5e: none)
    with the run's, and a run given its own model (``--engine``) keeps it."""
    from pathlib import Path

    from tpusim.collectives.offload import OnChipModel
    from tpusim.config import load_system
    from tpusim.engine import RunSettings, Simulation
    from tpusim.program.hlo.artifact import load_compiled

    path = Path(__file__).parent / "fixtures" / "compiled" / "dense-tpu7x-sparsecore.json.gz"
    _, program, artifact = load_compiled(path)
    offloaded = [op for op in program.ops if op.engine == "sparsecore"]
    calls = re.findall(
        r'%([\w.\-]+) = .* call-start\(.*async_execution_thread="sparsecore"', artifact.hlo
    )
    assert {op.name.split("/")[-1] for op in offloaded} == set(calls)  # loops unrolled
    assert all(op.kind == "collective" and op.overlap for op in offloaded)
    v5p = Simulation(load_system("v5p-pod"), program, RunSettings())
    assert v5p.onchip.engine == "tensorcore"
    assert v5p.onchip_of(offloaded[0]).engine == "sparsecore"
    v5e = Simulation(load_system("v5e-pod"), program, RunSettings())
    assert v5e.onchip_of(offloaded[0]) is v5e.onchip
    given = Simulation(load_system("v5p-pod"), program, RunSettings(), onchip=OnChipModel.none())
    assert given.onchip_of(offloaded[0]).engine == "none"


ASYNC_CUSTOM_CALL = """HloModule sc, num_partitions=4

%gather (p: bf16[64,128]) -> bf16[256,128] {
  %p = bf16[64,128]{1,0} parameter(0)
  ROOT %ag = bf16[256,128]{1,0} all-gather(%p), channel_id=7, replica_groups=[1,4]<=[4], \
dimensions={0}, use_global_device_ids=true
}, execution_thread="sparsecore"

ENTRY %main (x: bf16[64,128]) -> bf16[256,128] {
  %x = bf16[64,128]{1,0} parameter(0)
  %n = bf16[64,128]{1,0} negate(%x)
  %s = ((), (), (s32[16]{0})) custom-call-start(), async_execution_thread="sparsecore", \
custom_call_target="TODO", called_computations={%gather}
  %u = ((bf16[64,128]{1,0}), bf16[256,128]{1,0}, (s32[16]{0})) custom-call-update(%s, %n)
  ROOT %d = bf16[256,128]{1,0} custom-call-done(%u)
}
"""


def test_an_async_custom_call_runs_its_collective_on_the_sparsecore():
    """libtpu 0.0.5x's SparseCore all-gather: custom-call-start (no operand) calls the
    collective's computation, custom-call-update hands it the data, custom-call-done
    waits. One asynchronous all-gather of 256 x 128 bf16 over 4 devices, after the
    negate that makes its input, on the SparseCore."""
    module = parse_hlo(ASYNC_CUSTOM_CALL)
    assert dict(module.collectives) == {"all-gather": 1}
    assert module.collective_bytes_per_chip == 256 * 128 * 2
    assert not module.unknown_ops
    program = hlo_to_program(module)
    (op,) = [op for op in program.ops if op.kind == "collective"]
    assert (op.name, op.after, op.overlap, op.engine) == ("u", ("n",), True, "sparsecore")
