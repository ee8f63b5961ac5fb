"""Why flow and analytic fidelities differ on an FSDP step (issue 33): contention.

The Llama-3.1-8B FSDP step on ironwood-256 takes 79.5 ms at analytic fidelity and
97.6 ms at flow (docs/network.md). In the backward pass the next layer's weight
all-gather and this layer's gradient reduce-scatter run at the same time over the same
FSDP rings. The analytic fidelity times every collective alone, at the full link
bandwidth; the flow fidelity shares each link max-min fairly between the flows on it.
The flow answer is the right one; the analytic is optimistic wherever collectives
overlap on links.

Closed form on a 4-chip ring (50 GB/s links at the chip's link efficiency ``e``): a
ring all-reduce of ``B`` bytes is 2(n - 1) = 6 steps, each moving ``B / 4`` over every
link. Two of them at once put two flows on every link, each at half the bandwidth, so
each takes what one ring of ``2B`` takes: ``6 (B / 4) / (W e)`` longer than one alone.
The same for an all-gather beside a reduce-scatter (3 steps each), the FSDP pair.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tpusim.collectives.offload import OnChipModel
from tpusim.config import load_system
from tpusim.engine import Simulation
from tpusim.engine.settings import RunSettings
from tpusim.network import NetworkSettings
from tpusim.program.ir import Op, Program

RING4 = Path(__file__).parent / "corpus" / "round3" / "ring4.yaml"
W = 50e9  # ring4.yaml: v5e links, bytes/s per direction
B = 64 * 2**20
N = 4


@pytest.fixture(scope="module")
def system():
    return load_system(str(RING4))


def step_s(system, fidelity: str, ops: list[tuple[str, float]]) -> float:
    """Step time (s) of concurrent ring collectives ``(op, bytes)`` over all 4 chips."""
    program = Program(
        "concurrent",
        tuple(
            Op(
                f"c{i}",
                "collective",
                collective=op,
                size_bytes=size,
                algorithm="ring",
                overlap=True,
            )
            for i, (op, size) in enumerate(ops)
        ),
    )
    settings = RunSettings(network=NetworkSettings(fidelity=fidelity))
    return Simulation(system, program, settings).run().step_time_s


def test_link_bandwidth_and_efficiency_are_what_the_closed_form_assumes(system):
    assert system.chip.ici.link_bandwidth_Bps == W
    assert OnChipModel.for_chip(system.chip).link_efficiency == 0.9


@pytest.mark.parametrize(
    ("pair", "steps"),
    [(("all-reduce", "all-reduce"), 2 * (N - 1)), (("all-gather", "reduce-scatter"), N - 1)],
)
def test_two_rings_on_the_same_links_each_run_at_half_bandwidth(system, pair, steps):
    bw_Bps = W * OnChipModel.for_chip(system.chip).link_efficiency
    size = {"all-reduce": B, "all-gather": B, "reduce-scatter": B}
    alone = step_s(system, "flow", [(pair[0], size[pair[0]])])
    both = step_s(system, "flow", [(op, size[op]) for op in pair])
    assert both - alone == pytest.approx(steps * (B / N) / bw_Bps, rel=1e-9)
    assert both == pytest.approx(step_s(system, "flow", [(pair[0], 2 * B)]), rel=1e-9)


def test_the_analytic_fidelity_times_each_collective_alone(system):
    """The optimistic side: at analytic fidelity two rings on the same links take what
    one takes."""
    alone = step_s(system, "analytic", [("all-reduce", B)])
    both = step_s(system, "analytic", [("all-reduce", B), ("all-reduce", B)])
    assert both == alone
    assert step_s(system, "flow", [("all-reduce", B)]) == pytest.approx(alone, rel=1e-12)
