"""One options tree for the network: ``network: {fidelity: ..., OPTION: ...}`` in a
scenario and in serve's schema, the command-line flags generated from the same options
models, the old flat keys read with one deprecation warning, and an option under a
fidelity that does not own it refused in one line."""

from __future__ import annotations

import re

import pytest

from tests.helpers import assert_one_error_line, run
from tpusim.network import FlowOptions, NetworkSettings, PacketOptions
from tpusim.serving.options import ServeOptions, ServeSpec, with_environment
from tpusim.study.scenario import Scenario

WORKLOADS = "systems: [v5e-pod]\nworkloads:\n  - {name: ar, kind: collective, op: all-reduce, "


def scenario_file(tmp_path, head: str, size: str = "1 MiB"):
    path = tmp_path / "s.yaml"
    path.write_text(f"name: s\n{head}{WORKLOADS}bytes: {size}}}\n")
    return path


def test_the_tree_names_the_fidelity_and_its_own_options(tmp_path):
    path = scenario_file(tmp_path, "network: {fidelity: packet, packet_bytes: 16KiB}\n")
    assert Scenario(path).spec.network == NetworkSettings.of("packet", packet_bytes=16384)
    path = scenario_file(tmp_path, "network: {fidelity: flow, tolerance: 0.05}\n")
    assert Scenario(path).spec.network == NetworkSettings.of("flow", tolerance=0.05)
    path = scenario_file(tmp_path, "network: analytic\n")
    assert Scenario(path).spec.network == NetworkSettings.of("analytic")
    path = scenario_file(tmp_path, "")
    assert Scenario(path).spec.network == NetworkSettings.of("flow")


def test_a_scenario_sets_packet_bytes_and_the_work_limit_follows(tmp_path, capsys):
    """1 GiB all-reduce on 256 chips: 256 x 2 x ceil(1 GiB / P) packet-hops against the
    limit of 2,000,000: 8,388,608 at 64 KiB (refused), 524,288 at 1 MiB (accepted)."""
    big = scenario_file(tmp_path, "network: {fidelity: packet}\n", "1 GiB")
    line = assert_one_error_line(*run(capsys, "check", str(big)))
    assert "about 8,388,608 packet-hops" in line and "larger packets (packet_bytes)" in line
    ok = scenario_file(tmp_path, "network: {fidelity: packet, packet_bytes: 1 MiB}\n", "1 GiB")
    code, out, err = run(capsys, "check", str(ok))
    assert (code, err) == (0, "") and "no problems" in out


def test_old_flat_keys_still_read_with_one_warning_line(tmp_path, capsys):
    old = scenario_file(tmp_path, "fidelity: flow\nflow_tolerance: 0.05\n")
    with pytest.warns(FutureWarning, match=r"s\.yaml:2 fidelity and flow_tolerance: deprecated"):
        spec = Scenario(old).spec
    assert spec.network == NetworkSettings.of("flow", tolerance=0.05)
    code, out, err = run(capsys, "check", str(old))
    assert code == 0 and "no problems" in out
    assert err.splitlines() == [
        f"tpusim: warning: {old}:2 fidelity and flow_tolerance: deprecated; write "
        "network: {fidelity: flow, tolerance: 0.05}"
    ]


def test_old_and_new_keys_together_are_one_error(tmp_path, capsys):
    both = scenario_file(tmp_path, "flow_tolerance: 0.05\nnetwork: {fidelity: flow}\n")
    code, _out, err = run(capsys, "check", str(both))
    lines = [x for x in err.splitlines() if "error" in x]
    assert code == 2 and len(lines) == 1
    assert f"{both}:2 flow_tolerance: give network: {{fidelity: ..., ...}} alone" in lines[0]


@pytest.mark.parametrize(
    ("head", "says"),
    [
        (
            "network: {fidelity: packet, tolerance: 0.1}\n",
            r"s\.yaml:2 network\.tolerance: the packet fidelity has no option 'tolerance' "
            r"\(its options: packet_bytes\); tolerance belongs to flow",
        ),
        (
            "network: {fidelity: analytic, packet_bytes: 4KiB}\n",
            r"network\.packet_bytes: the analytic fidelity has no option 'packet_bytes' "
            r"\(its options: none\); packet_bytes belongs to packet",
        ),
        ("fidelity: packet\nflow_tolerance: 0.1\n", r"s\.yaml:3 network\.tolerance: the packet"),
    ],
)
def test_an_option_of_another_fidelity_is_one_line(tmp_path, capsys, head, says):
    path = scenario_file(tmp_path, head)
    code, out, err = run(capsys, "check", str(path))
    errors = [x for x in err.splitlines() if x.startswith("tpusim: error:")]
    assert code == 2 and out == "" and len(errors) == 1
    assert re.search(says, errors[0]), errors[0]


