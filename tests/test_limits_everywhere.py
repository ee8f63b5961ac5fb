"""The shared limits guard every command (issue 45, item 3): a program's collectives at
packet fidelity are bounded like a collective's (``tpusim check`` refuses what ``run``
would, without simulating), a request trace is read up to a byte limit, and a
``--scheduler`` that is not a Dask scheduler is one line within a bounded time."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest
from helpers import assert_one_error_line, run

from tpusim.config.limits import MAX_PACKET_HOPS, MAX_TRACE_BYTES
from tpusim.errors import InputError


def _packet_step(tmp_path: Path, packet_bytes: str) -> str:
    (tmp_path / "line2.yaml").write_text(
        "name: line2\nchip: v5e\ntopology: {kind: torus, dims: [2], wraparound: [false]}\n"
    )
    path = tmp_path / "s.yaml"
    path.write_text(
        f"name: s\nsystems: [line2.yaml]\nplots: false\n"
        f"network: {{fidelity: packet, packet_bytes: {packet_bytes}}}\nworkloads:\n"
        "  - {name: step, kind: training_step, layers: 2, d_model: 1024, d_ff: 2048,"
        " heads: 8, head_dim: 128, seq: 1024, vocab: 1000, batch_per_shard: 1,"
        " mesh: {pipeline: 2}}\n"
    )
    return str(path)


def test_a_training_step_of_one_byte_packets_is_refused_by_check_and_run(tmp_path, capsys):
    """Hand count: 4 permutes of 1024 x 1024 x 2 bytes and 2 all-reduces of 1000 x 1024 x 2
    bytes, 12,484,608 bytes of collectives, on 2 chips at 1-byte packets: about
    2 x 2 x 12.5 M = 50 M packet-hops, over MAX_PACKET_HOPS."""
    assert MAX_PACKET_HOPS < 2 * 2 * (4 * 1024 * 1024 * 2 + 2 * 1000 * 1024 * 2)
    scenario = _packet_step(tmp_path, "1")
    for argv in (["check", scenario], ["run", scenario, "--out", str(tmp_path / "o")]):
        began = time.perf_counter()
        line = assert_one_error_line(*run(capsys, *argv))
        assert time.perf_counter() - began < 10
        assert "packet-hops, over the limit" in line and "workloads[0]" in line, line


def test_the_engine_refuses_it_for_the_python_api(tmp_path):
    from tpusim.config.loader import load_system
    from tpusim.engine import RunSettings, Simulation
    from tpusim.network import NetworkSettings
    from tpusim.program.ir import Op, Program

    system = load_system(str(_write_line(tmp_path)))
    op = Op(name="ar", kind="collective", collective="all-reduce", size_bytes=2**30)
    network = NetworkSettings.of("packet", packet_bytes=64)
    with pytest.raises(InputError, match=r"program 'p': packet fidelity would simulate"):
        Simulation(system, Program("p", (op,)), RunSettings(network))


def _write_line(tmp_path: Path) -> Path:
    path = tmp_path / "line2.yaml"
    path.write_text(
        "name: line2\nchip: v5e\ntopology: {kind: torus, dims: [2], wraparound: [false]}\n"
    )
    return path


def test_an_endless_trace_stops_at_the_byte_limit(capsys):
    began = time.perf_counter()
    line = assert_one_error_line(
        *run(capsys, "serve", "v5e-pod", "--model", "llama-3.1-8b", "--trace", "/dev/zero")
    )
    assert f"over the limit of {MAX_TRACE_BYTES:,} bytes" in line
    assert time.perf_counter() - began < 10


class _Server:
    """A TCP server on 127.0.0.1 that, per connection, sends ``greeting`` (None:
    nothing, as an HTTP server waiting for a request) and holds it open."""

    def __init__(self, greeting: bytes | None):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.greeting, self.held = greeting, []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if self.greeting:
                conn.sendall(self.greeting)
            self.held.append(conn)

    def close(self):
        for conn in self.held:
            conn.close()
        self.sock.close()


@pytest.mark.parametrize(
    ("greeting", "words"),
    [
        (None, "no Dask handshake within 0.3 s"),
        (b"HTTP/1.1 400 Bad Request\r\n\r\n", "another protocol than Dask's"),
        (b"SSH-2.0-OpenSSH_9.6\r\n", "another protocol than Dask's"),
    ],
)
def test_a_scheduler_that_is_not_dask_is_one_line_within_the_probe_time(
    tmp_path, capsys, monkeypatch, greeting, words
):
    pytest.importorskip("distributed")
    from tpusim.study import executors

    monkeypatch.setattr(executors, "PROBE_TIMEOUT_S", 0.3)
    server = _Server(greeting)
    scenario = _packet_step(tmp_path, "64 KiB")
    address = f"tcp://127.0.0.1:{server.port}"
    began = time.perf_counter()
    try:
        code, out, err = run(
            capsys,
            "run",
            scenario,
            "--executor",
            "dask",
            "--scheduler",
            address,
            "--out",
            str(tmp_path / "o"),
        )
    finally:
        server.close()
    line = assert_one_error_line(code, out, err)
    assert time.perf_counter() - began < 5
    assert address in line and words in line, line


def test_a_closed_port_is_one_line(tmp_path, capsys):
    pytest.importorskip("distributed")
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
    scenario = _packet_step(tmp_path, "64 KiB")
    line = assert_one_error_line(
        *run(
            capsys,
            "run",
            scenario,
            "--executor",
            "dask",
            "--scheduler",
            f"tcp://127.0.0.1:{port}",
            "--out",
            str(tmp_path / "o"),
        )
    )
    assert "cannot reach the Dask scheduler" in line


def test_check_never_simulates(tmp_path, capsys, monkeypatch):
    """``tpusim check`` of the shipped scenarios and of a jobs workload with a service
    starts no simulation (the engine's start and run raise if called)."""
    from tpusim.engine.simulation import Simulation

    def refuse(*args, **kwargs):
        raise AssertionError("check simulated")

    monkeypatch.setattr(Simulation, "start", refuse)
    monkeypatch.setattr(Simulation, "run", refuse)
    (tmp_path / "mesh.yaml").write_text(
        "name: m\nchip: ironwood\ntopology: {kind: torus, dims: [4, 4, 4], wraparound: false}\n"
    )
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(
        "name: j\nsystems: [mesh.yaml]\nworkloads:\n  - name: shared\n    kind: jobs\n"
        "    jobs:\n      - {name: t, chips: [0, 1], collective: {op: all-reduce, bytes: 1 GiB}}\n"
        "      - {name: chat, serve: {model: llama-3.1-8b, tp: 1, disaggregate: '1:1',"
        " requests: 100000}}\n"
    )
    repo = Path(__file__).resolve().parents[1]
    for scenario in [str(jobs), *sorted(str(p) for p in (repo / "scenarios").glob("*.yaml"))]:
        code, _, err = run(capsys, "check", scenario)
        assert code == 0 and "Traceback" not in err, (scenario, err)


def test_packet_hops_count_packets_times_route_hops(tmp_path):
    """Hand count on a line of 4 chips: 0 -> 3 of 3 packets crosses 3 links (9), 1 -> 2
    of 1 packet (a partial one) crosses 1 (1): 10 packet-hops."""
    import numpy as np

    from tpusim.collectives.base import Group, Schedule, Step
    from tpusim.config.loader import load_system
    from tpusim.engine.work import packet_hops
    from tpusim.topology import build_topology

    path = tmp_path / "line4.yaml"
    path.write_text(
        "name: l4\nchip: v5e\ntopology: {kind: torus, dims: [4], wraparound: [false]}\n"
    )
    topology = build_topology(load_system(str(path)))
    step = Step(np.array([0, 1]), np.array([3, 2]), np.array([3 * 1024.0, 100.0]))
    group = Group.__new__(Group)
    schedule = Schedule("collective-permute", "direct", 3072.0, group, [[step]])
    assert packet_hops(schedule, topology, 1024.0) == 10


def test_a_one_shot_all_reduce_at_packet_fidelity_is_refused_by_its_hops(capsys):
    """64 KiB one-shot on 1,024 chips: 1,023 one-packet transfers per chip fit the
    transfer estimate (about 1 M), but each travels several hops: over the limit."""
    began = time.perf_counter()
    line = assert_one_error_line(
        *run(capsys, "collective", "tpu8i-1024", "--op", "all-reduce", "--bytes", "64KiB",
             "--algorithm", "one-shot", "--fidelity", "packet")
    )  # fmt: skip
    assert time.perf_counter() - began < 10
    assert "packet-hops (one-shot" in line, line
