"""The XLA HLO importer against fixtures compiled by JAX (tools/gen_hlo_fixtures.py).

Expected values are computed here independently from the fixture text (regexes over the
instruction lines), and FLOPs are compared with XLA's own ``compiled.cost_analysis()``
saved next to each fixture, so no JAX is needed to run these tests.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tpusim.errors import InputError
from tpusim.program.hlo import (
    hlo_to_program,
    load_hlo,
    parse_hlo,
    parse_replica_groups,
    parse_shape,
)
from tpusim.program.hlo.callgraph import Policy, walk
from tpusim.program.ir import ProgramError

FIXTURES = Path(__file__).parent / "fixtures" / "hlo"
ALL = sorted(p.name.removesuffix(".hlo.txt") for p in FIXTURES.glob("*.hlo.txt"))
KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
BYTES = {"pred": 1, "s8": 1, "u8": 1, "bf16": 2, "f16": 2, "s32": 4, "u32": 4, "f32": 4}
OPCODE_RE = re.compile(r"(?<=\s)(" + "|".join(KINDS) + r")(-start)?\(")


def _text(stem: str) -> str:
    return (FIXTURES / f"{stem}.hlo.txt").read_text()


def _meta(stem: str) -> dict:
    return json.loads((FIXTURES / f"{stem}.json").read_text())


def _blocks(text: str) -> dict[str, list[tuple[int, str]]]:
    """Computation name -> its (line number, line) pairs, found independently."""
    blocks: dict[str, list[tuple[int, str]]] = {}
    current = None
    for n, line in enumerate(text.splitlines(), start=1):
        head = re.match(r"^(?:ENTRY )?%([\w.\-]+) \(.*\) -> .*\{$", line)
        if head:
            current = head.group(1)
            blocks[current] = []
        elif line == "}":
            current = None
        elif current is not None:
            blocks[current].append((n, line))
    return blocks


def _trip_counts(text: str) -> dict[str, int]:
    """While body computation -> trip count (1 when unknown)."""
    out = {}
    for line in text.splitlines():
        if " while(" in line:
            body = re.search(r"body=%([\w.\-]+)", line).group(1)
            n = re.search(r'"known_trip_count":\{"n":"(\d+)"\}', line)
            out[body] = int(n.group(1)) if n else 1
    return out


def _expected_counts(text: str) -> Counter:
    trips = _trip_counts(text)
    out: Counter = Counter()
    for comp, lines in _blocks(text).items():
        for _, line in lines:
            m = OPCODE_RE.search(line.split(", metadata=")[0])
            if m:
                out[m.group(1)] += trips.get(comp, 1)
    return out


def _bytes_of(shape_text: str) -> int:
    return sum(
        BYTES[dt] * math.prod(int(d) for d in dims.split(",") if d)
        for dt, dims in re.findall(r"([a-z]+\d*)\[([\d,]*)\]", shape_text)
    )


# ------------------------------------------------------------------ every fixture
@pytest.mark.parametrize("stem", ALL)
def test_collective_counts_match_the_text(stem):
    module, program = load_hlo(FIXTURES / f"{stem}.hlo.txt")
    expected = _expected_counts(_text(stem))
    assert sum(expected.values()) > 0
    assert dict(module.collectives) == dict(expected)
    in_program = Counter(op.collective for op in program.ops if op.kind == "collective")
    assert in_program == expected


@pytest.mark.parametrize("stem", ALL)
def test_flops_match_xla_cost_analysis(stem):
    cost = _meta(stem)["cost_analysis"]
    if cost is None:
        pytest.skip("hand-written fixture: no XLA cost analysis")
    module = parse_hlo(_text(stem), stem)
    # XLA's cost analysis counts a while body once; so does loop_trip_counts=False.
    assert module.flops(loop_trip_counts=False) == pytest.approx(cost["flops"], rel=0.05)


@pytest.mark.parametrize("stem", ALL)
def test_program_is_a_valid_small_dag(stem):
    module, program = load_hlo(FIXTURES / f"{stem}.hlo.txt")
    assert module.num_devices == _meta(stem)["devices"]
    assert not module.unknown_ops
    assert 0 < len(program.ops) < 200
    assert program.flops_per_chip > 0
    assert program.flops_per_chip <= module.flops_per_chip
    for op in program.ops:
        if op.kind == "collective":
            assert op.axes == ()
            assert op.size_bytes > 0
            assert op.groups and max(d for g in op.groups for d in g) < module.num_devices
    total = sum(op.size_bytes for op in program.ops if op.kind == "collective")
    assert total == pytest.approx(module.collective_bytes_per_chip)


# ------------------------------------------------------------------ exact collective sizes
def _independent_collectives(text: str, devices: int) -> list[tuple[str, int, int, int]]:
    """(kind, size bytes, group size, executions) of every collective, from the text alone."""
    trips = _trip_counts(text)
    out = []
    for comp, lines in _blocks(text).items():
        shapes = {}
        for _, line in lines:
            m = re.match(r"\s*(?:ROOT )?%([\w.\-]+) = (\(.*?\)|\S+) ", line)
            shapes[m.group(1)] = m.group(2)
        for _, line in lines:
            op = OPCODE_RE.search(line.split(", metadata=")[0])
            if not op:
                continue
            kind, is_start = op.group(1), bool(op.group(2))
            result = re.match(r"\s*(?:ROOT )?%[\w.\-]+ = (\(.*?\)\)?|\S+) ", line).group(1)
            args = line[op.end() : line.index(")", op.end())]
            operand_bytes = sum(_bytes_of(shapes[a]) for a in re.findall(r"%([\w.\-]+)", args))
            rg = re.search(
                r"replica_groups=(\{\}|\{\{[\d,{}]*\}\}|\[[^ ]*|mesh\[[^\]]*\] \{[^}]*\})", line
            )
            if kind == "collective-permute":
                pairs = re.findall(r"\{(\d+),(\d+)\}", line)
                group = len({d for p in pairs for d in p})
            elif rg.group(1) == "{}":
                group = devices
            elif rg.group(1).startswith("{{"):
                group = len(rg.group(1)[2:].split("}")[0].split(","))
            elif rg.group(1).startswith("mesh"):
                sizes = dict(re.findall(r"'(\w+)'=(\d+)", rg.group(1)))
                chosen = re.findall(r"'(\w+)'", rg.group(1).split("] ")[1])
                group = math.prod(int(sizes[c]) for c in chosen)
            else:
                group = int(re.match(r"\[(\d+),(\d+)\]", rg.group(1)).group(2))
            if kind == "all-gather":
                size = operand_bytes * group if is_start else _bytes_of(result)
            else:
                size = operand_bytes
            out.append((kind, size, group, trips.get(comp, 1)))
    return sorted(out)


@pytest.mark.parametrize(
    "stem",
    ["tpu_async_8", "tensor_parallel_4", "fsdp_8", "all_to_all_8", "transformer_8", "ppermute_4"],
)
def test_collective_bytes_and_group_sizes_are_exact(stem):
    text = _text(stem)
    module = parse_hlo(text, stem)
    got = sorted((c.kind, c.size_bytes, c.group_size, c.count) for c in module.collective_list)
    expected = _independent_collectives(text, _meta(stem)["devices"])
    assert got == expected
    assert module.collective_bytes_per_chip == sum(s * n for _, s, _, n in expected)


def test_hand_written_fixture_in_detail():
    module, program = load_hlo(FIXTURES / "tpu_async_8.hlo.txt")
    by_name = {c.name: c for c in module.collective_list}
    # all-gather-start of bf16[64,2048] over 8: the gathered output bf16[512,2048]
    assert by_name["all-gather-start"].size_bytes == 512 * 2048 * 2
    assert by_name["all-gather-start"].is_async
    # all-reduce-start with transposed iota groups [2,4]<=[4,2]T(1,0)
    assert by_name["all-reduce-start"].groups == ((0, 2, 4, 6), (1, 3, 5, 7))
    # reduce-scatter inside an async-start: the full input f32[128,2048]
    assert by_name["reduce-scatter.1"].size_bytes == 128 * 2048 * 4
    # tuple all-reduce counts both elements; {} is every device
    assert by_name["all-reduce.2"].size_bytes == 16 * 2048 * 4 + 8 * 16 * 32 * 128 * 2
    assert by_name["all-reduce.2"].group_size == 8
    # mesh form: groups along 'data' of a (data=2, model=4) mesh
    assert by_name["all-reduce.3"].groups == ((0, 4), (1, 5), (2, 6), (3, 7))
    # a collective in a 3-trip loop counts 3 times
    assert by_name["rs"].count == 3
    async_ops = {op.name for op in program.ops if op.kind == "collective" and op.overlap}
    assert async_ops == {
        "all-gather-start",
        "all-reduce-start",
        "reduce-scatter-start",
        "collective-permute-start",
    }
    # FLOPs: convolution as a dot (bf_io->bf) + a 3x3 convolution padded 1 on each side
    # of a 16 x 32 image: per axis, output x kernel positions less the 2 that fall on
    # padding (XLA's HloCostAnalysis counts the same), 64 input features
    dot = 2 * 128 * 2048 * 512
    conv = 2 * (8 * 128) * 64 * (16 * 3 - 2) * (32 * 3 - 2)
    # (the program's matmul has a whole k: the FLOPs within its rounding)
    assert program.flops_per_chip == pytest.approx(dot + conv, rel=1e-3)
    ops = {op.name: op for op in program.ops}
    assert ops["fusion.1"].after == ("all-gather-start",)  # through the -done
    assert ops["all-reduce.3"].after == ("all-reduce.2",)  # through get-tuple-element
    assert ops["fusion.1"].dtype == "bf16"


def test_while_loop_multiplies_by_its_trip_count():
    module, program = load_hlo(FIXTURES / "ppermute_4.hlo.txt")
    body_dot = 2 * 16 * 128 * 128
    assert program.flops_per_chip == 5 * body_dot
    assert module.flops_per_chip == pytest.approx(5 * module.flops(loop_trip_counts=False), 1e-3)
    assert module.collectives["collective-permute"] == 5
    by_name = {op.name: op for op in program.ops}

    def ancestors(name: str) -> set[str]:
        seen, todo = set(), [name]
        while todo:
            for dep in by_name[todo.pop()].after:
                if dep not in seen:
                    seen.add(dep)
                    todo.append(dep)
        return seen

    permutes = [op.name for op in program.ops if op.kind == "collective"]
    assert len(permutes) == 5
    for prev, nxt in itertools.pairwise(permutes):  # iteration i+1 waits for iteration i
        assert prev in ancestors(nxt)


# ------------------------------------------------------------------ replica groups
def test_explicit_groups():
    assert parse_replica_groups("{{0,1},{2,3}}") == [[0, 1], [2, 3]]
    assert parse_replica_groups("{{0,2,4,6},{1,3,5,7}}") == [[0, 2, 4, 6], [1, 3, 5, 7]]


def test_iota_groups():
    assert parse_replica_groups("[2,4]<=[8]") == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert parse_replica_groups("[1,4]<=[4]") == [[0, 1, 2, 3]]


def test_transposed_iota_groups():
    assert parse_replica_groups("[4,2]<=[2,4]T(1,0)") == [[0, 4], [1, 5], [2, 6], [3, 7]]
    expected = np.arange(24).reshape(2, 3, 4).transpose(2, 0, 1).reshape(4, 6).tolist()
    assert parse_replica_groups("[4,6]<=[2,3,4]T(2,0,1)") == expected


def test_empty_groups_are_all_devices():
    assert parse_replica_groups("{}", 4) == [[0, 1, 2, 3]]


def test_mesh_groups():
    assert parse_replica_groups("mesh['axis_0'=8,'axis_1'=1] {'axis_0'}") == [list(range(8))]
    assert parse_replica_groups("mesh['a'=2,'b'=4] {'b'}") == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert parse_replica_groups("mesh['a'=2,'b'=4] {'a'}") == [[0, 4], [1, 5], [2, 6], [3, 7]]


@pytest.mark.parametrize("bad", ["weird<0>", "[2,4]<=[6]", "{{0,1}x}", "mesh['a'=2] {'c'}"])
def test_unknown_group_syntax_is_a_value_error(bad):
    with pytest.raises(ValueError):
        parse_replica_groups(bad, 8)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.data())
def test_iota_groups_partition_the_devices(dims, data):
    n = math.prod(dims)
    perm = data.draw(st.permutations(range(len(dims))))
    group = data.draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
    text = f"[{n // group},{group}]<=[{','.join(map(str, dims))}]T({','.join(map(str, perm))})"
    groups = parse_replica_groups(text)
    assert sorted(d for g in groups for d in g) == list(range(n))
    assert all(len(g) == group for g in groups)


def test_shapes():
    assert parse_shape("f32[128,256]{1,0}").bytes == 128 * 256 * 4
    assert parse_shape("bf16[64,2048]{1,0:T(8,128)(2,1)}").dims == (64, 2048)
    t = parse_shape("(f32[2]{0}, bf16[4,4]{1,0}, s32[])")
    assert t.is_tuple and t.bytes == 8 + 32 + 4
    assert parse_shape("((f32[2]), u32[]{:S(2)})").bytes == 12


# ------------------------------------------------------------------ bad input
def _one_line_error(exc: pytest.ExceptionInfo, file: str, line: int) -> None:
    message = str(exc.value)
    assert "\n" not in message
    assert message.startswith(f"{file}:{line}: "), message
    assert isinstance(exc.value, InputError)


def test_truncated_file():
    lines = _text("transformer_4").splitlines()
    cut = len(lines) // 2
    while not lines[cut - 1].startswith("  %"):
        cut += 1
    with pytest.raises(ProgramError) as exc:
        parse_hlo("\n".join(lines[:cut]), "t.hlo")
    _one_line_error(exc, "t.hlo", cut)
    assert "truncated" in str(exc.value)


def test_truncated_mid_line():
    text = _text("data_parallel_4")
    cut = text.index(" dot(") + 3
    with pytest.raises(ProgramError) as exc:
        parse_hlo(text[:cut], "t.hlo")
    _one_line_error(exc, "t.hlo", text[:cut].count("\n") + 1)


def test_garbled_line():
    lines = _text("fsdp_4").splitlines()
    index = next(i for i, line in enumerate(lines) if " all-gather(" in line)
    lines[index] = "  %oops = f32[16,128]{1,0} all-gather(%param.4, channel_id=1, )))"
    with pytest.raises(ProgramError) as exc:
        parse_hlo("\n".join(lines), "g.hlo")
    _one_line_error(exc, "g.hlo", index + 1)


def test_line_that_is_not_an_instruction():
    lines = _text("fsdp_4").splitlines()
    index = next(i for i, line in enumerate(lines) if " all-gather(" in line)
    lines.insert(index, "  this is not HLO")
    with pytest.raises(ProgramError) as exc:
        parse_hlo("\n".join(lines), "g.hlo")
    _one_line_error(exc, "g.hlo", index + 1)


def test_unknown_replica_group_syntax():
    lines = _text("tensor_parallel_4").splitlines()
    index = next(i for i, line in enumerate(lines) if " all-reduce(" in line)
    lines[index] = re.sub(
        r"replica_groups=mesh\[[^\]]*\] \{[^}]*\}", "replica_groups=<<?>>", lines[index]
    )
    with pytest.raises(ProgramError) as exc:
        parse_hlo("\n".join(lines), "r.hlo")
    _one_line_error(exc, "r.hlo", index + 1)
    assert "replica group" in str(exc.value)


@pytest.mark.parametrize("text", ["", "hello world\n", "HloModule m\n"])
def test_not_hlo(text):
    with pytest.raises(ProgramError) as exc:
        parse_hlo(text, "x.hlo")
    assert str(exc.value).startswith("x.hlo:")


def test_unknown_operand_reference():
    text = _text("data_parallel_4").replace("dot(%", "dot(%nowhere, %", 1)
    with pytest.raises(ProgramError, match="unknown operand 'nowhere'"):
        parse_hlo(text, "x.hlo")


def test_missing_file(tmp_path):
    with pytest.raises(ProgramError, match="cannot read"):
        load_hlo(tmp_path / "nope.hlo.txt")


def test_unknown_op_is_counted_not_fatal():
    text = _text("tensor_parallel_4")
    lines = text.splitlines()
    index = next(
        i for i, line in enumerate(lines) if line.startswith("  ROOT") and "%all-reduce" in line
    )
    name = re.search(r"%([\w.\-]+) = ", lines[index]).group(1)
    shape = re.search(r" = (\S+) ", lines[index]).group(1)
    lines[index] = lines[index].replace("ROOT ", "")
    lines.insert(
        index + 1, f"  ROOT %mystery = {shape} frobnicate({name and '%' + name}), flavour=odd"
    )
    module = parse_hlo("\n".join(lines), "u.hlo")
    assert module.unknown_ops == Counter({"frobnicate": 1})
    program = hlo_to_program(module, "u")
    mystery = next(op for op in program.ops if op.name == "mystery")
    assert mystery.kind == "elementwise"
    assert mystery.bytes == parse_shape(shape).bytes
    assert mystery.after == (name,)


SMALL = """HloModule small, num_partitions=2

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%body (p: (s32[], f32[4,8,16])) -> (s32[], f32[4,8,16]) {
  %p = (s32[], f32[4,8,16]{2,1,0}) parameter(0)
  %x = f32[4,8,16]{2,1,0} get-tuple-element(%p), index=1
  %i = s32[] get-tuple-element(%p), index=0
  %w = f32[4,16,16]{2,1,0} constant({...})
  %d = f32[4,8,16]{2,1,0} dot(%x, %w), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  %ar = f32[4,8,16]{2,1,0} all-reduce(%d), replica_groups={{0,1}}, to_apply=%add
  ROOT %t = (s32[], f32[4,8,16]{2,1,0}) tuple(%i, %ar)
}

