"""The serving fit and its cross-validation (:mod:`tpusim.validation.serving_fit`,
:mod:`tpusim.validation.serving_cv`), against closed forms.

A stand-in simulator whose metrics are a known function of the HBM efficiency
(throughput = measured x efficiency / true efficiency) is the oracle: the fit must find
the true efficiency, a held-out chip whose true efficiency differs must show exactly the
error the ratio gives, a term at the grid's edge must be named, and a fit that lowers
its loss but raises its figures' median error must be refused.
"""

from __future__ import annotations

import pytest

from tests.helpers import assert_one_error_line, run
from tpusim.serving.overheads import IterationOverheads
from tpusim.serving.servers import load_server
from tpusim.validation.serving import FIT_HBM_EFFICIENCY, Simulator
from tpusim.validation.serving_cv import cross_validate
from tpusim.validation.serving_figures import load_figures
from tpusim.validation.serving_fit import fit, fit_server, grid_argmin, median_error


class ClosedForm(Simulator):
    """Metrics as a closed form of the efficiency: throughput = measured x (e / e_true)
    ** power, with e_true and power per figure id."""

    def __init__(self, truth: dict[str, tuple[float, float]]):
        super().__init__()
        self.truth = truth
        self.calls = 0

    def _simulate(self, figure, overheads):
        self.calls += 1
        true_e, power = self.truth[figure.id]
        ratio = (overheads.hbm_efficiency / true_e) ** power
        return {m: v * ratio for m, v in figure.measured.items()} | {
            m: None
            for m in ("request_throughput_per_s", "tpot_median_s", "ttft_median_s")
            if m not in figure.measured
        }


def _figures(chips: dict[str, str]):
    """The shipped v6e figure tpu-recipes-70b-v6e8-c64, once per (id, chip), async."""
    (base,) = [f for f in load_figures() if f.id == "tpu-recipes-70b-v6e8-c64"]
    return [
        base.model_copy(
            update={
                "id": fid,
                "chip": chip,
                "split": "fit",
                "measured": {"output_tokens_per_s": 1000.0},
            }
        )
        for fid, chip in chips.items()
    ]


def test_grid_argmin_finds_the_brute_force_minimum_evaluating_each_point_once():
    grid = tuple(range(20))
    for target in (0, 3, 7.4, 19, 25):
        calls: list[float] = []

        def loss(x, target=target, calls=calls):
            calls.append(x)
            return abs(x - target)

        assert grid_argmin(grid, loss) == min(grid, key=lambda x: abs(x - target))
        assert len(calls) == len(set(calls)) < len(grid)


def test_the_fit_finds_the_true_efficiency_shared_by_two_chips():
    figures = _figures({"a": "v6e", "b": "ironwood"})
    sim = ClosedForm({"a": (0.8, 1.0), "b": (0.8, 1.0)})
    (fitted,) = fit(figures, sim)
    assert fitted.overheads.hbm_efficiency == 0.8
    assert fitted.chips == ("v6e", "ironwood")
    assert fitted.kept and fitted.at_bound == () and fitted.fitted_error == pytest.approx(0)


def test_a_fit_at_the_grid_bound_says_so():
    figures = _figures({"a": "v6e"})
    (fitted,) = fit(figures, ClosedForm({"a": (1.3, 1.0)}))  # wants 1.3 > the top, 1.0
    assert fitted.overheads.hbm_efficiency == FIT_HBM_EFFICIENCY[-1] == 1.0
    assert fitted.at_bound == ("hbm_efficiency 1",)


def test_a_fit_that_raises_the_median_error_is_refused():
    # Two figures agree with e = 0.7; a third, ten times as sensitive, wants 0.4. The L1
    # loss follows the third (10 |log(e/0.4)| outweighs 2 |log(e/0.7)|), which would put
    # the first two 43% off where the start (0.7) has a median error of 0.
    figures = _figures({"a": "v6e", "b": "v6e", "c": "v6e"})
    sim = ClosedForm({"a": (0.7, 1.0), "b": (0.7, 1.0), "c": (0.4, 10.0)})
    start = IterationOverheads(8e-3, 0.7, 2.0)
    fitted = fit_server("vllm-tpu-inference", figures, sim, start)
    assert not fitted.kept
    assert fitted.overheads == start
    assert fitted.shipped_error == pytest.approx(0.0)
    assert fitted.fitted_error == pytest.approx(1 - 0.4 / 0.7)


