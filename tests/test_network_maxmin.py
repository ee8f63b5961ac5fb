"""The max-min solver's speed paths against its plain answer: a problem re-solved
after flows are removed (restarted at the round of the first removed flow) gives the
rates of a new problem of the remaining flows, bit for bit; unsorted entries and a
``link_order`` hint change nothing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tpusim.network import maxmin
from tpusim.network.maxmin import MaxMinProblem, max_min_rates


def _random_problem(rnd: np.random.Generator, distinct_capacities: bool):
    num_links, num_flows = int(rnd.integers(2, 40)), int(rnd.integers(2, 200))
    if distinct_capacities:
        capacity = rnd.uniform(1.0, 10.0, num_links)
    else:  # ties everywhere, as on a symmetric topology
        capacity = rnd.choice([2.0, 4.0, 8.0], num_links)
    routes = [
        rnd.choice(num_links, int(rnd.integers(1, min(num_links, 7) + 1)), replace=False)
        for _ in range(num_flows)
    ]
    inc_flow = np.repeat(np.arange(num_flows), [r.size for r in routes])
    return inc_flow, np.concatenate(routes), capacity, num_flows


def _fresh_rates(inc_flow, inc_link, capacity, num_flows, dead, tol):
    live = ~dead[inc_flow]
    return max_min_rates(inc_flow[live], inc_link[live], capacity, num_flows, tol)


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.booleans(), st.sampled_from([0.0, 0.01]))
def test_resolve_after_removals_equals_a_new_problem(seed, distinct, tol):
    """Remove flows the way the flow network does (the fastest first, a few at a time,
    sometimes twice between solves) and compare every solve with a fresh one."""
    _check_removals(seed, distinct, tol)


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([0.0, 0.01]))
def test_resolve_with_a_short_history_equals_a_new_problem(seed, tol):
    """With room for only 2 recorded rounds, re-solves restart earlier: same rates."""
    original = maxmin.HISTORY_MAX_BYTES
    maxmin.HISTORY_MAX_BYTES = 2 * 8 * 40  # 2 rounds of up to 40 links
    try:
        _check_removals(seed, True, tol)
    finally:
        maxmin.HISTORY_MAX_BYTES = original


def _check_removals(seed: int, distinct: bool, tol: float) -> None:
    rnd = np.random.default_rng(seed)
    inc_flow, inc_link, capacity, n = _random_problem(rnd, distinct)
    problem = MaxMinProblem(inc_flow, inc_link, capacity, n)
    dead = np.zeros(n, dtype=bool)
    rates = problem.rates(tol)
    assert np.array_equal(rates, max_min_rates(inc_flow, inc_link, capacity, n, tol))
    while not dead.all():
        for _ in range(int(rnd.integers(1, 3))):
            live = np.flatnonzero(~dead)
            if not live.size:
                break
            if rnd.random() < 0.5:  # the fastest flows finish first
                pick = live[rates[live] >= rates[live].max() * (1 - 0.05)]
            else:
                pick = rnd.choice(live, int(rnd.integers(1, live.size + 1)), replace=False)
            freed = problem.remove(pick)
            dead[pick] = True
            assert np.array_equal(np.sort(freed), np.sort(inc_link[np.isin(inc_flow, pick)]))
        rates = problem.rates(tol)
        assert np.array_equal(rates, _fresh_rates(inc_flow, inc_link, capacity, n, dead, tol))


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_entry_order_and_link_order_hint_change_nothing(seed):
    """Shuffled entries (a full sort by flow) and per-run link orders give the same
    rates as entries in flow order."""
    rnd = np.random.default_rng(seed)
    inc_flow, inc_link, capacity, n = _random_problem(rnd, True)
    want = max_min_rates(inc_flow, inc_link, capacity, n, 0.01)
    perm = rnd.permutation(inc_flow.size)
    assert np.array_equal(max_min_rates(inc_flow[perm], inc_link[perm], capacity, n, 0.01), want)
    half = inc_flow.size // 2
    runs = np.concatenate(
        [
            np.argsort(inc_link[:half], kind="stable"),
            half + np.argsort(inc_link[half:], kind="stable"),
        ]
    )
    assert np.array_equal(max_min_rates(inc_flow, inc_link, capacity, n, 0.01, runs), want)
    assert np.array_equal(max_min_rates(inc_flow, inc_link, capacity, n, 0.01, lambda: runs), want)


def test_removal_frees_capacity_for_the_rest():
    """Flow 0 on link 0 (1 B/s), flow 1 on links 0 and 1, flow 2 on link 1 (4 B/s):
    0.5, 0.5, 3.5. Without flow 0, flow 1 has link 0 to itself: 0, 1, 3."""
    inc_flow, inc_link = np.array([0, 1, 1, 2]), np.array([0, 0, 1, 1])
    problem = MaxMinProblem(inc_flow, inc_link, np.array([1.0, 4.0]), 3)
    assert problem.rates() == pytest.approx([0.5, 0.5, 3.5], rel=1e-12)
    problem.remove(np.array([0]))
    assert problem.rates() == pytest.approx([0.0, 1.0, 3.0], rel=1e-12)
