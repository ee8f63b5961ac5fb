"""Serving speed (2-core machine): 10,000 requests of Llama 3.1 70B on one TP-8
replica of TPU 8i (``tpu8i-pod``) in under 60 s wall (issue 14), and the steady-state
capacity search of the shipped serving scenario's case in under 60 s (issue 22).

Stream: Poisson arrivals at 15 requests/s, 1,024 prompt and 256 output tokens each.
Search: ``scenarios/serving.yaml``'s ``llama-70b-fp8`` (fp8, p99 TTFT 2 s, p99 TPOT
50 ms), 4,000 requests per trial, judged in steady state.
Run: ``python benchmarks/bench_serving.py``.
"""

from __future__ import annotations

import sys
import time

from tpusim.serving import Deployment, Service, Slo, summary
from tpusim.serving.capacity import find_capacity
from tpusim.serving.requests import TokenCount, synthetic_requests

RUN_TARGET_S = 60.0
SEARCH_TARGET_S = 60.0
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
    service = Service(Deployment("tpu8i-pod", "llama-3.1-70b", tp=8, dtype="fp8"))

    def stream(rate: float):
        return synthetic_requests(4000, rate, PROMPT, OUTPUT, seed=0)

    slo = Slo(ttft_s=2.0, tpot_s=0.05)
    best = find_capacity(service, stream, slo)
    wall = time.perf_counter() - start
    steady = best.get("steady_state", {})
    print(
        f"steady-state capacity search, fp8, 4,000 requests (p99 TTFT 2 s, TPOT 50 ms): "
        f"{best['capacity_rate_per_s']:.2f} req/s ({best['capacity_rate_per_s_per_chip']:.3f} "
        f"per chip; saturated {best['saturation_rate_per_s']:.2f}, limited by "
        f"{best['capacity_limited_by']}) in {best['trials']} trials, steady p99 TTFT "
        f"{best['ttft_p99_s']:.3f} s +- {steady.get('ttft_p99_ci_s') or 0:.3f}, TPOT "
        f"{best['tpot_p99_s'] * 1e3:.1f} ms; {service.costs.engine_runs} engine runs; "
        f"wall {wall:.1f} s (target {SEARCH_TARGET_S:.0f} s)"
    )
    return wall


def main() -> int:
    ok = bench_run() < RUN_TARGET_S
    ok = bench_search() < SEARCH_TARGET_S and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
