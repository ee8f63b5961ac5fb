"""Interactive speed (issue 34): the flow fidelity's closed form for latency-bound
batches against the flows run one by one, ``auto``'s bound-based skipping against
simulating every close candidate, ``tpusim.Session`` against fresh runs, and the
import graph of the command line's start."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import simpy

import tpusim
import tpusim.collectives.select as select
from tpusim.engine import CollectiveOptions, run_collective, simulate_collective
from tpusim.network.flow import FlowNetwork
from tpusim.network.flow_blocks import alone_bounds
from tpusim.network.routes import RouteCache
from tpusim.topology import Boardfly, Torus

W, A = 100e9, 1e-6  # link bandwidth (B/s) and hop latency (s)
TOL = 0.01  # the flow fidelity's default rate and merge tolerance
TOPOLOGIES = {
    "boardfly2x3x4": lambda: Boardfly(2, 3, 4, link_bandwidth_Bps=W, hop_latency_s=A),
    "boardfly4x4x3": lambda: Boardfly(4, 4, 3, link_bandwidth_Bps=W, hop_latency_s=A),
    "ring8": lambda: Torus((8,), (True,), link_bandwidth_Bps=W, hop_latency_s=A),
    "torus4x4x4": lambda: Torus((4, 4, 4), (True,) * 3, link_bandwidth_Bps=W, hop_latency_s=A),
}


def _time_s(topology, op, size, algorithm, closed, monkeypatch):
    monkeypatch.setattr(FlowNetwork, "closed_form", closed)
    monkeypatch.setattr(FlowNetwork, "closed_form_min_flows", 0)
    result, network = run_collective(topology, op, size, CollectiveOptions(algorithm=algorithm))
    return result.time_s, network.num_events


# sizes from latency bound (a few bytes per flow) through the criterion's threshold
# (drain ~ 1% of the latency: ~1 KiB per flow here) to bandwidth bound
@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
@pytest.mark.parametrize(
    ("op", "algorithm"),
    [
        ("all-to-all", "direct"),
        ("all-reduce", "direct"),
        ("all-gather", "direct"),
        ("all-reduce", "one-shot"),
    ],
)
@pytest.mark.parametrize("size", [64.0, 4096.0, 32768.0, 131072.0, 2**20, 2**24])
def test_closed_form_agrees_with_the_flows(name, op, algorithm, size, monkeypatch):
    topology = TOPOLOGIES[name]()
    exact_s, exact_events = _time_s(topology, op, size, algorithm, False, monkeypatch)
    closed_s, closed_events = _time_s(topology, op, size, algorithm, True, monkeypatch)
    assert closed_s == pytest.approx(exact_s, rel=TOL)
    assert closed_events <= exact_events


def test_closed_form_engages_when_latency_bound(monkeypatch):
    """A 64-byte all-to-all over 24 Boardfly chips: one closed batch, one event; its time
    is the longest route (diameter x hop latency) plus a drain under 1% of it."""
    topology = TOPOLOGIES["boardfly2x3x4"]()
    closed_s, events = _time_s(topology, "all-to-all", 64.0, "direct", True, monkeypatch)
    assert events == 1
    longest_s = topology.diameter_hops * A
    assert longest_s <= closed_s <= longest_s * (1 + TOL)


def _batch(topology, src, dst, size):
    return RouteCache(topology).batch(np.array(src), np.array(dst), np.full(len(src), size))


def test_alone_bounds_hand_count():
    """Two 100-byte flows on one 100 B/s link of 1 s latency share it: each gets 50 B/s,
    drains in 2 s and arrives at 3 s; both bounds are 3 s. A lone flow: 1 s + 1 s."""
    ring = Torus((4,), (False,), link_bandwidth_Bps=100.0, hop_latency_s=1.0)
    shared = _batch(ring, [0, 0], [1, 1], 100.0)
    bounds = alone_bounds(shared, ring.links.bandwidth_Bps, np.ones(2))
    assert (bounds.lower_s, bounds.upper_s) == (3.0, 3.0)
    alone = _batch(ring, [0], [1], 100.0)
    bounds = alone_bounds(alone, ring.links.bandwidth_Bps, np.ones(1))
    assert (bounds.lower_s, bounds.upper_s, bounds.drain_s) == (2.0, 2.0, 1.0)


@pytest.mark.parametrize("delay_s", [0.0, 1e-9, 5e-9])
def test_contending_batch_reopens_the_closed_one(delay_s, monkeypatch):
    """A latency-bound batch, then (during its drain) a big batch on the same links:
    both finish within the tolerance of the flows run one by one."""
    ring = TOPOLOGIES["ring8"]()
    small = _batch(ring, np.arange(8), (np.arange(8) + 1) % 8, 64.0)
    big = _batch(ring, np.arange(8), (np.arange(8) + 1) % 8, 2.0**20)
    monkeypatch.setattr(FlowNetwork, "closed_form_min_flows", 0)
    times = {}
    for closed in (False, True):
        monkeypatch.setattr(FlowNetwork, "closed_form", closed)
        env = simpy.Environment()
        network, done = FlowNetwork(env, ring), {}

        def run(net=network, env=env, done=done):
            first = net.send(small)
            first.callbacks.append(lambda _e: done.setdefault("small", env.now))
            yield env.timeout(delay_s)
            yield net.send(big)
            done["big"] = env.now

        env.process(run())
        env.run()
        times[closed] = done
    for key in ("small", "big"):
        assert times[True][key] == pytest.approx(times[False][key], rel=TOL)


@pytest.mark.parametrize(
    ("name", "op", "size"),
    [
        ("boardfly4x4x3", "all-reduce", 1024.0),
        ("boardfly4x4x3", "all-reduce", 2.0**22),
        ("torus4x4x4", "all-reduce", 1024.0),
        ("torus4x4x4", "all-gather", 2.0**20),
        ("ring8", "all-reduce", 64.0),
    ],
)
def test_bounds_skip_keeps_autos_choice(name, op, size, monkeypatch):
    """``auto`` with the flow bounds picks what simulating every close candidate picks."""
    topology = TOPOLOGIES[name]()
    chosen = run_collective(topology, op, size)[0]
    monkeypatch.setattr(select, "_possibly_fastest", lambda close, _predictor: close)
    simulated = run_collective(topology, op, size)[0]
    assert chosen.algorithm == simulated.algorithm
    assert chosen.time_s == simulated.time_s


def test_session_reuses_topology_and_matches_fresh_runs(monkeypatch):
    import tpusim.session as session

    builds = []
    real = session.build_topology
    monkeypatch.setattr(session, "build_topology", lambda s: builds.append(s) or real(s))
    s = tpusim.Session("v5e-pod")
    first, _ = s.collective("all-reduce", "1 MiB")
    second, _ = s.collective("all-gather", 2**22, CollectiveOptions(axes=["x"]))
    assert len(builds) == 1
    assert first == simulate_collective("v5e-pod", "all-reduce", 2**20)[0]
    fresh = simulate_collective("v5e-pod", "all-gather", 2**22, CollectiveOptions(axes=["x"]))
    assert second == fresh[0]


def test_command_line_start_loads_no_heavy_module():
    heavy = ("pandas", "matplotlib", "scipy", "numpy", "pydantic", "simpy", "yaml")
    code = (
        "import sys, tpusim.cli.app as app\n"
        "assert app.modules_for(['--version']) == ()\n"
        f"print(','.join(m for m in {heavy!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_a_command_loads_only_its_module():
    from tpusim.cli.app import modules_for

    assert modules_for(["collective", "v5e-pod", "--op", "all-reduce"]) == ("collective",)
    assert modules_for(["calibrate"]) == ("validate",)
    assert modules_for(["--help"]) == ()  # listed from the table of commands
    assert modules_for(["no-such-command"]) == ()


@pytest.mark.slow
def test_1kib_all_reduce_on_tpu8i_1024_keeps_the_flows_time(monkeypatch):
    """Issue 34's case at full size: the closed form (one event) against one-shot's
    1,047,552 flows drained one event at a time, within the flow tolerance (they agree
    to the last digits: the last arrival crosses the most crowded link, where the
    bounds are exact)."""
    closed = simulate_collective("tpu8i-1024", "all-reduce", 1024.0)
    monkeypatch.setattr(FlowNetwork, "closed_form", False)
    flows = simulate_collective("tpu8i-1024", "all-reduce", 1024.0)
    assert closed[0].algorithm == flows[0].algorithm == "one-shot"
    assert closed[1].num_events == 1 < flows[1].num_events
    assert closed[0].time_s == pytest.approx(flows[0].time_s, rel=TOL)
