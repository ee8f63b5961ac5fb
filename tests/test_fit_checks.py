"""Fits that fit nothing or make things worse are refused or said (issue 45, item 5):
``validate --workloads --cv`` with a fold that leaves no case to fit on is an error
naming the fold (it reported the data-free prior as "fitted on 0 cases", exit 0);
``calibrate --workloads`` writes no fit that raises its fit cases' median |error| over
the shipped terms', and says in its output and its file which terms sit at a bound.

The measurement file is ``tests/corpus/round4/wl-valid.yaml`` (one v6e case, Llama 3.1
8B on 8 chips) with its measured step changed: at 1.5 s (far above what any term in
the bounds gives) the fit drives the MXU efficiency to its lower bound 0.3 (the HBM
efficiency is XLA's, not fitted); at the step the shipped terms simulate (so their
error is 0%) any other terms make it worse, and the fit, pulled towards its prior,
moves away."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from helpers import assert_one_error_line, run

from tpusim.validation.workloads_fit import BOUNDS

BASE = Path(__file__).parent / "corpus" / "round4" / "wl-valid.yaml"


def _measurements(tmp_path: Path, step: str) -> str:
    text = BASE.read_text().replace("measured_step_time: 1.5 s", f"measured_step_time: {step}")
    path = tmp_path / "wl.yaml"
    path.write_text(text)
    return str(path)


def test_cross_validation_with_one_group_names_the_fold(tmp_path, capsys):
    argv = ["validate", "--workloads", "--measurements", _measurements(tmp_path, "1.5 s")]
    for by in ("chip", "family"):
        line = assert_one_error_line(*run(capsys, *argv, "--cv", by))
        assert f"--cv {by}: fold" in line and "no case to fit on without it" in line, line


def test_calibrate_says_which_terms_sit_at_a_bound_in_output_and_file(tmp_path, capsys):
    out = tmp_path / "terms.yaml"
    argv = ["calibrate", "--workloads", "--measurements", _measurements(tmp_path, "1.5 s")]
    code, text, err = run(capsys, *argv, "--out", str(out), "--jobs", "1")
    assert code == 0, err
    assert "at bound: mxu" in text
    written = out.read_text()
    assert "# At a bound of the fit (not determined by the cases): mxu." in written
    data = yaml.safe_load(written)
    assert data["terms"]["mxu"] == BOUNDS["mxu"][0]
    assert data["sources"]["terms.mxu"]["note"].startswith("AT A BOUND")
    # hbm is XLA's (not fitted): written as it is shipped, with its derived source
    assert "hbm" not in BOUNDS
    assert data["sources"]["terms.hbm"]["grade"] == "derived"


def test_calibrate_says_a_fit_worse_than_the_shipped_terms_in_output_and_file(tmp_path, capsys):
    measurements = _measurements(tmp_path, "1 s")
    argv = ["validate", "--workloads", "--measurements", measurements, "--json"]
    code, text, err = run(capsys, *argv)
    assert code == 0, err
    shipped_s = json.loads(text)["cases"][0]["simulated_s"]
    exact = _measurements(tmp_path, f"{shipped_s * 1e3:.4f} ms")
    out = tmp_path / "terms.yaml"
    argv = ["calibrate", "--workloads", "--measurements", exact, "--out", str(out), "--jobs", "1"]
    code, text, err = run(capsys, *argv)
    assert code == 0, err
    said = "the fit raises its 1 fit cases' median |error| from 0.0% (the shipped terms) to"
    assert f"WORSE THAN THE SHIPPED TERMS: {said}" in text
    assert f"# WORSE THAN THE SHIPPED TERMS: {said}" in out.read_text()


def test_collective_calibrate_says_bounds_and_a_worse_fit_and_writes_last(
    tmp_path, capsys, monkeypatch
):
    """The shipped collective points: the file names the terms at a bound per chip, and
    says the fit is worse on its own points exactly when ``validate`` with and without
    it says so; a Ctrl-C while validating leaves no file."""
    out = tmp_path / "cal.yaml"
    code, text, err = run(capsys, "calibrate", "--out", str(out), "--json")
    assert code == 0, err
    record = json.loads(text)
    written = out.read_text()
    for chip in record["chips"]:
        if chip["at_bound"]:
            assert f"# {chip['chip']}: at a bound of the fit: " in written
    _, shipped, _ = run(capsys, "validate", "--json")
    _, fitted, _ = run(capsys, "validate", "--json", "--calibration", str(out))
    before = json.loads(shipped)["fit"]["median_abs_error"]
    after = json.loads(fitted)["fit"]["median_abs_error"]
    assert (record["worse_than_shipped"] is not None) == (after > before + 1e-3)
    assert ("WORSE THAN THE SHIPPED TERMS" in written) == (after > before + 1e-3)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    import tpusim.cli.validate_run as validate_run  # where calibrate calls validate

    monkeypatch.setattr(validate_run, "validate", interrupted)
    again = tmp_path / "again.yaml"
    code, _, err = run(capsys, "calibrate", "--out", str(again))
    assert code == 130 and "interrupted" in err, err  # 128 + SIGINT, one line
    assert not again.exists()
