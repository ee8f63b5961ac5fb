"""A serving job beside a training job in one ``kind: jobs`` workload (issue 35,
item 4): one clock and one network (tpusim/workloads/jobs_serving.py).

Setup, by hand: a 4x4x4 mesh of ironwood chips without wraparound (x fastest: chip
``x + 4y + 16z``), so x is a line 0-1-2-3 with one ICI link each way between
neighbours, of ``R = 100 GB/s x 0.902`` (configs/chips/ironwood.yaml: link bandwidth
and link efficiency). The training job all-gathers 8 GiB over chips 0 and 3: its flow
0 -> 3 crosses links 0->1, 1->2 and 2->3 for tens of ms. The service is llama-3.1-8b
disaggregated 1:1 (one chip per replica, tp 1): prefill on its first chip, decode on
the next. One request of a 512-token prompt moves its KV, ``B = 512 tokens x 32
layers x (K and V: 2 x 8 KV heads x 128 head dim x 2 bytes)`` = 64 MiB, as one flow
from the prefill chip to the decode chip.

* On chips 1, 2 the KV crosses link 1->2 while the job's flow does; max-min fairness
  gives each half the link, so the transfer serialises at ``R / 2`` and takes ``B / R``
  longer than alone, and the job (sending ``B`` bytes fewer in that window) ends
  ``B / R`` later. The first token (the prefill, no network) is where it is alone.
* Placed after the job's chips (the default: chips 4, 5, link 4->5, which the job's
  flows do not use) the transfer takes what it takes alone and no one slows down.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import assert_one_error_line, run

from tpusim.workloads import record_from_row

LINK_BPS = 100e9 * 0.902
KV_BYTES = 512 * 32 * (2 * 8 * 128 * 2)
EXTRA_S = KV_BYTES / LINK_BPS
REPO = Path(__file__).resolve().parents[1]

TRAIN = "      - {name: train, chips: [0, 3], collective: {op: all-gather, bytes: 8 GiB}}\n"
SERVE = (
    "serve: {model: llama-3.1-8b, tp: 1, disaggregate: '1:1', rate: inf, requests: 1,"
    " prompt_tokens: 512, output_tokens: 4}"
)


def _scenario(tmp_path: Path, jobs: str) -> str:
    system = tmp_path / "line.yaml"
    system.write_text(
        "name: mesh-4x4x4\nchip: ironwood\n"
        "topology: {kind: torus, dims: [4, 4, 4], wraparound: false}\n"
    )
    path = tmp_path / "jobs-serving.yaml"
    path.write_text(
        f"name: jobs-serving\nsystems: [{system}]\nnetwork: {{fidelity: flow}}\n"
        f"workloads:\n  - name: shared\n    kind: jobs\n    jobs:\n{jobs}"
    )
    return str(path)


def _rows(capsys, tmp_path: Path, jobs: str) -> dict[str, dict]:
    scenario = _scenario(tmp_path, jobs)
    code, out, err = run(
        capsys, "run", scenario, "--json", "--jobs", "1", "--out", str(tmp_path / "o")
    )
    assert code == 0, err
    (result,) = json.loads(out)["results"]
    return {job["name"]: job for job in result["jobs"]}


def test_a_kv_transfer_on_the_jobs_link_takes_half_the_link(tmp_path, capsys):
    rows = _rows(capsys, tmp_path, TRAIN + f"      - {{name: chat, chips: [1, 2], {SERVE}}}\n")
    train, chat = rows["train"], rows["chat"]
    assert chat["chips"] == 2 and chat["completed"] == 1
    # the job is still sending when the prefill and the transfer are over
    assert train["alone_time_s"] > chat["ttft_p50_s"] + chat["kv_transfer_p50_s"]
    alone = chat["alone_kv_transfer_p50_s"]
    assert 0 < alone - KV_BYTES / LINK_BPS < 20e-6  # full link plus launch and latency
    assert chat["kv_transfer_p50_s"] - alone == pytest.approx(EXTRA_S, rel=1e-9)
    assert train["time_s"] - train["alone_time_s"] == pytest.approx(EXTRA_S, rel=1e-9)
    assert chat["time_s"] - chat["alone_time_s"] == pytest.approx(EXTRA_S, rel=1e-9)
    assert chat["slowdown"] > 1 and train["slowdown"] > 1


def test_a_service_placed_after_the_job_does_not_slow_down(tmp_path, capsys):
    rows = _rows(capsys, tmp_path, TRAIN + f"      - {{name: chat, {SERVE}}}\n")
    train, chat = rows["train"], rows["chat"]
    assert chat["kv_transfer_p50_s"] == pytest.approx(chat["alone_kv_transfer_p50_s"], rel=1e-12)
    assert chat["time_s"] == pytest.approx(chat["alone_time_s"], rel=1e-12)
    assert train["time_s"] == pytest.approx(train["alone_time_s"], rel=1e-12)
    assert chat["kv_transfer_p50_s"] - KV_BYTES / LINK_BPS < 20e-6


def test_python_m_tpusim_run_writes_the_serving_jobs_rows(tmp_path):
    scenario = _scenario(tmp_path, TRAIN + f"      - {{name: chat, chips: [1, 2], {SERVE}}}\n")
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "tpusim", "run", scenario, "--json", "--out", str(out)]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    (result,) = json.loads(done.stdout)["results"]
    names = [job["name"] for job in result["jobs"]]
    assert names == ["train", "chat"] and result["num_jobs"] == 2
    chat = result["jobs"][1]
    assert chat["kv_transfer_p50_s"] - chat["alone_kv_transfer_p50_s"] == pytest.approx(
        EXTRA_S, rel=1e-9
    )
    assert result["step_time_s"] == max(job["time_s"] for job in result["jobs"])
    with (out / "summary.csv").open() as f:
        record = record_from_row(next(csv.DictReader(f)))
    figures = dict(record.figures())
    assert figures["shared: job chat TTFT p99 (s)"] == pytest.approx(chat["ttft_p99_s"])


@pytest.mark.parametrize(
    ("jobs", "words"),
    [
        (f"      - {{name: chat, chips: [1, 3], {SERVE}}}\n", ["jobs[1]", "consecutive", "1..2"]),
        (f"      - {{name: chat, chips: [63, 64], {SERVE}}}\n", ["jobs[1]", "from chip 63"]),
        (
            f"      - {{name: chat, chips: [3, 4], {SERVE}}}\n",
            ["jobs[1]", "shares chip 3", "train"],
        ),
        (
            f"      - {{name: chat, slice: 2x1x1, {SERVE}}}\n",
            ["jobs[1]", "not 'slice'"],
        ),
        (
            "      - {name: chat, serve: {model: llama-3.1-8b, concurrency: 4}}\n",
            ["jobs[1]", "concurrency"],
        ),
        (
            "      - {name: chat, serve: {model: llama-3.1-8b, tp: 3}}\n",
            ["jobs[1].serve"],
        ),
    ],
)
def test_bad_serving_jobs_are_one_line_naming_the_entry(tmp_path, capsys, jobs, words):
    code, out, err = run(capsys, "check", _scenario(tmp_path, TRAIN + jobs))
    line = assert_one_error_line(code, out, err)
    for word in words:
        assert word in line, line


def test_a_serving_job_needs_a_training_job(tmp_path, capsys):
    code, out, err = run(capsys, "check", _scenario(tmp_path, f"      - {{name: chat, {SERVE}}}\n"))
    line = assert_one_error_line(code, out, err)
    assert "needs a training job" in line
