"""The scheduling lag of vLLM V1 (tpusim/serving/replica.py's module docstring): a busy
replica sees a request only at a scheduling decision made after it arrived; with
``--async-scheduling`` that decision is made while the previous iteration runs.

Oracle, counted by hand (the stub cost of tests/test_serving_batching.py: an iteration
of ``n`` tokens takes ``1 + n/4`` s; budget 8 tokens, vLLM V1's policy): two clients;
R0 (4-token prompt, 2 outputs) and R1 (4, 5) are sent at 0, R2 (4, 2) when R0 finishes.

- it1 (0-3) prefills R0 and R1; it2 (3-4.5) decodes both: R0 is done at 4.5 and R2 is
  sent at 4.5.
- Seen at once (the lag removed): it3 (4.5-6.75) decodes R1 and prefills R2: TTFT 2.25.
- Synchronous: it3 starts at 4.5, the instant R2 is sent, so it misses it: it3 decodes R1
  alone (4.5-5.75), it4 (5.75-8) decodes R1 and prefills R2: TTFT 3.5; it5 (8-9.5) ends
  both.
- Asynchronous: it3 was scheduled at it2's start (3) and it4 at it3's start (4.5, still
  not strictly after the sending): it3 (4.5-5.75) and it4 (5.75-7) decode R1, it5
  (7-9.25) decodes R1 (its last) and prefills R2: TTFT 4.75; it6 (9.25-10.5) ends R2.
- An idle replica sees an arrival at once (the first iteration at 0 holds R0 and R1).
"""

from __future__ import annotations

import pytest
import simpy

from tpusim.serving.batching import BATCH_POLICIES
from tpusim.serving.costs import ReplicaBatch
from tpusim.serving.replica import Replica
from tpusim.serving.scheduler import Request, Scheduler


class StubCosts:
    def time_s(self, batch: ReplicaBatch) -> float:
        return 1.0 + (batch.decode + batch.chunk_tokens) / 4


def run(async_scheduling: bool) -> tuple[list[Request], list[float]]:
    sched = Scheduler(1000, 4, 8, 256, batching=BATCH_POLICIES.get("vllm-v1"))
    requests = [Request(0, 0.0, 4, 2), Request(1, 0.0, 4, 5), Request(2, 0.0, 4, 2)]
    env = simpy.Environment()
    replica = Replica(
        env, sched, StubCosts(), 100_000, requests, 2, async_scheduling=async_scheduling
    )  # type: ignore[arg-type]
    env.run()
    return requests, [b.start_at for b in replica.stats.batches]


def test_a_synchronous_replica_misses_a_request_sent_as_its_iteration_starts():
    requests, starts = run(async_scheduling=False)
    assert starts == pytest.approx([0, 3, 4.5, 5.75, 8])
    r0, r1, r2 = requests
    assert (r0.first_token_at, r1.first_token_at) == pytest.approx((3, 3))
    assert r2.arrival_at == pytest.approx(4.5) and r2.first_token_at == pytest.approx(8)
    assert r2.first_token_at - r2.arrival_at == pytest.approx(3.5)
    assert (r1.finished_at, r2.finished_at) == pytest.approx((9.5, 9.5))


def test_an_asynchronous_replica_schedules_one_iteration_ahead():
    requests, starts = run(async_scheduling=True)
    assert starts == pytest.approx([0, 3, 4.5, 5.75, 7, 9.25])
    _, r1, r2 = requests
    assert r2.first_token_at - r2.arrival_at == pytest.approx(4.75)
    assert (r1.finished_at, r2.finished_at) == pytest.approx((9.25, 10.5))
