"""Faults apply wherever a network is simulated (issue 45, item 1): a scenario's
``faults:``, ``--fail-links`` and ``--faults FILE`` reach a training step, a jobs
workload (its training jobs and its services' KV transfers) and the program kinds, and
a kind that simulates no network refuses them by name.

Hand counts (configs/chips/*.yaml: ICI link bandwidth x link efficiency per direction):

* Training step on a line of 2 v5e chips (``R = 50 GB/s x 0.9``), mesh {pipeline: 2},
  one microbatch, collectives not overlapped (``async_collectives: false``): the step
  sends, over the one link, 2 forward and 2 backward activation permutes of ``seq x
  d_model x 2`` bytes (bf16) each, and all-reduces over the two stages the embedding's
  and the head's gradients, ``vocab x d_model x 2`` bytes each (bf16), each of which
  puts its whole size once through each direction of the link (a reduce-scatter and an
  all-gather of half). Halving the link's bandwidth adds ``bytes / R`` to each
  transfer, in sequence: ``(4 x seq x d_model + 2 x vocab x d_model) x 2 / R``.
* Jobs on an ironwood 4x4x4 mesh without wraparound (``R = 100 GB/s x 0.902``): a
  training job all-reducing ``S`` bytes over chips 0, 1 sends ``S`` through each
  direction of link 0-1 (reduce-scatter and all-gather of ``S/2``); the link at half its
  bandwidth adds ``S / R``. A service disaggregated 1:1 on chips 2, 3 moves one
  request's KV, ``512 tokens x 32 layers x 2 x 8 KV heads x 128 x 2 bytes``, over link
  2-3: at half bandwidth it takes ``B / R`` longer. A fault on link 8-9 (row y=2),
  which neither uses, changes nothing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import assert_one_error_line, run

V5E_R = 50e9 * 0.9
IRONWOOD_R = 100e9 * 0.902
SEQ, D_MODEL, VOCAB = 1024, 1024, 1000
STEP_BYTES = (4 * SEQ * D_MODEL + 2 * VOCAB * D_MODEL) * 2
KV_BYTES = 512 * 32 * (2 * 8 * 128 * 2)
JOB_BYTES = 256 * 2**20
REPO = Path(__file__).resolve().parents[1]
HALF = "{kind: link_degraded, link: [%s], bandwidth_fraction: 0.5}"


def _training(tmp_path: Path, top: str = "") -> str:
    (tmp_path / "line2.yaml").write_text(
        "name: line2\nchip: v5e\ntopology: {kind: torus, dims: [2], wraparound: [false]}\n"
    )
    path = tmp_path / "train.yaml"
    path.write_text(
        f"name: t\nsystems: [line2.yaml]\nplots: false\n{top}workloads:\n"
        "  - {name: step, kind: training_step, layers: 2, d_model: 1024, d_ff: 2048,"
        " heads: 8, head_dim: 128, seq: 1024, vocab: 1000, batch_per_shard: 1,"
        " mesh: {pipeline: 2}, async_collectives: false}\n"
    )
    return str(path)


def _step_s(capsys, scenario: str, *flags: str) -> float:
    code, out, err = run(
        capsys, "run", scenario, "--json", "--out", str(Path(scenario).parent / "out"), *flags
    )
    assert code == 0, err
    (record,) = json.loads(out)["results"]
    return record["step_time_s"]


def test_a_training_step_slows_by_the_hand_counted_time_on_a_half_link(tmp_path, capsys):
    healthy = _step_s(capsys, _training(tmp_path))
    faulty = _step_s(capsys, _training(tmp_path, f"faults: [{HALF % '0, 1'}]\n"))
    assert faulty - healthy == pytest.approx(STEP_BYTES / V5E_R, rel=0.01)


def test_fail_links_and_a_faults_file_reach_a_training_step(tmp_path, capsys):
    scenario = _training(tmp_path)
    faults = tmp_path / "faults.yaml"
    faults.write_text(f"faults: [{HALF % '1, 0'}]\n")
    healthy = _step_s(capsys, scenario)
    assert _step_s(capsys, scenario, "--faults", str(faults)) - healthy == pytest.approx(
        STEP_BYTES / V5E_R, rel=0.01
    )
    # the one link down: the pipeline's first permute cannot run (exit 1, named)
    code, _, err = run(capsys, "run", scenario, "--out", str(tmp_path / "o"), "--fail-links", "1")
    assert code == 1 and "cut chips 1 off" in err and "i0.permute.fwd" in err, err


def _jobs(capsys, tmp_path: Path, link: str | None) -> dict[str, dict]:
    """The jobs' rows of a training job on chips 0, 1 and a service on chips 2, 3, with
    link ``link`` at half its bandwidth (None: healthy)."""
    system = tmp_path / "mesh.yaml"
    system.write_text(
        "name: mesh-4x4x4\nchip: ironwood\n"
        "topology: {kind: torus, dims: [4, 4, 4], wraparound: false}\n"
    )
    faults = f"faults: [{HALF % link}]\n" if link else ""
    path = tmp_path / "jobs.yaml"
    path.write_text(
        f"name: jobs\nsystems: [{system}]\nplots: false\n{faults}workloads:\n"
        "  - name: shared\n    kind: jobs\n    jobs:\n"
        "      - {name: train, chips: [0, 1], collective: {op: all-reduce, bytes: 256 MiB}}\n"
        "      - {name: chat, chips: [2, 3], serve: {model: llama-3.1-8b, tp: 1,"
        " disaggregate: '1:1', rate: inf, requests: 1, prompt_tokens: 512, output_tokens: 4}}\n"
    )
    code, out, err = run(capsys, "run", str(path), "--json", "--out", str(tmp_path / "o"))
    assert code == 0, err
    (result,) = json.loads(out)["results"]
    return {job["name"]: job for job in result["jobs"]}


def test_a_jobs_workload_slows_by_the_hand_counted_time_where_its_links_fail(tmp_path, capsys):
    healthy = _jobs(capsys, tmp_path, None)
    train = _jobs(capsys, tmp_path, "0, 1")
    kv = _jobs(capsys, tmp_path, "2, 3")
    elsewhere = _jobs(capsys, tmp_path, "8, 9")
    extra_train_s = train["train"]["time_s"] - healthy["train"]["time_s"]
    assert extra_train_s == pytest.approx(JOB_BYTES / IRONWOOD_R, rel=0.01)
    assert train["train"]["slowdown"] == pytest.approx(1.0)  # alone on the same faults
    assert train["chat"]["kv_transfer_p50_s"] == healthy["chat"]["kv_transfer_p50_s"]
    extra_kv_s = kv["chat"]["kv_transfer_p50_s"] - healthy["chat"]["kv_transfer_p50_s"]
    assert extra_kv_s == pytest.approx(KV_BYTES / IRONWOOD_R, rel=1e-6)
    assert kv["chat"]["alone_kv_transfer_p50_s"] == pytest.approx(kv["chat"]["kv_transfer_p50_s"])
    assert kv["train"]["time_s"] == healthy["train"]["time_s"]
    for name in ("train", "chat"):
        assert elsewhere[name] == healthy[name]


@pytest.mark.parametrize(
    ("top", "workload", "flags", "words"),
    [
        (
            f"faults: [{HALF % '0, 1'}]\n",
            "  - {name: topo, kind: topology}\n",
            (),
            ["'faults' cannot apply to workload 'topo'", "a topology workload"],
        ),
        ("", "  - {name: topo, kind: topology}\n", ("--fail-links", "1"), ["--fail-links"]),
        (
            "routing: ugal\n",
            "  - {name: chat, kind: serving, model: llama-3.1-8b, tp: 1, requests: 2}\n",
            (),
            ["'routing' cannot apply to workload 'chat'", "a serving workload"],
        ),
    ],
)
def test_a_kind_that_simulates_no_network_under_faults_refuses_them_by_name(
    tmp_path, capsys, top, workload, flags, words
):
    (tmp_path / "line2.yaml").write_text(
        "name: line2\nchip: v5e\ntopology: {kind: torus, dims: [2], wraparound: [false]}\n"
    )
    path = tmp_path / "s.yaml"
    path.write_text(f"name: s\nsystems: [line2.yaml]\n{top}workloads:\n{workload}")
    for command in ("check", "run"):
        code, out, err = run(capsys, command, str(path), *flags)
        line = assert_one_error_line(code, out, err)
        for word in words:
            assert word in line, line


def test_a_service_of_replicas_over_several_chips_refuses_faults(tmp_path, capsys):
    (tmp_path / "mesh.yaml").write_text(
        "name: m\nchip: ironwood\ntopology: {kind: torus, dims: [4, 4, 4], wraparound: false}\n"
    )
    path = tmp_path / "s.yaml"
    path.write_text(
        f"name: s\nsystems: [mesh.yaml]\nfaults: [{HALF % '0, 1'}]\nworkloads:\n"
        "  - name: shared\n    kind: jobs\n    jobs:\n"
        "      - {name: train, chips: [0, 1], collective: {op: all-reduce, bytes: 1 MiB}}\n"
        "      - {name: chat, serve: {model: llama-3.1-8b, tp: 2, requests: 1}}\n"
    )
    code, out, err = run(capsys, "check", str(path))
    line = assert_one_error_line(code, out, err)
    assert "jobs[1]" in line and "serving job 'chat'" in line and "tp 1" in line, line


def test_run_faults_naming_a_link_the_system_lacks_is_one_line(tmp_path, capsys):
    faults = tmp_path / "faults.yaml"
    faults.write_text("faults: [{kind: link_down, link: [0, 999]}]\n")
    scenario = _training(tmp_path)
    argv = ["run", scenario, "--faults", str(faults), "--out", str(tmp_path / "o")]
    line = assert_one_error_line(*run(capsys, *argv))
    assert "faults[0] (link_down): link [0, 999]: chips are 0..1" in line, line


def _one_kind(tmp_path: Path, workload: str, link: str | None, dims: int) -> str:
    (tmp_path / "line.yaml").write_text(
        f"name: line\nchip: v5e\ntopology: {{kind: torus, dims: [{dims}], wraparound: [false]}}\n"
    )
    faults = f"faults: [{HALF % link}]\n" if link else ""
    path = tmp_path / "s.yaml"
    path.write_text(f"name: s\nsystems: [line.yaml]\nplots: false\n{faults}workloads:\n{workload}")
    return str(path)


def test_a_program_slows_by_the_hand_counted_time(tmp_path, capsys):
    """An all-reduce of S bytes over a line of 2 v5e chips puts S through each direction
    of its one link (reduce-scatter and all-gather of S/2): at half bandwidth, S / R
    more."""
    program = (
        "  - {name: p, kind: program, ops: [{name: ar, kind: collective,"
        " collective: all-reduce, bytes: 64 MiB}]}\n"
    )
    healthy = _step_s(capsys, _one_kind(tmp_path, program, None, 2))
    faulty = _step_s(capsys, _one_kind(tmp_path, program, "0, 1", 2))
    assert faulty - healthy == pytest.approx(64 * 2**20 / V5E_R, rel=0.01)


def test_hlo_replay_slows_on_a_link_it_uses_and_not_on_one_it_does_not(tmp_path, capsys):
    """The 8-device module replays on chips 0..7 of a line of 16: a half link 0-1 slows
    its collectives, one between chips 12 and 13 (no device there) changes nothing."""
    shutil.copy(REPO / "scenarios" / "hlo" / "transformer_8.hlo.txt", tmp_path)
    hlo = "  - {name: m, kind: hlo, path: transformer_8.hlo.txt}\n"
    healthy = _step_s(capsys, _one_kind(tmp_path, hlo, None, 16))
    assert _step_s(capsys, _one_kind(tmp_path, hlo, "0, 1", 16)) > healthy * 1.01
    assert _step_s(capsys, _one_kind(tmp_path, hlo, "12, 13", 16)) == healthy
