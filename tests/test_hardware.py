"""Hardware layer: roofline op costs and HBM/SRAM capacity tracking.

Oracles are computed by hand from the chips' published numbers (tpu-specs.md), typed
in below rather than read back from the model.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tpusim.config import load_chip
from tpusim.config.chip import MemorySpec
from tpusim.hardware import ChipCostModel, MemoryTracker, OutOfMemoryError
from tpusim.units import format_bytes

IRONWOOD_BF16_FLOPS = 2307e12
IRONWOOD_HBM_BPS = 7380e9
SRAM_BPS = 60e12  # an assumed VMEM bandwidth: no chip publishes one
TPU8I_HBM_BPS = 8.6e12
V5E_HBM_BYTES = 16 * 2**30  # "16 GB" in the docs, 16 GiB in JAX (17.2e9 B)


def model(chip: str, **kwargs: float) -> ChipCostModel:
    """The roofline (``ideal``: the chip's efficiency terms left out), no overhead."""
    return ChipCostModel(load_chip(chip), **{"op_overhead_s": 0.0, "ideal": True, **kwargs})


# --- matmul roofline ---------------------------------------------------------------


def test_compute_bound_matmul_matches_flops_over_peak() -> None:
    cost = model("ironwood").matmul(8192, 8192, 8192, dtype="bf16")
    expected_s = 2 * 8192**3 / IRONWOOD_BF16_FLOPS
    assert cost.bound == "compute"
    assert cost.time_s == pytest.approx(expected_s, rel=0.01)
    assert cost.mxu_utilization == 1.0


def test_memory_bound_matmul_matches_bytes_over_bandwidth() -> None:
    m, n, k = 8, 16384, 16384
    cost = model("ironwood").matmul(m, n, k, dtype="bf16", operands="hbm")
    expected_bytes = 2 * (m * k + k * n + m * n)
    assert cost.bound == "memory"
    assert cost.bytes == expected_bytes
    assert cost.time_s == pytest.approx(expected_bytes / IRONWOOD_HBM_BPS, rel=0.01)


def test_batched_matmul_reads_weights_once() -> None:
    cost = model("ironwood").matmul(16, 256, 512, batch=4)
    assert cost.flops == 2 * 4 * 16 * 256 * 512
    assert cost.bytes == 2 * (4 * 16 * 512 + 512 * 256 + 4 * 16 * 256)


def test_efficiency_stretches_compute_and_overhead_adds() -> None:
    full = model("ironwood").matmul(8192, 8192, 8192)
    half = model("ironwood", efficiency=0.5, op_overhead_s=1e-6).matmul(8192, 8192, 8192)
    assert half.time_s == pytest.approx(2 * full.time_s + 1e-6, rel=1e-12)
    assert half.overhead_s == 1e-6


def test_default_overhead_is_charged() -> None:
    cost = ChipCostModel(load_chip("ironwood")).elementwise(0)
    assert cost.time_s == cost.overhead_s == 0.5e-6


@pytest.mark.parametrize("efficiency", [0.0, -0.1, 1.5])
def test_bad_efficiency_is_rejected(efficiency: float) -> None:
    with pytest.raises(ValueError, match="efficiency"):
        ChipCostModel(load_chip("v5e"), efficiency=efficiency)


# --- MXU padding -------------------------------------------------------------------


def test_head_dim_64_on_256_wide_mxu_costs_four_times_per_useful_flop() -> None:
    # tpu8t's ridge point (996.1 TFLOP/s / 6.4 TB/s = 156 FLOP/B) sits below the padded
    # intensity of a q @ k^T of 8192 x 8192 scores (~256 FLOP/B), so all three are
    # compute-bound and time per useful FLOP is the inverse of the MXU utilization.
    costs = {d: model("tpu8t").matmul(8192, 8192, d) for d in (64, 128, 256)}
    assert all(c.bound == "compute" for c in costs.values())
    per_flop = {d: c.time_s / c.flops for d, c in costs.items()}
    assert per_flop[64] / per_flop[256] == pytest.approx(4.0, rel=1e-12)
    assert per_flop[128] / per_flop[256] == pytest.approx(2.0, rel=1e-12)
    assert [costs[d].mxu_utilization for d in (64, 128, 256)] == [0.25, 0.5, 1.0]


@pytest.mark.parametrize("chip", ["v6e", "ironwood", "tpu8t", "tpu8i"])
def test_head_dim_64_uses_a_quarter_of_a_256_wide_mxu(chip: str) -> None:
    assert model(chip).matmul(4096, 4096, 64).mxu_utilization == 0.25
    assert model(chip).matmul(4096, 64, 4096).mxu_utilization == 0.25  # n pads too


@pytest.mark.parametrize("chip", ["v4", "v5e", "v5p"])
def test_head_dim_64_uses_half_a_128_wide_mxu(chip: str) -> None:
    assert model(chip).matmul(4096, 4096, 64).mxu_utilization == 0.5


def test_rows_pad_only_to_eight_sublanes() -> None:
    cost = model("ironwood").matmul(1, 256, 256)
    assert cost.padded_flops == 2 * 8 * 256 * 256
    assert cost.mxu_utilization == 1 / 8


# --- memory tiers ------------------------------------------------------------------


def with_sram_bandwidth(chip: str, bandwidth_Bps: float):
    spec = load_chip(chip)
    sram = MemorySpec(capacity=spec.sram.capacity_bytes, bandwidth=bandwidth_Bps)
    return spec.model_copy(update={"sram": sram})


def test_sram_over_hbm_time_is_the_bandwidth_ratio() -> None:
    m = ChipCostModel(with_sram_bandwidth("ironwood", SRAM_BPS), op_overhead_s=0.0, ideal=True)
    ratio = IRONWOOD_HBM_BPS / SRAM_BPS
    hbm, sram = m.elementwise(1e9, memory="hbm"), m.elementwise(1e9, memory="sram")
    assert sram.time_s / hbm.time_s == pytest.approx(ratio, rel=1e-12)
    hbm_mm = m.matmul(8, 16384, 16384, operands="hbm")
    sram_mm = m.matmul(8, 16384, 16384, operands="sram")
    assert sram_mm.bound == hbm_mm.bound == "memory"
    assert sram_mm.time_s / hbm_mm.time_s == pytest.approx(ratio, rel=1e-12)


def test_chip_without_sram_bandwidth_raises() -> None:
    with pytest.raises(ValueError, match=r"chip v4 gives no SRAM bandwidth"):
        model("v4").elementwise(1e6, memory="sram")
    with pytest.raises(ValueError, match="v4"):
        model("v4").matmul(8, 128, 128, operands="sram")


def test_unknown_memory_raises() -> None:
    with pytest.raises(ValueError, match="unknown memory 'vmem'"):
        model("v5e").memory_bandwidth_Bps("vmem")  # type: ignore[arg-type]


# --- other units -------------------------------------------------------------------


def test_embedding_lookup_runs_on_sparsecores_where_present() -> None:
    on_ironwood = model("ironwood").embedding_lookup(1000, 512)
    assert on_ironwood.unit == "sparsecore"
    assert on_ironwood.time_s == pytest.approx(1000 * 512 / IRONWOOD_HBM_BPS, rel=1e-12)
    assert model("v5e").embedding_lookup(1000, 512).unit == "tensorcore"


def test_reduction_on_the_cae_is_three_times_faster() -> None:
    chip = load_chip("tpu8i")
    cae = ChipCostModel(chip, op_overhead_s=0.0).reduction(1e9)
    no_cae = ChipCostModel(chip.model_copy(update={"cae": None}), op_overhead_s=0.0)
    tensorcore = no_cae.reduction(1e9)
    assert (cae.unit, tensorcore.unit) == ("cae", "tensorcore")
    assert cae.time_s == pytest.approx(1e9 / TPU8I_HBM_BPS, rel=1e-12)
    assert tensorcore.time_s == pytest.approx(3 * 1e9 / TPU8I_HBM_BPS, rel=1e-12)


def test_reduction_without_cae_uses_the_tensorcore() -> None:
    assert model("ironwood").reduction(1e6).unit == "tensorcore"


def test_unknown_dtype_names_the_chip_and_its_dtypes() -> None:
    with pytest.raises(ValueError, match=r"chip v5e has no peak for dtype 'fp8' \(has bf16, "):
        model("v5e").matmul(128, 128, 128, dtype="fp8")


def test_non_positive_matmul_size_raises() -> None:
    with pytest.raises(ValueError, match="k must be positive"):
        model("v5e").matmul(128, 128, 0)


# --- memory tracker ----------------------------------------------------------------


def test_allocations_add_up_and_free_releases() -> None:
    tracker = MemoryTracker(load_chip("v5e"))
    tracker.allocate("weights", 6e9)
    tracker.allocate("kv", 4e9)
    tracker.allocate("scratch", 1e6, memory="sram")
    assert tracker.used_bytes("hbm") == 10e9
    assert tracker.used_bytes("sram") == 1e6
    tracker.free("kv")
    assert tracker.used_bytes("hbm") == 6e9
    assert tracker.peak_bytes("hbm") == 10e9
    assert tracker.capacity_bytes("hbm") == V5E_HBM_BYTES


def test_exceeding_hbm_raises_naming_chip_and_bytes() -> None:
    tracker = MemoryTracker(load_chip("v5e"), chip_index=3)
    tracker.allocate("weights", 10e9)
    needed, available = 10e9 + 8e9, V5E_HBM_BYTES
    with pytest.raises(OutOfMemoryError) as info:
        tracker.allocate("kv", 8e9)
    message = str(info.value)
    for text in ("v5e #3", "HBM", format_bytes(needed), format_bytes(available), "'kv'"):
        assert text in message
    assert f"{needed:.0f} B" in message and f"{available:.0f} B" in message
    assert (info.value.needed_bytes, info.value.available_bytes) == (needed, available)
    assert info.value.exit_code == 1
    assert tracker.used_bytes("hbm") == 10e9  # the failed allocation took nothing


def test_exactly_full_fits() -> None:
    tracker = MemoryTracker(load_chip("v5e"))
    tracker.allocate("all", V5E_HBM_BYTES)
    assert tracker.used_bytes() == V5E_HBM_BYTES


def test_duplicate_and_unknown_names_raise() -> None:
    tracker = MemoryTracker(load_chip("v5e"))
    tracker.allocate("a", 1.0)
    with pytest.raises(ValueError, match="'a' is already live"):
        tracker.allocate("a", 1.0)
    with pytest.raises(KeyError, match="no live allocation 'b'"):
        tracker.free("b")


@given(
    st.lists(
        st.tuples(st.booleans(), st.integers(0, 9), st.integers(0, 8 * 10**9)),
        max_size=40,
    )
)
def test_used_is_sum_of_live_and_peak_bounds_used(ops: list[tuple[bool, int, int]]) -> None:
    tracker = MemoryTracker(load_chip("v5e"))
    live: dict[str, int] = {}
    for allocate, slot, size in ops:
        name = f"buf{slot}"
        if allocate and name not in live and sum(live.values()) + size <= V5E_HBM_BYTES:
            tracker.allocate(name, size)
            live[name] = size
        elif not allocate and name in live:
            tracker.free(name)
            del live[name]
        assert tracker.used_bytes("hbm") == sum(live.values())
        assert tracker.peak_bytes("hbm") >= tracker.used_bytes("hbm")
    assert tracker.used_bytes("sram") == 0
