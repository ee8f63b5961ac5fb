"""``tpusim plan`` (issue 21): the layout search against a brute force, the memory
model, the workload's own runs and pure FSDP."""

from __future__ import annotations

import itertools
import json
import math
import re

import pytest

from tpusim.cli import main
from tpusim.config import load_system
from tpusim.engine.placement import map_mesh
from tpusim.errors import InputError
from tpusim.planner import PlanRequest, plan_layouts
from tpusim.planner.candidates import (
    Layout,
    active_roles,
    divisors,
    factorisations,
    flag_choices,
    meshes,
    microbatch_choices,
    remat_choices,
    searched_roles,
)
from tpusim.planner.memory import assess
from tpusim.planner.rank import Simulator
from tpusim.planner.search import builder_base, workload_fields
from tpusim.program.builders.memory import peak_stage
from tpusim.program.ir import ProgramError
from tpusim.topology import build_topology
from tpusim.workloads.training_memory import check_fits

SMALL = PlanRequest("llama-3.1-8b", "ironwood-256", 64, 2048, overrides={"layers": 6})


def _fits_topology(topology):
    def fits(mesh):
        try:
            map_mesh(topology, mesh)
        except InputError:
            return False
        return True

    return fits


def test_factorisations_are_every_ordered_product():
    found = list(factorisations(12, 3))
    brute = [t for t in itertools.product(range(1, 13), repeat=3) if math.prod(t) == 12]
    assert sorted(found) == sorted(brute)
    assert len(found) == len(set(found)) == 18


def test_meshes_are_the_factorisations_the_topology_takes():
    topology = build_topology(load_system("ironwood-256"))
    fits = _fits_topology(topology)
    roles = [r for r in searched_roles() if r.planner.needs is None and not r.planner.min_seq]
    found = list(meshes(256, roles, fits))
    brute = []
    for sizes in itertools.product([2**k for k in range(9)], repeat=len(roles)):
        mesh = {r.name: s for r, s in zip(roles, sizes, strict=True) if s > 1} or {"data": 1}
        if math.prod(sizes) == 256 and fits(mesh):
            brute.append(mesh)
    assert sorted(map(str, found)) == sorted(map(str, brute))
    assert {"fsdp": 64, "tensor": 4} in found
    assert all(math.prod(m.values()) == 256 for m in found)


def test_microbatch_choices():
    assert microbatch_choices(8, 1) == [1, 2, 4]
    assert microbatch_choices(32, 16) == [16, 32]
    assert microbatch_choices(3, 1) == [1]
    assert microbatch_choices(6, 4) == [3]  # no multiple of 4 divides 6


@pytest.fixture(scope="module")
def small_plan():
    return plan_layouts(SMALL.model_copy(update=dict(shortlist=12, margin=None, confirm=3)))


def test_best_is_the_fastest_it_simulated_and_every_layout_fits(small_plan):
    result = small_plan
    best = result.best()
    assert best.fidelity == "flow"
    assert all(best.step_time_s <= s.step_time_s for s in result.confirmed)
    chip = result.system.chip
    for s in result.ordered():
        plan = s.fitted.step
        check_fits(plan, chip)  # the run's own memory check: raises when it does not fit
        assert peak_stage(plan).total_bytes <= chip.hbm.capacity_bytes
    assert len(result.confirmed) >= 3


def test_fragments_extrapolate_to_the_whole_step(small_plan):
    """The ranking's two-fragment extrapolation against the workload's run of the
    whole 6-layer step at the same fidelity."""
    system = small_plan.system
    sim = Simulator(system, build_topology(system), workload_fields(SMALL))
    extrapolated = [r for r in small_plan.ranked if r.how == "fragments"]
    assert len(extrapolated) >= 3
    # not exact: a layer's time depends a little on the collectives in flight beside
    # it (they share its HBM), so the step is linear in its layers to 3%
    for ranked in extrapolated[:3]:
        whole = sim.run(ranked.fitted, "analytic")
        assert ranked.step_time_s == pytest.approx(whole.step_time_s, rel=3e-2)
        assert ranked.mfu == pytest.approx(whole.mfu, rel=3e-2)


