"""Collective benchmarks for the network engine (issue 3 targets).

1. 1 GiB all-reduce over the whole 9,216-chip ``ironwood-pod`` at flow fidelity:
   target under 2 s wall, measured in-process (simulation only) and as a fresh
   ``python -m tpusim collective ...`` process (start-up, load, topology, simulation).
2. 1 GiB all-to-all and all-reduce on ``tpu8i-pod`` at flow fidelity (default algorithm).
3. The largest torus on which the packet fidelity finishes a 64 MiB all-reduce
   within 60 s: a ladder of Ironwood-link tori, stopping at the first over budget.

Run: ``python benchmarks/bench_collectives.py [--quick]`` (``--quick`` skips 3).
"""

from __future__ import annotations

import subprocess
import sys
import time

from tpusim.engine import run_collective, simulate_collective
from tpusim.topology import Torus

PACKET_LADDER = [(4, 4, 4), (4, 4, 8), (4, 8, 8), (8, 8, 8)]
PACKET_BUDGET_S = 60.0


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def main() -> int:
    (result, _), wall = timed(simulate_collective, "ironwood-pod", "all-reduce", 2**30)
    print(
        f"ironwood-pod all-reduce 1 GiB flow: simulated {result.time_s * 1e3:.3f} ms, "
        f"busbw {result.busbw_Bps / 1e9:.1f} GB/s, {result.num_events} events; "
        f"wall {wall:.2f} s in-process (target 2 s)"
    )
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "tpusim",
            "collective",
            "ironwood-pod",
            "--op",
            "all-reduce",
            "--bytes",
            "1GiB",
            "--json",
        ],
        check=True,
        capture_output=True,
    )
    print(f"  same as a fresh CLI process: {time.perf_counter() - start:.2f} s wall")

    (result, _), wall = timed(simulate_collective, "tpu8i-pod", "all-to-all", 2**30)
    print(
        f"tpu8i-pod all-to-all 1 GiB flow ({result.algorithm}): simulated "
        f"{result.time_s * 1e3:.3f} ms, busbw {result.busbw_Bps / 1e9:.1f} GB/s, "
        f"{result.num_flows} flows, {result.num_events} events; wall {wall:.2f} s"
    )
    (result, _), wall = timed(simulate_collective, "tpu8i-pod", "all-reduce", 2**30)
    print(
        f"tpu8i-pod all-reduce 1 GiB flow ({result.algorithm}): simulated "
        f"{result.time_s * 1e3:.3f} ms, busbw {result.busbw_Bps / 1e9:.1f} GB/s, "
        f"{result.num_flows} flows, {result.num_events} events; wall {wall:.2f} s"
    )
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
