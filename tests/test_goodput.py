"""``kind: goodput`` (issue 12, item 4): the Monte Carlo of a long training run under
failures against Daly's exact expectation and Young's first-order form, and the
optimum checkpoint interval against a numerical maximiser of the exact goodput.

Tolerances follow from the Monte Carlo: the mean of ``trials`` runs has standard error
s / sqrt(trials) (s the runs' spread, reported as ``goodput_stderr``); a run also
loses its last, unfinished segment, at most tau / run_length of goodput. The checks
allow 4 standard errors plus that bias (a false alarm about once in 16,000 runs).
"""

from __future__ import annotations

import json
import math

import pytest
from helpers import assert_one_error_line, run
from scipy.optimize import minimize_scalar

from tpusim.workloads.goodput import FailureModel, parse_duration, simulate_runs

HOUR = 3600.0
# 9,216 chips at 50,000 h each: a system MTBF of 5.4 h; 5 min checkpoints, 10 min restarts
M = 50_000 * HOUR / 9216
DELTA, R = 300.0, 600.0
MODEL = FailureModel(M, DELTA, R)


def mc(tau_s, run_length_s=60 * 86400.0, trials=200, seed=1):
    runs = simulate_runs(MODEL, tau_s, run_length_s, trials, seed)
    stderr = runs.std(ddof=1) / math.sqrt(trials)
    return runs.mean(), stderr, 4 * stderr + tau_s / run_length_s


@pytest.mark.parametrize("tau_s", [600.0, 3200.0, 12_000.0])
def test_monte_carlo_matches_dalys_exact_expectation(tau_s):
    mean, stderr, tolerance = mc(tau_s)
    assert stderr < 0.005  # the tolerance is tight enough to mean something
    assert mean == pytest.approx(MODEL.goodput(tau_s), abs=tolerance)


def test_exact_goodput_from_its_terms():
    """Renewal-reward by hand: a segment needs tau + delta failure-free seconds; each
    failure first loses E[time to failure | before tau + delta], then a restart that
    needs R failure-free seconds, M (e^(R/M) - 1) on average."""
    tau = 3000.0
    span = tau + DELTA
    failures = math.exp(span / M) - 1
    lost = M - span / failures
    restart = M * (math.exp(R / M) - 1)
    by_hand = span + failures * (lost + restart)
    assert MODEL.mean_segment_s(tau) == pytest.approx(by_hand, rel=1e-12)


def test_first_order_goodput_is_close_when_intervals_are_short_against_the_mtbf():
    for tau in (600.0, 3000.0):
        small = (tau + DELTA) / M + R / M
        gap = abs(MODEL.goodput(tau) - MODEL.goodput_first_order(tau))
        assert gap <= small**2
    assert MODEL.goodput_first_order(3000.0) < MODEL.goodput(3000.0)


def test_optimum_intervals_young_daly_and_numerical():
    best = minimize_scalar(lambda t: -MODEL.goodput(t), bounds=(60, 10 * M), method="bounded")
    young, daly = MODEL.young_interval_s(), MODEL.daly_interval_s()
    assert young == pytest.approx(math.sqrt(2 * DELTA * M))
    # Daly's higher-order form lands within 1% of the exact optimum, Young within 10%
    assert daly == pytest.approx(best.x, rel=0.01)
    assert young == pytest.approx(best.x, rel=0.10)
    # and the goodput there is flat: Young's interval loses under 0.1 point
    assert MODEL.goodput(young) > MODEL.goodput(best.x) - 1e-3


def test_monte_carlo_optimum_beats_intervals_four_times_off():
    at_best, err_best, _ = mc(MODEL.daly_interval_s())
    for factor in (0.25, 4.0):
        other, err_other, _ = mc(MODEL.daly_interval_s() * factor, seed=2)
        assert at_best - other > 4 * math.hypot(err_best, err_other)


def test_no_failures_leaves_only_the_checkpoint_cost():
    model = FailureModel(1e15, DELTA, R)
    runs = simulate_runs(model, 2700.0, 30 * 86400.0, 5, 0)
    segments = math.floor(30 * 86400.0 / (2700.0 + DELTA))
    assert runs == pytest.approx(segments * 2700.0 / (30 * 86400.0), rel=1e-12)


def test_durations_take_long_units():
    assert parse_duration("50000 h") == 50_000 * HOUR
    assert parse_duration("5 min") == 300.0
    assert parse_duration("30 d") == 30 * 86400.0
    assert parse_duration("2.5 ms") == 2.5e-3
    with pytest.raises(ValueError):
        parse_duration("3 weeks")


def _scenario(tmp_path, extra: str, seed: int = 0) -> str:
    path = tmp_path / "goodput.yaml"
    path.write_text(
        "name: gp\nsystems: [ironwood-256]\nworkloads:\n"
        "  - {name: gp, kind: goodput, mtbf_per_chip: 10000 h, step_time: 10 s,\n"
        f"     checkpoint_cost: 2 min, restart: 5 min, trials: 50, seed: {seed}{extra}}}\n"
    )
    return str(path)


