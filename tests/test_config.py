"""Tests for tpusim.config: shipped chips and systems, the user's YAML forms, and the
one-line ``file.yaml:LINE path: problem`` errors a bad config produces."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml

from tpusim.config import load_chip, load_system, shipped
from tpusim.config.system import (
    TOPOLOGY_SPECS,
    BoardflyTopologySpec,
    TorusTopologySpec,
    twisted_torus_problem,
    wraparound_for,
)
from tpusim.errors import ConfigError, InputError

GRADES = {"primary", "secondary", "derived", "calibrated", "assumption"}
NOT_NUMBERS = {"name", "full_name", "year", "sources", "wraparound_rule"}
UNIT_TEXT = re.compile(r"^\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*[A-Za-z/]+\s*$")


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def where(path: Path, line: int, yaml_path: str) -> str:
    """Regex for the start of a ConfigError message: ``name.yaml:LINE path: ``."""
    return re.escape(f"{path.name}:{line} {yaml_path}: ")


MY_RING = """\
name: my-ring
chip: v5e
topology: {kind: torus, dims: [16], wraparound: true, twisted: false}
ici: {link_bandwidth: 45 GB/s, hop_latency: 1 us}
"""


# -- shipped configs ------------------------------------------------------------------------


def test_shipped_lists_are_not_empty():
    assert {"v4", "v5e", "v5p", "v6e", "ironwood", "tpu8t", "tpu8i"} <= set(shipped("chips"))
    assert {"v5e-pod", "v4-pod", "ironwood-pod", "tpu8i-pod", "tpu8t-virgo"} <= set(
        shipped("systems")
    )


@pytest.mark.parametrize("name", sorted(shipped("chips")))
def test_every_shipped_chip_loads_by_name(name):
    chip = load_chip(name)
    assert chip.name == name
    assert chip.peak_flops["bf16"] > 0
    assert chip.hbm.capacity_bytes > 0
    assert chip.ici.link_bandwidth_Bps > 0
    assert chip.ici.ports >= 1
    # by path too, and it is the same chip
    assert load_chip(str(shipped("chips")[name])) == chip


@pytest.mark.parametrize("name", sorted(shipped("systems")))
def test_every_shipped_system_loads_by_name(name):
    system = load_system(name)
    assert system.name == name
    assert system.num_chips > 0
    assert system.link_bandwidth_Bps > 0
    assert system.hop_latency_s >= 0
    if system.spec.chips is not None:
        assert system.num_chips == system.spec.chips
    assert load_system(str(shipped("systems")[name])) is system


def _numeric_leaves(node: Any, prefix: str = "") -> list[str]:
    """Dotted YAML paths of every number, or number-with-unit string, in a chip file."""
    out: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in NOT_NUMBERS:
                continue
            out += _numeric_leaves(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(node, bool):
        pass
    elif isinstance(node, int | float) or (isinstance(node, str) and UNIT_TEXT.match(node)):
        out.append(prefix)
    return out


@pytest.mark.parametrize("name", sorted(shipped("chips")))
def test_every_shipped_chip_number_has_a_graded_source(name):
    raw = yaml.safe_load(shipped("chips")[name].read_text(encoding="utf-8"))
    leaves = _numeric_leaves(raw)
    assert leaves, "walker found no numbers"
    sources = raw.get("sources", {})
    missing = [leaf for leaf in leaves if leaf not in sources]
    assert not missing, f"{name}: no sources entry for {missing}"
    for key, entry in sources.items():
        assert entry["grade"] in GRADES, f"{name}: sources.{key} grade {entry['grade']!r}"
        assert entry["source"], f"{name}: sources.{key} has no source"
    # the loaded spec keeps them
    assert set(load_chip(name).sources) == set(sources)


def test_numeric_leaf_walker_itself():
    raw = {
        "name": "x",
        "year": 2020,
        "a": {"b": "100 GB/s", "c": 3, "d": "cubes-4x4x4", "e": True},
        "ici": {"wraparound_rule": "never", "ports": 4},
        "sources": {"a.b": {}},
    }
    assert sorted(_numeric_leaves(raw)) == ["a.b", "a.c", "ici.ports"]


# -- the user's system forms ------------------------------------------------------------------


def test_minimal_user_system_from_path(tmp_path):
    system = load_system(str(write(tmp_path, "ring.yaml", MY_RING)))
    assert system.name == "my-ring"
    assert system.chip.name == "v5e"
    assert system.link_bandwidth_Bps == 45e9
    assert system.hop_latency_s == 1e-6
    assert system.num_chips == 16
    assert system.wraparound == (True,)
    assert system.topology_kind == "torus"


def test_user_system_without_ici_override_uses_the_chip(tmp_path):
    text = "name: r\nchip: v6e\ntopology: {kind: torus, dims: [4, 4]}\n"
    system = load_system(str(write(tmp_path, "r.yaml", text)))
    assert system.link_bandwidth_Bps == load_chip("v6e").ici.link_bandwidth_Bps
    assert system.hop_latency_s == load_chip("v6e").ici.hop_latency_s
    assert system.wraparound == (False, False)  # v6e rule: only full axes of 16 wrap


def test_chip_as_relative_path_next_to_the_system(tmp_path):
    chip_text = (
        shipped("chips")["v5e"].read_text(encoding="utf-8").replace("name: v5e", "name: my-chip")
    )
    write(tmp_path / "cfg", "my-chip.yaml", chip_text)
    system_file = write(
        tmp_path / "cfg",
        "sys.yaml",
        "name: s\nchip: my-chip.yaml\ntopology: {kind: torus, dims: [2, 4]}\n",
    )
    system = load_system(str(system_file))
    assert system.chip.name == "my-chip"
    assert system.num_chips == 8
    # also through a sub-folder
    write(tmp_path / "cfg" / "chips", "other.yaml", chip_text.replace("my-chip", "other"))
    sub = write(
        tmp_path / "cfg",
        "sys2.yaml",
        "name: s2\nchip: chips/other.yaml\ntopology: {kind: torus, dims: [4]}\n",
    )
    assert load_system(str(sub)).chip.name == "other"


def test_relative_chip_path_is_resolved_next_to_the_system_not_the_cwd(tmp_path, monkeypatch):
    """load_chip's docstring: a path is relative to ``base`` (the system's folder)."""
    chip_text = shipped("chips")["v5e"].read_text(encoding="utf-8")
    write(tmp_path / "cfg", "c.yaml", chip_text.replace("name: v5e", "name: beside-system"))
    write(tmp_path / "cwd", "c.yaml", chip_text.replace("name: v5e", "name: in-cwd"))
    system_file = write(
        tmp_path / "cfg", "s.yaml", "name: s\nchip: c.yaml\ntopology: {kind: torus, dims: [4]}\n"
    )
    monkeypatch.chdir(tmp_path / "cwd")
    assert load_system(str(system_file)).chip.name == "beside-system"


def test_wraparound_per_axis_list(tmp_path):
    text = (
        "name: w\nchip: v5e\n"
        "topology: {kind: torus, dims: [4, 8, 2], wraparound: [true, false, true]}\n"
    )
    assert load_system(str(write(tmp_path, "w.yaml", text))).wraparound == (True, False, True)
    one = "name: w1\nchip: v4\ntopology: {kind: torus, dims: [4, 4], wraparound: false}\n"
    assert load_system(str(write(tmp_path, "w1.yaml", one))).wraparound == (False, False)


@pytest.mark.parametrize(
    ("dims", "rule", "expected"),
    [
        ([4, 4, 8], "cubes-4x4x4", (True, True, True)),
        ([4, 4, 4], "cubes-4x4x4", (True, True, True)),
        ([2, 2, 4], "cubes-4x4x4", (False, False, False)),
        ([4, 4, 6], "cubes-4x4x4", (False, False, False)),
        ([16, 24, 24], "cubes-4x4x4", (True, True, True)),
        ([8, 16], "full-axis-16", (False, True)),
        ([16, 16], "full-axis-16", (True, True)),
        ([4, 4], "full-axis-16", (False, False)),
        ([3, 5], "always", (True, True)),
        ([3, 5], "never", (False, False)),
    ],
)
def test_tpu_wraparound_rules(dims, rule, expected):
    assert wraparound_for(dims, rule) == expected


@pytest.mark.parametrize(
    ("name", "axes"),
    [("v5e-pod", 2), ("v6e-pod", 2), ("v4-pod", 3), ("ironwood-pod", 3), ("torus-8x8x16", 3)],
)
def test_shipped_pods_wrap_on_every_axis(name, axes):
    assert load_system(name).wraparound == (True,) * axes


def test_boardfly_system_from_path(tmp_path):
    text = """\
