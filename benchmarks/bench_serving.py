"""Serving speed (issue 14 targets, 2-core machine): 10,000 requests of Llama 3.1 70B
on one TP-8 replica of TPU 8i (``tpu8i-pod``) in under 60 s wall, and a capacity
search at an SLO in under 3 minutes.

Stream: Poisson arrivals at 15 requests/s, 1,024 prompt and 256 output tokens each.
SLO of the search: p99 TTFT 2 s and p99 TPOT 200 ms (MLPerf Inference's Llama-2-70B
server scenario), 1,000 requests per trial.
Run: ``python benchmarks/bench_serving.py``.
"""

from __future__ import annotations

import sys
import time

from tpusim.serving import Deployment, Service, Slo, summary
from tpusim.serving.capacity import find_capacity, saturated_rate_per_s
from tpusim.serving.requests import TokenCount, synthetic_requests

RUN_TARGET_S = 60.0
SEARCH_TARGET_S = 180.0
PROMPT, OUTPUT = TokenCount("fixed", 1024), TokenCount("fixed", 256)


def bench_run() -> float:
    start = time.perf_counter()
    service = Service(Deployment("tpu8i-pod", "llama-3.1-70b", tp=8))
    requests = synthetic_requests(10_000, 15.0, PROMPT, OUTPUT, seed=0)
    run = service.run(requests)
    wall = time.perf_counter() - start
    row = summary(requests, service.chips)
    print(
        f"10,000 requests, llama-3.1-70b TP 8 on tpu8i-pod at 15 req/s: "
        f"{row['completed']} completed, {run.replicas[0].iterations:,} iterations, "
        f"{service.costs.engine_runs} engine runs; TTFT p50/p99 {row['ttft_p50_s']:.3f}/"
        f"{row['ttft_p99_s']:.3f} s, TPOT p50/p99 {row['tpot_p50_s'] * 1e3:.1f}/"
        f"{row['tpot_p99_s'] * 1e3:.1f} ms, {row['output_tokens_per_s']:.0f} output tok/s "
        f"({row['tokens_per_s_per_chip']:.0f} per chip); wall {wall:.1f} s "
        f"(target {RUN_TARGET_S:.0f} s)"
    )
    return wall


def bench_search() -> float:
    start = time.perf_counter()
    service = Service(Deployment("tpu8i-pod", "llama-3.1-70b", tp=8))

    def stream(rate: float):
        return synthetic_requests(1000, rate, PROMPT, OUTPUT, seed=0)

    slo = Slo(ttft_s=2.0, tpot_s=0.2)
    best = find_capacity(service, stream, slo, saturated_rate_per_s(service, 1024, 256))
    wall = time.perf_counter() - start
    print(
        f"capacity search (p99 TTFT 2 s, TPOT 200 ms): {best['capacity_rate_per_s']:.2f} req/s "
        f"({best['capacity_rate_per_s_per_chip']:.3f} per chip) in {best['trials']} trials, "
        f"{service.costs.engine_runs} engine runs; wall {wall:.1f} s "
        f"(target {SEARCH_TARGET_S:.0f} s)"
    )
    return wall


def main() -> int:
    ok = bench_run() < RUN_TARGET_S
    ok = bench_search() < SEARCH_TARGET_S and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
