"""No file is written outside the output folder (issue 45, item 2): every name from the
input that reaches a path (a scenario's name as the default ``out/NAME``, a server
profile's name in ``calibrate --serving --out DIR``, system and workload names in trace
and figure files) is one plain file name; ``..``, absolute paths, separators, control
characters and symbolic links are refused in one line (exit 2) or made safe, and
nothing appears outside the folder."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from helpers import assert_one_error_line, run

REPO = Path(__file__).resolve().parents[1]
FIGURES = REPO / "tests" / "corpus" / "round4" / "fig-valid.yaml"
HOSTILE = ["../../escaped", "/tmp/tpusim-escaped-abs", "a\\u0000b", "..", ".hidden", "x" * 300]


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    (work / "line2.yaml").write_text(
        "name: line2\nchip: v5e\ntopology: {kind: torus, dims: [2], wraparound: [false]}\n"
    )
    return work


@pytest.mark.parametrize("name", HOSTILE)
def test_a_scenario_name_never_leaves_out(cwd, capsys, name):
    (cwd / "s.yaml").write_text(
        f'name: "{name}"\nsystems: [line2.yaml]\nplots: false\n'
        "workloads: [{name: c, kind: collective, op: all-reduce, bytes: 1 MiB}]\n"
    )
    before = _files(cwd.parents[1])
    code, out, err = run(capsys, "run", "s.yaml")
    line = assert_one_error_line(code, out, err)
    assert "name" in line and "plain name" in line, line
    assert _files(cwd.parents[1]) == before
    assert not Path("/tmp/tpusim-escaped-abs").exists()


def test_a_scenario_name_that_is_a_symlink_in_out_is_refused(cwd, capsys, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (cwd / "out").mkdir()
    os.symlink(elsewhere, cwd / "out" / "linked")
    (cwd / "s.yaml").write_text(
        "name: linked\nsystems: [line2.yaml]\nplots: false\n"
        "workloads: [{name: c, kind: collective, op: all-reduce, bytes: 1 MiB}]\n"
    )
    line = assert_one_error_line(*run(capsys, "run", "s.yaml"))
    assert "symbolic link" in line
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("name", ["a\\u0000b", "../../x", "y" * 300, "..\\\\z"])
def test_workload_names_become_safe_trace_file_names(cwd, capsys, name):
    (cwd / "s.yaml").write_text(
        f'name: s\nsystems: [line2.yaml]\nplots: false\nworkloads:\n  - {{name: "{name}",'
        " kind: program, ops: [{name: a, kind: matmul, m: 64, n: 64, k: 64}]}\n"
    )
    before = _files(cwd.parents[1])
    code, _, err = run(capsys, "run", "s.yaml", "--out", "o")
    assert code == 0, err
    traces = [p for p in (cwd / "o").iterdir() if p.name.startswith("trace-")]
    assert len(traces) == 1 and traces[0].parent == cwd / "o"
    assert len(traces[0].name.encode()) <= 255 and "\x00" not in traces[0].name
    assert {p.parent for p in _files(cwd.parents[1]) - before - {cwd / "o"}} == {cwd / "o"}


def _profile(folder: Path, name: str) -> Path:
    path = folder / "server.yaml"
    text = (REPO / "configs" / "servers" / "vllm-tpu-torchxla.yaml").read_text()
    lines = [f'name: "{name}"' if ln.startswith("name:") else ln for ln in text.splitlines()]
    path.write_text("\n".join(lines) + "\n")
    return path


def _figures(folder: Path, *servers: str) -> Path:
    text = FIGURES.read_text()
    body = text[text.index("  - id:") :]
    path = folder / "figs.yaml"
    # each figure in a (chip, dtype) group of its own, so the split rule makes each fit
    dtypes = ("bf16", "fp8", "int8", "int4")
    entries = [
        body.replace("fig-8b", f"fig-{i}")
        .replace("vllm-tpu-torchxla", server)
        .replace("    split: fit\n", f"    split: fit\n    weight_dtype: {dtypes[i]}\n")
        for i, server in enumerate(servers)
    ]
    path.write_text(text[: text.index("  - id:")] + "".join(entries))
    return path


def _refused_or_inside(code: int, out: str, err: str, folder: Path) -> None:
    """Either one error line (exit 2) or a run (exit 0) whose files are in ``folder``."""
    if code == 2:
        assert_one_error_line(code, out, err)
    else:
        assert code == 0, err
        assert all(p.parent == folder for p in folder.iterdir())


@pytest.mark.parametrize("name", HOSTILE)
def test_calibrate_serving_never_writes_a_profile_outside_out(cwd, capsys, name):
    """A profile whose ``name:`` is hostile is refused, or written under a safe file name
    inside ``--out``: nothing appears anywhere else."""
    figures = _figures(cwd, str(_profile(cwd, name)))
    before = _files(cwd.parents[1])
    argv = ["calibrate", "--serving", "--measurements", str(figures), "--out", "prof"]
    _refused_or_inside(*run(capsys, *argv), cwd / "prof")
    new = _files(cwd.parents[1]) - before
    assert all(p == cwd / "prof" or p.parent == cwd / "prof" for p in new), new
    assert not Path("/tmp/tpusim-escaped-abs.yaml").exists()


def test_calibrate_serving_never_writes_through_a_symlink(cwd, capsys, tmp_path):
    victim = tmp_path / "victim.yaml"
    victim.write_text("keep\n")
    (cwd / "prof").mkdir()
    os.symlink(victim, cwd / "prof" / "vllm-tpu-torchxla.yaml")
    figures = _figures(cwd, "vllm-tpu-torchxla")
    argv = ["calibrate", "--serving", "--measurements", str(figures), "--out", "prof"]
    code, _, err = run(capsys, *argv)
    assert code in (0, 2), err
    assert victim.read_text() == "keep\n"


def test_two_names_of_one_server_do_not_overwrite_each_other(cwd, capsys):
    """Figures naming one profile twice (a name and a path to a copy) are refused, or
    each name gets its own file: no fit is lost to an overwrite."""
    copy = cwd / "same.yaml"
    shutil.copy(REPO / "configs" / "servers" / "vllm-tpu-torchxla.yaml", copy)
    figures = _figures(cwd, "vllm-tpu-torchxla", str(copy))
    argv = ["calibrate", "--serving", "--measurements", str(figures), "--out", "prof"]
    code, out, err = run(capsys, *argv)
    if code == 2:
        line = assert_one_error_line(code, out, err)
        assert "overwrite" in line or "distinct" in line, line
    else:
        assert code == 0, err
        assert len(list((cwd / "prof").glob("*.yaml"))) == 2
