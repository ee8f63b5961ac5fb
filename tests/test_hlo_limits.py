"""HLO input limits (issue 16): the call-graph check against a real walk, and each
limit at its boundary (one under is read, one over is a ``file:line`` error)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tpusim.program.hlo import MAX_UNROLL, parse_hlo, parse_replica_groups, parse_shape
from tpusim.program.hlo.callgraph import (
    EVERY_CALL,
    MAX_CALL_DEPTH,
    MAX_EXECUTIONS,
    MAX_WALK_SITES,
    Policy,
    check_call_graph,
    walk,
)
from tpusim.program.hlo.devices import MAX_DEVICES
from tpusim.program.hlo.parse import parse_text
from tpusim.program.hlo.shapes import MAX_TUPLE_DEPTH
from tpusim.program.ir import ProgramError

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "hlo"
CORPUS = Path(__file__).resolve().parent / "corpus" / "hlo"
UNROLLED = Policy(EVERY_CALL.follow, unroll_up_to=MAX_UNROLL)


def _generate():
    spec = importlib.util.spec_from_file_location("hlo_corpus_generate", CORPUS / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATE = _generate()


def _walked(text: str) -> tuple[int, int]:
    """(size the check predicts, sites a real unrolled walk of every call visits)."""
    parsed = parse_text(text, "t.hlo")
    predicted = check_call_graph(parsed.computations, parsed.entry)
    return predicted, sum(1 for _ in walk(parsed.computations, parsed.entry, UNROLLED))


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.hlo.txt")), ids=lambda p: p.name)
def test_predicted_walk_size_is_the_walk_on_fixtures(path):
    predicted, walked = _walked(path.read_text())
    assert predicted == walked


@pytest.mark.parametrize(
    "text",
    [
        GENERATE.call_chain(6, 2),
        GENERATE.call_chain(3, 3),
        GENERATE.nested_loops(2, 5),
        GENERATE.nested_loops(2, MAX_UNROLL + 1),  # not unrolled: one frame per loop
    ],
)
def test_predicted_walk_size_is_the_walk_on_generated_graphs(text):
    predicted, walked = _walked(text)
    assert predicted == walked


def test_call_depth_limit_at_its_boundary():
    # call_chain(n) nests n + 2 computations: main, c0 .. c<n>
    parse_hlo(GENERATE.call_chain(MAX_CALL_DEPTH - 2), "ok.hlo")
    with pytest.raises(ProgramError, match=rf"deep\.hlo:\d+: .*a chain of {MAX_CALL_DEPTH + 1} "):
        parse_hlo(GENERATE.call_chain(MAX_CALL_DEPTH - 1), "deep.hlo")


def test_walk_size_limit_is_checked_before_walking():
    # each level doubles the runs of the next: 2**20 levels of negate is over the limit
    levels = MAX_WALK_SITES.bit_length()
    with pytest.raises(ProgramError, match=r"over 1,000,000 instruction runs"):
        parse_hlo(GENERATE.call_chain(levels, 2), "wide.hlo")


def test_executions_limit_at_its_boundary():
    # three nested loops of n trips: the innermost body runs n**3 times
    under = 2**21 - 1
    assert under**3 <= MAX_EXECUTIONS < (under + 1) ** 3
    parse_hlo(GENERATE.nested_loops(3, under), "ok.hlo")
    with pytest.raises(ProgramError, match=r"runs over 2\*\*63-1 times"):
        parse_hlo(GENERATE.nested_loops(3, under + 1), "many.hlo")


def test_tuple_depth_limit_at_its_boundary():
    parse_shape("(" * MAX_TUPLE_DEPTH + "f32[2]" + ")" * MAX_TUPLE_DEPTH)
    with pytest.raises(ValueError, match=f"nested {MAX_TUPLE_DEPTH + 1} deep"):
        parse_shape("(" * (MAX_TUPLE_DEPTH + 1) + "f32[2]" + ")" * (MAX_TUPLE_DEPTH + 1))


def test_device_limit_at_its_boundary():
    groups = parse_replica_groups(f"[1,{MAX_DEVICES}]<=[{MAX_DEVICES}]")
    assert len(groups[0]) == MAX_DEVICES
    with pytest.raises(ValueError, match="limit 1,048,576"):
        parse_replica_groups(f"[1,{MAX_DEVICES + 1}]<=[{MAX_DEVICES + 1}]")


def test_array_bytes_limit_at_its_boundary():
    assert parse_shape(f"s8[{2**63 - 1}]").bytes == 2**63 - 1
    with pytest.raises(ValueError, match=r"over 2\*\*63-1 bytes"):
        parse_shape(f"s16[{2**62}]")


@pytest.mark.parametrize(
    ("dtype", "nbytes"),
    [("f8e4m3fn", 1), ("f8e8m0fnu", 1), ("f4e2m1fn", 0.5), ("s1", 0.125), ("u2", 0.25)],
)
def test_small_element_types_have_their_width(dtype, nbytes):
    assert parse_shape(f"{dtype}[8]").bytes == 8 * nbytes


@pytest.mark.parametrize("dtype", ["x99", "f8", "f32x", "int32"])
def test_unknown_element_type_is_refused(dtype):
    with pytest.raises(ValueError, match=f"unknown element type '{dtype}'"):
        parse_shape(f"{dtype}[8]")


ZERO_SIZE = """HloModule z, num_partitions=4

%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(%x, %y)
}

ENTRY %main (a: f32[8,0], b: f32[0,4], c: f32[8,4]) -> f32[8,4] {
  %a = f32[8,0]{1,0} parameter(0)
  %b = f32[0,4]{1,0} parameter(1)
  %c = f32[8,4]{1,0} parameter(2)
  %d = f32[8,4]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %e = f32[0]{0} all-reduce(%a), replica_groups={{0,1,2,3}}, to_apply=%add
  %real = f32[8,4]{1,0} all-reduce(%c), replica_groups={{0,1,2,3}}, to_apply=%add
  ROOT %n = f32[8,4]{1,0} add(%d, %real)
}
"""


def test_zero_size_ops_lower_to_no_op_and_pass_dependencies():
    from tpusim.program.hlo import hlo_to_program

    program = hlo_to_program(parse_hlo(ZERO_SIZE, "z.hlo"))
    by_name = {op.name: op for op in program.ops}
    assert sorted(by_name) == ["n", "real"]  # the k=0 dot and the 0-byte all-reduce: no op
    assert by_name["real"].size_bytes == 8 * 4 * 4
    assert by_name["n"].after == ("real",)
