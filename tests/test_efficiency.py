"""Chip efficiency terms: applied by default, the ideal mode is the roofline exactly, the
shape term against the published Ironwood GEMM sweep, fp8/bf16 from the terms, and the
calibration overlay (partial terms, limits, unknown chips, ``with_efficiency``)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tpusim.config import load_chip, load_system
from tpusim.config.calibration import (
    Calibration,
    ChipCalibration,
    calibrated_chip,
    with_efficiency,
)
from tpusim.engine import Simulation
from tpusim.hardware import ChipCostModel
from tpusim.program.builders import training_step

V6E_BF16 = 918e12
V6E_HBM = 1638e9
IRONWOOD_BF16 = 2307e12
IRONWOOD_FP8 = 4614e12
OVERHEAD_S = 0.5e-6
GEMM_BF16 = 0.83
"""Ironwood's single-GEMM bf16 efficiency, 956.4 / 1153.5 TFLOP/s per TensorCore at
32768^3 (AMB-7x)."""


def pad(x: int, to: int) -> int:
    return -(-x // to) * to


def test_the_chip_terms_apply_by_default():
    """v6e: the file's matmul.bf16 with the rows term m / (m + 256); its hbm term."""
    chip = load_chip("v6e")
    eff = chip.efficiency
    assert eff is not None and eff.matmul["bf16"] < 1 and eff.hbm < 1
    costs = ChipCostModel(chip, op_overhead_s=0.0)
    m = 4096
    mm = costs.matmul(m, 4096, 4096)
    rate = V6E_BF16 * eff.matmul["bf16"] * m / (m + 256)
    assert mm.compute_s == pytest.approx(2 * m * 4096 * 4096 / rate)
    assert costs.elementwise(1e9).time_s == pytest.approx(1e9 / (V6E_HBM * eff.hbm), rel=1e-12)


def test_reductions_keep_the_nominal_hbm_bandwidth():
    """The collective terms were calibrated with the reduce steps at the nominal rate."""
    costs = ChipCostModel(load_chip("v6e"), op_overhead_s=0.0)
    assert costs.reduction(1e9).time_s == pytest.approx(3e9 / V6E_HBM, rel=1e-12)


@pytest.mark.parametrize(
    ("size", "published_TFLOPs"), [(4096, 892.94), (16384, 950.13), (32768, 956.38)]
)
def test_large_matmuls_match_the_ironwood_gemm_sweep(size, published_TFLOPs):
    """AI-Hypercomputer/accelerator-microbenchmarks, Ironwood bf16 gemm_multiple_run: per
    device (one of a chip's two TensorCores). Two devices' matmuls make one chip's. The
    shape term with a single GEMM's efficiency, 0.83 (956.4 of 1153.5 TFLOP/s at
    32768^3; the chip file's whole-step calibrated value is lower)."""
    costs = ChipCostModel(with_efficiency(load_chip("ironwood"), matmul={"bf16": GEMM_BF16}))
    chip_s = costs.matmul(size, size, size, batch=2).time_s
    per_device_TFLOPs = 2 * size**3 / chip_s / 1e12
    assert per_device_TFLOPs == pytest.approx(published_TFLOPs, rel=0.015)


def test_fp8_over_bf16_comes_from_the_terms_not_the_peaks():
    costs = ChipCostModel(load_chip("ironwood"), op_overhead_s=0.0)
    bf16 = costs.matmul(16384, 16384, 16384, "bf16").time_s
    fp8 = costs.matmul(16384, 16384, 16384, "fp8").time_s
    eff = load_chip("ironwood").efficiency
    assert eff is not None and IRONWOOD_FP8 / IRONWOOD_BF16 == 2.0
    want = 2 * eff.matmul["fp8"] / eff.matmul["bf16"]
    assert bf16 / fp8 == pytest.approx(want, rel=1e-12)
    assert 1.0 < bf16 / fp8 < 2.0  # the recipes: 1.54x where the peaks give 2x


def test_the_vector_bound_slows_a_kernel_only_when_it_dominates():
    chip = load_chip("v6e")
    costs = ChipCostModel(chip, op_overhead_s=0.0)
    slow = costs.kernel(1e9, 1e9, vector_ops=7.17e12, bytes=0.0)
    assert slow.time_s == pytest.approx(1.0, rel=1e-12)  # v6e: 7.17 TFLOP/s
    fast = costs.kernel(1e12, 1e12, vector_ops=1.0, bytes=0.0)
    assert chip.efficiency is not None
    assert fast.time_s == pytest.approx(1e12 / (V6E_BF16 * chip.efficiency.matmul["bf16"]))


