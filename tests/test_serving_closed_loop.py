"""Closed-loop clients and per-iteration overheads (issue 22): one client serves one
request at a time (TTFT one prefill from the sending, the next sent at the last
one's finish), N clients never hold more than N requests, and the overheads add
exactly what their closed forms say."""

from __future__ import annotations

import itertools
import math

import pytest

from tpusim.config.loader import load_system
from tpusim.hardware import ChipCostModel
from tpusim.serving import Deployment, Service
from tpusim.serving.costs import ReplicaBatch
from tpusim.serving.overheads import NONE, IterationOverheads, with_hbm_efficiency
from tpusim.serving.requests import TokenCount, synthetic_requests
from tpusim.serving.scheduler import Request


@pytest.fixture(scope="module")
def service() -> Service:
    return Service(Deployment("tpu8i-pod", "llama-3.1-8b", tp=2, max_sequences=64))


def test_one_client_sends_each_request_when_the_last_finishes(service):
    prompt, output = 256, 8
    requests = synthetic_requests(
        5, math.inf, TokenCount("fixed", prompt), TokenCount("fixed", output), seed=0
    )
    assert all(r.arrival_at == 0.0 for r in requests)  # --rate inf: all at once
    service.run(requests, concurrency=1)
    prefill = service.costs.time_s(ReplicaBatch(
        decode=0, chunk_tokens=prompt, chunks=1, prefill_pairs=prompt * (prompt + 1) / 2
    ))  # fmt: skip
    for before, after in itertools.pairwise(requests):
        assert after.arrival_at == before.finished_at
    for r in requests:  # TTFT from the sending, as vLLM's benchmark measures it
        assert r.first_token_at - r.arrival_at == pytest.approx(prefill, rel=1e-12)


def test_n_clients_never_hold_more_than_n_requests(service):
    requests = synthetic_requests(
        60, math.inf, TokenCount("uniform", 64, 512), TokenCount("uniform", 4, 40), seed=9
    )
    service.run(requests, concurrency=7)
    events = sorted([(r.arrival_at, 1) for r in requests] + [(r.finished_at, -1) for r in requests])
    held = peak = 0
    for _, step in sorted(events, key=lambda e: (e[0], e[1])):  # finishes first at a tie
        held += step
        peak = max(peak, held)
    assert peak == 7
    assert all(r.finished_at is not None for r in requests)


def test_fewer_clients_than_replicas_is_refused():
    from tpusim.errors import InputError

    two = Service(Deployment("tpu8i-pod", "llama-3.1-8b", tp=1, replicas=2))
    with pytest.raises(InputError, match="below the 2 replicas"):
        two.run([Request(0, 0.0, 10, 2)], concurrency=1)


def test_two_rejected_arrivals_in_a_row_do_not_stop_the_run(service):
    """Prompts longer than the context are rejected; the run goes on (it used to end
    with 'the scheduler made no progress')."""
    too_long = service.model.context_length
    requests = [Request(0, 0.0, too_long, 4), Request(1, 1.0, too_long, 4), Request(2, 2.0, 64, 4)]
    service.run(requests)
    assert [r.rejected for r in requests] == [True, True, False]
    assert requests[2].finished_at is not None


def _costs(overheads: IterationOverheads, async_scheduling: bool):
    from tpusim.serving.costs import IterationCosts

    system = load_system("tpu8i-pod")
    shape = Service(Deployment(system, "llama-3.1-8b", tp=1, overheads=False)).shape
    return IterationCosts(system, shape, overheads=overheads, async_scheduling=async_scheduling)


def test_host_time_adds_without_async_scheduling_and_overlaps_with_it():
    batch = ReplicaBatch(decode=8, kv_tokens=8 * 300)
    device = _costs(NONE, False).time_s(batch)
    host = IterationOverheads(host_s=0.004)
    assert _costs(host, False).time_s(batch) == pytest.approx(device + 0.004, rel=1e-12)
    assert _costs(host, True).time_s(batch) == pytest.approx(max(device, 0.004), rel=1e-12)
    slow_host = IterationOverheads(host_s=10 * device)
    assert _costs(slow_host, True).time_s(batch) == pytest.approx(10 * device, rel=1e-12)


def test_hbm_efficiency_slows_memory_bound_ops_by_its_inverse():
    system = load_system("tpu8i-pod")
    slowed = with_hbm_efficiency(system, 0.8)
    # the serving term replaces the chip file's efficiency.hbm (it does not multiply it)
    assert slowed.chip.efficiency.hbm == 0.8
    nominal = with_hbm_efficiency(system, 1.0)
    full, part = ChipCostModel(nominal.chip), ChipCostModel(slowed.chip)
    nbytes = 1e9  # an elementwise pass: memory-bound
    overhead = full.elementwise(0.0).time_s
    ratio = (part.elementwise(nbytes).time_s - overhead) / (
        full.elementwise(nbytes).time_s - overhead
    )
    assert ratio == pytest.approx(1 / 0.8, rel=1e-9)


def test_sampler_passes_cost_their_logit_bytes():
    """Two passes over 8 sequences' fp32 logits of the 128,256-token vocabulary."""
    costs = _costs(IterationOverheads(sampling_passes=2.0), False)
    nbytes = 8 * 128256 * 4
    bandwidth = costs.system.chip.hbm.bandwidth_Bps
    op = ChipCostModel(costs.system.chip).elementwise(0.0).time_s  # the fixed op cost
    assert costs.sampling_s(8) == pytest.approx(2 * (nbytes / bandwidth + op), rel=1e-9)


def _prefix_service(prefix: int) -> Service:
    return Service(Deployment("tpu8i-pod", "llama-3.1-8b", tp=2, prefix_tokens=prefix))


