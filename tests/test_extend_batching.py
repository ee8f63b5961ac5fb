"""How to extend: a batch policy added from this file alone, through the BATCH_POLICIES
registry, reaches the scheduler, ``ServeOptions`` (the ``batching`` key of ``kind:
serving``) and the generated ``tpusim serve --batching`` flag.

The toy policy is static batching (as before iteration-level scheduling, Orca, OSDI
'22): a new batch is admitted only when the running one has finished; until then the
running requests decode. Oracles, by hand:

* three requests of 4 prompt and 3 output tokens at t = 0, a budget of 8 tokens: the
  first batch is R0 and R1 (one prefill iteration, two decode iterations), then R2
  alone (the same three); under ``vllm-v1`` R2 is prefilled in the second iteration
  beside R0's and R1's decodes, four iterations in all;
* two identical requests at t = 0 whose prompts fill the budget: the second starts
  when the first ends and does the same work from an empty cache, so its end-to-end
  latency is exactly twice the first's (with numpy's linear percentiles over the two,
  p50 = 1.5 and p99 = 1.99 times the first's).
"""

from __future__ import annotations

import json

import pytest
import simpy
from pydantic import ValidationError

from tpusim.cli import main
from tpusim.serving.batching import BATCH_POLICIES, BatchPolicy, Forming
from tpusim.serving.costs import ReplicaBatch
from tpusim.serving.options import ServeOptions
from tpusim.serving.replica import Replica
from tpusim.serving.scheduler import Iteration, Request, Scheduler
from tpusim.serving.service import Deployment, Service

STATIC = "static"


def static_batching(sched: Forming, now: float) -> None:
    """Admit a batch when nothing runs; otherwise run the batch."""
    if not sched.running:
        sched.admit(sched.max_tokens, now, whole=True)
    else:
        sched.run_running(sched.max_tokens, now)


BATCH_POLICIES.register(
    STATIC, BatchPolicy("static batching: a new batch when the last one is done", static_batching)
)


class UnitCosts:
    """One second per iteration."""

    def time_s(self, batch: ReplicaBatch) -> float:
        return 1.0


@pytest.mark.parametrize(
    ("batching", "ids", "ends"),
    [(STATIC, [[0, 1], [0, 1], [0, 1], [2], [2], [2]], [3, 3, 6]),
     ("vllm-v1", [[0, 1], [0, 1, 2], [0, 1, 2], [2]], [3, 3, 4])],
)  # fmt: skip
def test_the_registered_policy_changes_the_iteration_order_as_hand_counted(batching, ids, ends):
    sched = Scheduler(1000, 4, 8, 256, batching=BATCH_POLICIES.get(batching))
    requests = [Request(i, 0.0, 4, 3) for i in range(3)]
    order: list[list[int]] = []
    schedule = sched.schedule

    def recorded(now: float) -> Iteration:
        step = schedule(now)
        order.append([req.id for req, _ in step.chunks])
        return step

    sched.schedule = recorded  # type: ignore[method-assign]
    env = simpy.Environment()
    Replica(env, sched, UnitCosts(), 100_000, requests)  # type: ignore[arg-type]
    env.run()
    assert order == ids
    assert [r.finished_at for r in requests] == ends


def test_the_option_and_the_deployment_take_the_new_policy():
    options = ServeOptions(model="llama-3.1-8b", batching=STATIC)
    deployment = options.deployment("ironwood-256")
    assert deployment.batching == STATIC
    scheduler = Service(Deployment("ironwood-256", "llama-3.1-8b", tp=1, batching=STATIC))
    assert scheduler.scheduler().batching is BATCH_POLICIES.get(STATIC)
    with pytest.raises(ValidationError, match=r"batching\n.*unknown batch policy 'orca'"):
        ServeOptions(model="llama-3.1-8b", batching="orca")


def test_the_generated_flag_runs_the_policy(capsys):
    argv = ["serve", "ironwood-256", "--model", "llama-3.1-8b", "--tp", "1", "--rate", "inf"]
    argv += ["--requests", "2", "--prompt-tokens", "512", "--output-tokens", "8"]
    argv += ["--max-tokens", "512", "--batching", STATIC, "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    first = out["e2e_p50_s"] / 1.5
    assert out["e2e_p99_s"] == pytest.approx(1.99 * first, rel=1e-12)