name: my-boardfly
chip: tpu8i
topology:
  kind: boardfly
  chips_per_board: 4
  boards_per_group: 8
  groups: 4
chips: 128
"""
    system = load_system(str(write(tmp_path, "bf.yaml", text)))
    assert system.num_chips == 128
    assert system.topology_kind == "boardfly"
    assert system.wraparound == ()
    assert system.chip.name == "tpu8i"


def test_multipod_system_from_path_naming_a_shipped_pod(tmp_path):
    text = """\
name: two-v5e
pod: v5e-pod
pods: 2
fabric: {kind: clos, bandwidth_per_chip: 50 Gb/s, hop_latency: 2 us}
"""
    system = load_system(str(write(tmp_path, "mp.yaml", text)))
    assert system.pod is load_system("v5e-pod")
    assert system.num_chips == 512
    assert system.chip.name == "v5e"
    assert system.fabric_bandwidth_per_chip_Bps == pytest.approx(50e9 / 8)
    assert system.fabric is not None and system.fabric.hop_latency_s == pytest.approx(2e-6)
    assert system.link_bandwidth_Bps == load_system("v5e-pod").link_bandwidth_Bps
    assert system.topology_kind == "2 x torus + clos"


def test_multipod_fabric_bandwidth_defaults_to_chip_dcn(tmp_path):
    text = "name: m\npod: v6e-pod\npods: 3\nfabric: {hop_latency: 1 us}\n"
    system = load_system(str(write(tmp_path, "m.yaml", text)))
    assert system.fabric_bandwidth_per_chip_Bps == load_chip("v6e").dcn.bandwidth_Bps


# -- bad input --------------------------------------------------------------------------------


def test_config_error_is_an_input_error():
    assert issubclass(ConfigError, InputError)
    assert ConfigError.exit_code == 2


def test_unknown_top_level_key(tmp_path):
    path = write(tmp_path, "top.yaml", MY_RING + "colour: blue\n")
    with pytest.raises(ConfigError, match=where(path, 5, "colour") + "unknown key"):
        load_system(str(path))


def test_unknown_nested_key(tmp_path):
    text = "name: x\nchip: v5e\ntopology:\n  kind: torus\n  dims: [16]\n  dimz: [4]\n"
    path = write(tmp_path, "nested.yaml", text)
    with pytest.raises(ConfigError, match=where(path, 6, "topology.dimz") + "unknown key"):
        load_system(str(path))


def test_unknown_key_in_chip_file(tmp_path):
    chip = shipped("chips")["v5e"].read_text(encoding="utf-8")
    chip = chip.replace("  ports: 4\n", "  ports: 4\n  hop_latencyy: 2 us\n")
    path = write(tmp_path, "chip.yaml", chip)
    line = chip.splitlines().index("  hop_latencyy: 2 us") + 1
    with pytest.raises(ConfigError, match=where(path, line, "ici.hop_latencyy") + "unknown key"):
        load_chip(str(path))


def test_wrong_unit(tmp_path):
    text = "name: x\nchip: v5e\ntopology: {kind: torus, dims: [16]}\n"
    text += "ici:\n  link_bandwidth: 100 GB\n"
    path = write(tmp_path, "unit.yaml", text)
    with pytest.raises(ConfigError, match=where(path, 5, "ici.link_bandwidth")) as info:
        load_system(str(path))
    assert "'100 GB'" in str(info.value)
    assert "bandwidth" in info.value.problem


def test_missing_unit_where_text_is_not_a_number(tmp_path):
    text = "name: x\nchip: v5e\ntopology: {kind: torus, dims: [16]}\nici:\n  hop_latency: fast\n"
    path = write(tmp_path, "nounit.yaml", text)
    with pytest.raises(ConfigError, match=where(path, 5, "ici.hop_latency") + ".*'fast'.*time"):
        load_system(str(path))


@pytest.mark.parametrize("bad", ["0", "-2"])
def test_zero_or_negative_dimension(tmp_path, bad):
    text = f"name: x\nchip: v5e\ntopology:\n  kind: torus\n  dims:\n    - 4\n    - 4\n    - {bad}\n"
    path = write(tmp_path, "dims.yaml", text)
    with pytest.raises(ConfigError, match=where(path, 8, "topology.dims[2]") + ".*greater than 0"):
        load_system(str(path))


def test_boardfly_counts_that_do_not_multiply_out(tmp_path):
    text = """\
