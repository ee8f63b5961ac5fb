"""A scenario is read once per ``tpusim run --jobs 2`` (issue 44): worker processes
receive the typed point set, and the three steps of loading a scenario (read, check,
expand) are separate, each with a typed result."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

import pytest
from helpers import run
from pydantic import PositiveInt

import tpusim.study.reading
import tpusim.study.workers
from tpusim.errors import ConfigError
from tpusim.network.tree import DeprecatedKeyWarning
from tpusim.study.checking import Checking, check_read
from tpusim.study.expanding import expand
from tpusim.study.reading import read_scenario
from tpusim.study.scenario import Scenario
from tpusim.workloads import WORKLOADS, WorkloadKind, WorkloadSpec
from tpusim.workloads.collective import CollectiveWorkload
from tpusim.workloads.spec import NetworkDemand

TWO_SYSTEMS = """\
name: once
plots: false
systems: [v5e-pod, v6e-pod]
workloads:
  - {name: topo, kind: topology}
  - {name: ar, kind: collective, op: all-reduce, bytes: 1 MiB, sweep: {bytes: [1 MiB, 2 MiB]}}
"""


@pytest.fixture
def counted(tmp_path, monkeypatch):
    """The scenario file, and a log to which every read of it and every worker start
    appends a line with its process id (a file: workers are other processes)."""
    path = tmp_path / "once.yaml"
    path.write_text(TWO_SYSTEMS)
    log = tmp_path / "log.txt"
    log.touch()
    read, work = tpusim.study.reading.load_yaml, tpusim.study.workers._worker

    def counting_read(file, *args, **kwargs):
        if Path(file).resolve() == path.resolve():
            with log.open("a") as out:
                out.write(f"read {os.getpid()}\n")
        return read(file, *args, **kwargs)

    def counting_worker(*args, **kwargs):
        with log.open("a") as out:
            out.write(f"worker {os.getpid()}\n")
        return work(*args, **kwargs)

    monkeypatch.setattr(tpusim.study.reading, "load_yaml", counting_read)
    monkeypatch.setattr(tpusim.study.workers, "_worker", counting_worker)
    return path, log


def test_a_scenario_is_read_once_per_run_with_two_jobs(counted, tmp_path, capsys):
    path, log = counted
    argv = ["run", str(path), "--jobs", "2", "--quiet", "--json", "--out", str(tmp_path / "o")]
    code, stdout, err = run(capsys, *argv)
    assert code == 0, err
    assert len(json.loads(stdout)["results"]) == 2 * 3  # 2 systems x (1 + 2 points)
    lines = [line.split() for line in log.read_text().splitlines()]
    reads = [int(pid) for what, pid in lines if what == "read"]
    workers = {int(pid) for what, pid in lines if what == "worker"}
    assert reads == [os.getpid()]  # once, here
    assert len(workers) == 2 and os.getpid() not in workers  # two worker processes ran


def test_read_check_and_expand_are_separate_steps(counted):
    path, log = counted
    read = read_scenario(path)
    assert read.data["name"] == "once" and read.lines[("systems",)] == 3
    checked = check_read(read, Checking(max_points=10))
    assert [s.name for s in checked.systems] == ["v5e-pod", "v6e-pod"]
    assert checked.max_points == 10
    points = expand(checked)
    assert [p.label for p in points] == ["topo", "ar[bytes=1 MiB]", "ar[bytes=2 MiB]"]
    assert Scenario.of(read).runs == points
    assert log.read_text().count("read") == 1  # checking and expanding read nothing


def test_workloads_declare_their_network_demand_and_mesh():
    ar = CollectiveWorkload(kind="collective", name="ar", op="all-gather", bytes="2 KiB")
    assert ar.network_demand() == NetworkDemand("all-gather", 2048.0, None)
    assert ar.device_mesh() is None


class Shuffle(WorkloadSpec):
    """A kind of this file: a ring all-reduce of ``size`` bytes, known before it runs
    only through its declared network demand (no field is named ``op`` or ``bytes``)."""

    kind: Literal["shuffle_demand"]
    name: str
    size: PositiveInt

    def network_demand(self) -> NetworkDemand:
        return NetworkDemand("all-reduce", float(self.size), "ring")


@pytest.fixture
def shuffle_kind():
    WORKLOADS.register("shuffle_demand", WorkloadKind(Shuffle, lambda spec, context: None))
    yield
    WORKLOADS.unregister("shuffle_demand")


PACKET = """\
name: demand
network: {{fidelity: packet, packet_bytes: 64 KiB}}
systems: [v5e-pod]
workloads:
  - {{name: s, kind: shuffle_demand, size: {size}}}
"""


def test_a_kinds_declared_network_demand_is_checked_before_running(shuffle_kind, tmp_path):
    # packet fidelity on the 256 chips of v5e-pod, 64 KiB packets: 1 GiB per chip is
    # 2 x 16,384 packets each way; a ring all-reduce sends 2 x 255 = 510 transfers per
    # chip, fewer: 256 x 32,768 = 8,388,608 packet-hops, over the 2,000,000 limit
    path = tmp_path / "demand.yaml"
    path.write_text(PACKET.format(size=2**30))
    with pytest.raises(ConfigError, match=r"about 8,388,608 packet-hops, over the limit"):
        Scenario(path)
    # 1 MiB: 2 x 16 packets, fewer than the ring's 510 transfers: 256 x 510 = 130,560
    path.write_text(PACKET.format(size=2**20))
    assert [run.label for run in Scenario(path).runs] == ["s"]


ROLE_AXIS_SWEEP = """\
name: axes
systems: [v5e-pod]
fidelity: analytic
workloads:
  - name: step
    kind: training_step
    layers: 1
    d_model: 1024
    d_ff: 4096
    heads: 16
    head_dim: 64
    seq: 512
    batch: 64
    mesh: {a: 16, b: 16}
    sweep: {tensor_axis: [a, b]}
"""


def test_expanding_sweeps_a_role_axis_and_reads_the_flat_network_key(tmp_path):
    # a role's axis (tensor_axis) is a field of the kind though not a declared one
    # (WorkloadSpec.field_names): a sweep over it gives one point per axis, in order;
    # reading moves the flat ``fidelity`` into the network tree (network.tree.read_flat)
    path = tmp_path / "axes.yaml"
    path.write_text(ROLE_AXIS_SWEEP)
    with pytest.warns(DeprecatedKeyWarning, match=r"axes\.yaml:3 fidelity: deprecated"):
        read = read_scenario(path)
    assert read.data["network"] == {"fidelity": "analytic"} and "fidelity" not in read.data
    points = expand(check_read(read, Checking()))
    assert [p.label for p in points] == ["step[tensor_axis=a]", "step[tensor_axis=b]"]
    assert [p.workload.axis("tensor") for p in points] == ["a", "b"]
