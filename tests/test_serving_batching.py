"""Batch policies (:mod:`tpusim.serving.batching`): the iterations each forms on tiny
streams counted by hand, JetStream's prefill buckets, and how a run chooses its policy
(the server profile's ``batching:``, the ``batching`` option).

Oracle of the hand counts: three requests arrive at t = 0, each 4 prompt tokens and 3
output tokens; the budget is 8 tokens, blocks of 4 tokens are plenty. An iteration of
``n`` tokens (one per decode sequence plus the prefill tokens) takes ``1 + n/4`` s
(a stub cost, so every time below is a sum done by hand).

``prefill-first`` (vLLM V0): it1 prefills R0 and R1 (8 tokens, the budget: 3 s, ends
at 3), it2 prefills R2 alone, since a prompt can be admitted (4 tokens: 2 s, ends at 5),
it3 and it4 decode all three (3 tokens: 1.75 s each, end at 6.75 and 8.5). TTFT: 3, 3,
5; all finish at 8.5; TPOT (finish - first token) / 2: 2.75, 2.75, 1.75.

``vllm-v1``: it1 prefills R0 and R1 (ends at 3), it2 decodes R0 and R1 and prefills R2
(6 tokens: 2.5 s, ends at 5.5), it3 decodes all three (ends at 7.25: R0 and R1 done),
it4 decodes R2 (1 token: 1.25 s, ends at 8.5). TTFT 3, 3, 5.5; finish 7.25, 7.25, 8.5.
"""

from __future__ import annotations

import pytest
import simpy

from tpusim.errors import ConfigError
from tpusim.serving.batching import BATCH_POLICIES, bucket_tokens, power_of_two_tokens
from tpusim.serving.costs import ReplicaBatch
from tpusim.serving.replica import Replica
from tpusim.serving.scheduler import Request, Scheduler
from tpusim.serving.servers import load_server
from tpusim.serving.service import Deployment, Service


class StubCosts:
    """``1 + tokens/4`` s per iteration (tokens: decode sequences + prefill tokens)."""

    def time_s(self, batch: ReplicaBatch) -> float:
        return 1.0 + (batch.decode + batch.chunk_tokens) / 4


def run(batching: str, prompts: list[int], output: int, max_tokens: int, max_seqs: int):
    """Serve requests of ``prompts`` tokens arriving at 0 on a stub-costed replica;
    returns the requests and the iterations' records."""
    sched = Scheduler(1000, 4, max_tokens, max_seqs, batching=BATCH_POLICIES.get(batching))
    requests = [Request(i, 0.0, p, output) for i, p in enumerate(prompts)]
    env = simpy.Environment()
    replica = Replica(env, sched, StubCosts(), 100_000, requests)  # type: ignore[arg-type]
    env.run()
    return requests, replica.stats.batches


def shape(batches) -> list[tuple[int, int, int]]:
    """Each iteration's (decode sequences, prefill chunks, prefill tokens)."""
    return [(b.decode, b.chunks, b.prefill_tokens) for b in batches]


def test_prefill_first_runs_whole_prompts_alone_then_decodes_as_hand_counted():
    requests, batches = run("prefill-first", [4, 4, 4], 3, max_tokens=8, max_seqs=256)
    assert shape(batches) == [(0, 2, 8), (0, 1, 4), (3, 0, 0), (3, 0, 0)]
    assert [b.start_at for b in batches] == pytest.approx([0, 3, 5, 6.75])
    assert [r.first_token_at for r in requests] == pytest.approx([3, 3, 5])
    assert [r.finished_at for r in requests] == pytest.approx([8.5, 8.5, 8.5])
    tpot = [(r.finished_at - r.first_token_at) / (r.output_tokens - 1) for r in requests]
    assert tpot == pytest.approx([2.75, 2.75, 1.75])


def test_prefill_first_serial_runs_each_prompt_as_its_own_padded_pass():
    """vLLM V0 on TPU: it1's two prompts run as two passes of 16 padded tokens (5 s
    each: the first tokens of R0 and R1 at 10), it2 R2's (5 s, to 15), then the same
    two decodes as prefill-first (1.75 s each, to 16.75 and 18.5)."""
    requests, batches = run("prefill-first-serial", [4, 4, 4], 3, max_tokens=8, max_seqs=256)
    assert shape(batches) == [(0, 2, 32), (0, 1, 16), (3, 0, 0), (3, 0, 0)]
    assert [b.duration_s for b in batches] == pytest.approx([10, 5, 1.75, 1.75])
    assert [r.first_token_at for r in requests] == pytest.approx([10, 10, 15])
    assert [r.finished_at for r in requests] == pytest.approx([18.5, 18.5, 18.5])


def test_vllm_v1_mixes_the_third_prefill_with_decodes_as_hand_counted():
    requests, batches = run("vllm-v1", [4, 4, 4], 3, max_tokens=8, max_seqs=256)
    assert shape(batches) == [(0, 2, 8), (2, 1, 4), (3, 0, 0), (1, 0, 0)]
    assert [r.first_token_at for r in requests] == pytest.approx([3, 3, 5.5])
    assert [r.finished_at for r in requests] == pytest.approx([7.25, 7.25, 8.5])