def ring_system(tmp_path, chips: int = 2):
    path = tmp_path / "ring.yaml"
    path.write_text(
        f"name: ring\ndescription: test\nchip: v6e\ntopology: {{kind: torus, dims: [{chips}]}}\n"
        f"chips: {chips}\n"
    )
    return load_system(str(path))


def roofline_s(op) -> float:
    """An op's time on v6e at the published peaks, by hand (no cost model)."""
    if op.kind == "matmul":
        flops = 2 * op.batch * pad(op.m, 8) * pad(op.n, 256) * pad(op.k, 256)
        nbytes = 2 * (op.batch * op.m * op.k + op.k * op.n + op.batch * op.m * op.n)
        return max(flops / V6E_BF16, nbytes / V6E_HBM) + OVERHEAD_S
    if op.kind == "kernel":
        ratio = sum(pad(d, 256) for d in op.pad_dims) / sum(op.pad_dims)
        return max(op.padded_flops * ratio / V6E_BF16, op.bytes / V6E_HBM) + OVERHEAD_S
    return op.bytes / V6E_HBM + OVERHEAD_S


def test_ideal_mode_makes_a_training_step_the_roofline_sum(tmp_path):
    """Efficiency 1 and no overlap (``async_collectives: false``: every collective
    holds the TensorCore in turn): the step is the sum of the ops' rooflines plus the
    collectives' times; with the chip's terms the step is slower."""
    system = ring_system(tmp_path)
    program = training_step(layers=2, d_model=512, d_ff=2048, heads=8, head_dim=64,
                            seq=1024, batch=2, mesh={"data": 2}, mlp="gated",
                            async_collectives=False)  # fmt: skip
    compute = [op for op in program.ops if op.kind != "collective"]
    assert {op.kind for op in compute} == {"matmul", "kernel", "elementwise"}
    ideal = Simulation(system, program, costs=ChipCostModel(system.chip, ideal=True)).run()
    roofline = sum(map(roofline_s, compute))
    assert ideal.compute_time_s == pytest.approx(roofline, rel=1e-12)
    assert ideal.step_time_s == pytest.approx(roofline + ideal.communication_time_s, rel=1e-12)
    real = Simulation(system, program).run()
    assert real.compute_time_s > ideal.compute_time_s


def test_an_overlay_sets_only_the_terms_it_gives():
    chip = load_chip("v6e")
    overlay = Calibration(chips={"v6e": ChipCalibration(matmul_efficiency={"bf16": 0.7})})
    tuned = calibrated_chip(chip, overlay)
    assert tuned.efficiency.matmul["bf16"] == 0.7
    assert tuned.efficiency.matmul["int8"] == chip.efficiency.matmul["int8"]
    assert tuned.efficiency.hbm == chip.efficiency.hbm
    assert tuned.ici == chip.ici and tuned.collectives == chip.collectives


def test_with_efficiency_sets_terms_programmatically_and_checks_them():
    chip = with_efficiency(load_chip("v5e"), matmul={"bf16": 0.5}, hbm=0.8, vector_flops=1e12)
    assert (chip.efficiency.matmul["bf16"], chip.efficiency.hbm) == (0.5, 0.8)
    assert chip.efficiency.vector_flops == 1e12
    cost = ChipCostModel(chip, op_overhead_s=0.0).elementwise(8e8)
    assert cost.time_s == pytest.approx(8e8 / (chip.hbm.bandwidth_Bps * 0.8), rel=1e-12)
    with pytest.raises(ValidationError):
        with_efficiency(chip, matmul={"bf16": 1.5})
    bare = load_system("v5e-pod").chip.model_copy(update={"efficiency": None})
    assert with_efficiency(bare, hbm=0.5).efficiency.matmul == {}


def test_an_overlay_file_carries_compute_terms_with_units(tmp_path):
    from tpusim.config.calibration import load_calibration

    path = tmp_path / "cal.yaml"
    path.write_text(
        "chips:\n  ironwood:\n    matmul_efficiency: {fp8: 0.5}\n    hbm_efficiency: 0.8\n"
        "    vector_flops: 10 TFLOP/s\n    fit_on: [recipe-1]\n"
    )
    chip = calibrated_chip(load_chip("ironwood"), load_calibration(path))
    shipped = load_chip("ironwood").efficiency
    assert shipped is not None
    assert chip.efficiency.matmul == {"bf16": shipped.matmul["bf16"], "fp8": 0.5}
    assert (chip.efficiency.hbm, chip.efficiency.vector_flops) == (0.8, 10e12)
    assert chip.ici.hop_latency_s == load_chip("ironwood").ici.hop_latency_s