def _brute_force(request):
    """Every layout of a tiny system, built without the planner's generator, run whole
    at the analytic fidelity: the fastest that fits."""
    system = load_system(request.system)
    topology = build_topology(system)
    fits = _fits_topology(topology)
    base, known = builder_base(request)
    sim = Simulator(system, topology, workload_fields(request))
    roles = [r.name for r in active_roles(base)]
    n = system.num_chips
    best = None
    for sizes in itertools.product([d for d in range(1, n + 1) if n % d == 0], repeat=len(roles)):
        mesh = {r: s for r, s in zip(roles, sizes, strict=True) if s > 1} or {"data": 1}
        shards = math.prod(mesh.get(r, 1) for r in ("data", "fsdp"))
        if math.prod(sizes) != n or not fits(mesh) or request.global_batch % shards:
            continue
        per_shard = request.global_batch // shards
        for remat, flags in itertools.product(remat_choices(known), flag_choices(known)):
            for m in microbatch_choices(per_shard, mesh.get("pipeline", 1)):
                try:
                    fitted = assess(Layout(mesh, remat, m, flags), base, system.chip)
                except ProgramError:
                    continue
                if fitted.fits:
                    run = sim.run(fitted, "analytic")
                    if best is None or run.step_time_s < best.step_time_s:
                        best = run
    return best


@pytest.mark.slow  # 25-45 s on 2 cores: keeps the default run under 10 minutes
def test_search_agrees_with_a_brute_force_on_a_tiny_system(tmp_path):
    system = tmp_path / "tiny.yaml"
    system.write_text("name: tiny\nchip: ironwood\ntopology: {kind: torus, dims: [2, 4]}\n")
    request = PlanRequest(
        "llama-3.1-8b",
        str(system),
        8,
        1024,
        overrides={"layers": 4},
        shortlist=1000,
        margin=None,
        confirm=1000,
        confirm_network="analytic",
    )
    brute = _brute_force(request)
    best = plan_layouts(request).best()
    assert brute is not None
    assert best.step_time_s == pytest.approx(brute.step_time_s, rel=1e-9)