def test_scenario_row_reports_the_optimum_and_agrees_with_the_closed_form(tmp_path, capsys):
    code, out, _ = run(capsys, "run", _scenario(tmp_path, ""), "--json", "--out", str(tmp_path))
    assert code == 0
    row = json.loads(out)["results"][0]
    m = 10_000 * HOUR / 256
    assert row["chips"] == 256 and row["system_mtbf_s"] == pytest.approx(m)
    model = FailureModel(m, 120.0, 300.0)
    assert row["optimum_interval_daly_s"] == pytest.approx(model.daly_interval_s())
    assert row["optimum_interval_young_s"] == pytest.approx(math.sqrt(2 * 120 * m))
    # the interval is the optimum rounded to whole 10 s steps
    assert row["checkpoint_interval_s"] == 10 * round(model.daly_interval_s() / 10)
    bias = row["checkpoint_interval_s"] / row["run_length_s"]
    tolerance = 4 * row["goodput_stderr"] + bias
    assert row["goodput"] == pytest.approx(row["goodput_daly"], abs=tolerance)


def test_same_seed_same_answer_other_seed_other_answer(tmp_path, capsys):
    rows = []
    for seed in (3, 3, 4):
        path = _scenario(tmp_path, ", chips: 4096", seed)
        code, out, _ = run(capsys, "run", path, "--json", "--out", str(tmp_path / str(seed)))
        assert code == 0
        rows.append(json.loads(out)["results"][0])
    assert rows[0]["chips"] == 4096
    assert rows[0]["goodput"] == rows[1]["goodput"]
    assert rows[0]["goodput"] != rows[2]["goodput"]


@pytest.mark.parametrize(
    "extra, words",
    [
        (", checkpoint_interval: 3 weeks", "checkpoint_interval"),
        (", run_length: -1 h", "run_length"),
        (", chips: 0", "chips"),
        (", state_per_chip: 1 GB", "not both"),
        (", training: {kind: training_step}", "training"),
    ],
)
def test_bad_input_is_one_line_naming_the_field(tmp_path, capsys, extra, words):
    code, out, err = run(capsys, "run", _scenario(tmp_path, extra), "--out", str(tmp_path))
    line = assert_one_error_line(code, out, err)
    assert words in line


TRAINING = (
    "{kind: training_step, name: step, layers: 2, d_model: 512, d_ff: 2048, heads: 8,"
    " head_dim: 64, seq: 256, mlp: gated, vocab: 4000, batch: 256, mesh: {data: 256}}"
)


def test_step_time_simulated_and_checkpoint_cost_from_the_state(tmp_path, capsys):
    """Goodput over a simulated training step: the step time is the same step's as a
    training_step workload of the scenario; the checkpoint cost is the chip's state
    over its DCN bandwidth, by hand: 2 layers of 512 x 24 x 64 + 8 x 64 x 512 (attention)
    + 3 x 512 x 2048 (gated MLP) + 2 x 512 (norms) and 2 x 4000 x 512 (embedding, head)
    = 12,486,656 parameters, 2 bytes of bf16 weights + 12 of Adam each, over
    Ironwood's 100 Gb/s."""
    path = tmp_path / "gp.yaml"
    path.write_text(
        "name: gp\nsystems: [ironwood-256]\nworkloads:\n"
        f"  - {TRAINING[:-1]}}}\n"
        "  - {name: gp, kind: goodput, mtbf_per_chip: 10000 h, restart: 5 min, trials: 20,\n"
        f"     training: {TRAINING}}}\n"
    )
    code, out, err = run(capsys, "run", str(path), "--json", "--out", str(tmp_path / "o"))
    assert code == 0, err
    step, goodput = json.loads(out)["results"]
    assert goodput["step_time_from"] == "simulated"
    assert goodput["step_time_s"] == pytest.approx(step["step_time_s"], rel=1e-12)
    params = 2 * (512 * 24 * 64 + 8 * 64 * 512 + 3 * 512 * 2048 + 2 * 512) + 2 * 4000 * 512
    assert params == 12_486_656
    assert goodput["state_bytes_per_chip"] == pytest.approx(params * 14.0)
    assert goodput["storage_bandwidth_Bps"] == pytest.approx(100e9 / 8)
    assert goodput["checkpoint_cost_s"] == pytest.approx(params * 14.0 / (100e9 / 8))


def test_checkpoint_cost_from_given_state_and_storage_bandwidth(tmp_path, capsys):
    path = _scenario(tmp_path, "")
    with open(path) as f:
        text = f.read()
    given = "state_per_chip: 30 GB, storage_bandwidth: 1 GB/s"
    with open(path, "w") as f:
        f.write(text.replace("checkpoint_cost: 2 min", given))
    code, out, err = run(capsys, "run", path, "--json", "--out", str(tmp_path / "o"))
    assert code == 0, err
    row = json.loads(out)["results"][0]
    assert row["checkpoint_cost_s"] == pytest.approx(30.0)
    assert row["step_time_from"] == "input"
