"""Fault benchmarks (issue 12 targets).

1. ``tpusim faults``' Monte Carlo in-process: a 1 GiB all-reduce on ``ironwood-pod``
   with 0..16 random failed links (0, 1, 2, 4, 8, 16), 20 trials per count, the
   analytic fidelity (the command's default); target under 60 s.
2. One 1 GiB all-reduce on ``ironwood-pod`` at flow fidelity with 16 random failed
   links (in-flight rerouting is not needed: the links fail from the start).
3. UGAL and Valiant against minimal on ``tpu8i-pod``'s group-to-group exchange (32
   chips sending 64 MiB each from group 0 to group 1) as multiples of the injection
   bound (64 MiB at one link's bandwidth).

Run: ``python benchmarks/bench_faults.py [--quick]`` (``--quick`` skips 2).
"""

from __future__ import annotations

import sys
import time

from tpusim.cli.faults import link_counts
from tpusim.config.faults import FaultSet
from tpusim.config.loader import load_system
from tpusim.engine import CollectiveOptions, run_collective, simulate_collective
from tpusim.study.fault_trials import monte_carlo
from tpusim.topology import build_topology

MC_BUDGET_S = 60.0
MIB = 2**20


def bench_monte_carlo() -> None:
    start = time.perf_counter()
    rec = monte_carlo("ironwood-pod", "all-reduce", 2**30, link_counts("0:16"), 20, 1).record()
    wall = time.perf_counter() - start
    runs = sum(r["trials"] for r in rec["counts"]) + 1
    medians = ", ".join(f"{r['failed_links']}: {r['p50_s'] * 1e3:.2f} ms" for r in rec["counts"])
    verdict = "ok" if wall < MC_BUDGET_S else "OVER BUDGET"
    print(
        f"Monte Carlo ironwood-pod all-reduce 1 GiB, {runs} runs: {wall:.1f} s wall "
        f"(target {MC_BUDGET_S:.0f} s: {verdict}); medians by links down: {medians}"
    )


def bench_flow_with_faults() -> None:
    start = time.perf_counter()
    result, net = simulate_collective(
        "ironwood-pod",
        "all-reduce",
        2**30,
        CollectiveOptions(faults=FaultSet(fail_links=16, seed=1)),
    )
    wall = time.perf_counter() - start
    print(
        f"ironwood-pod all-reduce 1 GiB flow, 16 links down: simulated "
        f"{result.time_s * 1e3:.3f} ms, {net.rerouted_flows:,} flows rerouted; wall {wall:.2f} s"
    )


def bench_routing() -> None:
    topo = build_topology(load_system("tpu8i-pod"))
    bound_s = 64 * MIB / topo.links.bandwidth_Bps.max()
    pairs = [(i, 32 + i) for i in range(32)]
    for routing in ("minimal", "valiant", "ugal"):
        start = time.perf_counter()
        result, _ = run_collective(
            topo,
            "collective-permute",
            64 * MIB,
            CollectiveOptions(pairs=pairs, algorithm="direct", routing=routing),
        )
        wall = time.perf_counter() - start
        print(
            f"tpu8i-pod group 0 -> group 1, 32 x 64 MiB, {routing}: {result.time_s * 1e3:.3f} ms "
            f"= {result.time_s / bound_s:.2f}x the injection bound; wall {wall:.2f} s"
        )


if __name__ == "__main__":
    bench_routing()
    bench_monte_carlo()
    if "--quick" not in sys.argv:
        bench_flow_with_faults()
