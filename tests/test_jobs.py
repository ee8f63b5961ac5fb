"""``kind: jobs`` (issue 12, item 6): several jobs on one network.

Oracles: a job on a slice of a larger torus, alone or beside jobs on disjoint links,
takes the time of the same work on a standalone mesh of the slice's shape (a slice
axis shorter than the torus's is a line); two identical collectives whose flows are
forced through the same links share them max-min fairly, each getting half of a
shared link: the bandwidth term doubles (closed form below), the latency terms stay.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_one_error_line, run
from hypothesis import given, settings
from hypothesis import strategies as st

from tpusim.config.loader import load_chip, load_system
from tpusim.engine import CollectiveOptions, Simulation, run_collective
from tpusim.engine.multijob import Job, chips_group, run_jobs
from tpusim.network.routes import RouteCache
from tpusim.program.ir import Op, Program
from tpusim.topology import build_topology
from tpusim.workloads import record_from_row

MiB = 2**20


def _system(tmp_path: Path, name: str, dims: list[int], wrap: bool) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        f"name: {name}\nchip: ironwood\n"
        f"topology: {{kind: torus, dims: {dims}, wraparound: {str(wrap).lower()}}}\n"
    )
    return str(path)


def _scenario(tmp_path: Path, system: str, jobs: str) -> str:
    path = tmp_path / "jobs.yaml"
    path.write_text(
        f"name: jobs\nsystems: [{system}]\nworkloads:\n  - name: shared\n    kind: jobs\n"
        f"    jobs:\n{jobs}"
    )
    return str(path)


def _row(capsys, tmp_path, scenario):
    code, out, err = run(capsys, "run", scenario, "--json", "--out", str(tmp_path / "out"))
    assert code == 0, err
    return json.loads(out)["results"][0]


AR_JOBS = (
    "      - {name: a, slice: 4x4x4, offset: [0, 0, 0],"
    " collective: {op: all-reduce, bytes: 64 MiB}}\n"
    "      - {name: b, slice: 4x4x4, offset: [4, 0, 0],"
    " collective: {op: all-reduce, bytes: 64 MiB}}\n"
)


def test_jobs_on_disjoint_links_take_their_alone_times(tmp_path, capsys):
    row = _row(capsys, tmp_path, _scenario(tmp_path, "torus-8x8x16", AR_JOBS))
    assert row["num_jobs"] == 2 and row["job_chips"] == 128
    assert row["num_shared_links"] == 0
    for job in row["jobs"]:
        assert job["time_s"] == pytest.approx(job["alone_time_s"], rel=1e-3)
        assert job["slowdown"] == pytest.approx(1.0, rel=1e-3)
    # the oracle: the same all-reduce on a standalone 4x4x4 mesh of Ironwood chips
    mesh = load_system(_system(tmp_path, "mesh4", [4, 4, 4], wrap=False))
    alone, _ = run_collective(
        build_topology(mesh), "all-reduce", 64 * MiB, chip=mesh.chip, system_name="mesh4"
    )
    assert row["jobs"][0]["alone_time_s"] == pytest.approx(alone.time_s, rel=1e-3)


def test_two_collectives_forced_through_the_same_links_share_them_fairly(tmp_path, capsys):
    """On an 8-ring, job a (chips 0, 2) and job b (chips 1, 3) each all-gather over a
    2-chip ring: 0 <-> 2 crosses 1, 1 <-> 3 crosses 2, so links 1->2 and 2->1 carry one
    flow of each job. Max-min fair: each flow gets W/2 there, so the transfer of V/2
    bytes takes V/W instead of V/(2W): together - alone = (V/2) / W_eff exactly,
    W_eff the link bandwidth times the chip's link efficiency."""
    size = 64 * MiB
    jobs = "".join(
        f"      - {{name: {name}, chips: {chips},"
        f" collective: {{op: all-gather, bytes: {size}, algorithm: ring}}}}\n"
        for name, chips in (("a", [0, 2]), ("b", [1, 3]))
    )
    system = _system(tmp_path, "ring8", [8], wrap=True)
    row = _row(capsys, tmp_path, _scenario(tmp_path, system, jobs))
    chip = load_chip("ironwood")
    w_eff = chip.ici.link_bandwidth_Bps * chip.collectives.link_efficiency
    assert row["num_shared_links"] == 2
    for job in row["jobs"]:
        extra = job["time_s"] - job["alone_time_s"]
        assert extra == pytest.approx(size / 2 / w_eff, rel=0.01)
        assert job["slowdown"] == pytest.approx(
            (job["alone_time_s"] + size / 2 / w_eff) / job["alone_time_s"], rel=0.01
        )
    assert row["max_slowdown"] > 1.8  # the bandwidth term dominates at 64 MiB


