"""``tpusim check`` and the check ``tpusim run`` runs first (issue 15): every planted
problem is listed at once, each naming file:line and YAML path; nothing is simulated;
a failure inside one run keeps the other runs' outputs."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from helpers import run

#: A scenario with one problem planted per kind; (line, YAML path, words of the
#: message) of each, found by reading the text below.
BROKEN = """\
name: broken
systems: [v5e-pod, no-such-pod, v6e-pod]
workloads:
  - name: ar
    kind: collective
    op: all-reduce
    bytes: 1 MiB
    axes: [q]
  - name: train
    kind: training_step
    layers: 2
    d_model: 2048
    d_ff: 8192
    heads: 16
    head_dim: 128
    seq: 2048
    batch: 256
    mesh: {data: 8, model: 16}
    tensor_axis: model
  - name: fits
    kind: program
    memory: {hbm: 1 GB}
    ops: [{name: mm, kind: matmul, m: 128, n: 128, k: 128}]
    sweep: {memory: [{hbm: 1 GB}, {hbm: 40 GB}]}
  - name: typo
    kind: topology
    colour: blue
  - name: swept
    kind: collective
    op: all-gather
    bytes: 1 MiB
    sweep: {size: [1, 2]}
  - name: ar
    kind: topology
  - name: per
    kind: topology
    per_system: {v9-pod: {}}
"""

PLANTED = [
    (2, "systems[1]", "unknown system 'no-such-pod'"),
    (4, "workloads[0]", "v5e-pod: axes q: axes must be distinct"),
    (4, "workloads[0]", "v6e-pod: axes q: axes must be distinct"),
    (9, "workloads[1]", "v5e-pod: mesh {'data': 8, 'model': 16} has 128 devices"),
    (9, "workloads[1]", "v6e-pod: mesh {'data': 8, 'model': 16} has 128 devices"),
    (20, "workloads[2]", "v5e-pod fits[memory={'hbm': '40 GB'}]: out of memory"),
    (20, "workloads[2]", "v6e-pod fits[memory={'hbm': '40 GB'}]: out of memory"),
    (27, "workloads[3].colour", "unknown key"),
    (32, "workloads[4].sweep.size", "sweep over 'size'"),
    (33, "workloads[5].name", "workload name 'ar' is also on line 4"),
    (37, "workloads[6].per_system.v9-pod", "'v9-pod' is not one of the scenario's systems"),
]


@pytest.fixture
def broken(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text(BROKEN)
    return path


def _planted_lines(path) -> list[str]:
    return [f"tpusim: error: {path}:{line} {where}: {what}" for line, where, what in PLANTED]


def test_check_lists_every_planted_problem_once_in_line_order(broken, capsys):
    code, out, err = run(capsys, "check", str(broken))
    assert code == 2 and out == "" and "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == len(PLANTED), err
    for got, want in zip(lines, _planted_lines(broken), strict=True):
        assert got.startswith(want), (got, want)


def test_planted_lines_are_where_the_text_says():
    """The oracle itself: each planted line number holds the key it names."""
    text = BROKEN.splitlines()
    for line, where, _ in PLANTED:
        key = re.findall(r"[a-z_0-9-]+", where.split(".")[-1].split("[")[0])[-1]
        if where.startswith("workloads[") and "." not in where:
            key = "name"
        assert key in text[line - 1], (line, where, text[line - 1])


def test_check_json_lists_the_same_problems(broken, capsys):
    code, out, err = run(capsys, "check", str(broken), "--json")
    assert code == 2 and err == ""
    record = json.loads(out)
    got = [(p["line"], p["path"]) for p in record["problems"]]
    assert got == [(line, where) for line, where, _ in PLANTED]
    assert all(p["file"] == str(broken) for p in record["problems"])
    assert record["systems"] == ["v5e-pod", "v6e-pod"]


def test_run_checks_first_and_simulates_nothing(broken, tmp_path, capsys, monkeypatch):
    import tpusim.study.runner

    def never(*args, **kwargs):
        raise AssertionError("simulated a scenario that has problems")

    monkeypatch.setattr(tpusim.study.runner, "run_scenario", never)
    code, out, err = run(capsys, "run", str(broken), "--out", str(tmp_path / "o"))
    assert code == 2 and out == ""
    assert len(err.splitlines()) == len(PLANTED)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("name", ["demo", "generations"])
def test_shipped_scenarios_check_clean(name, capsys):
    code, out, err = run(capsys, "check", name)
    assert code == 0 and err == ""
    assert re.fullmatch(rf"{name}: \d+ systems x \d+ workload points checked, no problems\n", out)


def test_a_file_that_does_not_validate_is_one_problem(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nnetwork: {fidelity: warp}\nsystems: [v5e-pod]\nworkloads: []\n")
    code, _, err = run(capsys, "check", str(path))
    assert code == 2 and err.startswith(f"tpusim: error: {path}:2 network.fidelity:")


#: One program deadlocks at run time (chip 0 has an extra collective: no check can
#: see it without simulating); the other workloads run.
DEADLOCK = """\
name: partly
systems: [v5e-pod, v6e-pod]
workloads:
  - {name: topo, kind: topology}
  - name: stuck
    kind: program
    ops: [{name: mm, kind: matmul, m: 128, n: 128, k: 128}]
    overrides:
      0:
        extra_ops:
          - {name: log, kind: collective, collective: all-reduce, bytes: 1 MB, after: [mm]}
  - {name: mm, kind: program, ops: [{name: mm, kind: matmul, m: 1024, n: 1024, k: 1024}]}
"""


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_failed_run_keeps_the_others_outputs(tmp_path, capsys, jobs):
    path, out = tmp_path / "s.yaml", tmp_path / "o"
    path.write_text(DEADLOCK + "plots: false\n")  # the rows and CSVs are what it reads
    argv = ["run", str(path), "--out", str(out), "--quiet", "--json", "--jobs", jobs]
    code, stdout, err = run(capsys, *argv)
    assert code == 1
    record = json.loads(stdout)
    assert [r["workload"] for r in record["results"]] == ["topo", "mm"] * 2
    failures = record["failures"]
    assert [(f["system"], f["workload"]) for f in failures] == [
        ("v5e-pod", "stuck"),
        ("v6e-pod", "stuck"),
    ]
    lines = [f"tpusim: error: {f['system']} stuck failed: {f['error']}" for f in failures]
    kept = len(record["results"])
    lines[-1] += f" ({kept} finished points kept in {out / 'points.jsonl'})"
    assert err.splitlines() == lines
    assert all(f["error"].startswith("deadlock: collective 'log'") for f in failures)
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary.workload) == ["topo", "mm"] * 2


def test_every_workload_broken_still_lists_each(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: s\nsystems: [v5e-pod]\nworkloads:\n"
        "  - {name: a, kind: topology, x: 1}\n  - {name: b, kind: nosuch}\n"
    )
    code, _, err = run(capsys, "check", str(path))
    assert code == 2
    assert [line.split(": ")[2] for line in err.splitlines()] == [
        f"{path}:4 workloads[0].x",
        f"{path}:5 workloads[1].kind",
    ]
