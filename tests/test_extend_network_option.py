"""How to extend: a new option of the shipped flow fidelity, added from this file alone,
reaches every simulating command as a flag and as a YAML key.

The option is ``bandwidth_fraction`` (f, 0 < f <= 1): every link carries f of its
bandwidth. The flow backend is registered again with an options model that adds it
(:class:`DeratedFlowOptions`, a subclass of the shipped ``FlowOptions``) and a builder
that records the options each network is built with and derates the links. Nothing in
``tpusim/`` is edited: the flag ``--flow-bandwidth-fraction`` and the key
``network: {fidelity: flow, bandwidth_fraction: ...}`` exist because the options model
declares the field.

The oracle where the figure is a closed form: chip 0 sending ``V`` bytes to chip 4 of an
8-chip ring (4 hops either way, links of ``W`` B/s and ``a`` s per hop, the network
alone) takes ``V / (f W) + 4 a`` at the flow fidelity (one flow, cut-through). Where the
figure is a whole training step or a claims table, the record of the networks built
says the value given reached the network that produced it.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from pydantic import Field

from tpusim.cli import main
from tpusim.network import FLOW, NETWORKS, FlowNetwork, FlowOptions, Network

W, A = 50e9, 2e-6  # the ring's link bandwidth (B/s) and hop latency (s)
RING = """name: ring-8
chip: v5e
topology: {kind: torus, dims: [8], wraparound: true}
ici: {link_bandwidth: 50 GB/s, hop_latency: 2 us}
"""
TINY = "name: tiny\nchip: ironwood\ntopology: {kind: torus, dims: [2, 4]}\n"
FLAG = "--flow-bandwidth-fraction"
HELP = "fraction of its bandwidth every link carries"

#: The bandwidth fraction of every network built while a test runs, in order.
BUILT: list[float] = []


class DeratedFlowOptions(FlowOptions):
    """The flow fidelity's options and ``bandwidth_fraction`` (0 < f <= 1)."""

    bandwidth_fraction: float = Field(1.0, gt=0, le=1, description=HELP)


class DeratedFlowNetwork(FlowNetwork):
    """The shipped flow network with every link at ``fraction`` of its bandwidth."""

    def __init__(self, env, topology, fraction: float, **kwargs):
        self.fraction = fraction
        super().__init__(env, topology, **kwargs)
        self.bandwidth_Bps = self.bandwidth_Bps * fraction

    def _set_bandwidth(self) -> None:
        super()._set_bandwidth()
        self.bandwidth_Bps = self.bandwidth_Bps * self.fraction


def build(env, topology, options, check_capacity) -> Network:
    fraction = getattr(options, "bandwidth_fraction", 1.0)  # settings made before the test
    BUILT.append(fraction)
    kwargs = {} if options.tolerance is None else {"rate_tolerance": options.tolerance}
    return DeratedFlowNetwork(env, topology, fraction, check_capacity=check_capacity, **kwargs)


@pytest.fixture(autouse=True)
def derated_flow():
    """The flow fidelity with the new option, for this test only."""
    NETWORKS.unregister("flow")
    NETWORKS.register("flow", dataclasses.replace(FLOW, build=build, options=DeratedFlowOptions))
    BUILT.clear()
    yield
    NETWORKS.unregister("flow")
    NETWORKS.register("flow", FLOW)


@pytest.fixture
def ring(tmp_path):
    path = tmp_path / "ring-8.yaml"
    path.write_text(RING)
    return str(path)


def permute_s(size_bytes: float, fraction: float) -> float:
    """The closed form of the module docstring."""
    return size_bytes / (fraction * W) + 4 * A


