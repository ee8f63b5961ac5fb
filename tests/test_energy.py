"""Power as idle plus a busy share (tpusim/results/energy.py) against its closed form,
and the shipped power figures derived on one dtype basis (issue 15: TPU 8t's power
was derived from its fp4 peak against Ironwood's fp8)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tpusim.config import load_chip
from tpusim.results.economics import Economics
from tpusim.results.energy import (
    IDLE_POWER_FRACTION,
    busy_share,
    derived_power_W,
    mean_power_W,
)
from tpusim.units import parse_power

GENERATIONS = Path(__file__).resolve().parent.parent / "scenarios" / "generations.yaml"


@pytest.mark.parametrize("busy", [0.0, 0.25, 0.8, 1.0])
def test_mean_power_is_idle_plus_a_busy_share(busy):
    # closed form: idle half always, the other half in proportion to the busy share
    assert mean_power_W(1085.0, busy) == pytest.approx(1085.0 * (0.5 + 0.5 * busy))
    assert mean_power_W(1000.0, busy, idle_fraction=0.2) == pytest.approx(200 + 800 * busy)


def test_power_rises_with_utilisation_and_is_bounded():
    assert mean_power_W(500.0, 0.0) == 500.0 * IDLE_POWER_FRACTION
    assert mean_power_W(500.0, 1.0) == 500.0
    with pytest.raises(ValueError, match=r"must be in 0\.\.1"):
        mean_power_W(500.0, 1.5)


def test_busy_share_is_compute_over_step_clipped():
    assert busy_share(1.0, 4.0) == 0.25
    assert busy_share(5.0, 4.0) == 1.0
    assert busy_share(1.0, 0.0) == 0.0


def test_economics_charge_the_mean_power():
    """256 chips, 2 s, 500 W at full load, 40% busy: 500 x 0.7 W per chip."""
    money = Economics.of(2.0, 256, 1024.0, 500.0, busy_share=0.4)
    assert money.full_load_power_per_chip_W == 500.0 and money.busy_share == 0.4
    assert money.power_per_chip_W == pytest.approx(350.0)
    assert money.energy_per_step_J == pytest.approx(350.0 * 256 * 2)
    assert money.energy_per_token_J == pytest.approx(350.0 * 256 * 2 / 1024)


def test_tpu8t_power_is_derived_at_the_fp8_peaks_the_workloads_run():
    scenario = yaml.safe_load(GENERATIONS.read_text())
    assumptions = scenario["assumptions"]
    assert assumptions["power_basis"] == "fp8"
    dtypes = {w.get("dtype") for w in scenario["workloads"] if "dtype" in w}
    assert dtypes == {assumptions["power_basis"]}
    power = {k: parse_power(v) for k, v in assumptions["power_per_chip"].items()}
    ironwood, tpu8t = load_chip("ironwood"), load_chip("tpu8t")
    basis = assumptions["power_basis"]
    # Google: "up to 2x perf/W" of 8t over Ironwood, on the same dtype's peaks
    expected = derived_power_W(
        power["ironwood"], ironwood.peak_flops[basis], tpu8t.peak_flops[basis], 2.0
    )
    assert power["tpu8t"] == pytest.approx(expected, abs=0.05)  # written to 0.1 W
    perf_per_W = {c.name: c.peak_flops[basis] / power[c.name] for c in (ironwood, tpu8t)}
    assert perf_per_W["tpu8t"] / perf_per_W["ironwood"] == pytest.approx(2.0, rel=1e-4)
    for key in ("power_per_chip.ironwood", "power_per_chip.tpu8t", "power_per_chip.tpu8i"):
        assert assumptions["sources"][key]["grade"] in ("derived", "assumption")
