"""Calibration overlays and ``tpusim calibrate``: the fit recovers known cost terms from
synthetic measurements (simulated with those terms), and overlays apply everywhere."""

from __future__ import annotations

import json

import pytest
from helpers import run

from tpusim.config import load_system
from tpusim.config.calibration import (
    Calibration,
    ChipCalibration,
    calibrated_system,
    load_calibration,
)
from tpusim.engine import CollectiveOptions, simulate_collective
from tpusim.validation.fit import fit_chip, write_overlay
from tpusim.validation.measurements import Measurement
from tpusim.validation.validate import simulate_case

MiB = 2**20
TRUE = ChipCalibration(hop_latency=0.4e-6, launch=3e-6, step_sync=0.7e-6, link_efficiency=0.85)
SLICES = [((8,), None), ((4, 4), ("x",)), ((4, 4), None), ((2, 2, 2), None)]
CASES = [
    ("all-gather", 64 * 1024),
    ("all-gather", 32 * MiB),
    ("all-reduce", 16 * 1024),
    ("all-reduce", 8 * MiB),
    ("collective-permute", 1 * MiB),
]


def synthetic(chip: str) -> list[Measurement]:
    """Measurements whose 'measured' times are tpusim's with the TRUE terms."""
    out = []
    for i, ((dims, axes), (op, size)) in enumerate((s, c) for s in SLICES for c in CASES):
        case = Measurement(
            id=f"synthetic-{i}",
            source="synthetic",
            url="https://example.invalid/",
            chip=chip,
            slice=dims,
            axes=axes,
            op=op,
            bytes=float(size),
            measured_s=1.0,
            split="fit",
            where="test",
            note="",
            file="synthetic.yaml",
            line=None,
        )
        truth = simulate_case(case, Calibration(chips={chip: TRUE})).simulated_s
        out.append(Measurement(**{**case.__dict__, "measured_s": truth}))
    return out


def test_fit_recovers_known_terms_from_synthetic_measurements():
    fit = fit_chip("v5p", synthetic("v5p"))
    assert fit.terms.hop_latency_s == pytest.approx(TRUE.hop_latency_s, rel=0.05)
    assert fit.terms.launch_s == pytest.approx(TRUE.launch_s, rel=0.05)
    assert fit.terms.step_sync_s == pytest.approx(TRUE.step_sync_s, rel=0.05)
    assert fit.terms.link_efficiency == pytest.approx(TRUE.link_efficiency, rel=0.01)
    assert fit.at_bound == ()
    assert len(fit.terms.fit_on) == len(SLICES) * len(CASES)


def test_overlay_round_trips_and_applies_to_systems(tmp_path):
    fit = fit_chip("v5p", synthetic("v5p")[:10])
    path = tmp_path / "cal.yaml"
    write_overlay([fit], path)
    loaded = load_calibration(path)
    system = calibrated_system(load_system("v5p-pod"), loaded)
    assert system.chip.ici.hop_latency_s == pytest.approx(fit.terms.hop_latency_s, rel=1e-3)
    assert system.chip.collectives.launch_s == pytest.approx(fit.terms.launch_s, rel=1e-3)
    assert system.chip.collectives.link_efficiency == pytest.approx(
        fit.terms.link_efficiency, rel=1e-3
    )
    assert loaded.chips["v5p"].fit_on == fit.terms.fit_on
    # a chip the overlay does not name is left alone
    assert calibrated_system(load_system("v5e-pod"), loaded).chip == load_system("v5e-pod").chip


def test_overlay_changes_a_collective_by_its_closed_form(tmp_path, capsys):
    """Ring all-gather of V on one wrapped 16-chip axis: launch + (k-1) (hop latency +
    V/k / (W x efficiency) + step sync); the overlay's terms go straight in."""
    path = tmp_path / "cal.yaml"
    path.write_text(
        "chips:\n  v5p:\n    hop_latency: 0.25 us\n    launch: 4 us\n"
        "    step_sync: 1 us\n    link_efficiency: 0.8\n"
    )
    system = load_system("v5p-pod")
    W, V, k = system.chip.ici.link_bandwidth_Bps, 16 * MiB, system.spec.topology.dims[0]
    expected = 4e-6 + (k - 1) * (0.25e-6 + V / k / (W * 0.8) + 1e-6)
    args = ["collective", "v5p-pod", "--op", "all-gather", "--bytes", "16MiB", "--axes", "x"]
    args += ["--algorithm", "ring", "--engine", "tensorcore", "--json"]
    code, out, _ = run(capsys, *args, "--calibration", str(path))
    assert code == 0
    assert json.loads(out)["time_s"] == pytest.approx(expected, rel=1e-9)
    calibrated = calibrated_system(system, load_calibration(path))
    result, _ = simulate_collective(
        calibrated,
        "all-gather",
        V,
        CollectiveOptions(axes=["x"], algorithm="ring", engine="tensorcore"),
    )
    assert result.time_s == pytest.approx(expected, rel=1e-9)


