"""A scenario's ``systems:`` entries with ICI overrides and sweeps (issue 15, for the
design space): a derived system gives the same numbers as a system file written by
hand with those overrides; bad entries are problems of the check."""

from __future__ import annotations

import json

import pytest
from helpers import run

from tpusim.config import load_system
from tpusim.engine import simulate_collective
from tpusim.study.scenario import Scenario

SWEPT = """\
name: swept
plots: false  # figures are tests/test_plots.py's; these tests read rows and CSVs
systems:
  - system: v5e-pod
    name: fast
    ici: {hop_latency: 2 us}
    sweep: {link_bandwidth: [90 GB/s, 180 GB/s]}
workloads:
  - {name: ar, kind: collective, op: all-reduce, bytes: 64 MiB}
"""

BY_HAND = """\
name: v5e-by-hand
chip: v5e
topology: {{kind: torus, dims: [16, 16]}}
ici: {{link_bandwidth: {bw}, hop_latency: 2 us}}
"""


def test_a_sweep_derives_one_named_system_per_point(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(SWEPT)
    scenario = Scenario(path)
    assert [s.name for s in scenario.systems] == [
        "fast[link_bandwidth=90 GB/s]",
        "fast[link_bandwidth=180 GB/s]",
    ]
    assert [s.link_bandwidth_Bps for s in scenario.systems] == [90e9, 180e9]
    assert {s.hop_latency_s for s in scenario.systems} == {2e-6}


@pytest.mark.parametrize("bw", ["90 GB/s", "180 GB/s"])
def test_derived_system_equals_a_hand_written_system_file(tmp_path, capsys, bw):
    path = tmp_path / "s.yaml"
    path.write_text(SWEPT)
    code, out, _ = run(capsys, "run", str(path), "--out", str(tmp_path / "o"), "--json", "--quiet")
    assert code == 0
    rows = {r["system"]: r for r in json.loads(out)["results"]}
    (tmp_path / "hand.yaml").write_text(BY_HAND.format(bw=bw))
    hand, _ = simulate_collective(load_system(str(tmp_path / "hand.yaml")), "all-reduce", 2**26)
    assert rows[f"fast[link_bandwidth={bw}]"]["time_s"] == pytest.approx(hand.time_s, rel=1e-12)


@pytest.mark.parametrize(
    ("entry", "line", "where", "words"),
    [
        ("{system: v5e-pod, ici: {colour: red}}", 2, "systems[0].ici.colour", "not an ICI field"),
        ("{system: v5e-pod, sweep: {hop_latency: []}}", 2, "systems[0].sweep.hop_latency", "empty"),
        ("{system: tpu8t-virgo, ici: {hop_latency: 1 us}}", 2, "systems[0]", "multi-pod"),
        ("{system: v5e-pod, ici: {link_bandwidth: -1 GB/s}}", 2, "systems[0].ici", "bandwidth"),
        ("{system: no-such, ici: {}}", 2, "systems[0].system", "unknown system"),
    ],
)
def test_bad_entries_are_check_problems(tmp_path, capsys, entry, line, where, words):
    path = tmp_path / "s.yaml"
    path.write_text(
        f"name: s\nsystems:\n  - {entry}\n  - v6e-pod\nworkloads:\n"
        "  - {name: t, kind: topology}\n"
    )
    code, out, err = run(capsys, "check", str(path))
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"tpusim: error: {path}:3 {where}"), lines[0]
    assert words in lines[0]
    del line  # every entry here is on line 3 of the file


def test_two_systems_of_one_name_are_a_problem(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: s\nsystems:\n  - v5e-pod\n  - {system: v5e-pod}\nworkloads:\n"
        "  - {name: t, kind: topology}\n"
    )
    code, _, err = run(capsys, "check", str(path))
    assert code == 2
    assert err.startswith(
        f"tpusim: error: {path}:4 systems[1]: system 'v5e-pod' is also systems[0]"
    )
