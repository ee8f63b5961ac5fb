"""The engine against independent oracles: rooflines, tpusim collective, overlap bounds."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tpusim.config import load_system
from tpusim.config.chip import MemorySpec
from tpusim.engine import CollectiveOptions, Simulation, map_mesh, simulate_collective
from tpusim.errors import InputError, SimulationError
from tpusim.hardware import ChipCostModel, OutOfMemoryError
from tpusim.program import ChipOverride, Op, Program, ProgramError
from tpusim.topology import build_topology

IRONWOOD_BF16 = 2307e12
IRONWOOD_HBM = 7380e9


def ideal_costs(system) -> ChipCostModel:
    """The roofline of ``system``'s chip (its efficiency terms left out)."""
    chip = (load_system(system) if isinstance(system, str) else system).chip
    return ChipCostModel(chip, ideal=True)


def run(system, *ops, **kwargs):
    program = Program("p", tuple(ops), **kwargs)
    return Simulation(system, program, costs=ideal_costs(system)).run()


def test_lone_compute_bound_matmul_is_flops_over_peak():
    result = run("ironwood-256", Op("mm", "matmul", m=8192, n=8192, k=8192))
    assert result.step_time_s == pytest.approx(2 * 8192**3 / IRONWOOD_BF16, rel=0.01)


def test_lone_memory_bound_matmul_is_bytes_over_bandwidth():
    m, n, k = 8, 16384, 16384
    result = run("ironwood-256", Op("mm", "matmul", m=m, n=n, k=k))
    assert result.step_time_s == pytest.approx(2 * (m * k + k * n + m * n) / IRONWOOD_HBM, rel=0.01)


def test_mxu_padding_of_the_head_dimension_shows():
    """Attention scores q @ k^T contract over head_dim: 64 and 128 on a 256-wide MXU pay
    for a full 256-deep tile, so time per useful FLOP is 4x and 2x that of 256 (TPU 8t,
    where all three are compute-bound; on Ironwood head_dim 256 is memory-bound)."""
    per_flop = {}
    for hd in (64, 128, 256):
        op = Op("qk", "matmul", batch=64, m=4096, n=4096, k=hd, memory="hbm")
        per_flop[hd] = run("tpu8t-superpod", op).step_time_s / op.flops
    assert per_flop[64] / per_flop[256] == pytest.approx(4, rel=0.02)
    assert per_flop[128] / per_flop[256] == pytest.approx(2, rel=0.02)


def test_async_all_reduce_overlapping_a_matmul_costs_the_max_not_the_sum():
    matmul = Op("mm", "matmul", m=8192, n=8192, k=8192)
    alone_mm = run("ironwood-256", matmul).step_time_s
    alone_ar, _ = simulate_collective("ironwood-256", "all-reduce", 2**28)
    both = run(
        "ironwood-256",
        matmul,
        Op("ar", "collective", collective="all-reduce", size_bytes=2**28, overlap=True),
    )
    assert both.step_time_s == pytest.approx(max(alone_mm, alone_ar.time_s), rel=1e-6)
    assert both.step_time_s < 0.9 * (alone_mm + alone_ar.time_s)
    sync = run(
        "ironwood-256",
        matmul,
        Op("ar", "collective", collective="all-reduce", size_bytes=2**28, after=("mm",)),
    )
    assert sync.step_time_s == pytest.approx(alone_mm + alone_ar.time_s, rel=1e-6)


def test_communication_busy_time_counts_concurrent_collectives_once():
    """Two identical async all-reduces issued together share every link and finish
    together: their summed time is twice the time one was in flight, and the time
    with a collective in flight is the step. A matmul after a sync all-reduce adds
    nothing to it: busy = the all-reduce alone, as `tpusim collective` gives it."""
    ar = {"collective": "all-reduce", "size_bytes": 2**26, "overlap": True}
    both = run("ironwood-256", Op("a", "collective", **ar), Op("b", "collective", **ar))
    assert both.communication_time_s == pytest.approx(2 * both.communication_busy_time_s)
    assert both.communication_busy_time_s == pytest.approx(both.step_time_s, rel=1e-9)
    alone, _ = simulate_collective("ironwood-256", "all-reduce", 2**26)
    serial = run(
        "ironwood-256",
        Op("a", "collective", collective="all-reduce", size_bytes=2**26),
        Op("mm", "matmul", m=4096, n=4096, k=4096, after=("a",)),
    )
    assert serial.communication_busy_time_s == pytest.approx(alone.time_s, rel=1e-9)
    assert serial.summary()["communication_busy_time_s"] == serial.communication_busy_time_s


