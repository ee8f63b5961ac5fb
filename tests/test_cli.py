"""Tests for the ``tpusim`` command line, run in-process through ``tpusim.cli.main``
(plus one subprocess run of ``python -m tpusim``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import assert_one_error_line, run

from tpusim.config import load_system, shipped

DESIGN_FIELDS = (
    "system",
    "topology",
    "chips",
    "links",
    "diameter_hops",
    "mean_hops",
    "bisection_bandwidth_Bps",
)
EXTRA_FIELDS = ("link_bandwidth_Bps", "degree", "peak_flops", "hbm_capacity_bytes")


def one_json_object(text: str) -> dict:
    """Exactly one JSON object and nothing else (json.loads rejects trailing data)."""
    record = json.loads(text)
    assert isinstance(record, dict)
    return record


# -- systems ----------------------------------------------------------------------------------


def test_systems_json_lists_every_shipped_system(capsys):
    code, out, err = run(capsys, "systems", "--json")
    assert code == 0 and err == ""
    record = one_json_object(out)
    rows = record["systems"]
    assert [r["name"] for r in rows] == list(shipped("systems"))
    for row in rows:
        assert {"name", "chip", "topology", "chips"} <= set(row)
        system = load_system(row["name"])
        assert row["chip"] == system.chip.name
        assert row["chips"] == system.num_chips
        assert row["topology"] == system.topology_kind
    by_name = {r["name"]: r for r in rows}
    assert by_name["v5e-pod"]["chips"] == 256
    assert by_name["tpu8i-pod"]["topology"] == "boardfly"
    assert by_name["tpu8t-virgo"]["chips"] == 134_400


def test_systems_table(capsys):
    code, out, err = run(capsys, "systems")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["name", "chip", "topology", "chips"]
    assert len(lines) == 1 + len(shipped("systems"))
    for name in shipped("systems"):
        assert any(line.startswith(name + " ") for line in lines[1:])


# -- topo -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["v5e-pod", "tpu8i-pod", "ironwood-256", "tpu8t-virgo"])
def test_topo_json_fields(capsys, name):
    code, out, err = run(capsys, "topo", name, "--json")
    assert code == 0 and err == ""
    rec = one_json_object(out)
    for field in DESIGN_FIELDS + EXTRA_FIELDS:
        assert field in rec, field
    assert list(rec)[:2] == ["system", "topology"]
    system = load_system(name)
    assert rec["system"] == name
    assert rec["chips"] == system.num_chips
    assert rec["link_bandwidth_Bps"] == system.link_bandwidth_Bps
    assert isinstance(rec["links"], int) and rec["links"] > 0
    assert isinstance(rec["diameter_hops"], int) and rec["diameter_hops"] >= 1
    assert 1 <= rec["mean_hops"] <= rec["diameter_hops"]
    assert rec["bisection_bandwidth_Bps"] > 0
    assert set(rec["degree"]) == {"min", "mean", "max"}
    assert rec["degree"]["min"] <= rec["degree"]["mean"] <= rec["degree"]["max"]
    assert rec["peak_flops"]["bf16"] == pytest.approx(
        system.chip.peak_flops["bf16"] * system.num_chips
    )
    assert rec["hbm_capacity_bytes"] == pytest.approx(
        system.chip.hbm.capacity_bytes * system.num_chips
    )


def test_topo_json_v5e_values(capsys):
    rec = one_json_object(run(capsys, "topo", "v5e-pod", "--json")[1])
    assert rec["topology"] == "torus"
    assert rec["chips"] == 256
    assert rec["links"] == 512  # 16x16 wrap torus: 2 links per chip
    assert rec["diameter_hops"] == 16
    assert rec["bisection_bandwidth_Bps"] == pytest.approx(1.6e12, rel=1e-9)
    assert rec["link_bandwidth_Bps"] == 50e9
    assert rec["degree"] == {"min": 4, "mean": 4.0, "max": 4}


def test_topo_json_user_path(capsys, tmp_path):
    path = tmp_path / "ring.yaml"
    path.write_text(
        "name: my-ring\nchip: v5e\n"
        "topology: {kind: torus, dims: [16], wraparound: true, twisted: false}\n"
        "ici: {link_bandwidth: 45 GB/s, hop_latency: 1 us}\n"
    )
    code, out, err = run(capsys, "topo", str(path), "--json")
    assert code == 0 and err == ""
    rec = one_json_object(out)
    assert rec["system"] == "my-ring"
    assert rec["chips"] == 16 and rec["links"] == 16 and rec["diameter_hops"] == 8
    assert rec["bisection_bandwidth_Bps"] == pytest.approx(2 * 45e9)


def test_topo_json_several_systems_is_still_one_object(capsys):
    code, out, _ = run(capsys, "topo", "v5e-pod", "v6e-pod", "--json")
    assert code == 0
    rec = one_json_object(out)
    assert [r["system"] for r in rec["topologies"]] == ["v5e-pod", "v6e-pod"]


def test_topo_table(capsys):
    code, out, err = run(capsys, "topo", "v5e-pod")
    assert code == 0 and err == ""
    assert out.startswith("system")
    assert "v5e-pod" in out and "16x16" in out
    assert "diameter        16 hops" in out


# -- bad input: exit 2, one line, no traceback -----------------------------------------------


def test_unknown_system_name(capsys):
    line = assert_one_error_line(*run(capsys, "topo", "no-such-pod"))
    assert "no-such-pod" in line


def test_path_that_does_not_exist(capsys, tmp_path):
    line = assert_one_error_line(*run(capsys, "topo", str(tmp_path / "absent.yaml")))
    assert "absent.yaml" in line and "does not exist" in line


def test_bad_yaml(capsys, tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: x\nchip: v5e\ntopology: {kind: torus, dims: [16]\nfoo: bar\n")
    line = assert_one_error_line(*run(capsys, "topo", str(path)))
    assert "broken.yaml:4" in line


def test_invalid_config(capsys, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nchip: v5e\ntopology: {kind: torus, dims: [16]}\ncolour: red\n")
    line = assert_one_error_line(*run(capsys, "topo", str(path), "--json"))
    assert "bad.yaml:4 colour: unknown key" in line


def test_unknown_flag(capsys):
    line = assert_one_error_line(*run(capsys, "topo", "v5e-pod", "--bogus"))
    assert "--bogus" in line


def test_missing_argument(capsys):
    line = assert_one_error_line(*run(capsys, "topo"))
    assert "system" in line


def test_no_command_prints_help_and_exits_0(capsys):
    """Issue 15: bare ``tpusim`` is a request for help, not a mistake."""
    code, out, err = run(capsys)
    assert code == 0 and err == ""
    assert out.startswith("usage: tpusim") and "run a scenario" in out


def test_unknown_command(capsys):
    assert_one_error_line(*run(capsys, "frobnicate"))


# -- the module entry point -------------------------------------------------------------------


def test_python_dash_m_entry_point():
    proc = subprocess.run(
        [sys.executable, "-m", "tpusim", "topo", "v5e-pod", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    rec = one_json_object(proc.stdout)
    assert rec["system"] == "v5e-pod" and rec["chips"] == 256
