"""The everyday command line (issue 15): ``--version``, one error prefix, sizes echoed
in the unit given, ``--flow-tolerance``, shipped scenarios listed and run by name (also
from an installed wheel, slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import assert_one_error_line, run

import tpusim
from tpusim.engine import CollectiveOptions, run_collective
from tpusim.network import NetworkSettings
from tpusim.topology import build_topology

ROOT = Path(__file__).resolve().parent.parent


def test_version_is_the_package_version(capsys):
    from importlib.metadata import PackageNotFoundError, version

    try:
        want = version("tpusim")
    except PackageNotFoundError:
        want = tpusim.__version__
    with pytest.raises(SystemExit) as exc:
        tpusim.cli.app.main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"tpusim {want}\n"


def test_version_of_the_tree_matches_pyproject():
    text = (ROOT / "pyproject.toml").read_text()
    assert f'\nversion = "{tpusim.__version__}"\n' in text


@pytest.mark.parametrize(
    ("argv", "start"),
    [
        (["collective", "v5e-pod", "--op", "warp", "--bytes", "1MB"], "collective: argument --op"),
        (["topo", "v5e-pod", "--bogus"], "unrecognized arguments: --bogus"),
        (["frobnicate"], "argument command: invalid choice"),
    ],
)
def test_one_error_prefix(capsys, argv, start):
    line = assert_one_error_line(*run(capsys, *argv))
    assert line.startswith(f"tpusim: error: {start}"), line
    assert "tpusim: error: tpusim" not in line


@pytest.mark.parametrize(
    ("size", "shown"),
    [("1MB", "1 MB"), ("1MiB", "1 MiB"), ("1000000", "1 MB"), ("64 KiB", "64 KiB")],
)
def test_bytes_echoed_in_the_unit_given(capsys, size, shown):
    code, out, _ = run(capsys, "collective", "v5e-pod", "--op", "all-reduce", "--bytes", size)
    assert code == 0
    assert f"collective      all-reduce of {shown} (" in out


def test_sweep_sizes_echoed_in_the_unit_of_low(capsys):
    argv = ["collective", "v5e-pod", "--op", "all-reduce", "--sweep-bytes", "1KB:4KB", "--quiet"]
    code, out, _ = run(capsys, *argv)
    assert code == 0
    assert [line.split()[:2] for line in out.splitlines()[1:]] == [
        ["1", "KB"],
        ["2", "KB"],
        ["4", "KB"],
    ]


def test_flow_tolerance_reaches_the_simulation(capsys):
    """The flag gives the library's figure at that tolerance, and is part of the run:
    on the 256-chip Ironwood torus's 64 MiB all-reduce exact and 5% differ (measured:
    332.8 us against 331.0 us)."""
    from tpusim.config import load_system

    system = load_system("ironwood-256")
    topology = build_topology(system)
    times = {}
    for tolerance in (0.0, 0.05):
        argv = ["collective", "ironwood-256", "--op", "all-reduce", "--bytes", "64MiB"]
        code, out, _ = run(capsys, *argv, "--flow-tolerance", str(tolerance), "--json")
        assert code == 0
        times[tolerance] = json.loads(out)["time_s"]
        direct, _ = run_collective(
            topology,
            "all-reduce",
            64 * 2**20,
            CollectiveOptions(network=NetworkSettings.of(tolerance=tolerance)),
            chip=system.chip,
        )
        assert times[tolerance] == pytest.approx(direct.time_s, rel=1e-12)
    assert times[0.0] != times[0.05]


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--flow-tolerance", "1.5"], "must be at least 0 and below 1"),
        (["--flow-tolerance", "x"], "expected a number"),
        (["--flow-tolerance", "0.1", "--fidelity", "analytic"], "only applies to --fidelity flow"),
    ],
)
def test_bad_flow_tolerance(capsys, extra, words):
    argv = ["collective", "v5e-pod", "--op", "all-reduce", "--bytes", "1MB", *extra]
    assert words in assert_one_error_line(*run(capsys, *argv))


def test_scenarios_lists_the_shipped_files(capsys):
    code, out, err = run(capsys, "scenarios", "--json")
    assert code == 0 and err == ""
    rows = json.loads(out)["scenarios"]
    shipped = sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml"))
    assert [r["name"] for r in rows] == shipped
    for row in rows:
        data = yaml.safe_load(Path(row["path"]).read_text())
        assert row["description"] == data["description"] and data["name"] == row["name"]


def test_run_by_name_from_another_folder(demo_by_name):
    """``tpusim run demo`` from a folder that is not the repository (tests/conftest.py,
    shared with tests/test_scenario.py) writes into ``out/demo`` there."""
    record, folder = demo_by_name
    assert record["scenario"] == "demo" and record["out"] == "out/demo"
    assert (folder / "out" / "demo" / "summary.csv").is_file()
    assert len(record["results"]) == 12


def test_unknown_scenario_name_lists_the_shipped_ones(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = assert_one_error_line(*run(capsys, "run", "nosuch"))
    assert "unknown scenario 'nosuch'" in line
    assert "shipped: demo, design-space, generations" in line


@pytest.mark.slow
def test_installed_wheel_lists_and_runs_shipped_scenarios(tmp_path):
    """``pip install .`` into a fresh venv; from another folder the shipped scenarios are
    listed and ``demo`` runs (its HLO module ships beside it)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = [str(venv / "bin" / "pip"), "install", "-q", str(ROOT)]
    subprocess.run(pip, check=True, timeout=1800, capture_output=True)
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    tool = str(venv / "bin" / "tpusim")

    def call(*argv: str) -> str:
        done = subprocess.run(
            [tool, *argv], cwd=work, env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    names = [r["name"] for r in json.loads(call("scenarios", "--json"))["scenarios"]]
    assert {"demo", "generations"} <= set(names)
    record = json.loads(call("run", "demo", "--quiet", "--json", "--jobs", "1"))
    assert len(record["results"]) == 12 and (work / "out" / "demo" / "summary.csv").is_file()
