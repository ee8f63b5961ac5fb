"""The fault flags of ``tpusim collective`` and the ``tpusim faults`` Monte Carlo, from
the command line: JSON fields, exit codes and one-line errors, the degradation curve."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tpusim.cli import main
from tpusim.cli.faults import link_counts
from tpusim.study.fault_trials import monte_carlo


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_collective_json_gains_fault_fields(capsys, tmp_path):
    faults = tmp_path / "f.yaml"
    faults.write_text("faults:\n  - {kind: link_down, link: [0, 1]}\n")
    code, out, _ = run_cli(
        capsys, "collective", "v5e-pod", "--op", "all-gather", "--bytes", "16MiB",
        "--faults", str(faults), "--fail-links", "2", "--seed", "3", "--json",
    )  # fmt: skip
    assert code == 0
    rec = json.loads(out)
    assert [0, 1] in rec["failed_links"] and len(rec["failed_links"]) == 3
    assert rec["rerouted_flows"] >= 0 and isinstance(rec["adapted"], list)


def test_healthy_collective_json_is_unchanged(capsys):
    code, out, _ = run_cli(
        capsys, "collective", "v5e-pod", "--op", "all-gather", "--bytes", "16MiB", "--json"
    )
    assert code == 0
    assert "failed_links" not in json.loads(out)


@pytest.mark.parametrize(
    "entry, needle",
    [
        ("{kind: link_down, link: [0, 9]}", "faults[0] (link_down): link [0, 9] does not exist"),
        ("{kind: chip_down, chip: 99999}", "faults[0] (chip_down): chip 99999 does not exist"),
        ("{kind: link_down, link: [0, 1], at: -2 ms}", "faults[0].at"),
        ("{kind: link_degraded, link: [0, 1], bandwidth_fraction: 2}", "bandwidth_fraction"),
    ],
)
def test_bad_faults_exit_2_with_one_line(capsys, tmp_path, entry, needle):
    faults = tmp_path / "f.yaml"
    faults.write_text(f"faults:\n  - {entry}\n")
    code, out, err = run_cli(
        capsys, "collective", "v5e-pod", "--op", "all-gather", "--bytes", "1MiB",
        "--faults", str(faults),
    )  # fmt: skip
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and needle in err


def test_chip_failure_exits_1_naming_chip_op_and_time(capsys, tmp_path):
    faults = tmp_path / "f.yaml"
    faults.write_text("faults:\n  - {kind: chip_down, chip: 17, at: 1 us}\n")
    code, _, err = run_cli(
        capsys, "collective", "v5e-pod", "--op", "all-reduce", "--bytes", "16MiB",
        "--faults", str(faults),
    )  # fmt: skip
    assert code == 1
    assert err.strip() == (
        "tpusim: error: chip 17 (x=1, y=1) is down at 1 us: collective 'all-reduce' cannot "
        "complete (on_chip_failure: fail; exclude or spare_cube continue)"
    )


def test_packet_fidelity_refuses_a_link_failing_mid_run(capsys, tmp_path):
    faults = tmp_path / "f.yaml"
    faults.write_text("faults:\n  - {kind: link_down, link: [0, 1], at: 1 us}\n")
    code, _, err = run_cli(
        capsys, "collective", "v5e-pod", "--op", "all-gather", "--bytes", "1MiB",
        "--fidelity", "packet", "--chips", "16", "--faults", str(faults),
    )  # fmt: skip
    assert code == 2 and "packet fidelity" in err and len(err.strip().splitlines()) == 1


def test_link_counts():
    assert link_counts("0:16") == [0, 1, 2, 4, 8, 16]
    assert link_counts("3:12") == [3, 4, 8, 12]


def test_monte_carlo_is_reproducible_and_monotone_in_expectation():
    a = monte_carlo("v5e-pod", "all-reduce", 2**24, [0, 1, 8], 4, 7).record()
    b = monte_carlo("v5e-pod", "all-reduce", 2**24, [0, 1, 8], 4, 7).record()
    assert a == b
    rows = a["counts"]
    assert rows[0]["trials"] == 1 and rows[0]["p50_s"] == a["healthy_time_s"]
    assert all(r["p10_s"] <= r["p50_s"] <= r["p90_s"] <= r["p99_s"] <= r["max_s"] for r in rows)
    assert rows[-1]["p50_s"] >= a["healthy_time_s"]


def test_faults_command_writes_the_curve(capsys, tmp_path):
    code, out, _ = run_cli(
        capsys, "faults", "v5e-pod", "--op", "all-reduce", "--bytes", "16MiB",
        "--fail-links", "0:4", "--trials", "3", "--out", str(tmp_path / "o"), "--json",
    )  # fmt: skip
    assert code == 0
    rec = json.loads(out)
    assert [r["failed_links"] for r in rec["counts"]] == [0, 1, 2, 4]
    png = tmp_path / "o" / "faults.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "o" / "faults.csv").read_text().startswith("failed_links,")


@pytest.mark.parametrize("flags", [["--fail-links", "4:2"], ["--trials", "0"]])
def test_faults_command_bad_flags_exit_2(capsys, flags):
    code, _, err = run_cli(
        capsys, "faults", "v5e-pod", "--op", "all-reduce", "--bytes", "1MiB", *flags
    )
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_scenario_top_level_faults_and_run_flags(capsys, tmp_path):
    """Top-level fault keys reach every collective workload; ``per_system`` overrides
    them; ``tpusim run --faults`` sets them on top (bad entries: exit 2, one line per
    workload they reach, before anything runs)."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "name: faulty\nsystems: [v5e-pod]\nfail_links: 2\nseed: 3\nworkloads:\n"
        "  - {kind: collective, name: a, op: all-reduce, bytes: 16MiB}\n"
        "  - {kind: collective, name: b, op: all-reduce, bytes: 16MiB, fail_links: 0}\n"
    )
    code, out, _ = run_cli(capsys, "run", str(scenario), "--out", str(tmp_path / "o"), "--json")
    assert code == 0
    rows = {r["workload"]: r for r in json.loads(out)["results"]}
    assert rows["a"]["time_s"] > rows["b"]["time_s"]  # two links down against none
    assert rows["a"]["failed_links"] == 2 and rows["a"]["rerouted_flows"] >= 0
    assert rows["a"]["routing"] == "minimal"
    assert "failed_links" not in rows["b"]  # a healthy run has no fault columns
    from tpusim.workloads import record_from_row

    summary = pd.read_csv(tmp_path / "o" / "summary.csv").to_dict("records")
    back = {r["workload"]: record_from_row(r).row() for r in summary}
    assert back["a"]["failed_links"] == 2 and "failed_links" not in back["b"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("faults:\n  - {kind: link_down, link: [0, 9]}\n")
    code, _, err = run_cli(
        capsys, "run", str(scenario), "--out", str(tmp_path / "o2"), "--faults", str(bad), "--quiet"
    )
    lines = err.strip().splitlines()  # the check lists the problem of both workloads
    assert code == 2 and len(lines) == 2
    assert all("link [0, 9] does not exist" in line for line in lines)
