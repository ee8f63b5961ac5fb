"""``tpusim validate`` on the shipped public measurements (issue 10 item 5).

The oracle is the measurements themselves. The thresholds are the issue's where the
shipped table meets them (median error, fitted points) and today's figures as a floor
where it does not (see the README's Validation section for why): a change to the
model that loses accuracy on public data fails here.
"""

from __future__ import annotations

import json

import pytest
from helpers import run

from tpusim.validation.measurements import load_measurements
from tpusim.validation.validate import summary, validate


@pytest.fixture(scope="module")
def cases():
    return validate(load_measurements())


def test_median_error_is_at_most_5_percent(cases):
    assert summary(cases)["median_abs_error"] <= 0.05


def test_fitted_points_are_within_10_percent(cases):
    fit = summary(cases)["fit"]
    assert fit["within_10pct"] >= 0.9 * fit["total"]


def test_no_lost_ground_on_the_public_table(cases):
    """Today: 16 of 22 within 10%; the misses are the three rows of issue #71 (held out:
    the reporter's own anomaly), v5e's 32 MiB all-gather and the two v6e points that
    pull its link efficiency opposite ways."""
    stats = summary(cases)
    assert stats["total"] >= 22
    assert stats["within_10pct"] >= 16
    assert stats["holdout"]["within_10pct"] >= 6
    misses = {c.measurement.id for c in cases if abs(c.error) > 0.10}
    assert {c for c in misses if not c.startswith("amb71-")} <= {
        "sb-v5e-allgather-y4-32MiB",
        "marin-v6e-permute-2x4-64MiB",
        "tr-v6e-allreduce-16x16-606076928B",
    }


def test_error_is_relative_to_the_measurement(cases):
    for case in cases:
        m = case.measurement
        assert case.error == pytest.approx((case.simulated_s - m.measured_s) / m.measured_s)


def test_validate_json_contract(capsys):
    code, out, _ = run(capsys, "validate", "--json")
    assert code == 0
    record = json.loads(out)
    assert {"cases", "total", "within_10pct", "median_abs_error"} <= set(record)
    fields = {"id", "source", "chip", "op", "bytes", "measured_s", "simulated_s", "error", "split"}
    assert all(fields <= set(c) for c in record["cases"])
    assert record["total"] == len(record["cases"])
    assert record["within_10pct"] == sum(abs(c["error"]) <= 0.10 for c in record["cases"])


def test_calibrate_writes_an_overlay_validate_accepts(tmp_path, capsys):
    out = tmp_path / "cal.yaml"
    code, stdout, _ = run(capsys, "calibrate", "--out", str(out), "--json")
    assert code == 0
    record = json.loads(stdout)
    assert {c["chip"] for c in record["chips"]} == {"ironwood", "v5e", "v5p", "v6e"}
    held_out = {m.id for m in load_measurements() if m.split == "holdout"}
    for chip in record["chips"]:
        assert 0.5 <= chip["link_efficiency"] <= 1.0
        assert chip["fit_on"] and not held_out.intersection(chip["fit_on"])
    code, stdout, _ = run(capsys, "validate", "--calibration", str(out), "--json")
    assert code == 0 and json.loads(stdout)["total"] == record["total"]


def test_calibrate_to_a_missing_folder_exits_2_before_fitting(tmp_path, capsys):
    out = tmp_path / "missing" / "cal.yaml"
    code, _, err = run(capsys, "calibrate", "--out", str(out))
    assert code == 2 and "does not exist" in err and len(err.strip().splitlines()) == 1
