"""Compute cost terms: the shared terms apply to every chip by default against closed
forms (tile-aligned matmuls at the roofline, skinny ones memory bound, the vector bound,
quantization, grouped matmuls, gathers), the shape term against the published Ironwood
GEMM sweep, the terms file, and the calibration overlay."""

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
from tpusim.config.cost_terms import (
    FITTED,
    cost_terms_path,
    load_cost_terms_file,
    shared_terms,
    with_terms,
)
from tpusim.engine import Simulation
from tpusim.errors import ConfigError
from tpusim.hardware import ChipCostModel
from tpusim.program.builders import training_step

V6E_BF16 = 918e12
V6E_HBM = 1638e9
IRONWOOD_BF16 = 2307e12
IRONWOOD_FP8 = 4614e12
IRONWOOD_HBM = 7380e9
V5P_BF16 = 459e12
OVERHEAD_S = 0.5e-6
GEMM_BF16 = 0.83
"""Ironwood's single-GEMM bf16 efficiency, 956.4 / 1153.5 TFLOP/s per TensorCore at
32768^3 (AMB-7x)."""


def pad(x: int, to: int) -> int:
    return -(-x // to) * to


def terms():
    return shared_terms()


def test_the_shared_terms_apply_by_default():
    """v6e (256-wide MXU): the shared ``mxu`` with the rows term m / (m + 1 x 256); the
    shared ``hbm``; v5p (128-wide MXU) fills in half the rows."""
    t = terms()
    costs = ChipCostModel(load_chip("v6e"), op_overhead_s=0.0)
    m = 4096
    rate = V6E_BF16 * t.mxu * m / (m + t.rows_half_tiles * 256)
    assert costs.matmul(m, 4096, 4096).compute_s == pytest.approx(2 * m * 4096**2 / rate)
    v5p = ChipCostModel(load_chip("v5p"), op_overhead_s=0.0)
    rate = V5P_BF16 * t.mxu * m / (m + t.rows_half_tiles * 128)
    assert v5p.matmul(m, 4096, 4096).compute_s == pytest.approx(2 * m * 4096**2 / rate)
    gather = costs.elementwise(1e9, gather=True)
    assert gather.time_s == pytest.approx(1e9 / (V6E_HBM * t.gather_hbm), rel=1e-12)


def test_a_tile_aligned_matmul_at_efficiency_one_is_its_roofline():
    """Ideal mode, every dimension a multiple of the MXU tile: 2 m n k / peak exactly."""
    costs = ChipCostModel(load_chip("ironwood"), ideal=True, op_overhead_s=0.0)
    for m, n, k in ((4096, 8192, 2048), (256, 256, 256), (1024, 512, 4096 * 4)):
        cost = costs.matmul(m, n, k)
        assert cost.compute_s == pytest.approx(2 * m * n * k / IRONWOOD_BF16, rel=1e-12)
        assert cost.mxu_utilization == 1.0


def test_a_skinny_matmul_is_memory_bound():
    """8 rows against an 8192 x 8192 weight (decode): the weight's bytes over the HBM
    bandwidth, far above its FLOPs over the peak."""
    costs = ChipCostModel(load_chip("ironwood"), op_overhead_s=0.0)
    cost = costs.matmul(8, 8192, 8192)
    nbytes = 2 * (8 * 8192 + 8192 * 8192 + 8 * 8192)
    assert cost.bound == "memory"
    assert cost.time_s == pytest.approx(nbytes / (IRONWOOD_HBM * terms().hbm), rel=1e-12)
    assert cost.memory_s / 10 > 2 * 8 * 8192 * 8192 / IRONWOOD_BF16  # its FLOPs alone: 46x faster


def test_an_elementwise_op_is_vector_bound_when_the_vector_unit_is_slower():
    """Bytes / (HBM x hbm) against (bytes / 2) x ops-per-element / vector rate."""
    chip = with_efficiency(load_chip("v6e"), vector_flops=1e12)
    costs = ChipCostModel(chip, op_overhead_s=0.0)
    t = terms()
    cost = costs.elementwise(1e9, vector=True)
    vector_s = 1e9 / 2 * t.vector_ops_per_element / 1e12
    assert cost.time_s == pytest.approx(max(vector_s, 1e9 / (V6E_HBM * t.hbm)), rel=1e-12)
    assert cost.bound == ("compute" if vector_s > 1e9 / (V6E_HBM * t.hbm) else "memory")


def test_an_8bit_matmul_pays_its_quantization_on_the_vector_unit():
    """fp8 at twice the bf16 peak, plus (m k + k n) x quantize ops / vector rate: the
    speed-up comes out of the terms, under the peaks' 2x."""
    chip = load_chip("ironwood")
    costs = ChipCostModel(chip, op_overhead_s=0.0)
    t, m = terms(), 16384
    rows = m / (m + t.rows_half_tiles * 256)
    bf16 = costs.matmul(m, m, m, "bf16").compute_s
    fp8 = costs.matmul(m, m, m, "fp8").compute_s
    assert bf16 == pytest.approx(2 * m**3 / (IRONWOOD_BF16 * t.mxu * rows), rel=1e-12)
    vector = chip.efficiency.vector_flops
    quantize = 2 * m * m * t.quantize_ops_per_element / vector
    assert fp8 == pytest.approx(2 * m**3 / (IRONWOOD_FP8 * t.mxu * rows) + quantize, rel=1e-12)
    assert 1.0 < bf16 / fp8 < 2.0


def test_a_grouped_matmul_runs_at_the_grouped_fraction():
    costs = ChipCostModel(load_chip("v5p"), op_overhead_s=0.0)
    dense = costs.matmul(4096, 2048, 7168).compute_s
    grouped = costs.matmul(4096, 2048, 7168, grouped=True).compute_s
    assert grouped == pytest.approx(dense / terms().grouped_matmul, rel=1e-12)


def test_with_terms_replaces_the_shared_terms_for_one_chip():
    t = terms().model_copy(update={"mxu": 0.5, "hbm": 0.6})
    chip = with_terms(load_chip("v6e"), t)
    costs = ChipCostModel(chip, op_overhead_s=0.0)
    assert costs.achievable_flops("bf16") == pytest.approx(V6E_BF16 * 0.5)
    assert costs.memory_bandwidth_Bps("hbm") == pytest.approx(V6E_HBM * 0.6)
    bare = load_chip("v6e").model_copy(update={"efficiency": None})
    assert with_terms(bare, t) is bare


def test_the_terms_file_is_sourced_and_checked(tmp_path):
    spec = load_cost_terms_file()
    assert set(FITTED) | {"hbm", "rows_half_tiles"} == set(type(spec.terms).model_fields)
    assert all(f"terms.{name}" in spec.sources for name in FITTED)
    assert "hbm" not in FITTED and spec.sources["terms.hbm"].grade == "derived"
    assert spec.fit_on, "the shipped terms name the cases they were fitted on"
    text = cost_terms_path().read_text()
    bad = tmp_path / "terms.yaml"
    bad.write_text(text.replace("  mxu: ", "  mxu: 5 #", 1))
    with pytest.raises(ConfigError, match=r"terms\.mxu"):
        load_cost_terms_file(bad)
    bad.write_text(text.replace("  hbm: ", "  hbmm: 0.5\n  hbm: ", 1))
    with pytest.raises(ConfigError, match="hbmm"):
        load_cost_terms_file(bad)


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
    32768^3; the shared whole-step term is lower)."""
    costs = ChipCostModel(with_efficiency(load_chip("ironwood"), matmul={"bf16": GEMM_BF16}))
    chip_s = costs.matmul(size, size, size, batch=2).time_s
    per_device_TFLOPs = 2 * size**3 / chip_s / 1e12
    assert per_device_TFLOPs == pytest.approx(published_TFLOPs, rel=0.015)


def test_the_vector_bound_slows_a_kernel_only_when_it_dominates():
    chip = load_chip("v6e")
    costs = ChipCostModel(chip, op_overhead_s=0.0)
    slow = costs.kernel(1e9, 1e9, vector_ops=7.17e12, bytes=0.0)
    assert slow.time_s == pytest.approx(1.0, rel=1e-12)  # v6e: 7.17 TFLOP/s
    fast = costs.kernel(1e12, 1e12, vector_ops=1.0, bytes=0.0)
    assert fast.time_s == pytest.approx(1e12 / (V6E_BF16 * terms().mxu))


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
    assert tuned.efficiency.matmul == {"bf16": 0.7}
    costs = ChipCostModel(tuned)
    assert costs.achievable_flops("bf16") == pytest.approx(V6E_BF16 * 0.7)
    assert costs.achievable_flops("int8") == pytest.approx(2 * V6E_BF16 * terms().mxu)
    assert tuned.efficiency.hbm == chip.efficiency.hbm
    assert tuned.ici == chip.ici and tuned.collectives == chip.collectives


def test_with_efficiency_sets_terms_programmatically_and_checks_them():
    chip = with_efficiency(load_chip("v5e"), matmul={"bf16": 0.5}, hbm=0.8, vector_flops=1e12)
    assert (chip.efficiency.matmul["bf16"], chip.efficiency.hbm) == (0.5, 0.8)
    assert chip.efficiency.vector_flops == 1e12
    cost = ChipCostModel(chip, op_overhead_s=0.0).elementwise(8e8, gather=True)
    want = 8e8 / (chip.hbm.bandwidth_Bps * terms().gather_hbm)
    assert cost.time_s == pytest.approx(want, rel=1e-12)
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
    assert chip.efficiency.matmul == {"fp8": 0.5}
    assert (chip.efficiency.hbm, chip.efficiency.vector_flops) == (0.8, 10e12)
    assert chip.ici.hop_latency_s == load_chip("ironwood").ici.hop_latency_s