def test_engine_none_is_the_bare_network_closed_form(tmp_path, capsys):
    """--engine none: no launch, no step cost, nominal bandwidth: a ring all-gather on a
    wrapped 8-chip v5p axis is (k-1) (hop latency + V/k / W) at every fidelity."""
    chip = load_system("v5p-pod").chip
    W, a, k, V = chip.ici.link_bandwidth_Bps, chip.ici.hop_latency_s, 8, 4 * MiB
    system = tmp_path / "ring8.yaml"
    system.write_text(
        "name: ring8\nchip: v5p\ntopology: {kind: torus, dims: [8], wraparound: true}\n"
    )
    args = ["collective", str(system), "--op", "all-gather", "--bytes", "4MiB"]
    for fidelity in ("analytic", "flow", "packet"):
        code, out, _ = run(
            capsys,
            *args,
            "--algorithm",
            "ring",
            "--engine",
            "none",
            "--fidelity",
            fidelity,
            "--json",
        )
        assert code == 0
        record = json.loads(out)
        assert record["engine"] == "none"
        assert record["time_s"] == pytest.approx((k - 1) * (a + V / k / W), rel=0.01)


@pytest.mark.parametrize(
    "text,problem",
    [
        (
            "chips:\n  v5p: {hop_latency: -1 us, launch: 1 us, step_sync: 1 us, "
            "link_efficiency: 0.9}\n",
            ":2 chips.v5p.hop_latency",
        ),
        (
            "chips:\n  v5p: {hop_latency: 1 us, launch: 1 us, step_sync: 1 us, "
            "link_efficiency: 1.5}\n",
            ":2 chips.v5p.link_efficiency",
        ),
        ("chips:\n  v5p: {hop_latency: 1e30 s}\n", ":2 chips.v5p.hop_latency"),
        ("chips:\n  v5p: {link_efficiency: 1e-300}\n", ":2 chips.v5p.link_efficiency"),
        ("chips:\n  v5p: {launch: 1e30 s}\n", ":2 chips.v5p.launch"),
        ("chips:\n  v5p: {matmul_efficiency: {bf16: 0}}\n", ":2 chips.v5p.matmul_efficiency"),
        ("chips:\n  v5p: {hbm_efficiency: 1.2}\n", ":2 chips.v5p.hbm_efficiency"),
        ("chips:\n  v5p: {matmul_efficiency: {bf17: 0.8}}\n", ":2 chips.v5p.matmul_efficiency"),
        ("chips:\n  v9z: {hbm_efficiency: 0.9}\n", ":2 chips.v9z: unknown chip 'v9z'"),
    ],
)
def test_bad_overlay_is_one_line_with_file_and_line(tmp_path, capsys, text, problem):
    path = tmp_path / "cal.yaml"
    path.write_text(text)
    code, _, err = run(
        capsys,
        "collective",
        "v5p-pod",
        "--op",
        "all-reduce",
        "--bytes",
        "1MiB",
        "--calibration",
        str(path),
    )
    assert code == 2
    assert f"{path}{problem}" in err and len(err.strip().splitlines()) == 1


def test_scenario_calibration_applies_and_a_missing_file_names_its_line(tmp_path, capsys):
    overlay = tmp_path / "cal.yaml"
    overlay.write_text(
        "chips:\n  v5p:\n    hop_latency: 0.25 us\n    launch: 40 us\n"
        "    step_sync: 1 us\n    link_efficiency: 0.8\n"
    )
    base = (
        "name: cal\nsystems: [v5p-pod]\n{cal}workloads:\n"
        "  - {{name: ar, kind: collective, op: all-reduce, bytes: 1 KiB}}\n"
    )
    from tpusim.study.scenario import Scenario

    plain = Scenario(_write(tmp_path / "a.yaml", base.format(cal="")))
    calibrated = Scenario(_write(tmp_path / "b.yaml", base.format(cal="calibration: cal.yaml\n")))
    assert plain.systems[0].chip.collectives.launch_s != 40e-6
    assert calibrated.systems[0].chip.collectives.launch_s == pytest.approx(40e-6)
    missing = _write(tmp_path / "c.yaml", base.format(cal="calibration: nope.yaml\n"))
    code, _, err = run(capsys, "run", str(missing))
    assert code == 2 and f"{missing}:3 calibration:" in err


def _write(path, text):
    path.write_text(text)
    return path
