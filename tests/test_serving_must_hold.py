"""Issue 41's validation must-holds on the shipped serving figures and profiles
(configs/measurements/serving/, configs/servers/): ``validate --serving`` over at
least 30 figures on at least 3 chips with median |error| <= 10% over all, <= 12% on
the holdout split and <= 15% for TTFT; ``validate --serving --cv chip`` (slow: it
refits every profile three times) with a held-out median <= 15% and no chip over 25%.
The oracle is the published measurements themselves."""

from __future__ import annotations

import json
from statistics import median

import pytest

from tests.helpers import run


def test_validate_serving_meets_the_bounds_on_the_shipped_figures(capsys):
    code, out, err = run(capsys, "validate", "--serving", "--json")
    assert code == 0, err
    record = json.loads(out)
    cases = record["cases"]
    assert len({c["id"] for c in cases}) >= 30
    assert len({c["chip"] for c in cases}) >= 3
    assert record["median_abs_error"] <= 0.10
    assert record["holdout"]["median_abs_error"] <= 0.12
    ttft = [
        abs(c["error"]) for c in cases if c["metric"] == "ttft_median_s" and c["error"] is not None
    ]
    assert median(ttft) == pytest.approx(record["metrics"]["ttft_median_s"]["median_abs_error"])
    assert median(ttft) <= 0.15


@pytest.mark.slow
def test_serving_cv_by_chip_meets_the_bounds():
    from tpusim.validation.serving_cv import cross_validate, held_out_rows
    from tpusim.validation.serving_figures import load_figures
    from tpusim.validation.serving_fit import median_error

    folds = cross_validate(load_figures(), "chip")
    assert {f.group for f in folds} >= {"ironwood", "v5e", "v6e"}
    assert median_error(held_out_rows(folds)) <= 0.15
    for fold in folds:
        assert fold.median_abs_error is not None and fold.median_abs_error <= 0.25, fold.group