def test_a_prefix_hit_prefills_only_the_rest_of_the_prompt():
    """Prompt 1,000 tokens, shared prefix 520: 32 whole blocks (512 tokens) are cached,
    so TTFT at low load is one prefill of the other 488 tokens attending to the 512;
    a miss prefills all 1,000."""
    service = _prefix_service(520)
    hit, miss = Request(0, 0.0, 1000, 4, prefix_hit=True), Request(1, 100.0, 1000, 4)
    service.run([hit, miss])
    rest = 1000 - 512
    suffix = ReplicaBatch(decode=0, chunk_tokens=rest, chunks=1, kv_tokens=512,
                          prefill_pairs=rest * (512 + (rest + 1) / 2))  # fmt: skip
    whole = ReplicaBatch(decode=0, chunk_tokens=1000, chunks=1, prefill_pairs=1000 * 1001 / 2)
    assert hit.first_token_at - hit.arrival_at == pytest.approx(service.costs.time_s(suffix))
    assert miss.first_token_at - miss.arrival_at == pytest.approx(service.costs.time_s(whole))


def test_prefix_caching_conserves_blocks_and_requests():
    """A small cache with hits and misses, preemptions included: every request completes
    and every block not pinned by the prefix is free again at the end."""
    import dataclasses

    base = _prefix_service(256)
    small = dataclasses.replace(base.capacity, hbm_blocks=300)
    tiny = Service.__new__(Service)
    tiny.__dict__ |= base.__dict__ | {"capacity": small}
    requests = synthetic_requests(
        120, 40.0, TokenCount("uniform", 300, 1500), TokenCount("uniform", 20, 200), seed=5,
        prefix_hit_rate=0.6,
    )  # fmt: skip
    stats = tiny.run(requests).replicas[0]
    assert 50 < sum(r.prefix_hit for r in requests) < 95
    assert all(r.finished_at is not None and r.generated == r.output_tokens for r in requests)
    assert stats.preemptions > 0
    assert all(r.blocks == 0 and r.shared_blocks == 0 for r in requests)
    assert stats.free_blocks == 300 - 16  # the 256-token prefix's 16 blocks stay pinned


def _spec_service(drafts: int, acceptance: float) -> Service:
    return Service(
        Deployment("tpu8i-pod", "llama-3.1-8b", tp=2, draft_tokens=drafts, acceptance=acceptance)
    )


def test_speculation_with_every_draft_accepted_yields_k_plus_1_tokens_per_iteration():
    """Acceptance 1, 3 drafts, 9 output tokens: the first from the prefill, then two
    verification iterations of 4 tokens (last token + 3 drafts), each a chunk attending
    to the context so far."""
    service = _spec_service(3, 1.0)
    prompt = 200
    request = Request(0, 0.0, prompt, 9)
    service.run([request])
    prefill = ReplicaBatch(decode=0, chunk_tokens=prompt, chunks=1,
                           prefill_pairs=prompt * (prompt + 1) / 2)  # fmt: skip

    def verify(prior: int) -> ReplicaBatch:
        return ReplicaBatch(decode=0, chunk_tokens=4, chunks=1, kv_tokens=prior,
                            prefill_pairs=4 * (prior + 5 / 2))  # fmt: skip

    cost = service.costs.time_s
    assert request.first_token_at == pytest.approx(cost(prefill), rel=1e-12)
    expected = cost(prefill) + cost(verify(prompt)) + cost(verify(prompt + 4))
    assert request.finished_at == pytest.approx(expected, rel=1e-12)


def test_speculation_yields_the_expected_tokens_per_verification():
    """Acceptance 0.6, 4 drafts: (1 - 0.6^5) / 0.4 = 2.306 tokens per verification on
    average, measured over 40 requests of 201 output tokens (3%)."""
    service = _spec_service(4, 0.6)
    requests = [Request(i, 100.0 * i, 64, 201) for i in range(40)]
    run_ = service.run(requests)
    verifications = run_.replicas[0].iterations - len(requests)  # one prefill each
    mean = 40 * 200 / verifications
    assert mean == pytest.approx((1 - 0.6**5) / 0.4, rel=0.03)


def test_uneven_expert_routing_lengthens_the_routed_expert_compute():
    """DeepSeek-V3 on EP 8, a compute-bound 4,096-token prefill per chip: at twice the
    mean load on the busiest rank, a MoE layer takes longer by about the routed
    experts' own compute time (a little less: a matmul of twice the rows reaches more
    of the MXU); uniform routing adds nothing."""
    from tpusim.program.builders.serving import layer_program
    from tpusim.serving.costs import ROUTED_EXPERT_OPS, IterationCosts, compute_op_time_s

    system = load_system("tpu8i-pod")
    shape = Service(Deployment(system, "deepseek-v3", ep=8, dtype="fp8", overheads=False)).shape
    even = IterationCosts(system, shape)
    uneven = IterationCosts(system, shape, expert_imbalance=2.0)
    program = layer_program(shape, 4096)
    routed = sum(
        compute_op_time_s(even.costs, op)
        for op in program.ops
        if op.name.startswith("moe.") and op.name.endswith(ROUTED_EXPERT_OPS)
    )
    assert even.imbalance_s(program) == 0.0
    # at most the routed compute once more (linear in the rows); less by the rows
    # term of the matmul efficiency (m / (m + 256): twice the rows run more efficiently)
    assert 0.7 * routed < uneven.imbalance_s(program) <= 1.05 * routed
    assert uneven.layer_times_s(4096)[2] > even.layer_times_s(4096)[2]