def test_data_parallel_gradient_all_reduce_equals_tpusim_collective():
    grads = 512 * 2**20
    step = run(
        "v5e-pod",
        Op("grad", "collective", collective="all-reduce", size_bytes=grads, axes=("data",)),
        mesh={"data": 16, "model": 16},
    )
    direct, _ = simulate_collective("v5e-pod", "all-reduce", grads, CollectiveOptions(axes=["x"]))
    assert step.communication_time_s == pytest.approx(direct.time_s, rel=1e-9)
    assert step.step_time_s == pytest.approx(direct.time_s, rel=1e-9)


def with_sram_bandwidth(name: str, bandwidth_Bps: float):
    system = load_system(name)
    chip = system.chip
    sram = MemorySpec(capacity=chip.sram.capacity_bytes, bandwidth=bandwidth_Bps)
    return dataclasses.replace(system, chip=chip.model_copy(update={"sram": sram}))


def test_kv_cache_in_sram_is_faster_by_exactly_the_bandwidth_ratio():
    system = with_sram_bandwidth("ironwood-256", 40e12)
    costs = ChipCostModel(system.chip, op_overhead_s=0.0, ideal=True)
    times = {}
    for tier in ("hbm", "sram"):
        program = Program("decode", (Op("kv", "elementwise", bytes=64 * 2**20, memory=tier),))
        times[tier] = Simulation(system, program, costs=costs).run().step_time_s
    assert times["hbm"] / times["sram"] == pytest.approx(40e12 / IRONWOOD_HBM, rel=1e-12)


def test_a_straggler_delays_everyone_at_the_collective():
    ops = (
        Op("mm", "matmul", m=4096, n=4096, k=4096),
        Op("ar", "collective", collective="all-reduce", size_bytes=2**20, after=("mm",)),
    )
    fast = run("v5e-pod", *ops)
    slow = run("v5e-pod", *ops, chip_overrides={5: ChipOverride(slowdown=2.0)})
    mm = next(r for r in fast.ops if r.name == "mm")
    assert slow.step_time_s == pytest.approx(fast.step_time_s + (mm.end_at - mm.start_at), rel=1e-9)


def test_mismatched_collective_is_a_deadlock_naming_chips_and_op():
    extra = Op("log", "collective", collective="all-reduce", size_bytes=1e6, after=("mm",))
    with pytest.raises(
        SimulationError,
        match=r"deadlock: collective 'log' .*chip 0.*"
        r"chips 1\.\.255",
    ):
        run(
            "v5e-pod",
            Op("mm", "matmul", m=128, n=128, k=128),
            chip_overrides={0: ChipOverride(extra_ops=(extra,))},
        )


def test_mesh_maps_onto_physical_axes_and_rejects_what_does_not_fit():
    topo = build_topology(load_system("ironwood-pod"))
    assert map_mesh(topo, {"data": 16, "model": 24, "expert": 24}) == {
        "data": ["x"],
        "model": ["y"],
        "expert": ["z"],
    }
    assert map_mesh(topo, {"data": 16, "model": 576}) == {"data": ["x"], "model": ["y", "z"]}
    with pytest.raises(InputError, match="does not fit"):
        map_mesh(topo, {"data": 9, "model": 1024})
    with pytest.raises(InputError, match="has 100 devices"):
        map_mesh(topo, {"data": 100})


def test_program_that_does_not_fit_in_hbm_is_out_of_memory():
    # v5e: 16 GiB = 17.18e9 B
    with pytest.raises(OutOfMemoryError, match="HBM"):
        run("v5e-pod", Op("mm", "matmul", m=8, n=8, k=8), memory_bytes={"hbm": 18e9})


def test_cycles_and_unknown_ops_are_program_errors():
    with pytest.raises(ProgramError, match="cycle among ops a, b"):
        Program("p", (Op("a", "matmul", after=("b",)), Op("b", "matmul", after=("a",))))
    with pytest.raises(ProgramError, match="unknown op 'z'"):
        Program("p", (Op("a", "elementwise", after=("z",)),))


def test_same_inputs_same_numbers():
    ops = (
        Op("mm", "matmul", m=2048, n=2048, k=2048),
        Op("ar", "collective", collective="all-reduce", size_bytes=2**22, overlap=True),
    )
    assert run("v5e-pod", *ops).summary() == run("v5e-pod", *ops).summary()


