"""Collective benchmarks for the network engine (issue 3 targets).

1. Fresh CLI processes (start-up, imports, load, topology, simulation), the best of
   3 runs: ``tpusim collective ironwood-pod --op all-reduce --bytes 1GiB`` (target
   under 2 s) and ``tpusim collective tpu8i-pod --op all-reduce --bytes 1GiB``
   (target under 3 s), both at flow fidelity with the default algorithm.
2. In-process (simulation only): 1 GiB all-reduce over the whole 9,216-chip
   ``ironwood-pod``; 1 GiB all-to-all and all-reduce on ``tpu8i-pod`` and all-to-all
   on ``tpu8i-1024`` (default algorithm).
3. The largest torus on which the packet fidelity finishes a 64 MiB all-reduce
   within 60 s: a ladder of Ironwood-link tori, stopping at the first over budget.

Run: ``python benchmarks/bench_collectives.py [--quick]`` (``--quick`` skips 3).
"""

from __future__ import annotations

import subprocess
import sys
import time

from tpusim.engine import CollectiveOptions, run_collective, simulate_collective
from tpusim.network import NetworkSettings
from tpusim.topology import Torus

PACKET_LADDER = [(4, 4, 4), (4, 4, 8), (4, 8, 8), (8, 8, 8)]
PACKET_BUDGET_S = 60.0
CLI_RUNS = 3
CLI_TARGETS = [("ironwood-pod", "all-reduce", 2.0), ("tpu8i-pod", "all-reduce", 3.0)]
IN_PROCESS = [
    ("ironwood-pod", "all-reduce"),
    ("tpu8i-pod", "all-reduce"),
    ("tpu8i-pod", "all-to-all"),
    ("tpu8i-1024", "all-to-all"),
]

#: The packet fidelity at its default packet size.
PACKET = CollectiveOptions(network=NetworkSettings.of("packet"))


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def fresh_cli_s(system: str, op: str, runs: int = CLI_RUNS) -> float:
    """Best wall time (s) of ``runs`` fresh ``python -m tpusim collective`` processes."""
    argv = [sys.executable, "-m", "tpusim", "collective", system, "--op", op, "--bytes", "1GiB"]
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        best = min(best, time.perf_counter() - start)
    return best


def print_in_process(system: str, op: str) -> None:
    (result, _), wall = timed(simulate_collective, system, op, 2**30)
    print(
        f"{system} {op} 1 GiB flow ({result.algorithm}): simulated "
        f"{result.time_s * 1e3:.3f} ms, busbw {result.busbw_Bps / 1e9:.1f} GB/s, "
        f"{result.num_flows} flows, {result.num_events} events; wall {wall:.2f} s in-process"
    )


def main() -> int:
    for system, op, target_s in CLI_TARGETS:
        wall = fresh_cli_s(system, op)
        print(
            f"tpusim collective {system} --op {op} --bytes 1GiB, fresh process: "
            f"{wall:.2f} s wall (best of {CLI_RUNS}; target {target_s:.0f} s)"
        )
    for system, op in IN_PROCESS:
        print_in_process(system, op)
    if "--quick" in sys.argv:
        return 0
    largest = None
    for dims in PACKET_LADDER:
        topo = Torus(dims, (True,) * 3, link_bandwidth_Bps=100e9, hop_latency_s=1e-6)
        (result, _), wall = timed(run_collective, topo, "all-reduce", 64 * 2**20, fidelity="packet")
        chips = topo.num_chips
        print(
            f"packet all-reduce 64 MiB on {'x'.join(map(str, dims))} ({chips} chips): "
            f"simulated {result.time_s * 1e3:.3f} ms, wall {wall:.1f} s"
        )
        if wall > PACKET_BUDGET_S:
            break
        largest = chips
    print(
        f"largest torus with a 64 MiB packet all-reduce under {PACKET_BUDGET_S:.0f} s: "
        f"{largest} chips"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
