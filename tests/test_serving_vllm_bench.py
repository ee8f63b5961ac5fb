"""vLLM's benchmark, verbatim (issue 41): ``--rate inf --concurrency N`` and ``--rate R
--concurrency N`` as ``vllm bench serve --request-rate R --max-concurrency N`` run them
(every arrival waits on a semaphore of N slots; the default rate is inf), its random
dataset's lengths, ShareGPT-like lengths, and the published v6e-8 figures the
tpu-recipes Llama 3.3 70B runs measured."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import run
from tpusim.serving.options import ServeOptions
from tpusim.serving.requests import SHAREGPT_MEAN_TOKENS, parse_token_count, synthetic_requests
from tpusim.serving.run import serve_run

FIXTURES = Path(__file__).parent / "fixtures"
V6E8 = str(FIXTURES / "systems" / "v6e-8.yaml")
SMALL = ("serve", "tpu8i-pod", "--model", "llama-3.1-8b", "--tp", "2", "--json")


def _row(capsys, *argv: str) -> dict:
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    return json.loads(out)


def _peak_in_flight(requests) -> int:
    """Most requests between their sending and their finish at any instant (a finish
    at the instant of a sending frees its slot first)."""
    events = [(r.arrival_at, 1) for r in requests] + [(r.finished_at, -1) for r in requests]
    held = peak = 0
    for _, step in sorted(events):
        held += step
        peak = max(peak, held)
    return peak


def test_concurrency_without_a_rate_is_rate_inf_as_vllms_default(capsys):
    """vLLM's --request-rate defaults to inf: --concurrency 4 alone queues every request
    at 0, so the first 4 are sent at 0 and the row says rate null (inf) and 4."""
    options = ServeOptions(model="llama-3.1-8b", tp=2, concurrency=4, requests=12)
    assert options.offered_rate_per_s == math.inf
    row, served = serve_run(options, "tpu8i-pod")
    assert row["rate_per_s"] is None and row["concurrency"] == 4
    sent = sorted(r.arrival_at for r in served.requests)
    assert sent[:4] == [0.0] * 4 and sent[4] > 0
    assert _peak_in_flight(served.requests) == 4
    cli = _row(capsys, *SMALL, "--concurrency", "4", "--requests", "12", "--rate", "inf")
    assert cli["rate_per_s"] is None and cli["concurrency"] == 4
    code, table, _ = run(capsys, *SMALL[:-1], "--concurrency", "4", "--requests", "12")
    assert code == 0
    assert re.search(r"rate_per_s +inf req/s", table) and re.search(r"concurrency +4\n", table)


def test_a_finite_rate_under_a_cap_waits_for_a_slot():
    """--rate 50 --concurrency 3: each request is sent at its Poisson arrival (the same
    seed's draws) or, when 3 are in flight, at the finish that frees a slot."""
    options = ServeOptions(
        model="llama-3.1-8b", tp=2, rate=50, concurrency=3, requests=40, output_tokens=64
    )
    poisson = synthetic_requests(40, 50, options.prompt(), options.output(), seed=0)
    row, served = serve_run(options, "tpu8i-pod")
    assert row["rate_per_s"] == 50 and row["concurrency"] == 3
    finishes = {r.finished_at for r in served.requests}
    waited = 0
    for drawn, sent in zip(poisson, served.requests, strict=True):
        assert sent.arrival_at >= drawn.arrival_at
        if sent.arrival_at > drawn.arrival_at:
            waited += 1
            assert sent.arrival_at in finishes  # a slot freed at that instant
    assert waited > 0
    assert _peak_in_flight(served.requests) == 3


def test_gamma_arrivals_need_a_finite_rate(capsys):
    code, _, err = run(capsys, *SMALL, "--concurrency", "4", "--arrival", "gamma")
    assert code == 2 and "give --rate" in err


@pytest.mark.parametrize(
    ("length", "ratio", "low", "high"),
    [(1024, 0.5, 512, 1536), (1000, 0.25, 750, 1250), (7, 0.3, 4, 10), (1000, 0.0, 1000, 1000)],
)
def test_vllm_random_dataset_range(length, ratio, low, high):
    """vLLM's RandomDataset.get_sampling_params: [floor(L (1 - r)), ceil(L (1 + r))]
    (hand-computed bounds), whole numbers drawn uniformly over it."""
    count = parse_token_count({"random": {"length": length, "range_ratio": ratio}})
    draws = count.draw(np.random.default_rng(0), 20_000)
    assert draws.min() == low and draws.max() == high
    assert draws.mean() == pytest.approx((low + high) / 2, rel=0.01)


def test_vllm_random_dataset_refuses_a_ratio_of_one():
    with pytest.raises(ValueError, match=r"range_ratio must be in \[0, 1\)"):
        parse_token_count("{random: {length: 100, range_ratio: 1.0}}")


@pytest.mark.parametrize("side", ["prompt", "output"])
def test_sharegpt_lengths_keep_the_published_means(side):
    """The lognormal's mean is the vLLM paper's ShareGPT mean (161.31 / 337.99)."""
    published = {"prompt": 161.31, "output": 337.99}[side]
    assert SHAREGPT_MEAN_TOKENS[side] == published
    count = parse_token_count({"sharegpt": side})
    assert count.mean == pytest.approx(published, rel=1e-12)
    draws = count.draw(np.random.default_rng(1), 400_000)
    assert draws.mean() == pytest.approx(published, rel=0.02)


def _recipe(capsys, concurrency: int) -> dict:
    return _row(
        capsys,
        "serve", V6E8, "--model", "llama-3.1-70b", "--tp", "8", "--rate", "inf",
        "--concurrency", str(concurrency), "--requests", "3000", "--prompt-tokens", "999",
        "--output-tokens", "1000", "--max-tokens", "512", "--max-seqs", "256", "--json",
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(("concurrency", "published"), [(64, 2494.80), (128, 3544.46)])
def test_v6e8_llama70b_recipe_within_15pct(capsys, concurrency, published):
    """Issue 41's must-hold: the tpu-recipes Llama 3.3 70B runs on a v6e-8 (3000
    requests, 999/1000 tokens, --max-num-batched-tokens 512, --max-num-seqs 256,
    --max-concurrency 64 / 128, --request-rate inf): published output tokens/s 2,494.8
    and 3,544.5 (configs/measurements/serving/vllm-tpu-v6e.yaml)."""
    row = _recipe(capsys, concurrency)
    assert row["output_tokens_per_s"] == pytest.approx(published, rel=0.15)
    assert row["rate_per_s"] is None and row["concurrency"] == concurrency
    assert row["completed"] == 3000 and row["server"] == "vllm-tpu-inference"


@pytest.mark.parametrize("figure_id", ["tpu-recipes-70b-v6e8-c64"])
def test_serve_and_validate_serving_are_one_path(figure_id):
    """``validate --serving`` simulates the figure as ``serve`` runs it: the same
    deployment, server profile and stream give the same throughput and medians."""
    from tpusim.validation.serving import Simulator, load_figures, shipped_overheads

    figure = next(f for f in load_figures() if f.id == figure_id)
    simulated = Simulator().simulate(figure, shipped_overheads(figure))
    options = ServeOptions(
        model=figure.model, tp=figure.tp, rate=figure.rate, concurrency=figure.concurrency,
        requests=figure.simulated_requests, prompt_tokens=figure.prompt_tokens,
        output_tokens=figure.output_tokens, max_tokens=figure.max_tokens,
        max_sequences=figure.max_sequences, server=figure.server,
    )  # fmt: skip
    row, _ = serve_run(options, V6E8)
    assert row["server"] == figure.server
    assert row["output_tokens_per_s"] == pytest.approx(simulated["output_tokens_per_s"], 1e-12)
    assert row["tpot_p50_s"] == pytest.approx(simulated["tpot_median_s"], rel=1e-12)
