"""Running ahead over repeated decode iterations (``Scheduler.decode_run``,
``Replica._run_ahead``) gives the numbers of the iteration-by-iteration loop to the bit.

Oracle: the same stream served with the run-ahead switched off (the plain loop, one
schedule and one finish per iteration), on a stub cost that depends on every field of
the batch (so a wrong cache length or SRAM share shows), over random streams, caches
small enough to preempt, every batch policy, client caps and Poisson arrivals."""

from __future__ import annotations

import random

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from tpusim.serving.batching import BATCH_POLICIES
from tpusim.serving.costs import ReplicaBatch
from tpusim.serving.replica import Replica
from tpusim.serving.scheduler import Request, Scheduler


class StubCosts:
    """Seconds of an iteration from every field of its batch (distinct weights)."""

    def time_s(self, b: ReplicaBatch) -> float:
        return (
            1e-3
            + 3e-5 * b.decode
            + 7e-6 * b.chunk_tokens
            + 2e-4 * b.chunks
            + 1.1e-7 * b.kv_tokens
            + 1e-11 * b.prefill_pairs
            - 3e-8 * b.sram_tokens
        )


def serve(stream: dict, run_ahead: bool, monkeypatch) -> tuple[list, object, int]:
    """Serve ``stream``; returns (each request's outcome, the replica's stats, schedules)."""
    rng = random.Random(stream["seed"])
    t, requests = 0.0, []
    for i in range(stream["n"]):
        t += rng.expovariate(stream["rate"]) if stream["rate"] else 0.0
        prompt = rng.randint(1, stream["max_prompt"])
        requests.append(Request(i, t, prompt, rng.randint(1, stream["max_output"])))
    sched = Scheduler(
        stream["blocks"],
        stream["block_size"],
        stream["max_tokens"],
        stream["max_seqs"],
        sram_blocks=stream["sram_blocks"],
        batching=BATCH_POLICIES.get(stream["batching"]),
    )
    calls = {"schedule": 0}
    schedule = sched.schedule

    def counted(now):
        calls["schedule"] += 1
        return schedule(now)

    monkeypatch.setattr(sched, "schedule", counted)
    if not run_ahead:
        monkeypatch.setattr(sched, "decode_run", lambda: None)
    env = simpy.Environment()
    replica = Replica(env, sched, StubCosts(), 100_000, requests, stream["clients"])  # type: ignore[arg-type]
    env.run()
    outcome = [
        (r.arrival_at, r.first_token_at, r.finished_at, r.preemptions, r.rejected, r.generated)
        for r in requests
    ]
    return outcome, replica.stats, calls["schedule"]


streams = st.fixed_dictionaries(
    {
        "seed": st.integers(0, 10_000),
        "n": st.integers(1, 40),
        "rate": st.sampled_from([0.0, 5.0, 50.0, 500.0]),
        "max_prompt": st.integers(1, 300),
        "max_output": st.integers(1, 200),
        "blocks": st.integers(30, 400),
        "block_size": st.sampled_from([1, 4, 16]),
        "max_tokens": st.sampled_from([8, 64, 512]),
        "max_seqs": st.sampled_from([1, 4, 32, 256]),
        "sram_blocks": st.sampled_from([0, 5]),
        "batching": st.sampled_from(sorted(BATCH_POLICIES.names())),
        "clients": st.sampled_from([None, 1, 8]),
    }
)


@settings(max_examples=60, deadline=None)
@given(stream=streams)
def test_run_ahead_equals_the_plain_loop_to_the_bit(stream, monkeypatch_session):
    plain, plain_stats, _ = serve(stream, False, monkeypatch_session)
    fast, fast_stats, _ = serve(stream, True, monkeypatch_session)
    assert fast == plain
    assert fast_stats == plain_stats


def test_run_ahead_schedules_once_per_change(monkeypatch):
    """128 requests of up to 1,000 output tokens over 64 clients: the plain loop
    schedules every iteration (1,762), the run-ahead about once per admission or
    completion (256 of them) and block shortfall, with the same numbers."""
    stream = {
        "seed": 1, "n": 128, "rate": 0.0, "max_prompt": 200, "max_output": 1000,
        "blocks": 100_000, "block_size": 16, "max_tokens": 512, "max_seqs": 256,
        "sram_blocks": 0, "batching": "vllm-v1", "clients": 64,
    }  # fmt: skip
    plain, plain_stats, plain_calls = serve(stream, False, monkeypatch)
    fast, fast_stats, fast_calls = serve(stream, True, monkeypatch)
    assert (fast, fast_stats) == (plain, plain_stats)
    assert plain_calls == plain_stats.iterations
    assert fast_calls < plain_calls / 5


@pytest.fixture(scope="module")
def monkeypatch_session():
    """One MonkeyPatch for the examples of a hypothesis test (each ``serve`` patches
    its own new scheduler object, so nothing leaks between examples)."""
    with pytest.MonkeyPatch.context() as mp:
        yield mp
