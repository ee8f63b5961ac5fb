"""How to extend: a network fidelity added from this file alone, through the registry,
reaches run_collective, the CLI's --fidelity, scenarios and the option checks; its own
option (``per_hop_overhead``, a time with a unit) is read from a scenario's ``network:``
tree and from a command-line flag generated from its options model, help included.

The toy is store-and-forward without contention: a flow crosses its route one hop at
a time, each hop taking the whole message's serialisation ``V / W`` plus the hop
latency ``a`` plus the backend's own option ``per_hop_overhead_s`` (``o``). So a
message over ``h`` hops takes ``h (V / W + a + o)``, where the shipped cut-through
fidelities take ``V / W + h a``: the closed forms below tell the two apart.
Nothing in ``tpusim/`` is edited.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import simpy
from pydantic import Field

from tpusim.cli import main
from tpusim.collectives.offload import OnChipModel
from tpusim.config import load_system
from tpusim.config.types import Time
from tpusim.engine import CollectiveOptions, simulate_collective
from tpusim.network import NETWORKS, BackendOptions, Network, NetworkBackend, NetworkSettings
from tpusim.network.base import FlowBatch
from tpusim.registry import UnknownEntryError
from tpusim.topology import Topology

NAME = "store-forward"
W, A = 50e9, 2e-6  # the system file's link bandwidth (B/s) and hop latency (s)
SYSTEM = """name: ring-8
chip: v5e
topology: {kind: torus, dims: [8], wraparound: true}
ici: {link_bandwidth: 50 GB/s, hop_latency: 2 us}
"""


#: The option's help, as its generated flag shows it.
OVERHEAD_HELP = "time each hop adds to a message, e.g. 1us"


class StoreForwardOptions(BackendOptions):
    """``per_hop_overhead_s``: time each hop adds to a message (s, >= 0), written
    ``per_hop_overhead: 1 us`` in YAML and ``--store-forward-per-hop-overhead 1us``."""

    per_hop_overhead_s: Time = Field(0.0, alias="per_hop_overhead", description=OVERHEAD_HELP)


class StoreForwardNetwork(Network):
    """Every flow alone on its route, hop after hop; a batch ends with its slowest flow."""

    fidelity = NAME

    def __init__(self, env: simpy.Environment, topology: Topology, overhead_s: float):
        super().__init__(env, topology)
        self.overhead_s = overhead_s

    def _send(self, batch: FlowBatch) -> simpy.Event:
        self.num_events += 1
        per_byte_s = 1.0 / self.bandwidth_Bps[batch.links]
        entry_bytes = np.repeat(batch.bytes, batch.hops)
        entry_s = entry_bytes * per_byte_s + self.latency_s[batch.links] + self.overhead_s
        flow_of_entry = np.repeat(np.arange(len(batch)), batch.hops)
        flow_s = np.bincount(flow_of_entry, weights=entry_s, minlength=len(batch))
        return self.env.timeout(float(flow_s.max(initial=0.0)))


def build(env, topology, options, check_capacity) -> Network:
    assert isinstance(options, StoreForwardOptions)
    return StoreForwardNetwork(env, topology, options.per_hop_overhead_s)


BACKEND = NetworkBackend(build, StoreForwardOptions, description="store-and-forward toy")


@pytest.fixture(autouse=True)
def registered():
    NETWORKS.register(NAME, BACKEND)
    yield
    NETWORKS.unregister(NAME)


@pytest.fixture
def system_file(tmp_path):
    path = tmp_path / "ring-8.yaml"
    path.write_text(SYSTEM)
    return path


def permute(system_file, settings: NetworkSettings, size: float) -> float:
    """Seconds for chip 0 to send ``size`` bytes to chip 4 (4 hops either way round)."""
    options = CollectiveOptions(pairs=[(0, 4)], algorithm="direct", network=settings)
    system = load_system(str(system_file))
    result, network = simulate_collective(
        system, "collective-permute", size, options, onchip=OnChipModel.none()
    )
    assert network.fidelity == settings.fidelity and result.fidelity == settings.fidelity
    return result.time_s


@pytest.mark.parametrize("overhead_s", [0.0, 1e-6])
def test_store_and_forward_meets_its_closed_form_where_cut_through_does_not(
    system_file, overhead_s
):
    """4 (V/W + a + o) for the toy; V/W + 4a for the shipped analytic fidelity."""
    size = 4 * 2**20
    settings = NetworkSettings.of(NAME, per_hop_overhead_s=overhead_s)
    assert settings.option("per_hop_overhead_s") == overhead_s
    toy_s = permute(system_file, settings, size)
    assert toy_s == pytest.approx(4 * (size / W + A + overhead_s), rel=1e-9)
    analytic_s = permute(system_file, NetworkSettings.of("analytic"), size)
    assert analytic_s == pytest.approx(size / W + 4 * A, rel=1e-9)


def test_ring_all_gather_is_one_hop_a_step(system_file):
    """Ring all-gather: n - 1 steps of one hop each, (n - 1)(V/(nW) + a + o)."""
    size, n, o = 8 * 2**20, 8, 3e-6
    options = CollectiveOptions(
        algorithm="ring", network=NetworkSettings.of(NAME, per_hop_overhead_s=o)
    )
    result, _ = simulate_collective(
        load_system(str(system_file)), "all-gather", size, options, onchip=OnChipModel.none()
    )
    assert result.time_s == pytest.approx((n - 1) * (size / n / W + A + o), rel=1e-9)


def test_each_backend_owns_its_options():
    with pytest.raises(ValueError, match="store-forward fidelity has no option 'tolerance'"):
        NetworkSettings.of(NAME, tolerance=0.01)
    with pytest.raises(ValueError, match="flow fidelity has no option 'per_hop_overhead_s'"):
        NetworkSettings.of("flow", per_hop_overhead_s=1e-6)
    with pytest.raises(ValueError, match="per_hop_overhead_s"):
        NetworkSettings.of(NAME, per_hop_overhead_s=-1.0)
    with pytest.raises(ValueError, match="takes FlowOptions, not StoreForwardOptions"):
        NetworkSettings("flow", StoreForwardOptions())


def test_the_cli_offers_it_and_records_it(system_file, capsys):
    argv = ["collective", str(system_file), "--op", "collective-permute", "--pairs", "0:4"]
    argv += ["--bytes", "1MiB", "--algorithm", "direct", "--engine", "none"]
    assert main([*argv, "--fidelity", NAME, "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["fidelity"] == NAME
    assert record["time_s"] == pytest.approx(4 * (2**20 / W + A), rel=1e-9)
    # an option flag the toy does not own is refused, naming who owns it
    assert main([*argv, "--fidelity", NAME, "--flow-tolerance", "0.1"]) == 2
    assert "--flow-tolerance only applies to --fidelity flow" in capsys.readouterr().err


def test_a_scenario_runs_at_it(system_file, tmp_path):
    from tpusim.study.options import ScenarioRunOptions
    from tpusim.study.runner import run_scenario
    from tpusim.study.scenario import Scenario

    path = tmp_path / "toy.yaml"
    workload = "  - {name: g, kind: collective, op: all-to-all, bytes: 8 MiB, algorithm: direct}\n"
    path.write_text(
        f"name: toy\nnetwork: {{fidelity: {NAME}}}\nsystems: [{system_file}]\n"
        f"workloads:\n{workload}"
    )
    run = run_scenario(Scenario(path), ScenarioRunOptions(quiet=True, jobs=1))
    (row,) = run.rows
    assert row["fidelity"] == NAME
    # the same collective through the Python API, with the chip's on-chip costs
    system = load_system(str(system_file))
    for fidelity in (NAME, "analytic"):
        settings = NetworkSettings.of(fidelity)
        options = CollectiveOptions(algorithm="direct", network=settings)
        direct, _ = simulate_collective(system, "all-to-all", 8 * 2**20, options)
        assert (row["time_s"] == pytest.approx(direct.time_s, rel=1e-12)) == (fidelity == NAME)
    # a tolerance belongs to the flow fidelity: a scenario giving it to the toy is refused
    path.write_text(path.read_text().replace(f"{NAME}}}", f"{NAME}, tolerance: 0.1}}"))
    with pytest.raises(
        Exception,
        match=r"toy.yaml:2 network\.tolerance: the store-forward "
        r"fidelity has no option 'tolerance' \(its options: per_hop_overhead\)",
    ):
        Scenario(path)


def test_its_option_is_set_from_a_scenario_tree(system_file, tmp_path):
    """``network: {fidelity: store-forward, per_hop_overhead: 1 us}``: a direct all-to-all
    on the 8-ring ends with its farthest flows (4 hops), so the overhead adds 4 o to the
    time it takes without one (the on-chip work is the same)."""
    from tpusim.study.options import ScenarioRunOptions
    from tpusim.study.runner import run_scenario
    from tpusim.study.scenario import Scenario, ScenarioSpec

    def time_s(overhead: str) -> tuple[float, ScenarioSpec]:
        path = tmp_path / "toy.yaml"
        path.write_text(
            f"name: toy\nnetwork: {{fidelity: {NAME}, per_hop_overhead: {overhead}}}\n"
            f"systems: [{system_file}]\nworkloads:\n  - {{name: g, kind: collective, "
            "op: all-to-all, bytes: 8 MiB, algorithm: direct}\n"
        )
        scenario = Scenario(path)
        (row,) = run_scenario(scenario, ScenarioRunOptions(quiet=True, jobs=1)).rows
        return row["time_s"], scenario.spec

    with_s, spec = time_s("1 us")
    assert spec.network.option("per_hop_overhead_s") == 1e-6
    tree = spec.model_dump(mode="json")["network"]
    assert tree == {"fidelity": NAME, "per_hop_overhead": 1e-6}
    assert with_s - time_s("0 s")[0] == pytest.approx(4 * 1e-6, rel=1e-9)


def test_its_option_is_a_generated_flag(system_file, capsys):
    """``--store-forward-per-hop-overhead`` exists because the toy registered, takes a
    time with a unit, shows the field's description as its help, and is refused with
    another fidelity."""
    argv = ["collective", str(system_file), "--op", "collective-permute", "--pairs", "0:4"]
    argv += ["--bytes", "1MiB", "--algorithm", "direct", "--engine", "none", "--json"]
    flag = "--store-forward-per-hop-overhead"
    assert main([*argv, "--fidelity", NAME, flag, "2us"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["time_s"] == pytest.approx(4 * (2**20 / W + A + 2e-6), rel=1e-9)
    with pytest.raises(SystemExit):
        main(["collective", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"{flag} PER_HOP_OVERHEAD store-forward fidelity: {OVERHEAD_HELP}" in help_text
    assert main([*argv, flag, "2us"]) == 2  # the default fidelity is flow
    assert f"{flag} only applies to --fidelity {NAME}" in capsys.readouterr().err
    assert main([*argv, "--fidelity", NAME, flag, "2 parsec"]) == 2
    err = capsys.readouterr().err
    assert f"{flag} 2 parsec:" in err and len(err.splitlines()) == 1


def test_unknown_fidelities_name_the_registered_ones():
    with pytest.raises(UnknownEntryError, match=f"choose from analytic, flow, packet, {NAME}"):
        NetworkSettings.of("fluid")