def test_prefill_first_counts_running_requests_against_the_sequence_slots():
    """Two slots: R0 and R1 prefill together (8 tokens), R2 waits for a free slot
    though the budget would take it; it is prefilled when R0 and R1 are done."""
    _, batches = run("prefill-first", [2, 2, 2], 2, max_tokens=8, max_seqs=2)
    assert shape(batches) == [(0, 2, 4), (2, 0, 0), (0, 1, 2), (1, 0, 0)]


def test_jetstream_prefills_one_bucketed_prompt_per_iteration_while_a_slot_is_free():
    """Two decode slots, prompts of 20 tokens (bucket 32): R0 and R1 are prefilled one
    per iteration, two generate steps finish them, then R2 alone. A generate step
    computes both slots even when one is empty (MaxText's fixed shape). Times: a
    prefill of 32 tokens takes 9 s, a generate step 1 + 2/4 = 1.5 s."""
    requests, batches = run("jetstream-interleaved", [20, 20, 20], 3, 1024, max_seqs=2)
    assert shape(batches) == [
        (0, 1, 32), (0, 1, 32), (2, 0, 0), (2, 0, 0), (0, 1, 32), (2, 0, 0), (2, 0, 0),
    ]  # fmt: skip
    assert [b.start_at for b in batches] == pytest.approx([0, 9, 18, 19.5, 21, 30, 31.5])
    assert [r.first_token_at for r in requests] == pytest.approx([9, 18, 30])
    assert [r.finished_at for r in requests] == pytest.approx([21, 21, 33])


def test_jetstream_batches_are_a_bucketed_prefill_and_a_fixed_shape_generate_step():
    """One request of 20 prompt tokens on 4 slots: its prefill computes the 32-token
    bucket (32 x 33 / 2 causal pairs, nothing cached); the generate step computes all
    4 slots, each over MaxText's 2,048 cache positions."""
    policy = BATCH_POLICIES.get("jetstream-interleaved")
    sched = Scheduler(1000, 4, 1024, 4, batching=policy)
    sched.enqueue(Request(0, 0.0, 20, 3), 0.0)
    prefill = sched.schedule(0.0)
    assert prefill.batch == ReplicaBatch(0, 32, 1, 0, 32 * 33 / 2, 0)
    sched.finish(prefill, 1.0)
    generate = sched.schedule(1.0)
    assert generate.batch == ReplicaBatch(4, 0, 0, 4 * 2048, 0.0, 0)


@pytest.mark.parametrize(("tokens", "padded"), [(1, 16), (16, 16), (17, 32), (224, 256)])
def test_vllm_v0_tpu_pads_a_prompt_to_a_power_of_two_from_16(tokens, padded):
    assert power_of_two_tokens(tokens, 8) == padded


@pytest.mark.parametrize(
    ("tokens", "max_tokens", "bucket"),
    [(1, 1024, 16), (16, 1024, 16), (17, 1024, 32), (218, 1024, 256), (600, 1000, 1000)],
)
def test_jetstream_buckets_are_powers_of_two_from_16_capped_at_the_prefill_length(
    tokens, max_tokens, bucket
):
    assert bucket_tokens(tokens, max_tokens) == bucket


def test_a_prompt_longer_than_the_budget_is_rejected_under_whole_prompts_only():
    """vLLM V0 ignores a prompt over its limit (``max_num_batched_tokens`` without
    chunked prefill); V1 chunks it."""
    requests, _ = run("prefill-first", [9, 4], 2, max_tokens=8, max_seqs=256)
    assert [r.rejected for r in requests] == [True, False]
    requests, _ = run("vllm-v1", [9, 4], 2, max_tokens=8, max_seqs=256)
    assert [r.rejected for r in requests] == [False, False]


def test_profiles_name_their_batching_and_a_run_may_override_it():
    assert load_server("jetstream-maxtext").batching.value == "jetstream-interleaved"
    assert load_server("vllm-v0-tpu").batching.value == "prefill-first-serial"
    assert load_server("vllm-tpu-inference").batching.value == "vllm-v1"  # absent: V1
    d = Deployment("ironwood-256", "llama-3.1-8b", tp=1, server="vllm-v0-tpu")
    assert Service(d).batching == "prefill-first-serial"
    assert Service(Deployment("ironwood-256", "llama-3.1-8b", tp=1)).batching == "vllm-v1"
    d = Deployment("ironwood-256", "llama-3.1-8b", tp=1, server="vllm-v0-tpu", batching="vllm-v1")
    assert Service(d).scheduler().batching is BATCH_POLICIES.get("vllm-v1")


def test_a_profile_with_an_unknown_batching_names_file_line_and_the_known_ones(tmp_path):
    path = tmp_path / "p.yaml"
    source = (
        "name: p\nengine: e\nscheduling: {value: sync, grade: assumption, note: n}\n"
        "batching: {value: orca, grade: assumption, note: n}\n"
        "terms:\n  host_time: {value: 1 ms, grade: assumption, note: n}\n"
        "  hbm_efficiency: {value: 0.5, grade: assumption, note: n}\n"
        "  sampling_passes: {value: 0, grade: assumption, note: n}\n"
    )
    path.write_text(source)
    with pytest.raises(ConfigError, match=r"p\.yaml:4 batching\.value.*'orca'.*vllm-v1"):
        load_server(str(path))
