"""``auto``'s algorithm choice kept across simulations on one topology
(:mod:`tpusim.engine.choices`): a second simulation of the same collective does not
predict the candidates again and gets the same numbers as one on a fresh topology."""

from __future__ import annotations

from pathlib import Path

import pytest

import tpusim.collectives as collectives
from tpusim.config import load_system
from tpusim.engine import Simulation
from tpusim.engine.settings import RunSettings
from tpusim.network import NetworkSettings
from tpusim.program.ir import Op, Program
from tpusim.topology import build_topology

RING4 = Path(__file__).parent / "corpus" / "round3" / "ring4.yaml"


@pytest.fixture
def chosen(monkeypatch):
    """Counts the calls of ``auto``'s choice."""
    calls: list[str] = []
    real = collectives.choose

    def counting(op, *args, **kwargs):
        calls.append(op)
        return real(op, *args, **kwargs)

    monkeypatch.setattr(collectives, "choose", counting)
    return calls


def _program(size_bytes: float) -> Program:
    ops = tuple(
        Op(f"c{i}", "collective", collective=op, size_bytes=size_bytes, algorithm="auto")
        for i, op in enumerate(("all-reduce", "all-gather"))
    )
    return Program("auto", ops)


def _run(system, topology, fidelity: str = "flow", size_bytes: float = 2**20):
    settings = RunSettings(network=NetworkSettings(fidelity=fidelity))
    sim = Simulation(system, _program(size_bytes), settings, topology=topology)
    return sim.run().step_time_s, sim


def test_a_second_simulation_reuses_the_choice_with_the_same_numbers(chosen):
    system = load_system(str(RING4))
    shared = build_topology(system)
    first_s, first = _run(system, shared)
    assert len(chosen) == 2  # one choice per distinct collective
    again_s, again = _run(system, shared)
    assert len(chosen) == 2  # none predicted again
    fresh_s, _ = _run(system, build_topology(system))  # a new topology: a new choice
    assert len(chosen) == 4
    assert again_s == first_s == fresh_s
    algorithms = [s.algorithm for s in first._schedules.values()]
    assert [s.algorithm for s in again._schedules.values()] == algorithms


def test_another_fidelity_or_size_is_chosen_again(chosen):
    system = load_system(str(RING4))
    shared = build_topology(system)
    _run(system, shared)
    _run(system, shared, fidelity="analytic")
    _run(system, shared, size_bytes=2**10)
    assert len(chosen) == 6


def test_a_named_algorithm_is_not_kept():
    from tpusim.engine.choices import choice_key

    system = load_system(str(RING4))
    op = Op("c", "collective", collective="all-reduce", size_bytes=1.0, algorithm="ring")
    _, sim = _run(system, build_topology(system))
    group = next(iter(sim._schedules.values())).group
    assert choice_key(op, group, sim.settings, sim.onchip) is None
