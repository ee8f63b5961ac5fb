"""The serving trace (``serving_trace.json``, issue 33): one process per replica, one
complete event per iteration on its prefill or decode thread, checked against
independent counts: the loop's own busy-time accumulator and iteration count per
replica, and the stream's tokens counted by hand (every prompt token prefilled once,
every output token after the first decoded once, with no preemption)."""

from __future__ import annotations

import itertools
import json
from collections import defaultdict

import pytest

from tpusim.cli import main

PROMPT_TOKENS, OUTPUT_TOKENS, REQUESTS, REPLICAS = 300, 20, 24, 2

SCENARIO = f"""\
name: serving-trace
systems: [v6e-pod]
workloads:
  - {{name: serve, kind: serving, model: llama-3.1-8b, tp: 1, replicas: {REPLICAS},
     rate: 8, requests: {REQUESTS}, prompt_tokens: {PROMPT_TOKENS},
     output_tokens: {OUTPUT_TOKENS}}}
"""


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serving-trace")
    (tmp / "s.yaml").write_text(SCENARIO)
    assert main(["run", str(tmp / "s.yaml"), "--out", str(tmp / "out"), "--quiet"]) == 0
    return tmp / "out"


def _events(folder):
    trace = json.loads((folder / "serving_trace.json").read_text())
    return trace["traceEvents"]


def test_one_named_process_per_replica_with_prefill_and_decode_threads(run_folder):
    events = _events(run_folder)
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert names == {r: f"v6e-pod serve replica {r}" for r in range(REPLICAS)}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e["name"] == "thread_name"}  # fmt: skip
    assert set(threads.values()) == {"prefill", "decode"}
    for e in events:
        if e["ph"] == "X":
            assert threads[(e["pid"], e["tid"])] == e["cat"]
            assert (e["cat"] == "prefill") == (e["args"]["prefill_chunks"] > 0)


def test_busy_time_and_count_per_replica_match_the_loop(run_folder):
    """Replay the run's replicas directly: the loop's busy_s and iteration count
    (accumulated as it goes) equal the trace's sum of durations and event count."""
    from tpusim.serving.requests import TokenCount, synthetic_requests
    from tpusim.serving.service import Deployment, Service

    service = Service(Deployment("v6e-pod", "llama-3.1-8b", tp=1, replicas=REPLICAS))
    requests = synthetic_requests(
        REQUESTS,
        8.0,
        TokenCount("fixed", PROMPT_TOKENS),
        TokenCount("fixed", OUTPUT_TOKENS),
        seed=0,
    )
    run = service.run(requests)
    busy_us, count = defaultdict(float), defaultdict(int)
    for e in _events(run_folder):
        if e["ph"] == "X":
            busy_us[e["pid"]] += e["dur"]
            count[e["pid"]] += 1
    for r, replica in enumerate(run.replicas):
        assert count[r] == replica.iterations
        assert busy_us[r] * 1e-6 == pytest.approx(replica.busy_s, rel=1e-9)


def test_events_of_a_replica_never_overlap(run_folder):
    by_pid = defaultdict(list)
    for e in _events(run_folder):
        if e["ph"] == "X":
            by_pid[e["pid"]].append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_pid.values():
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert start >= end - 1e-6


def test_tokens_are_the_streams_counted_by_hand(run_folder):
    import pandas as pd

    summary = pd.read_csv(run_folder / "summary.csv")
    assert summary["preemptions"].tolist() == [0]  # so each token is computed once
    assert summary["completed"].tolist() == [REQUESTS]
    events = [e for e in _events(run_folder) if e["ph"] == "X"]
    prefill = sum(e["args"]["prefill_tokens"] for e in events)
    decode = sum(e["args"]["decode_sequences"] for e in events)
    assert prefill == REQUESTS * PROMPT_TOKENS
    assert decode == REQUESTS * (OUTPUT_TOKENS - 1)
    assert sum(e["args"]["tokens"] for e in events) == prefill + decode
