"""How to extend: a collective algorithm added from this file alone, through the
registry, reaches run_collective, the CLI's --algorithm and YAML programs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tpusim.cli import main
from tpusim.collectives import ALGORITHMS, AlgorithmError, CollectiveAlgorithm
from tpusim.collectives.base import Group, Op, Step
from tpusim.collectives.offload import OnChipModel
from tpusim.config import load_system
from tpusim.engine import CollectiveOptions, simulate_collective
from tpusim.network import NetworkSettings
from tpusim.program.yaml_program import OpSpec

SYSTEM = """name: ring-8
chip: v5e
topology: {kind: torus, dims: [8], wraparound: true}
ici: {link_bandwidth: 50 GB/s, hop_latency: 2 us}
"""


def one_way_gather(op: Op, size: float, group: Group) -> list[list[Step]]:
    """All-gather as n - 1 steps in which every chip passes one shard to its successor."""
    if op != "all-gather":
        raise AlgorithmError(f"one-way-gather does not implement {op}")
    chips = group.flat
    n = chips.shape[1]
    nxt = np.roll(chips, -1, axis=1)
    return [[Step.of(chips, nxt, size / n) for _ in range(n - 1)]]


ALGORITHMS.register("one-way-gather", CollectiveAlgorithm(one_way_gather))


@pytest.fixture
def system_file(tmp_path):
    path = tmp_path / "ring-8.yaml"
    path.write_text(SYSTEM)
    return path


@pytest.mark.parametrize("fidelity", ["analytic", "flow", "packet"])
def test_toy_algorithm_matches_its_closed_form(system_file, fidelity):
    """(n - 1)(a + V / (n W)) on an uncontended ring (formulas.md 2.2), network only."""
    size, n, a, w = 8 * 2**20, 8, 2e-6, 50e9
    result, _ = simulate_collective(
        load_system(str(system_file)),
        "all-gather",
        size,
        CollectiveOptions(algorithm="one-way-gather", network=NetworkSettings.of(fidelity)),
        onchip=OnChipModel.none(),
    )
    assert result.algorithm == "one-way-gather"
    assert result.num_steps == n - 1
    assert result.time_s == pytest.approx((n - 1) * (a + size / n / w), rel=0.01)


def test_toy_algorithm_from_the_cli_and_yaml(system_file, capsys):
    argv = ["collective", str(system_file), "--op", "all-gather", "--bytes", "1MiB"]
    assert main([*argv, "--algorithm", "one-way-gather", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["algorithm"] == "one-way-gather"
    assert (
        main(
            [
                "collective",
                str(system_file),
                "--op",
                "all-reduce",
                "--bytes",
                "1MiB",
                "--algorithm",
                "one-way-gather",
            ]
        )
        == 2
    )
    assert "does not implement all-reduce" in capsys.readouterr().err
    spec = OpSpec(
        name="g", kind="collective", collective="all-gather", bytes=1024, algorithm="one-way-gather"
    )
    assert spec.to_op().algorithm == "one-way-gather"
    with pytest.raises(ValueError, match="unknown algorithm 'nope'"):
        OpSpec(name="g", kind="collective", collective="all-gather", bytes=1024, algorithm="nope")


def test_a_taken_name_is_refused():
    with pytest.raises(ValueError, match="already registered"):
        ALGORITHMS.register("ring", CollectiveAlgorithm(one_way_gather))


def shift_by_one(
    op: Op, size: float, group: Group, pairs: list[tuple[int, int]] | None = None
) -> list[list[Step]]:
    """Collective-permute only: the pairs given, else every chip to its successor."""
    if op != "collective-permute":
        raise AlgorithmError(f"shift-by-one does not implement {op}")
    chips = group.flat
    if pairs:
        src, dst = (list(side) for side in zip(*pairs, strict=True))
        return [[Step.of(chips[:, src], chips[:, dst], size)]]
    return [[Step.of(chips, np.roll(chips, -1, axis=1), size)]]


def test_what_an_algorithm_may_run_is_what_its_entry_declares(system_file):
    """Only entries whose cost class declares collective-permute run it, and the error
    for another names them: a rule asked of the entries, not a list of names."""
    from tpusim.collectives import build_schedule, make_group
    from tpusim.collectives.costs import CostClass
    from tpusim.topology import build_topology

    group = make_group(build_topology(load_system(str(system_file))))
    entry = CollectiveAlgorithm(shift_by_one, CostClass(ops=frozenset({"collective-permute"})))
    ALGORITHMS.register("shift-by-one", entry)
    try:
        schedule = build_schedule("collective-permute", 1024, group, "shift-by-one", [(0, 3)])
        (step,) = schedule.pipelines[0]
        assert step.src.tolist() == [0] and step.dst.tolist() == [3]
        with pytest.raises(AlgorithmError, match="use the direct or shift-by-one algorithm"):
            build_schedule("collective-permute", 1024, group, "ring", [(0, 3)])
    finally:
        ALGORITHMS.unregister("shift-by-one")
    assert "shift-by-one" not in ALGORITHMS.names()
