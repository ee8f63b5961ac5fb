"""Serving (issue 14): conservation, closed forms and queueing laws on the simulated
service, and the command line's bad-input errors."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from tests.helpers import assert_one_error_line, run
from tpusim.serving import Deployment, Service, Slo, summary
from tpusim.serving.capacity import find_capacity, trial
from tpusim.serving.costs import ReplicaBatch
from tpusim.serving.requests import TokenCount, read_trace, synthetic_requests
from tpusim.serving.scheduler import Request


@pytest.fixture(scope="module")
def service() -> Service:
    """Llama 3.1 8B on two TPU 8i chips (TP 2: all-reduces on the Boardfly)."""
    return Service(Deployment("tpu8i-pod", "llama-3.1-8b", tp=2, max_sequences=64))


def _spaced(n: int, prompt: int, output: int, gap_s: float = 1000.0) -> list[Request]:
    return [Request(i, i * gap_s, prompt, output) for i in range(n)]


def test_low_load_ttft_is_one_prefill_and_tpot_one_decode_of_batch_one(service):
    prompt, output = 512, 8
    requests = _spaced(3, prompt, output)
    service.run(requests)
    prefill = ReplicaBatch(decode=0, chunk_tokens=prompt, chunks=1,
                           prefill_pairs=prompt * (prompt + 1) / 2)  # fmt: skip
    decodes = [
        service.costs.time_s(ReplicaBatch(decode=1, kv_tokens=prompt + k + 1))
        for k in range(output - 1)
    ]
    for r in requests:
        assert r.first_token_at - r.arrival_at == pytest.approx(service.costs.time_s(prefill))
        tpot = (r.finished_at - r.first_token_at) / (output - 1)
        assert tpot == pytest.approx(sum(decodes) / len(decodes), rel=1e-12)


def test_under_capacity_output_rate_is_rate_times_output_tokens(service):
    rate, output = 4.0, 64
    requests = synthetic_requests(
        800, rate, TokenCount("fixed", 256), TokenCount("fixed", output), seed=3,
        arrival="gamma", burstiness=0.05,
    )  # fmt: skip
    service.run(requests)
    row = summary(requests, service.chips)
    assert row["completed"] == 800
    assert row["output_tokens_per_s"] == pytest.approx(rate * output, rel=0.02)


def test_littles_law_on_the_queue_and_the_system(service):
    """Request-seconds integrated by the loop (waiting, in the system) equal the sum of
    the per-request waits and latencies: L = lambda W over the whole run."""
    requests = synthetic_requests(
        600, 60.0, TokenCount("uniform", 100, 1500), TokenCount("uniform", 10, 200), seed=7
    )
    run_ = service.run(requests)
    stats = run_.replicas[0]
    waits = sum(r.queued_s for r in requests)
    sojourn = sum(r.finished_at - r.arrival_at for r in requests)
    assert waits > 1.0  # the queue really formed
    assert stats.queue_area == pytest.approx(waits, rel=1e-9)
    assert stats.system_area == pytest.approx(sojourn, rel=1e-9)


def test_conservation_when_the_cache_is_full(service):
    """A 200-block cache (3,200 tokens): requests wait or are preempted and recomputed,
    every one completes with all its tokens, except the one that cannot fit alone."""
    small = dataclasses.replace(service.capacity, hbm_blocks=200)
    tiny = Service.__new__(Service)
    tiny.__dict__ |= service.__dict__ | {"capacity": small}
    requests = synthetic_requests(
        300, 50.0, TokenCount("uniform", 200, 1200), TokenCount("uniform", 50, 400), seed=11
    )
    requests.append(Request(300, requests[-1].arrival_at + 1, 3000, 300))  # 3,299 > 3,200
    run_ = tiny.run(requests)
    done = [r for r in requests if r.finished_at is not None]
    rejected = [r for r in requests if r.rejected]
    assert len(done) + len(rejected) == len(requests)
    assert [r.id for r in rejected] == [300]
    assert run_.replicas[0].preemptions > 0
    assert all(r.generated == r.output_tokens and r.blocks == 0 for r in done)
    assert sum(r.preemptions for r in requests) == run_.replicas[0].preemptions


def test_saturated_throughput_is_the_largest_batch_iteration_throughput(service):
    """Every request at t=0, short prompts, long outputs: the server decodes 64
    sequences at a time; its throughput is 64 tokens per iteration of that batch at the
    mean context (the iteration time is affine in the context)."""
    prompt, output, slots = 16, 512, 64
    requests = _spaced(4 * slots, prompt, output, gap_s=0.0)
    service.run(requests)
    row = summary(requests, service.chips)
    mean_context = prompt + output / 2
    step = service.costs.time_s(ReplicaBatch(decode=slots, kv_tokens=int(slots * mean_context)))
    assert row["output_tokens_per_s"] == pytest.approx(slots / step, rel=0.03)


def test_same_seed_same_numbers(service):
    def once():
        requests = synthetic_requests(
            200, 20.0, TokenCount("lognormal", 300, 0.5), TokenCount("fixed", 30), seed=5
        )
        service.run(requests)
        return summary(requests, service.chips)

    assert once() == once()


def test_capacity_meets_the_slo_and_a_higher_rate_does_not(service):
    slo = Slo(ttft_s=0.5, tpot_s=0.02)

    def stream(rate):
        return synthetic_requests(
            150, rate, TokenCount("fixed", 512), TokenCount("fixed", 32), seed=2
        )

    best = find_capacity(service, stream, slo, tolerance=0.05)
    capacity = best["capacity_rate_per_s"]
    assert capacity > 0
    assert best["ttft_p99_s"] <= slo.ttft_s and best["tpot_p99_s"] <= slo.tpot_s
    assert not trial(service, stream, capacity * 1.5, slo)["slo_met"]


def test_trace_with_a_bad_row_names_file_and_line(tmp_path, capsys):
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0.0,10,5\n0.5,ten,5\n")
    code, out, err = run(capsys, "serve", "tpu8i-pod", "--model", "llama-3.1-8b",
                         "--trace", str(trace))  # fmt: skip
    assert f"{trace}:3:" in assert_one_error_line(code, out, err)


def test_trace_rows_become_requests(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n1.5,10,5\n0.5,20,6\n")
    requests = read_trace(trace)
    assert [(r.arrival_at, r.prompt_tokens, r.output_tokens) for r in requests] == [
        (0.5, 20, 6), (1.5, 10, 5),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--model", "no-such-model"], "unknown model 'no-such-model'"),
        (["--model", "llama-3.1-70b", "--tp", "16"], r"kv_heads \(8\) is not divisible"),
        (["--model", "llama-3.1-405b", "--tp", "1"], r"short by .* per chip"),
        (["--model", "llama-3.1-8b", "--find-capacity"], "needs --slo-ttft and --slo-tpot"),
        (["--model", "llama-3.1-8b", "--prompt-tokens", "{uniform: [5, 1]}"], "--prompt-tokens"),
        (["--model", "llama-3.1-8b", "--replicas", "2000"], "need 2000 chips"),
        (["--model", "llama-3.1-8b", "--disaggregate", "1:0"], "expected P:D"),
    ],
)
def test_bad_input_exits_2_with_one_line(capsys, argv, match):
    code, out, err = run(capsys, "serve", "tpu8i-pod", *argv)
    assert re.search(match, assert_one_error_line(code, out, err))


def test_serve_json_has_the_issue_fields(capsys):
    argv = ["--tp", "2", "--rate", "5", "--requests", "50", "--output-tokens", "16", "--json"]
    code, out, _ = run(capsys, "serve", "tpu8i-pod", "--model", "llama-3.1-8b", *argv)
    assert code == 0
    row = json.loads(out)
    fields = [
        "system", "model", "replicas", "chips_per_replica", "requests", "completed",
        "rejected", "rate_per_s", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s",
        "e2e_p50_s", "e2e_p99_s", "output_tokens_per_s", "tokens_per_s_per_chip",
        "kv_cache_capacity_tokens", "preemptions",
    ]  # fmt: skip
    assert [f for f in fields if f not in row] == []
    assert row["completed"] + row["rejected"] == row["requests"] == 50
    assert row["rate_per_s"] == 5.0


def test_disaggregated_low_load_adds_one_kv_transfer(service):
    """One request at a time on 1 prefill + 1 decode replica: TTFT is one prefill; the
    rest takes the colocated decode time plus one KV transfer."""
    from tpusim.serving.disaggregated import DisaggregatedService

    prompt, output = 512, 8
    two = Service(dataclasses.replace(service.deployment, replicas=2))
    split = DisaggregatedService(two, 1, 1)
    colocated, apart = _spaced(2, prompt, output), _spaced(2, prompt, output)
    service.run(colocated)
    split.run(apart)
    transfer = split.transfer_s(0, 0, prompt)
    assert transfer > 0
    for c, a in zip(colocated, apart, strict=True):
        assert a.first_token_at == pytest.approx(c.first_token_at)
        decode_c, decode_a = c.finished_at - c.first_token_at, a.finished_at - a.first_token_at
        assert decode_a == pytest.approx(decode_c + transfer, rel=1e-12)


def test_disaggregated_conservation(service):
    from tpusim.serving.disaggregated import DisaggregatedService

    three = Service(dataclasses.replace(service.deployment, replicas=3))
    split = DisaggregatedService(three, 1, 2)
    requests = synthetic_requests(
        300, 40.0, TokenCount("uniform", 100, 900), TokenCount("uniform", 1, 60), seed=4
    )
    split.run(requests)
    assert all(r.finished_at is not None and r.generated == r.output_tokens for r in requests)
    assert all(r.finished_at >= r.first_token_at >= r.arrival_at for r in requests)
