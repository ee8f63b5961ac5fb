"""The flow fidelity's bounds on a batch run alone (``alone_bounds``), which decide
when a batch is answered in closed form, against the oracle: the same batch run flow
by flow with every tolerance 0 (exact max-min rates, no merged drains).

Random batches on small Boardflies and tori (random pairs, equal or random bytes,
from latency bound to bandwidth bound): the exact last arrival always lies within
the bounds. Equal-sized all-pairs steps (one-shot's and direct's) meet the exact
most-crowded-link bound, so both bounds coincide and equal the exact run.
"""

from __future__ import annotations

import numpy as np
import pytest
import simpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tpusim.network.flow import FlowNetwork
from tpusim.network.flow_blocks import alone_bounds
from tpusim.network.routes import RouteCache
from tpusim.topology import Boardfly, Torus

W, A = 100e9, 1e-6  # link bandwidth (B/s) and hop latency (s)
TOPOLOGIES = {
    "boardfly2x3x4": lambda: Boardfly(2, 3, 4, link_bandwidth_Bps=W, hop_latency_s=A),
    "boardfly2x2x5-two-global": lambda: Boardfly(
        2, 2, 5, link_bandwidth_Bps=W, hop_latency_s=A, links_per_group_pair=2
    ),
    "torus3x4": lambda: Torus((3, 4), (True, True), link_bandwidth_Bps=W, hop_latency_s=A),
    "mesh4x3": lambda: Torus((4, 3), (False, False), link_bandwidth_Bps=W, hop_latency_s=A),
}
BUILT = {name: make() for name, make in TOPOLOGIES.items()}


def _exact_last_arrival_s(topology, batch) -> float:
    """The batch alone on idle links, flow by flow, exact rates, no merged drains."""
    env = simpy.Environment()
    network = FlowNetwork(env, topology, merge_tolerance=0.0, rate_tolerance=0.0)
    network.closed_form = False
    done = network.send(batch)
    env.run(until=done)
    return env.now


def _bounds(topology, batch):
    network = FlowNetwork(simpy.Environment(), topology)
    return alone_bounds(batch, network.bandwidth_Bps, network.path_latency_s(batch))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(TOPOLOGIES)),
    seed=st.integers(0, 2**32 - 1),
    num_flows=st.integers(1, 60),
    equal=st.booleans(),
    scale=st.sampled_from([8.0, 1e3, 1e5, 1e7]),
)
def test_the_exact_run_lies_within_the_bounds(name, seed, num_flows, equal, scale):
    topology = BUILT[name]
    rng = np.random.default_rng(seed)
    n = topology.num_chips
    src = rng.integers(0, n, num_flows)
    dst = (src + rng.integers(1, n, num_flows)) % n  # never a chip to itself
    sizes = np.full(num_flows, scale) if equal else scale * rng.uniform(0.01, 1.0, num_flows)
    batch = RouteCache(topology).batch(src, dst, sizes)
    bounds = _bounds(topology, batch)
    exact = _exact_last_arrival_s(topology, batch)
    assert bounds.lower_s <= exact * (1 + 1e-9)
    assert exact <= bounds.upper_s * (1 + 1e-9)


@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
@pytest.mark.parametrize("size", [64.0, 4096.0, 2.0**20])
def test_equal_all_pairs_steps_are_determined_exactly(name, size):
    """Every ordered pair with the same bytes: the flows on the most crowded link run
    at its fair share from start to end, so the lower bound reaches the upper one."""
    topology = BUILT[name]
    n = topology.num_chips
    src, dst = (x.ravel() for x in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    keep = src != dst
    batch = RouteCache(topology).batch(src[keep], dst[keep], np.full(int(keep.sum()), size))
    bounds = _bounds(topology, batch)
    exact = _exact_last_arrival_s(topology, batch)
    assert bounds.lower_s == pytest.approx(bounds.upper_s, rel=1e-12)
    assert bounds.time_s == pytest.approx(exact, rel=1e-9)


def test_most_crowded_bound_hand_count():
    """Three 100-byte flows on a 4-chip line (100 B/s links, 1 s per hop): 0->2 and
    1->2 share link 1->2 (crowding 2/100 s/B), 0->1 shares 0->1 with 0->2. Link 1->2's
    two flows drain at exactly 2 s; 0->2 arrives at 2 + 2 = 4 s, the last arrival."""
    line = Torus((4,), (False,), link_bandwidth_Bps=100.0, hop_latency_s=1.0)
    batch = RouteCache(line).batch(np.array([0, 1, 0]), np.array([2, 2, 1]), np.full(3, 100.0))
    bounds = _bounds(line, batch)
    assert bounds.lower_s == pytest.approx(4.0, rel=1e-12)
    assert bounds.upper_s == pytest.approx(4.0, rel=1e-12)
    assert _exact_last_arrival_s(line, batch) == pytest.approx(4.0, rel=1e-12)