def json_of(capsys, *argv: str) -> dict:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize(
    "command",
    ["collective", "run", "plan", "validate", "calibrate", "claims", "hlo", "faults"],
)
def test_every_simulating_command_offers_the_flag(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"{FLAG} BANDWIDTH_FRACTION flow fidelity: {HELP} (default 1.0)" in text


def test_collective_takes_it_as_a_flag_and_a_yaml_key(ring, capsys):
    argv = ["collective", ring, "--op", "collective-permute", "--pairs", "0:4"]
    argv += ["--bytes", "1MiB", "--algorithm", "direct", "--engine", "none", "--json"]
    record = json_of(capsys, *argv, FLAG, "0.5")
    assert record["time_s"] == pytest.approx(permute_s(2**20, 0.5), rel=1e-9)
    record = json_of(capsys, *argv, "--network", "{fidelity: flow, bandwidth_fraction: 0.25}")
    assert record["time_s"] == pytest.approx(permute_s(2**20, 0.25), rel=1e-9)
    assert BUILT[-1] == 0.25
    # the option belongs to flow: with another fidelity it is refused, naming the owner
    assert main([*argv, "--fidelity", "analytic", FLAG, "0.5"]) == 2
    assert f"{FLAG} only applies to --fidelity flow" in capsys.readouterr().err
    # and a bad value is the model's message, named by the flag, on one line
    assert main([*argv, FLAG, "1.5"]) == 2
    err = capsys.readouterr().err
    assert f"{FLAG} 1.5: Input should be less than or equal to 1" in err
    assert len(err.splitlines()) == 1


def test_run_takes_it_from_the_scenario_and_from_the_flag(ring, tmp_path, capsys):
    """A scenario's ring all-gather (the chip's own collective costs) runs as ``tpusim
    collective`` runs it on the same derated network (checked above in closed form),
    and the fraction given by the scenario's tree or by the flag is the one it ran on."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "name: derated\nnetwork: {fidelity: flow, bandwidth_fraction: 0.5}\n"
        f"systems: [{ring}]\nworkloads:\n  - {{name: g, kind: collective, "
        "op: all-gather, bytes: 64 MiB, algorithm: ring}\n"
    )
    out = tmp_path / "out"
    argv = ["run", str(scenario), "--quiet", "--json", "--jobs", "1", "--out", str(out)]
    alone = ["collective", ring, "--op", "all-gather", "--bytes", "64MiB", "--algorithm"]
    alone += ["ring", "--json"]
    (row,) = json_of(capsys, *argv)["results"]
    assert row["time_s"] == json_of(capsys, *alone, FLAG, "0.5")["time_s"]
    (row,) = json_of(capsys, *argv, "--fidelity", "flow", FLAG, "0.25")["results"]
    assert row["time_s"] == json_of(capsys, *alone, FLAG, "0.25")["time_s"]
    assert row["time_s"] > json_of(capsys, *alone, FLAG, "0.5")["time_s"]
    assert "bandwidth_fraction: 0.25" in (out / "resolved.yaml").read_text()


def test_plan_confirms_on_it(tmp_path, capsys):
    """The search confirms on the flow network the flags give (and ranks at analytic,
    which has no such option: its networks are not recorded here)."""
    system = tmp_path / "tiny.yaml"
    system.write_text(TINY)
    argv = ["plan", "llama-3.1-8b", str(system), "--global-batch", "8", "--seq", "1024"]
    argv += ["--layers", "2", "--workers", "1", "--shortlist", "2", "--json"]
    record = json_of(capsys, *argv, FLAG, "0.5")
    assert record["confirmed_by"] == "flow" and record["ranked_by"] == "analytic"
    assert BUILT and set(BUILT) == {0.5}
    BUILT.clear()
    json_of(capsys, *argv, "--network", "{bandwidth_fraction: 0.25}")
    assert BUILT and set(BUILT) == {0.25}
    BUILT.clear()
    json_of(capsys, *argv, "--rank-fidelity", "flow", FLAG, "0.75")
    assert BUILT and set(BUILT) == {0.75}  # ranked and confirmed on it


def test_validate_workloads_simulates_on_it(tmp_path, capsys):
    import yaml

    from tpusim.config.loader import configs_dir

    shipped = configs_dir() / "measurements" / "workloads" / "maxtext-v4.yaml"
    data = yaml.safe_load(shipped.read_text())
    data["cases"] = data["cases"][:1]  # one case: 64 v4 chips, one step
    cases = tmp_path / "one.yaml"
    cases.write_text(yaml.safe_dump(data))
    argv = ["validate", "--workloads", "--measurements", str(cases), "--json"]
    slow = json_of(capsys, *argv, FLAG, "0.5")["cases"][0]["simulated_s"]
    assert BUILT and set(BUILT) == {0.5}
    BUILT.clear()
    tree = json_of(capsys, *argv, "--network", "{fidelity: flow, bandwidth_fraction: 0.5}")
    assert tree["cases"][0]["simulated_s"] == slow and set(BUILT) == {0.5}
    # halving every link's bandwidth cannot make the step faster
    assert slow >= json_of(capsys, *argv)["cases"][0]["simulated_s"]


def test_claims_simulate_on_it_from_their_file_and_from_the_flag(tmp_path, capsys):
    """A claims file (one ``ici_bandwidth`` claim on the two 256-chip pods) names the
    option in its ``network:``; ``tpusim claims``'s flags replace it."""
    import tpusim.study.claims
    from tpusim.study.claim_specs import load_claims_file

    file = tmp_path / "claims.yaml"
    file.write_text(
        "name: toy\nratio_margin: 0.9\nclaims:\n  - check: ici_bandwidth\n"
        "    claim: two pods\n    source: this test\n"
        "    baseline: v5e-pod\n    subject: v6e-pod\n    claimed_ratio: 1.0\n"
        "    bytes: 1048576\n    network: {fidelity: flow, bandwidth_fraction: 0.5}\n"
        "    verdict: holds\n    figure: '{ratio:.3f}'\n    assumptions: none\n"
    )
    claims = (load_claims_file(file),)
    mp = pytest.MonkeyPatch()
    with mp.context() as patch:
        patch.setattr(tpusim.study.claims, "shipped_claims", lambda: claims)
        (row,) = json_of(capsys, "claims", "--json")["claims"]
        assert row["claim"] == "two pods" and set(BUILT) == {0.5}
        BUILT.clear()
        json_of(capsys, "claims", "--json", "--fidelity", "flow", FLAG, "0.25")
        assert BUILT and set(BUILT) == {0.25}


def test_hlo_replays_on_it(capsys):
    """A data-parallel XLA module (an all-reduce of its gradients) replayed on a v5e pod:
    its communication on the network the flag or the tree gives, never faster on half
    the bandwidth."""
    from pathlib import Path

    module = Path(__file__).parent / "fixtures" / "hlo" / "data_parallel_8.hlo.txt"
    argv = ["hlo", "v5e-pod", str(module), "--json"]
    half = json_of(capsys, *argv, FLAG, "0.5")
    assert BUILT and set(BUILT) == {0.5}
    BUILT.clear()
    tree = json_of(capsys, *argv, "--network", "{bandwidth_fraction: 0.5}")
    assert set(BUILT) == {0.5} and tree["step_time_s"] == half["step_time_s"]
    whole = json_of(capsys, *argv)
    assert half["communication_time_s"] > whole["communication_time_s"] > 0
