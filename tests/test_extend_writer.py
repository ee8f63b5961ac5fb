"""How to extend: a new output file, from this file alone.

A writer registered in :data:`tpusim.study.outputs.WRITERS` runs in every
``tpusim run`` after the built-in writers, reads the run's records, and the paths it
returns come back from :func:`~tpusim.study.outputs.write_outputs`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run

from tpusim.results.writers import Outputs
from tpusim.study.outputs import WRITERS, OutputWriter, write_outputs

SCENARIO = """\
name: diameters
systems: [v5e-pod, torus-8x8x16]
plots: false
workloads:
  - {name: topo, kind: topology}
"""


def write_diameters(out: Path, outputs: Outputs) -> list[Path]:
    """``diameters.txt``: one ``system diameter`` line per topology record."""
    path = out / "diameters.txt"
    lines = [f"{r.system} {r.diameter_hops}" for r in outputs.run.records]
    path.write_text("\n".join(lines) + "\n")
    return [path]


@pytest.fixture
def diameters_writer():
    WRITERS.register("diameters", OutputWriter(write_diameters, "diameters.txt"))
    yield
    WRITERS.unregister("diameters")


def test_registered_writer_runs_in_tpusim_run(diameters_writer, tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    out = tmp_path / "out"
    code, stdout, _ = run(
        capsys, "run", str(path), "--json", "--quiet", "--jobs", "1", "--out", str(out)
    )
    assert code == 0
    rows = json.loads(stdout)["results"]
    # a 16x16 torus: 8 + 8 hops; an 8x8x16 torus: 4 + 4 + 8 hops
    assert (out / "diameters.txt").read_text() == "v5e-pod 16\ntorus-8x8x16 16\n"
    assert [r["diameter_hops"] for r in rows] == [16, 16]
    assert (out / "summary.csv").exists()  # the built-in writers still ran


def test_write_outputs_returns_each_writers_paths(diameters_writer, tmp_path):
    from tpusim.study.options import ScenarioRunOptions
    from tpusim.study.runner import run_scenario
    from tpusim.study.scenario import Scenario

    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.replace("torus-8x8x16", "v6e-pod"))
    scenario = Scenario(path)
    written = write_outputs(
        tmp_path / "out",
        scenario.outputs(run_scenario(scenario, ScenarioRunOptions(quiet=True, jobs=1))),
    )
    assert WRITERS.names()[-1] == "diameters"
    assert written["diameters"] == [tmp_path / "out" / "diameters.txt"]
    assert written["summary"][0] == tmp_path / "out" / "summary.csv"  # (+ .parquet)
    assert written["traces"] == [] and written["claims"] == [] and written["plots"] == []
    assert (tmp_path / "out" / "diameters.txt").read_text() == "v5e-pod 16\nv6e-pod 16\n"


def test_unregistered_writer_writes_nothing(tmp_path):
    from tpusim.study.options import ScenarioRunOptions
    from tpusim.study.runner import run_scenario
    from tpusim.study.scenario import Scenario

    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    scenario = Scenario(path)
    written = write_outputs(
        tmp_path / "out",
        scenario.outputs(run_scenario(scenario, ScenarioRunOptions(quiet=True, jobs=1))),
    )
    assert "diameters" not in written and not (tmp_path / "out" / "diameters.txt").exists()


def test_a_taken_writer_name_cannot_be_registered_again(diameters_writer):
    with pytest.raises(ValueError, match="output writer 'diameters' is already registered"):
        WRITERS.register("diameters", OutputWriter(lambda out, outputs: [], "nothing"))