def test_data_parallel_training_step_communication_is_its_gradient_all_reduce():
    """One layer, pure data parallelism: the step's only collective is the all-reduce of
    that layer's gradients, which must take what ``tpusim collective`` says."""
    from tpusim.program.builders import parameters_per_layer, training_step

    program = training_step(
        layers=1,
        d_model=1024,
        d_ff=4096,
        heads=8,
        head_dim=128,
        seq=512,
        batch=256,
        mesh={"data": 256},
    )
    grads = [op for op in program.ops if op.kind == "collective"]
    assert len(grads) == 1 and grads[0].collective == "all-reduce"
    assert grads[0].size_bytes == parameters_per_layer(1024, 4096, 8, 128) * 2
    result = Simulation("v5e-pod", program).run()
    direct, _ = simulate_collective("v5e-pod", "all-reduce", grads[0].size_bytes)
    assert result.communication_time_s == pytest.approx(direct.time_s, rel=1e-9)


def test_decode_kv_cache_in_sram_is_faster_by_the_bandwidth_ratio():
    """Memory-bound decode: each layer's cache read takes bytes / bandwidth of its tier."""
    from tpusim.program.builders import decode_step

    system = with_sram_bandwidth("ironwood-256", 40e12)
    costs = ChipCostModel(system.chip, op_overhead_s=0.0, ideal=True)
    reads = {}
    for tier in ("hbm", "sram"):
        # 2 layers x 8 seqs x 1024 tokens x 8 kv heads x 128 x (K, V) x 2 B = 64 MiB: fits
        program = decode_step(
            layers=2,
            d_model=4096,
            d_ff=16384,
            heads=32,
            head_dim=128,
            kv_heads=8,
            batch=8,
            context=1024,
            kv_cache=tier,
            mesh={"data": 256},
        )
        result = Simulation(system, program, costs=costs).run()
        reads[tier] = sum(r.end_at - r.start_at for r in result.ops if r.name.endswith("kv_read"))
    assert reads["hbm"] / reads["sram"] == pytest.approx(40e12 / IRONWOOD_HBM, rel=1e-12)


def test_chip_zero_also_logs_and_everyone_waits_for_it_at_the_collective():
    log_bytes = 2**30
    ops = (
        Op("mm", "matmul", m=1024, n=1024, k=1024),
        Op("ar", "collective", collective="all-reduce", size_bytes=2**20, after=("mm",)),
    )
    plain = run("v5e-pod", *ops)
    log = Op("log", "elementwise", bytes=log_bytes, after=("mm",))
    logged = Simulation(
        "v5e-pod",
        Program("p", ops, chip_overrides={0: ChipOverride(extra_ops=(log,))}),
        costs=ideal_costs("v5e-pod"),
    ).run()
    log_s = next(r.end_at - r.start_at for r in logged.ops if r.name == "log")
    assert log_s == pytest.approx(log_bytes / 819e9 + 0.5e-6, rel=1e-9)
    # log and the synchronous all-reduce share chip 0's TensorCore: the step grows by log
    assert logged.step_time_s == pytest.approx(plain.step_time_s + log_s, rel=1e-9)
    assert {r.chips for r in logged.ops} == {"spmd (255 chips)", "chip 0"}


def test_explicit_groups_run_as_independent_collectives():
    """Two groups of 2 neighbouring chips on a v5e row: each is a 2-chip all-reduce."""
    op = Op(
        "ar",
        "collective",
        collective="all-reduce",
        size_bytes=2**24,
        groups=((0, 1), (2, 3)),
        algorithm="ring",
    )
    result = Simulation("v5e-pod", Program("p", (op,))).run()
    direct, _ = simulate_collective(
        "v5e-pod", "all-reduce", 2**24, CollectiveOptions(chips=2, algorithm="ring")
    )
    assert result.step_time_s == pytest.approx(direct.time_s, rel=1e-9)
    with pytest.raises(InputError, match="equal-sized"):
        bad = Op("ar", "collective", collective="all-reduce", size_bytes=1e6, groups=((0, 1), (2,)))
        Simulation("v5e-pod", Program("p", (bad,))).run()


def test_explicit_group_on_a_line_is_folded_so_no_hop_spans_the_line():
    """Chips 0..7 of a v5e row (no wraparound at 8): in the given order the closing hop
    7 -> 0 is 7 hops; the folded ring 0,2,4,6,7,5,3,1 has no hop longer than 2."""
    sim = Simulation("v5e-pod", Program("p", (Op("mm", "matmul", m=8, n=8, k=8),)))
    order = sim.placement.ring_order(np.arange(8))
    assert order.tolist() == [0, 2, 4, 6, 7, 5, 3, 1]
    ring = order.tolist()
    assert max(abs(a - b) for a, b in zip(ring, ring[1:] + ring[:1], strict=True)) == 2
    square = sim.placement.ring_order(np.array([0, 1, 17, 16]))  # already a ring of 1-hop steps
    assert square.tolist() == [0, 1, 2, 3]