name: x
chip: tpu8i
topology:
  kind: boardfly
  chips_per_board: 4
  boards_per_group: 8
  groups: 32
chips: 1000
"""
    path = write(tmp_path, "bf.yaml", text)
    with pytest.raises(ConfigError, match=where(path, 8, "chips") + ".*1000.*1024"):
        load_system(str(path))


def test_unknown_chip_name(tmp_path):
    text = "name: x\nchip: v99\ntopology: {kind: torus, dims: [16]}\n"
    path = write(tmp_path, "chip.yaml", text)
    with pytest.raises(ConfigError, match=where(path, 2, "chip") + ".*unknown chip 'v99'"):
        load_system(str(path))


def test_unknown_pod_name(tmp_path):
    text = "name: x\npod: v99-pod\npods: 2\nfabric: {hop_latency: 1 us}\n"
    path = write(tmp_path, "pod.yaml", text)
    with pytest.raises(ConfigError, match=where(path, 2, "pod") + ".*unknown system 'v99-pod'"):
        load_system(str(path))


def test_unknown_system_name():
    with pytest.raises(ConfigError, match="unknown system 'no-such-pod'"):
        load_system("no-such-pod")


def test_file_that_does_not_exist(tmp_path):
    path = tmp_path / "absent.yaml"
    with pytest.raises(ConfigError, match=re.escape("absent.yaml: file does not exist")):
        load_system(str(path))


def test_missing_chip_file_names_the_system_file_and_key(tmp_path):
    """A system whose ``chip:`` path does not exist: the error should point at the
    system file's ``chip`` line (as for an unknown chip name), since that is what
    the user has to fix."""
    text = "name: x\nchip: chips/nope.yaml\ntopology: {kind: torus, dims: [16]}\n"
    path = write(tmp_path, "sys.yaml", text)
    with pytest.raises(ConfigError, match=where(path, 2, "chip") + ".*does not exist"):
        load_system(str(path))


def test_file_that_is_not_yaml(tmp_path):
    text = "name: x\nchip: v5e\ntopology: {kind: torus, dims: [16]\nfoo: bar\n"
    path = write(tmp_path, "broken.yaml", text)
    with pytest.raises(ConfigError, match=re.escape("broken.yaml:4: ") + "not valid YAML") as e:
        load_system(str(path))
    assert e.value.line == 4


def test_top_level_is_a_list(tmp_path):
    path = write(tmp_path, "list.yaml", "- name: x\n- chip: v5e\n")
    with pytest.raises(ConfigError, match=re.escape("list.yaml:1: ") + "expected a mapping"):
        load_system(str(path))


def test_empty_file(tmp_path):
    path = write(tmp_path, "empty.yaml", "")
    with pytest.raises(ConfigError, match=re.escape("empty.yaml") + ".*expected a mapping"):
        load_system(str(path))


def test_twisted_on_a_shape_that_cannot_twist(tmp_path):
    text = "name: x\nchip: v5p\ntopology:\n  kind: torus\n  dims: [4, 4, 4]\n  twisted: true\n"
    path = write(tmp_path, "twist.yaml", text)
    with pytest.raises(ConfigError, match=where(path, 3, "topology") + "twisted tori need"):
        load_system(str(path))


def test_twisted_without_wraparound(tmp_path):
    text = (
        "name: x\nchip: v5p\n"
        "topology: {kind: torus, dims: [4, 4, 8], twisted: true, wraparound: false}\n"
    )
    path = write(tmp_path, "twist2.yaml", text)
    with pytest.raises(ConfigError, match=where(path, 3, "topology") + ".*wraparound"):
        load_system(str(path))


def test_twisted_shape_with_wraparound_false_on_one_axis(tmp_path):
    text = (
        "name: x\nchip: v5p\n"
        "topology: {kind: torus, dims: [3, 6], twisted: true, wraparound: [true, false]}\n"
    )
    path = write(tmp_path, "twist4.yaml", text)
    with pytest.raises(
        ConfigError, match=where(path, 3, "topology") + "twisted tori need wraparound on every axis"
    ):
        load_system(str(path))


def test_twisted_shape_the_chip_rule_does_not_wrap(tmp_path):
    # v5p wraps only slices of whole 4x4x4 cubes: 3x3x6 can twist, but the chip does not wrap it
    text = "name: x\nchip: v5p\ntopology:\n  kind: torus\n  dims: [3, 3, 6]\n  twisted: true\n"
    path = write(tmp_path, "twist5.yaml", text)
    with pytest.raises(
        ConfigError, match=where(path, 3, "topology") + "twisted tori need wraparound on every axis"
    ):
        load_system(str(path))


def test_twisted_rule_is_one_function():
    assert twisted_torus_problem([4, 4, 8], None) is None
    assert twisted_torus_problem([6, 3], [True, True]) is None
    shape = "twisted tori need a k x k x 2k or 2k x k shape with k >= 3 (got 2x2x4)"
    assert twisted_torus_problem([2, 2, 4], None) == shape
    assert "wraparound" in (twisted_torus_problem([4, 4, 8], [True, False, True]) or "")


def test_config_does_not_import_the_topology_layer():
    code = "import sys, tpusim.config.loader; print('tpusim.topology' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_unknown_topology_kind_lists_the_registered_ones(tmp_path):
    path = write(tmp_path, "k.yaml", "name: x\nchip: v5e\ntopology: {kind: hypercube}\n")
    with pytest.raises(ConfigError, match=where(path, 3, "topology") + ".*'torus', 'boardfly'"):
        load_system(str(path))
    assert TOPOLOGY_SPECS.names()[:2] == ("torus", "boardfly")


def test_a_topology_kind_cannot_be_taken_twice():
    TOPOLOGY_SPECS.register("torus", TorusTopologySpec)  # the same class again: nothing happens

    class OtherTorus(BoardflyTopologySpec):
        kind: Literal["torus"]  # type: ignore[assignment]

    with pytest.raises(ValueError, match="topology spec 'torus' is already registered"):
        TOPOLOGY_SPECS.register("torus", OtherTorus)
    with pytest.raises(ValueError, match=r"OtherTorus\.kind must be Literal\['other'\]"):
        TOPOLOGY_SPECS.register("other", OtherTorus)
    assert "other" not in TOPOLOGY_SPECS


def test_twisted_shape_that_can_twist_loads(tmp_path):
    text = "name: x\nchip: v5p\ntopology: {kind: torus, dims: [4, 4, 8], twisted: true}\n"
    system = load_system(str(write(tmp_path, "twist3.yaml", text)))
    assert system.wraparound == (True, True, True)
    assert system.num_chips == 128


def test_wraparound_list_length_mismatch(tmp_path):
    text = (
        "name: x\nchip: v5e\ntopology:\n  kind: torus\n  dims: [4, 4]\n"
        "  wraparound: [true, false, true]\n"
    )
    path = write(tmp_path, "wrap.yaml", text)
    with pytest.raises(ConfigError, match=where(path, 3, "topology") + ".*3 entries.*2 axes"):
        load_system(str(path))


def test_multipod_missing_fabric(tmp_path):
    path = write(tmp_path, "mp.yaml", "name: x\npod: v5e-pod\npods: 2\n")
    with pytest.raises(ConfigError, match=re.escape("mp.yaml:1") + ".*missing fabric") as e:
        load_system(str(path))
    assert e.value.file is not None and e.value.file.endswith("mp.yaml")


def test_topology_and_pod_together(tmp_path):
    text = (
        "name: x\npod: v5e-pod\npods: 2\nfabric: {hop_latency: 1 us}\n"
        "topology: {kind: torus, dims: [4]}\n"
    )
    with pytest.raises(ConfigError, match="either topology"):
        load_system(str(write(tmp_path, "both.yaml", text)))


def test_system_without_topology(tmp_path):
    with pytest.raises(ConfigError, match="needs 'topology'"):
        load_system(str(write(tmp_path, "notopo.yaml", "name: x\nchip: v5e\n")))


def test_source_naming_a_value_not_in_the_chip(tmp_path):
    chip = shipped("chips")["v5e"].read_text(encoding="utf-8")
    chip += '  hbm.colour: {source: D-v5e, grade: primary, note: "x"}\n'
    path = write(tmp_path, "src.yaml", chip)
    line = len(chip.splitlines())
    with pytest.raises(ConfigError, match=where(path, line, "sources.hbm.colour") + ".*names"):
        load_chip(str(path))


def test_bad_source_grade(tmp_path):
    chip = shipped("chips")["v5e"].read_text(encoding="utf-8")
    chip = chip.replace(
        "ici.ports: {source: D-v5e, grade: primary", "ici.ports: {source: D-v5e, grade: rumour"
    )
    path = write(tmp_path, "grade.yaml", chip)
    line = next(i for i, s in enumerate(chip.splitlines(), 1) if "grade: rumour" in s)
    with pytest.raises(ConfigError, match=where(path, line, "sources.ici.ports.grade")):
        load_chip(str(path))
