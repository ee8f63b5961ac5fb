"""Issue 23: faults answered as a runtime would: ``auto`` re-plans on the surviving
links, a group that no longer connects is an error naming its chips (never a faster
result), the Monte Carlo counts disconnected trials.

Oracles: a BFS by hand over the surviving ring links (which chips are cut off), and the
same collective forced to each algorithm on the same failed links (the re-planned
choice is within 2% of the fastest of them).
"""

from __future__ import annotations

import json

import pytest

from tpusim.cli import main
from tpusim.collectives import ALGORITHMS, AlgorithmError
from tpusim.config.faults import FaultSet, FaultSpec
from tpusim.engine import CollectiveOptions, run_collective
from tpusim.errors import SimulationError
from tpusim.study.fault_trials import monte_carlo
from tpusim.topology.torus import Torus

W, V = 100e9, 16 * 2**20


def torus4x4() -> Torus:
    return Torus((4, 4), (True, True), link_bandwidth_Bps=W, hop_latency_s=1e-6)


def down(a: int, b: int) -> FaultSpec:
    return FaultSpec(kind="link_down", link=(a, b))


def test_every_link_down_is_an_error_not_a_faster_collective():
    topo = torus4x4()
    every = FaultSet(fail_links=topo.num_links)
    with pytest.raises(SimulationError, match=r"cut chips .* off from the rest of their group"):
        run_collective(topo, "all-reduce", V, CollectiveOptions(faults=every))


def test_an_isolated_chip_is_named():
    """Chip 5 of a 4x4 torus (neighbours 1, 4, 6, 9) with its four links down: a BFS
    from chip 0 over the surviving links reaches every chip but 5."""
    topo = torus4x4()
    plan = FaultSet(faults=[down(5, 1), down(5, 4), down(5, 6), down(5, 9)])
    with pytest.raises(SimulationError, match=r"cut chips 5 off"):
        run_collective(topo, "all-gather", V, CollectiveOptions(faults=plan))


def test_the_cli_exits_1_with_one_line_when_every_link_is_down(capsys):
    code = main(["collective", "v5e-pod", "--op", "all-reduce", "--bytes", "1MiB",
                 "--fail-links", "512", "--fidelity", "analytic"])  # fmt: skip
    _, err = capsys.readouterr()
    assert code == 1
    assert len(err.strip().splitlines()) == 1 and "cut chips" in err


def test_auto_replans_on_the_surviving_links_and_names_it():
    """One dead link on a 4x4 torus: auto's choice, re-planned with the link down, is
    within 2% of the fastest algorithm forced on the same failed link, and the report
    names the algorithm re-planned and the healthy one."""
    topo = torus4x4()
    plan = FaultSet(faults=[down(0, 1)])
    auto, net = run_collective(topo, "all-reduce", V, CollectiveOptions(faults=plan))
    forced = {}
    for name in ALGORITHMS.names():
        try:
            res, _ = run_collective(
                topo, "all-reduce", V, CollectiveOptions(algorithm=name, faults=plan)
            )
        except AlgorithmError:
            continue
        forced[name] = res.time_s
    assert auto.time_s <= 1.02 * min(forced.values()), (auto.algorithm, forced)
    healthy, _ = run_collective(topo, "all-reduce", V)
    replanned = net.fault_report["replanned"]
    assert replanned == {"algorithm": auto.algorithm, "healthy_algorithm": healthy.algorithm}
    assert any("re-planned" in note for note in net.fault_report["adapted"])


def test_collective_json_names_the_replanned_algorithm(capsys):
    code = main(["collective", "v5e-pod", "--op", "all-gather", "--bytes", "16MiB",
                 "--fail-links", "1", "--json", "--fidelity", "analytic"])  # fmt: skip
    out, _ = capsys.readouterr()
    assert code == 0
    rec = json.loads(out)
    assert rec["replanned"]["algorithm"] == rec["algorithm"]


def test_monte_carlo_counts_disconnected_trials_and_replans():
    """v5e-pod (16x16 torus, 512 links): one random link down leaves every chip
    connected, so every trial is timed, re-planned, and no faster than healthy; all
    512 down isolates every chip, so every trial is disconnected and none is timed."""
    rec = monte_carlo("v5e-pod", "all-gather", 2**20, [0, 1, 512], trials=3, seed=2).record()
    rows = {r["failed_links"]: r for r in rec["counts"]}
    assert rows[1]["disconnected"] == 0 and rows[1]["p10_s"] >= rows[0]["p50_s"] * (1 - 1e-9)
    assert rows[1]["algorithms"]
    assert rows[512]["disconnected"] == 3 and rows[512]["p50_s"] is None