def test_network_flags_are_generated_from_the_options_models(capsys):
    with pytest.raises(SystemExit):
        run(capsys, "collective", "--help")
    text = " ".join(capsys.readouterr().out.split())
    tolerance = FlowOptions.model_fields["tolerance"].description
    packet = PacketOptions.model_fields["packet_bytes"].description
    assert f"--flow-tolerance TOLERANCE flow fidelity: {tolerance}" in text
    assert f"--packet-bytes PACKET_BYTES packet fidelity: {packet} (default 65536)" in text


def test_a_flag_for_another_fidelity_is_one_line(capsys):
    argv = ["collective", "v5e-pod", "--op", "all-reduce", "--bytes", "1MiB"]
    line = assert_one_error_line(*run(capsys, *argv, "--packet-bytes", "4KiB"))
    assert "--packet-bytes only applies to --fidelity packet" in line
    line = assert_one_error_line(*run(capsys, *argv, "--fidelity", "packet", "--packet-bytes", "0"))
    assert "--packet-bytes 0: Input should be greater than 0" in line


def test_serving_takes_the_network_settings_whole():
    settings = NetworkSettings.of("packet", packet_bytes=16384)
    spec = ServeSpec(model="llama-3.1-8b")
    options = with_environment(spec, network=settings)
    assert options.network is settings
    assert options.deployment("v5e-pod").network is settings
    tree = ServeOptions(model="llama-3.1-8b", network={"fidelity": "flow", "tolerance": 0.05})
    assert tree.network == NetworkSettings.of("flow", tolerance=0.05)
    assert tree.model_dump(mode="json")["network"] == {"fidelity": "flow", "tolerance": 0.05}


def test_run_takes_the_network_flags_over_the_file(tmp_path, capsys):
    """``tpusim run --fidelity packet --packet-bytes 16KiB`` replaces the file's
    ``network:`` in every point, in worker processes too (``--jobs 2``), and in the
    resolved scenario written beside the results."""
    import json

    import yaml

    path = tmp_path / "s.yaml"
    path.write_text(
        "name: s\nplots: false\nnetwork: {fidelity: flow, tolerance: 0.05}\n"
        "systems: [v5e-pod, v6e-pod]\n"
        "workloads:\n  - {name: ar, kind: collective, op: all-reduce, bytes: 1 MiB}\n"
    )
    out = tmp_path / "o"
    argv = ["run", str(path), "--out", str(out), "--quiet", "--json", "--jobs", "2"]
    code, text, _ = run(capsys, *argv, "--fidelity", "packet", "--packet-bytes", "16KiB")
    assert code == 0
    assert {row["fidelity"] for row in json.loads(text)["results"]} == {"packet"}
    resolved = yaml.safe_load((out / "resolved.yaml").read_text())
    assert resolved["network"] == {"fidelity": "packet", "packet_bytes": 16384}
    line = assert_one_error_line(*run(capsys, *argv, "--flow-tolerance", "0.1"))
    assert "--flow-tolerance needs --fidelity" in line


@pytest.mark.parametrize(
    ("tree", "says"),
    [
        ("5", r"network: expected a fidelity name or a mapping"),
        ("{fidelity: fluid}", r"network\.fidelity: unknown network fidelity 'fluid'"),
        ("{fidelity: flow, tolerance: false}", r"network\.tolerance: expected a number"),
        ("{fidelity: flow, tolerance: .nan}", r"network\.tolerance: Input should be a finite"),
        ("{fidelity: packet, packet_bytes: true}", r"network\.packet_bytes: expected a size"),
        ("{fidelity: packet, packet_bytes: -1}", r"network\.packet_bytes: Input should be greater"),
    ],
)
def test_a_bad_tree_is_one_line_at_its_key(tmp_path, capsys, tree, says):
    path = scenario_file(tmp_path, f"network: {tree}\n")
    line = assert_one_error_line(*run(capsys, "check", str(path)))
    assert re.search(rf"s\.yaml:2 {says}", line), line


def test_serve_options_still_read_the_old_flat_keys():
    with pytest.warns(FutureWarning, match="ServeOptions fidelity and flow_tolerance: deprecated"):
        old = ServeOptions(model="llama-3.1-8b", fidelity="flow", flow_tolerance=0.05)
    assert old.network == NetworkSettings.of("flow", tolerance=0.05)
    owned = "the packet fidelity has no option 'tolerance'"
    with pytest.raises(ValueError, match=owned), pytest.warns(FutureWarning):
        ServeOptions(model="llama-3.1-8b", fidelity="packet", flow_tolerance=0.05)
