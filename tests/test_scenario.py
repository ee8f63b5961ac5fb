"""Scenarios and ``tpusim run``: the shipped demo against independent figures, outputs,
and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import achievable_flops, achievable_hbm_Bps, assert_one_error_line, run

from tpusim.config import load_chip
from tpusim.engine import simulate_collective

DEMO = Path(__file__).resolve().parent.parent / "scenarios" / "demo.yaml"


@pytest.fixture(scope="module")
def demo(demo_by_name):
    """The shipped demo's JSON record and output folder (tests/conftest.py: run once per
    session, by name, as tests/test_cli_ux.py also reads it)."""
    record, folder = demo_by_name
    return record, folder / record["out"]


def rows(record, workload):
    return {r["system"]: r for r in record["results"] if r["workload"] == workload}


def test_demo_json_contract(demo):
    record, out = demo
    assert record["scenario"] == "demo" and out.is_dir()
    assert len(record["results"]) == 2 * 6  # 2 systems x (2 swept collectives + 4 programs)
    for row in record["results"]:
        assert {"system", "workload", "step_time_s"} <= set(row)


@pytest.mark.parametrize("size", [2**20, 64 * 2**20])
def test_demo_collectives_equal_tpusim_collective(demo, size):
    record, _ = demo
    label = f"all-reduce[bytes={size // 2**20} MiB]"
    for system, row in rows(record, label).items():
        direct, _ = simulate_collective(system, "all-reduce", size)
        assert row["time_s"] == pytest.approx(direct.time_s, rel=1e-12)


def test_demo_overlap_program_is_the_max_plus_the_update(demo):
    """fwd (8192^3 matmul) and grads (async all-reduce of 256 MiB) overlap; update (1 GiB
    elementwise) waits for both: step = max(fwd, grads) + update, from the roofline."""
    record, _ = demo
    for system, row in rows(record, "overlap").items():
        chip = load_chip(system.split("-")[0])
        overhead = 0.5e-6
        hbm_Bps = achievable_hbm_Bps(chip)
        fwd = max(2 * 8192**3 / achievable_flops(chip, 8192), 3 * 2 * 8192**2 / hbm_Bps)
        fwd += overhead
        update = 2**30 / hbm_Bps + overhead
        grads, _ = simulate_collective(system, "all-reduce", 256 * 2**20)
        assert row["step_time_s"] == pytest.approx(max(fwd, grads.time_s) + update, rel=1e-6)


def test_demo_training_and_decode_figures_are_consistent(demo):
    record, _ = demo
    for workload in ("train", "decode"):
        for system, row in rows(record, workload).items():
            assert row["compute_time_s"] <= row["step_time_s"] * (1 + 1e-12)
            assert row["step_time_s"] <= (row["compute_time_s"] + row["communication_time_s"]) * (
                1 + 1e-9
            )
            peak = load_chip(system.split("-")[0]).peak_flops["bf16"]
            assert row["mfu"] == pytest.approx(row["flops_per_chip"] / (row["step_time_s"] * peak))
            assert row["tokens_per_s"] > 0
            assert 0 < row["max_link_utilization"] <= 1 + 1e-9
            assert row["max_hops"] >= 1
    train = rows(record, "train")["v5e-pod"]
    assert train["tokens_per_s"] == pytest.approx(256 * 2048 / train["step_time_s"])


def test_demo_hlo_replay_matches_tpusim_hlo(demo):
    from tpusim.workloads.hlo import hlo_summary

    record, _ = demo
    fixture = DEMO.parent.parent / "tests" / "fixtures" / "hlo" / "transformer_8.hlo.txt"
    for system, row in rows(record, "jax-transformer").items():
        direct = hlo_summary(str(fixture), system, "flow")
        assert row["step_time_s"] == pytest.approx(direct["step_time_s"], rel=1e-12)
        assert row["flops_per_chip"] <= direct["flops_per_chip"]  # matmuls only vs all ops


def test_demo_outputs_and_trace_format(demo):
    _, out = demo
    for name in ("summary.csv", "ops.csv", "links.csv", "resolved.yaml"):
        assert (out / name).stat().st_size > 0
    traces = sorted(out.glob("trace-*.json"))
    assert len(traces) == 8
    events = json.loads(traces[0].read_text())["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert complete and all({"name", "pid", "tid", "ts", "dur"} <= set(e) for e in complete)
    names = {
        e["args"]["name"]
        for t in traces
        for e in json.loads(t.read_text())["traceEvents"]
        if e["ph"] == "M" and e["name"] == "thread_name"
    }
    assert {"tensorcore", "ici"} <= names
    assert {"ICI x+", "ICI x-", "ICI y+", "ICI y-"} <= names  # v5e's 4 ports, 2D torus


BASE = """\
name: t
systems: [v5e-pod]
workloads:
  - {name: w, kind: program, ops: [{name: mm, kind: matmul, m: 128, n: 128, k: 128}]}
