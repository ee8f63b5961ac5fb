"""Steady-state serving figures (issue 22): the batch-means arithmetic against numpy
by hand, the queue-trend verdict on constructed queues, the utilisation cap, and the
capacity's independence of the stream's length on the shipped scenario's cases."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from tpusim.network import NetworkSettings
from tpusim.serving import Deployment, Service, Slo
from tpusim.serving.capacity import MAX_UTILISATION, find_capacity, trial
from tpusim.serving.requests import TokenCount, synthetic_requests
from tpusim.serving.scheduler import Request
from tpusim.serving.steady import BATCHES, steady_state, trend


def _done(i: int, arrival: float, ttft: float, wait: float, output: int = 11) -> Request:
    """A completed request with the given TTFT and queue wait, TPOT 10 ms."""
    r = Request(i, arrival, 100, output)
    r.first_token_at = arrival + ttft
    r.finished_at = r.first_token_at + 0.01 * (output - 1)
    r.queued_s = wait
    return r


def test_batch_means_of_the_p99s_by_hand():
    """1,000 requests: 100 of warm-up and 100 of cool-down dropped, 10 batches of 80;
    the pooled p99 and the batch means' interval equal numpy on the same slices."""
    rng = np.random.default_rng(1)
    ttft = rng.exponential(0.2, 1000)
    requests = [_done(i, float(i), float(ttft[i]), 0.05) for i in range(1000)]
    row = steady_state(requests)
    kept = ttft[100:900]
    per_batch = [np.percentile(kept[80 * b : 80 * (b + 1)], 99) for b in range(10)]
    half = 2.262 * np.std(per_batch, ddof=1) / math.sqrt(10)
    assert row["warmup_requests"] == 100 and row["cooldown_requests"] == 100
    assert row["measured_requests"] == 800 and row["batches"] == BATCHES == 10
    assert row["ttft_p99_s"] == pytest.approx(np.percentile(kept, 99), rel=1e-12)
    assert row["ttft_p99_mean_s"] == pytest.approx(np.mean(per_batch), rel=1e-12)
    assert row["ttft_p99_ci_s"] == pytest.approx(half, rel=1e-12)
    assert row["tpot_p99_s"] == pytest.approx(0.01, rel=1e-9)
    assert row["reached"] and not row["queue_trending"]


def test_a_queue_growing_from_empty_is_trending_and_a_flat_one_is_not():
    rng = np.random.default_rng(2)
    growing = [0.5 * b + 0.05 * rng.random() for b in range(10)]
    flat = [1.0 + 0.2 * rng.random() for _ in range(10)]
    assert trend(growing)[1]
    assert trend(growing)[0] == pytest.approx(0.5, abs=0.02)
    assert not trend(flat)[1]


def test_a_rejected_request_or_a_short_stream_has_no_steady_state():
    requests = [_done(i, float(i), 0.1, 0.0) for i in range(500)]
    requests[7].rejected = True
    assert not steady_state(requests)["reached"]
    assert not steady_state(requests[:100])["reached"]  # 80 measured < 10 batches of 10


@pytest.fixture(scope="module")
def small() -> Service:
    return Service(Deployment("tpu8i-pod", "llama-3.1-8b", tp=2, max_sequences=32))


def _stream(n: int):
    def stream(rate: float) -> list[Request]:
        return synthetic_requests(
            n, rate, TokenCount("fixed", 512), TokenCount("fixed", 64), seed=4
        )

    return stream


def test_an_overloaded_rate_is_not_steady_and_fails_the_slo(small):
    """Twice the saturated throughput: the queue grows through the run, the trial has
    no steady state and fails even a loose SLO."""
    from tpusim.serving.capacity import saturated_rate_per_s, saturated_throughput_per_s

    stream = _stream(600)
    saturation = saturated_throughput_per_s(small, stream, saturated_rate_per_s(small, 512, 64))
    row = trial(small, stream, 2 * saturation, Slo(ttft_s=1e6, tpot_s=1e6))
    assert row["steady_state"]["queue_trending"] and not row["slo_met"]


def test_a_loose_slo_gives_the_utilisation_cap(small):
    """With an SLO any steady rate meets, the capacity is the cap: 0.9 of the
    saturated throughput the search measured."""
    best = find_capacity(small, _stream(600), Slo(ttft_s=1e3, tpot_s=1e3))
    assert best["capacity_limited_by"] == "utilisation" and best["trials"] == 1
    assert best["capacity_rate_per_s"] == pytest.approx(
        MAX_UTILISATION * best["saturation_rate_per_s"], rel=1e-12
    )


SCENARIO_CASES = [
    (system, workload)
    for system in ("tpu8i-pod", "ironwood-256", "tpu8t-superpod")
    for workload in ("llama-70b-fp8", "deepseek-v3-fp8", "llama-70b-fp8-tiered")
]


def _scenario_capacity(system: str, workload: str, requests: int) -> float:
    from pathlib import Path

    from tpusim.serving.run import serve
    from tpusim.study.scenario import Scenario
    from tpusim.workloads.serving import options_of

    path = Path(__file__).resolve().parent.parent / "scenarios" / "serving.yaml"
    spec = next(p.workload for p in Scenario(path).runs if p.workload.name == workload)
    context = SimpleNamespace(
        system=system, fidelity="flow", network=NetworkSettings(), power_per_chip_W=None,
        price_per_chip_hour_usd=None,
    )  # fmt: skip
    options = options_of(spec, context).model_copy(update={"requests": requests})  # type: ignore[arg-type]
    return serve(options, context.system)["capacity_rate_per_s"]


@pytest.mark.slow
@pytest.mark.parametrize(("system", "workload"), SCENARIO_CASES)
def test_capacity_moves_at_most_3pct_between_4000_and_16000_requests(system, workload):
    """Issue 22's bar: the steady-state capacity of each shipped serving case is the
    same (within 3%) on a stream four times longer."""
    short = _scenario_capacity(system, workload, 4000)
    long = _scenario_capacity(system, workload, 16000)
    assert short > 0 and abs(short / long - 1) <= 0.03