def test_a_held_out_chip_shows_the_error_its_own_efficiency_gives():
    # v6e and v5e run at 0.8, Ironwood at 0.6: with Ironwood held out the terms say 0.8,
    # so its throughput is 0.8 / 0.6 - 1 = +33.3% off; the others are predicted exactly.
    figures = _figures({"a": "v6e", "b": "v5e", "c": "ironwood"})
    sim = ClosedForm({"a": (0.8, 1.0), "b": (0.8, 1.0), "c": (0.6, 1.0)})
    folds = {f.group: f for f in cross_validate(figures, "chip", sim)}
    assert folds["ironwood"].median_abs_error == pytest.approx(0.8 / 0.6 - 1)
    # v6e held out: fitted on v5e (0.8) and Ironwood (0.6), the L1 optimum lies in
    # [0.6, 0.8]; v6e's error is that optimum / 0.8 - 1
    e = folds["v6e"].fitted[0].overheads.hbm_efficiency
    assert 0.6 <= e <= 0.8
    assert folds["v6e"].rows[0]["error"] == pytest.approx(e / 0.8 - 1)


def test_server_cross_validation_fits_one_set_on_the_other_servers():
    figures = _figures({"a": "v6e", "b": "v6e"})
    figures[1] = figures[1].model_copy(update={"server": "vllm-tpu-torchxla"})
    sim = ClosedForm({"a": (0.9, 1.0), "b": (0.6, 1.0)})
    folds = {f.group: f for f in cross_validate(figures, "server", sim)}
    # held out at a true 0.9, predicted at the other server's 0.6 (on the grid): 0.6/0.9 - 1
    assert folds["vllm-tpu-inference"].median_abs_error == pytest.approx(1 - 0.6 / 0.9)
    assert folds["vllm-tpu-inference"].fitted[0].fit_on == ("b",)


def test_one_group_cannot_be_cross_validated(capsys):
    code, out, err = run(
        capsys,
        "validate",
        "--serving",
        "--cv",
        "server",
        "--measurements",
        "tests/fixtures/serving-one-server.yaml",
    )
    line = assert_one_error_line(code, out, err)
    assert "one server" in line


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (("validate", "--serving", "--cv", "family"), "chip or server"),
        (("validate", "--workloads", "--cv", "server"), "give --serving"),
        (("validate", "--serving", "--cv", "chip", "--fit"), "drop --fit"),
    ],
)
def test_cv_flags_that_do_not_apply_are_refused(capsys, argv, words):
    assert words in assert_one_error_line(*run(capsys, *argv))


def test_median_error_ignores_unsimulated_rows():
    rows = [{"error": 0.1}, {"error": -0.3}, {"error": None}, {"error": 0.2}]
    assert median_error(rows) == pytest.approx(0.2)


def test_a_chip_without_figures_says_it_borrowed_the_terms():
    profile = load_server("vllm-tpu-inference")
    measured = profile.measured_chips[0]
    assert profile.basis(measured).startswith("vllm-tpu-inference terms fitted on")
    assert profile.basis("tpu8i").startswith("no serving figure on tpu8i: borrowed")
    assert "tpu8i" not in profile.measured_chips


def test_the_serving_residuals_are_the_held_out_log_ratios_and_reach_the_file(tmp_path):
    """With Ironwood's true efficiency 0.6 and the others' 0.8, Ironwood held out is
    predicted at 0.8: its residual is log(0.8 / 0.6) by hand; the file then holds the
    serving_throughput kind (no longer pending)."""
    import math
    import shutil

    from tpusim.config.uncertainty import load_uncertainty, uncertainty_path
    from tpusim.validation.serving_cv import (
        held_out_rows,
        serving_residuals,
        write_serving_uncertainty,
    )

    figures = _figures({"a": "v6e", "b": "v5e", "c": "ironwood"})
    sim = ClosedForm({"a": (0.8, 1.0), "b": (0.8, 1.0), "c": (0.6, 1.0)})
    rows = held_out_rows(cross_validate(figures, "chip", sim))
    residuals = {r[0]: r for r in serving_residuals(rows, "output_tokens_per_s")}
    assert residuals["c"][1] == "ironwood"
    assert residuals["c"][3] == pytest.approx(math.log(0.8 / 0.6))
    path = tmp_path / "uncertainty.yaml"
    shutil.copy(uncertainty_path(), path)
    more = [dict(r, id=r["id"] + "2") for r in rows]  # two residuals per chip at least
    assert write_serving_uncertainty(path, rows + more, "test", []) == ["serving_throughput"]
    assert "serving_throughput" in load_uncertainty(path).kinds
