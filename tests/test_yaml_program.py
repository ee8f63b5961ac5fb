"""Inline YAML programs: parsing with units, and errors naming file, path and line."""

from __future__ import annotations

import pytest

from tpusim.engine import Simulation
from tpusim.errors import ConfigError
from tpusim.program.yaml_program import load_program

PROGRAM = """\
name: overlap-demo
mesh: {data: 16, model: 16}
memory: {hbm: 12 GiB}
ops:
  - {name: fwd, kind: matmul, m: 4096, n: 4096, k: 4096}
  - {name: grads, kind: collective, collective: all-reduce, bytes: 64 MiB, axes: [data],
     overlap: true}
  - {name: update, kind: elementwise, bytes: 1 GiB, after: [fwd, grads]}
"""


def write(tmp_path, text: str):
    path = tmp_path / "program.yaml"
    path.write_text(text)
    return path


def test_program_fields_and_units(tmp_path):
    program = load_program(write(tmp_path, PROGRAM))
    assert [op.name for op in program.ops] == ["fwd", "grads", "update"]
    assert program.ops[1].size_bytes == 64 * 2**20
    assert program.ops[1].axes == ("data",) and program.ops[1].overlap
    assert program.ops[2].bytes == 2**30 and program.ops[2].after == ("fwd", "grads")
    assert program.memory_bytes == {"hbm": 12 * 2**30}
    assert program.flops_per_chip == 2 * 4096**3


def test_yaml_program_runs_and_update_waits_for_both(tmp_path):
    result = Simulation("v5e-pod", load_program(write(tmp_path, PROGRAM))).run()
    records = {r.name: r for r in result.ops}
    assert records["update"].start_at == pytest.approx(
        max(records["fwd"].end_at, records["grads"].end_at)
    )


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (
            PROGRAM.replace("after: [fwd, grads]", "after: [fwd, nope]"),
            r"program.yaml:8 ops\[2\].after\[1\]: .*unknown op 'nope'",
        ),
        (PROGRAM.replace("kind: matmul", "kind: conv"), r"program.yaml:5 ops\[0\].kind"),
        (PROGRAM.replace("bytes: 64 MiB", "bytes: 64 MiB/s"), r"program.yaml:6 ops\[1\].bytes"),
        (PROGRAM.replace("m: 4096", "m: 4096, mm: 3"), r"ops\[0\].mm: unknown key"),
        (
            PROGRAM.replace("{name: fwd,", "{name: fwd, after: [update],"),
            r"dependency cycle among ops fwd, update",
        ),
    ],
)
def test_bad_programs_name_file_path_and_line(tmp_path, text, match):
    with pytest.raises(ConfigError, match=match):
        load_program(write(tmp_path, text))