def test_program_job_on_a_slice_runs_as_on_its_own_mesh(tmp_path, capsys):
    """A program with a mesh, a matmul and an all-reduce over one mesh axis, on a
    4x4x4 slice beside another job, against the same program on a standalone 4x4x4
    mesh (Simulation of the whole system)."""
    jobs = (
        "      - name: train\n        slice: [4, 4, 4]\n        offset: [4, 4, 8]\n"
        "        program:\n          mesh: {data: 4, model: 16}\n          ops:\n"
        "            - {name: fwd, kind: matmul, m: 8192, n: 8192, k: 8192}\n"
        "            - {name: grads, kind: collective, collective: all-reduce,"
        " bytes: 128 MiB, axes: [data], after: [fwd]}\n"
        "      - {name: other, slice: 4x4x4, collective: {op: all-gather, bytes: 16 MiB}}\n"
    )
    row = _row(capsys, tmp_path, _scenario(tmp_path, "torus-8x8x16", jobs))
    mesh = load_system(_system(tmp_path, "mesh4", [4, 4, 4], wrap=False))
    ops = (
        Op("fwd", "matmul", m=8192, n=8192, k=8192),
        Op(
            "grads",
            "collective",
            ("fwd",),
            collective="all-reduce",
            size_bytes=128 * MiB,
            axes=("data",),
        ),
    )
    alone = Simulation(mesh, Program("train", ops, {"data": 4, "model": 16})).run()
    train = row["jobs"][0]
    assert train["time_s"] == pytest.approx(alone.step_time_s, rel=1e-3)
    assert train["alone_time_s"] == pytest.approx(alone.step_time_s, rel=1e-3)


def test_row_reads_back_from_summary_csv_and_the_heatmap_is_written(tmp_path, capsys):
    row = _row(capsys, tmp_path, _scenario(tmp_path, "torus-8x8x16", AR_JOBS))
    with open(tmp_path / "out" / "summary.csv") as f:
        csv_row = next(csv.DictReader(f))
    record = record_from_row(csv_row)
    assert record is not None and record.jobs[0]["name"] == "a"
    assert record.jobs[1]["slowdown"] == pytest.approx(row["jobs"][1]["slowdown"])
    png = tmp_path / "out" / "jobs-torus-8x8x16-shared.png"
    assert png.is_file() and png.stat().st_size > 10_000


