"""Observers against independent oracles: hop statistics against the hop counts of
every flow sent, concatenated (what the observer kept before it kept running counts)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tpusim.network.base import FlowBatch
from tpusim.results.observers import HopStats


def batch_of(hops: list[int]) -> FlowBatch:
    """A batch whose flows have ``hops`` links each (link ids do not matter here)."""
    n = len(hops)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(hops, out=ptr[1:])
    zeros = np.zeros(n, dtype=np.int64)
    return FlowBatch(zeros, zeros, np.ones(n), ptr, np.zeros(int(ptr[-1]), dtype=np.int64))


def test_no_flow_sent_has_zero_hops():
    stats = HopStats()
    stats.flows_sent(batch_of([]))
    assert (stats.num_flows, stats.max_hops, stats.mean_hops) == (0, 0, 0.0)


def test_a_repeated_batch_counts_each_send():
    stats, ring_step = HopStats(), batch_of([1, 1, 2])
    for _ in range(3):
        stats.flows_sent(ring_step)
    stats.flows_sent(batch_of([0, 5]))
    # by hand: 3 x (1 + 1 + 2) + 5 = 17 hops over 3 x 3 + 2 = 11 flows
    assert (stats.num_flows, stats.max_hops, stats.mean_hops) == (11, 5, 17 / 11)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.lists(st.integers(0, 40), max_size=30), st.integers(1, 3)),
        max_size=8,
    )
)
def test_hop_stats_match_the_concatenated_hop_counts(sends):
    stats, every = HopStats(), []
    for hops, times in sends:
        batch = batch_of(hops)
        for _ in range(times):
            stats.flows_sent(batch)
            every.append(np.diff(batch.ptr))
    flat = np.concatenate(every) if every else np.zeros(0, dtype=np.int64)
    assert stats.num_flows == flat.size
    assert stats.max_hops == (int(flat.max()) if flat.size else 0)
    assert stats.mean_hops == (float(flat.mean()) if flat.size else 0.0)  # exactly