%cond (q: (s32[], f32[4,8,16])) -> pred[] {
  %q = (s32[], f32[4,8,16]{2,1,0}) parameter(0)
  ROOT %c = pred[] constant(true)
}

ENTRY %main (in: (s32[], f32[4,8,16])) -> (s32[], f32[4,8,16]) {
  %in = (s32[], f32[4,8,16]{2,1,0}) parameter(0)
  ROOT %loop = (s32[], f32[4,8,16]{2,1,0}) while(%in), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"TRIPS"}}
}
"""  # noqa: E501


@pytest.mark.parametrize("trips", [2, 1000])
def test_batched_dot_in_a_loop(trips):
    module = parse_hlo(SMALL.replace("TRIPS", str(trips)), "s.hlo")
    program = hlo_to_program(module, "s")
    dot = 2 * 4 * 8 * 16 * 16
    assert module.flops(loop_trip_counts=False) == dot + 4 * 8 * 16  # + the reduction
    assert program.flops_per_chip == trips * dot
    assert module.collectives == Counter({"all-reduce": trips})
    assert module.collective_bytes_per_chip == trips * 4 * 8 * 16 * 4
    matmuls = [op for op in program.ops if op.kind == "matmul"]
    if trips == 2:  # unrolled: one op per iteration, chained
        assert [(op.batch, op.m, op.n, op.k) for op in matmuls] == [(4, 8, 16, 16)] * 2
        assert len(program.ops) == 4
    else:  # beyond MAX_UNROLL: one copy of the body, scaled
        assert len(matmuls) == 1 and matmuls[0].batch == 4 * trips
        sizes = [op.size_bytes for op in program.ops if op.kind == "collective"]
        assert sizes == [trips * 4 * 8 * 16 * 4]


def test_trip_count_defaults_to_one():
    text = SMALL.replace(', backend_config={"known_trip_count":{"n":"TRIPS"}}', "")
    module = parse_hlo(text, "s.hlo")
    assert module.collectives == Counter({"all-reduce": 1})
    assert module.num_devices == 2


# ------------------------------------------------------------------ the call graph walk
def test_walk_counts_loop_executions_or_unrolls_them():
    module = parse_hlo(SMALL.replace("TRIPS", "3"), "s.hlo")
    follow = frozenset({"loop_body"})
    counted = [
        s for s in walk(module.computations, "main", Policy(follow)) if s.op_name.endswith("ar")
    ]
    assert [(s.op_name, s.num_executions) for s in counted] == [("loop/ar", 3)]
    unrolled = Policy(follow, unroll_up_to=3)
    sites = [s for s in walk(module.computations, "main", unrolled) if s.instruction.name == "ar"]
    assert [(s.op_name, s.num_executions) for s in sites] == [(f"loop/{i}/ar", 1) for i in range(3)]
    assert [s.frame.previous.prefix if s.frame.previous else None for s in sites] == [
        None,
        "loop/0/",
        "loop/1/",
    ]
    loop = [s for s in walk(module.computations, "main", unrolled) if s.op_name == "loop"]
    assert [f.prefix for f in loop[0].runs] == ["loop/0/", "loop/1/", "loop/2/"]  # callees first


def test_recursion_is_an_error_naming_the_call():
    text = SMALL.replace("TRIPS", "2").replace(
        "  ROOT %c = pred[] constant(true)",
        "  %again = pred[] call(%q), to_apply=%cond\n  ROOT %c = pred[] constant(true)",
    )
    with pytest.raises(ProgramError, match=r"^s\.hlo:\d+: 'again' calls 'cond'.*recursion"):
        parse_hlo(text, "s.hlo")


def test_unknown_branch_computation():
    text = SMALL.replace("TRIPS", "2").replace(
        "  ROOT %c = pred[] constant(true)",
        "  %k = s32[] constant(0)\n"
        "  %br = pred[] conditional(%k), branch_computations={%add, %nowhere}\n"
        "  ROOT %c = pred[] constant(true)",
    )
    with pytest.raises(ProgramError, match="calls unknown computation 'nowhere'"):
        parse_hlo(text, "s.hlo")


def test_conditional_costs_its_costliest_branch_and_runs_its_first():
    lines = SMALL.replace("TRIPS", "2").splitlines()
    entry_root = next(i for i, line in enumerate(lines) if "while(%in)" in line)
    lines[entry_root] = lines[entry_root].replace("ROOT %loop", "%loop")
    lines.insert(entry_root + 1, "  %k = s32[] constant(0)")
    lines.insert(
        entry_root + 2,
        "  ROOT %pick = (s32[], f32[4,8,16]{2,1,0}) conditional(%k, %loop, %loop), "
        "branch_computations={%cond, %body}",
    )
    module = parse_hlo("\n".join(lines), "c.hlo")
    loop_flops = 2 * (2 * 4 * 8 * 16 * 16 + 4 * 8 * 16)
    body_flops = module.flops() - loop_flops
    assert body_flops == 2 * 4 * 8 * 16 * 16 + 4 * 8 * 16  # %body (dot + reduction) > %cond (0)
    assert module.collectives == Counter({"all-reduce": 2})  # the first branch (%cond) runs
    program = hlo_to_program(module, "c")
    assert program.flops_per_chip == 2 * 2 * 4 * 8 * 16 * 16  # the loop only: %cond has no dot