"""


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (
            BASE.replace("kind: program", "kind: telepathy"),
            r":4 workloads\[0\]\.kind: unknown kind 'telepathy' \(choose from .*program",
        ),
        (BASE.replace("kind: program, ", ""), r":4 workloads\[0\]\.kind: required key is missing"),
        (
            BASE + "  - {name: ar, kind: collective, op: all-reduce, bytes: 1 KiB,"
            " algorithm: spiral}\n",
            r":5 workloads\[1\]\.algorithm: unknown algorithm 'spiral' \(choose from ring",
        ),
        (
            BASE.replace("systems: [v5e-pod]", "systems: [v99-pod]"),
            r":2 systems\[0\]: unknown system",
        ),
        (BASE.replace("{name: w,", "{name: w, colour: red,"), "colour: unknown key"),
        (BASE.replace("{name: w,", "{name: w, sweep: {q: [1, 2]},"), "sweep over 'q'"),
        (BASE.replace("m: 128,", "m: 128, after: [zz],"), "unknown op 'zz'"),
        (BASE.replace("m: 128,", "m: 128, after: [mm],"), "dependency cycle among ops mm"),
        (BASE.replace("{name: w,", "{name: w, mesh: {data: 8},"), "mesh .* 8 devices"),
        (
            BASE.replace("{name: w,", "{name: w, per_system: {v9-pod: {}},"),
            r"workloads\[0\]\.per_system\.v9-pod: 'v9-pod' is not one of the scenario's systems",
        ),
        (
            BASE + "assumptions: {power_per_chip: {tpu9: 1 kW}}\n",
            r"assumptions\.power_per_chip\.tpu9: 'tpu9' is not a chip",
        ),
        (BASE + "assumptions: {power_per_chip: {v5e: 1 parsec}}\n", "power_per_chip"),
        (
            BASE + "  - {name: ar, kind: collective, op: all-reduce, bytes: 1 KiB,"
            " sweep: {bytes: {from: 1 MiB, to: 1 KiB, factor: 2}}}\n",
            r"workloads\[1\]\.sweep\.bytes: a range needs 0 < from <= to",
        ),
        (
            BASE + "  - {name: ar, kind: collective, op: all-reduce, bytes: 1 KiB,"
            " sweep: {bytes: {from: 1 KiB, to: 1 MiB, factor: 1}}}\n",
            r"sweep\.bytes: .*a range takes from, to and factor \(factor: Input should be greater",
        ),
        (
            BASE + "network: {fidelity: flow, tolerance: 1.5}\n",
            r"s\.yaml:5 network\.tolerance: must be at least 0 and below 1, got 1\.5",
        ),
        (
            BASE + "network: {fidelity: packet, tolerance: 0.1}\n",
            r"network\.tolerance: the packet fidelity has no option 'tolerance' \(its options: "
            r"packet_bytes\); tolerance belongs to flow",
        ),
        (BASE + "network: {fidelity: fluid}\n", r"network\.fidelity: unknown network fidelity"),
        (BASE + "network: {fidelity: packet, packet_bytes: 1 parsec}\n", "network.packet_bytes"),
        (
            BASE + "  - {name: d, kind: decode_step, layers: 1, d_model: 64, d_ff: 128, heads: 2,"
            " head_dim: 32, batch: 1, context: 16, mesh: {a: auto, b: auto}}\n",
            "at most one mesh axis can be 'auto'",
        ),
        (
            BASE + "  - {name: d, kind: decode_step, layers: 1, d_model: 64, d_ff: 128, heads: 2,"
            " head_dim: 32, batch: 1, context: 16, mesh: {a: auto, b: 3}}\n",
            r"workloads\[1\]\.mesh\.a: v5e-pod: 256 chips do not divide by the other mesh axes",
        ),
        (
            BASE + "  - {name: t, kind: training_step, layers: 1, d_model: 64, d_ff: 128, heads: 2,"
            " head_dim: 32, seq: 16, batch: 256, batch_per_shard: 1, mesh: {data: auto}}\n",
            "exactly one of 'batch' and 'batch_per_shard'",
        ),
    ],
)
def test_bad_scenarios_exit_2_with_one_line(tmp_path, capsys, text, match):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    line = assert_one_error_line(
        *run(capsys, "run", str(path), "--out", str(tmp_path / "o"), "--quiet")
    )
    assert __import__("re").search(match, line), line


def test_bad_jobs_flag_is_one_line(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(BASE)
    line = assert_one_error_line(*run(capsys, "run", str(path), "--jobs", "-1"))
    assert "--jobs" in line


def test_sweep_range_is_geometric_from_to_inclusive(tmp_path):
    from tpusim.study.scenario import Scenario

    path = tmp_path / "s.yaml"
    path.write_text(
        BASE + "  - {name: ar, kind: collective, op: all-reduce, bytes: 1 KiB,"
        " sweep: {bytes: {from: 1 KiB, to: 1 GiB, factor: 32}}}\n"
        + "  - {name: mm, kind: program, ops: [{name: a, kind: matmul, m: 8, n: 8, k: 8}],"
        " sweep: {ops: [[{name: b, kind: matmul, m: 16, n: 16, k: 16}]]}}\n"
    )
    runs = Scenario(path).runs
    sizes = [p.workload.bytes for p in runs if p.index == 1]
    assert sizes == [2.0**10, 2.0**15, 2.0**20, 2.0**25, 2.0**30]
    labels = [p.label for p in runs if p.index == 1]
    assert labels[0] == "ar[bytes=1 KiB]" and labels[-1] == "ar[bytes=1 GiB]"


def test_program_sweeps_and_per_system_overrides_reach_the_program(tmp_path, capsys):
    """A matmul of n^3: the slower of 2 n^3 / achievable FLOP/s and its 3 n^2 bf16 elements
    over the achievable HBM bandwidth (+ 0.5 us)."""
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: t\nplots: false\nsystems: [v5e-pod, v6e-pod]\nworkloads:\n"
        "  - {name: mm, kind: program, ops: [{name: a, kind: matmul, m: 4096, n: 4096, k: 4096}],\n"
        "     sweep: {ops: [[{name: b, kind: matmul, m: 8192, n: 8192, k: 8192}]]},\n"
        "     per_system: {v6e-pod: {ops: [{name: c, kind: matmul, m: 2048, n: 2048, k: 2048}]}}}\n"
    )
    code, out, _ = run(
        capsys, "run", str(path), "--json", "--quiet", "--jobs", "1", "--out", str(tmp_path / "o")
    )
    assert code == 0
    rows = {r["system"]: r for r in json.loads(out)["results"]}
    for system, n in (("v5e-pod", 8192), ("v6e-pod", 2048)):
        chip = load_chip(system.split("-")[0])
        compute, memory = 2 * n**3 / achievable_flops(chip, n), 6 * n**2 / achievable_hbm_Bps(chip)
        want = max(compute, memory) + 0.5e-6
        assert rows[system]["step_time_s"] == pytest.approx(want, rel=1e-3)


def test_model_that_does_not_fit_is_out_of_memory_found_by_the_check_exit_1(tmp_path, capsys):
    """Issue 15: memory fits are checked before simulating (nothing is run or written);
    out of memory keeps its exit code 1 (issue 13); ``tpusim check`` says 2."""
    path = tmp_path / "s.yaml"
    path.write_text(BASE.replace("{name: w,", "{name: w, memory: {hbm: 40 GB},"))
    code, _, err = run(capsys, "run", str(path), "--out", str(tmp_path / "o"), "--quiet")
    assert code == 1 and "out of memory" in err and "HBM" in err and "Traceback" not in err
    assert err.startswith(f"tpusim: error: {path}:4 workloads[0]: v5e-pod w: out of memory")
    assert not (tmp_path / "o").exists()
    code, _, err = run(capsys, "check", str(path))
    assert code == 2 and "out of memory" in err


def test_workload_systems_runs_it_on_those_systems_only(tmp_path, capsys):
    """A matmul of n^3 is compute-bound: 2 n^3 / achievable FLOP/s (+ 0.5 us), on the
    named system only."""
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: t\nplots: false\nsystems: [v5e-pod, v6e-pod]\nworkloads:\n"
        "  - {name: both, kind: program, ops: [{name: a, kind: matmul, m: 256, n: 256, k: 256}]}\n"
        "  - {name: one, kind: program, systems: [v6e-pod],\n"
        "     ops: [{name: b, kind: matmul, m: 4096, n: 4096, k: 4096}]}\n"
    )
    code, out, _ = run(
        capsys, "run", str(path), "--json", "--quiet", "--jobs", "1", "--out", str(tmp_path / "o")
    )
    assert code == 0
    rows = [(r["system"], r["workload"]) for r in json.loads(out)["results"]]
    assert rows == [("v5e-pod", "both"), ("v6e-pod", "both"), ("v6e-pod", "one")]
    one = json.loads(out)["results"][2]
    rate = achievable_flops(load_chip("v6e"), 4096)
    assert one["step_time_s"] == pytest.approx(2 * 4096**3 / rate + 0.5e-6, rel=1e-3)
    code, out, _ = run(capsys, "check", str(path), "--json")
    assert code == 0 and json.loads(out)["checked"] == 3


def test_workload_systems_naming_an_unknown_system_is_one_line(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(BASE.replace("{name: w,", "{name: w, systems: [v9-pod],"))
    line = assert_one_error_line(
        *run(capsys, "run", str(path), "--out", str(tmp_path / "o"), "--quiet")
    )
    assert "workloads[0].systems[0]: 'v9-pod' is not one of the scenario's systems" in line