def test_cli_json(capsys):
    code = main(
        ["plan", "llama-3.1-8b", "ironwood-256", "--global-batch", "64", "--seq", "2048",
         "--layers", "6", "--top", "2", "--json"]
    )  # fmt: skip
    assert code == 0
    record = json.loads(capsys.readouterr().out)
    for key in ("model", "system", "global_batch", "seq", "candidates_considered"):
        assert key in record
    assert record["fit_in_memory"] <= record["candidates_considered"]
    assert 1 <= len(record["layouts"]) <= 2
    first = record["layouts"][0]
    assert math.prod(first["mesh"].values()) == 256
    assert first["peak_hbm_bytes_per_chip"] <= load_system("ironwood-256").chip.hbm.capacity_bytes
    assert first["fidelity"] == "flow" and first["step_time_s"] > 0 and 0 < first["mfu"] < 1
    assert record["ranked_by"] == "analytic" and record["confirmed_by"] == "flow"


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["nosuch", "ironwood-256", "--global-batch", "64", "--seq", "2048"], 2, "unknown model"),
        (["llama-3.1-8b", "nosuch", "--global-batch", "64", "--seq", "2048"], 2, "unknown system"),
        (["llama-3.1-8b", "ironwood-256", "--global-batch", "64", "--seq", "8", "--top", "0"],
         2, "--top: must be 1 or more"),
        # 7 sequences of 7 tokens: no batch split divides 7 and 256 chips, no context
        # split divides 7 tokens
        (["llama-3.1-8b", "ironwood-256", "--global-batch", "7", "--seq", "7", "--layers", "1"],
         2, "no layout is valid"),
        # 405B x 16 bytes of weights, gradients and Adam state is 6.5 TB; 256 v5e chips
        # hold 4.4 TB
        (["llama-3.1-405b", "v5e-pod", "--global-batch", "256", "--seq", "8192"],
         1, "no layout fits in HBM .*short by"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line(capsys, args, code, message):
    assert main(["plan", *args]) == code
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("tpusim: error: ")
    assert re.search(message, err)


@pytest.mark.slow
def test_405b_on_the_ironwood_pod_is_at_least_as_fast_as_pure_fsdp():
    """The plan's best against pure FSDP (the largest fsdp axis that fits, the rest
    tensor), found and simulated here without the planner's search."""
    request = PlanRequest("llama-3.1-405b", "ironwood-pod", 2304, 8192)
    best = plan_layouts(request).best()
    system = load_system(request.system)
    base, _ = builder_base(request)
    fsdp = None
    for f in sorted((d for d in range(1, 9217) if 9216 % d == 0), reverse=True):
        for remat in remat_choices(builder_base(request)[1]):
            mesh = {"fsdp": f, "tensor": 9216 // f} if f < 9216 else {"fsdp": f}
            try:
                fitted = assess(Layout(mesh, remat, 1), base, system.chip)
            except ProgramError:
                continue
            if fitted.fits:
                fsdp = fitted
                break
        if fsdp is not None:
            break
    assert fsdp is not None
    sim = Simulator(system, build_topology(system), workload_fields(request))
    reference = sim.run(fsdp, "flow")
    print(
        f"plan {best.fitted.layout.label()} MFU {best.mfu:.3f}; pure FSDP MFU {reference.mfu:.3f}"
    )
    assert best.step_time_s <= reference.step_time_s * (1 + 1e-9)


def test_divisors_by_square_root_are_the_scan():
    for n in (1, 2, 12, 36, 97, 9216, 9600):
        assert divisors(n) == [d for d in range(1, n + 1) if n % d == 0]
    assert divisors(1_000_000_007) == [1, 1_000_000_007]


def test_memoised_memory_equals_the_builders_model(small_plan):
    """The search's memoised counts give the builder's own peak on every layout that
    fit and every remat choice (pipelines included)."""
    from tpusim.planner.memory import memo_step

    for fitted in small_plan.memory.fitting:
        plain = peak_stage(fitted.step)
        assert peak_stage(memo_step(fitted.step)) == plain
        assert fitted.peak_hbm_bytes == plain.total_bytes


def test_screen_memo_shared_across_layouts_gives_each_ones_own_screen(small_plan):
    """Memos (layers, embedding and head passes) shared by the layouts equal a fresh
    Screener per layout."""
    from tpusim.hardware import ChipCostModel
    from tpusim.planner.estimate import Network, Screener

    system = load_system(SMALL.system)
    topology = build_topology(system)
    costs, memo, passes = ChipCostModel(system.chip), {}, {}
    for fitted in small_plan.memory.fitting:
        net = Network(
            system.link_bandwidth_Bps, system.hop_latency_s, map_mesh(topology, fitted.step.mesh)
        )
        fresh = Screener(costs, net).screen(fitted.step)
        assert Screener(costs, net, memo, passes).screen(fitted.step) == fresh
        assert small_plan.screens[id(fitted)] == fresh


def test_workers_give_the_numbers_of_the_run_in_order(small_plan):
    """Two worker processes and one: the same layouts, times and order."""
    alone = plan_layouts(
        SMALL.model_copy(update=dict(shortlist=12, margin=None, confirm=3, workers=1))
    )

    def figures(result):
        return [(s.fitted.layout, s.fidelity, s.step_time_s, s.mfu) for s in result.ordered()]

    assert figures(alone) == figures(small_plan)