@pytest.mark.parametrize(
    "jobs, words",
    [
        (
            "      - {name: a, slice: 4x4x4, collective: {op: all-reduce, bytes: 1 MiB}}\n"
            "      - {name: b, slice: 2x2x2, offset: [3, 3, 3],"
            " collective: {op: all-reduce, bytes: 1 MiB}}\n",
            ["jobs[1]", "job 'b' shares chip", "x=3, y=3, z=3", "job 'a'"],
        ),
        (
            "      - {name: a, slice: 4x4x4, offset: [6, 0, 0],"
            " collective: {op: all-reduce, bytes: 1 MiB}}\n",
            ["jobs[0]", "does not fit", "axis x has 8 chips", "6..9"],
        ),
        (
            "      - {name: a, chips: [0, 1024], collective: {op: all-reduce, bytes: 1 MiB}}\n",
            ["jobs[0]", "chip 1024 is not a chip of the system"],
        ),
        (
            "      - {name: a, slice: 4x4, collective: {op: all-reduce, bytes: 1 MiB}}\n",
            ["jobs[0]", "one size and one offset per axis"],
        ),
        (
            "      - {name: a, chips: [0, 1], slice: 2x1x1,"
            " collective: {op: all-reduce, bytes: 1 MiB}}\n",
            ["jobs[0]", "either 'slice'"],
        ),
    ],
)
def test_bad_jobs_are_one_line_naming_the_entry(tmp_path, capsys, jobs, words):
    scenario = _scenario(tmp_path, "torus-8x8x16", jobs)
    code, out, err = run(capsys, "run", scenario, "--quiet", "--out", str(tmp_path / "out"))
    line = assert_one_error_line(code, out, err)
    for word in words:
        assert word in line, line


def test_collective_over_one_axis_of_a_slice_runs_one_ring_per_line(tmp_path, capsys):
    """``axes: [z]`` of a 4x4x4 slice: 16 lines of 4 chips at once, as on a standalone
    4x4x4 mesh with ``--axes z``."""
    jobs = (
        "      - {name: a, slice: 4x4x4, offset: [2, 2, 6],"
        " collective: {op: reduce-scatter, bytes: 32 MiB, axes: [z]}}\n"
    )
    row = _row(capsys, tmp_path, _scenario(tmp_path, "torus-8x8x16", jobs))
    mesh = load_system(_system(tmp_path, "mesh4", [4, 4, 4], wrap=False))
    alone, _ = run_collective(
        build_topology(mesh),
        "reduce-scatter",
        32 * MiB,
        CollectiveOptions(axes=["z"]),
        chip=mesh.chip,
    )
    assert alone.num_groups == 16
    assert row["jobs"][0]["time_s"] == pytest.approx(alone.time_s, rel=1e-3)


OPS = ["all-gather", "reduce-scatter", "all-reduce", "all-to-all"]


@settings(max_examples=12, deadline=None)
@given(
    order=st.permutations(range(256)),
    sizes=st.lists(st.integers(2, 8), min_size=2, max_size=4),
    ops=st.lists(st.sampled_from(OPS), min_size=4, max_size=4),
    kib=st.lists(st.integers(1, 4096), min_size=4, max_size=4),
)
def test_random_jobs_conserve_bytes_and_repeat_exactly(order, sizes, ops, kib):
    """Random disjoint chip sets on ironwood-256, each running a collective: the bytes
    every job put on each link add up to the shared network's, each job puts the same
    bytes on the same links as alone (routes do not depend on load), and a second run
    gives the same times."""
    system = load_system("ironwood-256")
    topology = build_topology(system)
    routes = RouteCache(topology)
    jobs, start = [], 0
    for i, size in enumerate(sizes):
        chips = list(order[start : start + size])
        start += size
        work = Op(ops[i], "collective", collective=ops[i], size_bytes=kib[i] * 1024.0)
        jobs.append(Job(f"j{i}", chips_group(topology, chips, None), Program(f"j{i}", (work,))))
    together = run_jobs(system, topology, routes, jobs)
    network_bytes = together.results[0].link_bytes
    assert sum(together.link_bytes.values()) == pytest.approx(network_bytes, rel=1e-9, abs=1e-3)
    for job in jobs:
        alone = run_jobs(system, topology, routes, [job])
        assert np.array_equal(alone.link_bytes[job.name] > 0, together.link_bytes[job.name] > 0)
        assert alone.link_bytes[job.name] == pytest.approx(together.link_bytes[job.name])
    assert run_jobs(system, topology, routes, jobs).times_s == together.times_s
