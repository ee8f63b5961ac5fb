"""How to extend: a scheduler policy added from this file alone, through the
SCHEDULERS registry, reaches the scheduler, ``ServeOptions`` (the ``scheduler`` key of
``kind: serving``) and the generated ``tpusim serve --scheduler`` flag.

The toy policy is shortest prompt first. Oracle, by hand: five requests arrive at once
on one replica that runs one sequence per iteration (``max_sequences`` 1) and each
wants one output token, so each is one prefill iteration and they are served one
after the other: in ascending prompt length under the toy policy, in arrival order
under ``fcfs``; the k-th served finishes at the sum of the prefill times of the first
k (each the iteration cost of one chunk of its prompt on an empty cache).
"""

from __future__ import annotations

import json
from itertools import accumulate

import pytest
from pydantic import ValidationError

from tpusim.cli import main
from tpusim.serving.costs import ReplicaBatch
from tpusim.serving.options import ServeOptions
from tpusim.serving.policies import SCHEDULERS, SchedulerPolicy
from tpusim.serving.scheduler import Request
from tpusim.serving.service import Deployment, Service

SPF = "shortest-prompt-first"
SCHEDULERS.register(SPF, SchedulerPolicy("shortest prompt first", lambda r: r.prompt_tokens))

PROMPTS = [900, 300, 700, 100, 500]


def _service(scheduler: str) -> Service:
    return Service(
        Deployment("ironwood-256", "llama-3.1-8b", tp=1, max_sequences=1, scheduler=scheduler)
    )


def _prefill_s(service: Service, prompt: int) -> float:
    """One iteration of one chunk of ``prompt`` tokens on an empty cache."""
    pairs = prompt * (prompt + 1) / 2
    return service.costs.time_s(ReplicaBatch(0, prompt, 1, 0, pairs, 0))


@pytest.mark.parametrize(
    ("scheduler", "order"),
    [(SPF, sorted(range(5), key=lambda i: PROMPTS[i])), ("fcfs", list(range(5)))],
)
def test_requests_are_served_in_the_policy_order_at_hand_summed_times(scheduler, order):
    service = _service(scheduler)
    requests = [Request(i, 0.0, p, 1) for i, p in enumerate(PROMPTS)]
    service.run(requests)
    served = sorted(requests, key=lambda r: r.finished_at)
    assert [r.id for r in served] == order
    ends = list(accumulate(_prefill_s(service, PROMPTS[i]) for i in order))
    assert [r.finished_at for r in served] == pytest.approx(ends, rel=1e-12)


def test_the_option_takes_the_new_policy_and_names_the_known_ones():
    options = ServeOptions(model="llama-3.1-8b", scheduler=SPF)
    assert options.deployment("ironwood-256").scheduler == SPF
    with pytest.raises(ValidationError, match=r"scheduler\n.*unknown scheduler policy 'sjf'"):
        ServeOptions(model="llama-3.1-8b", scheduler="sjf")
    with pytest.raises(ValidationError, match=f"choose from fcfs, {SPF}"):
        ServeOptions(model="llama-3.1-8b", scheduler="sjf")


def _mean_ttft_s(capsys, scheduler: str) -> float:
    argv = ["serve", "ironwood-256", "--model", "llama-3.1-8b", "--tp", "1", "--max-seqs", "1"]
    argv += ["--rate", "inf", "--requests", "40", "--prompt-tokens", "{uniform: [100, 2000]}"]
    argv += ["--output-tokens", "1", "--scheduler", scheduler, "--json"]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)["ttft_mean_s"]


def test_the_generated_flag_runs_the_policy(capsys):
    """Every request at once, one at a time: shortest processing time first minimises
    the mean completion time (Smith's rule), so the toy policy's mean TTFT is below
    first come, first served's."""
    assert _mean_ttft_s(capsys, SPF) < _mean_ttft_s(capsys, "fcfs")
