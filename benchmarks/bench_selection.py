"""Cost of ``--algorithm auto`` (issue 23): selection plus run against the forced best.

1. 1 GiB all-reduce over the 1,024-chip ``torus-8x8x16``: auto (every registered
   algorithm bounded, the hopeless ones never built) against ``--algorithm torus``,
   CPU seconds and peak memory of a fresh process each (target: auto within 1.2x).
2. 1 KiB all-reduce on ``tpu8i-1024``: auto's time (target: at most 16 us) and which
   algorithm it ran, CPU seconds of the fresh process.
3. 1 GiB all-reduce over ``ironwood-pod`` with one dead link: CPU seconds (target:
   under 2 s of simulation) and what the record says of the re-planned algorithm.

Run: ``python benchmarks/bench_selection.py`` (each case a fresh ``python -m tpusim``).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys

CASES = [
    ("torus-8x8x16", "all-reduce", "1GiB", ["--algorithm", "auto"]),
    ("torus-8x8x16", "all-reduce", "1GiB", ["--algorithm", "torus"]),
    ("tpu8i-1024", "all-reduce", "1KiB", ["--algorithm", "auto"]),
    ("ironwood-pod", "all-reduce", "1GiB", ["--fail-links", "1"]),
]


def fresh(system: str, op: str, size: str, extra: list[str]) -> tuple[dict, float, float]:
    """(JSON record, CPU seconds, peak RSS MiB) of one fresh ``tpusim collective``."""
    argv = [sys.executable, "-m", "tpusim", "collective", system, "--op", op, "--bytes", size]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([*argv, *extra, "--json"], check=True, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(done.stdout), cpu_s, after.ru_maxrss / 1024


def main() -> None:
    cpu = {}
    for system, op, size, extra in CASES:
        rec, cpu_s, rss = fresh(system, op, size, extra)
        cpu[(system, size, tuple(extra))] = cpu_s
        note = f"; re-planned {rec['replanned']}" if "replanned" in rec else ""
        print(
            f"{system} {op} {size} {' '.join(extra)}: {rec['algorithm']}, simulated "
            f"{rec['time_s'] * 1e6:.2f} us; CPU {cpu_s:.2f} s, peak RSS so far {rss:.0f} MiB"
            f"{note}"
        )
    auto = cpu[("torus-8x8x16", "1GiB", ("--algorithm", "auto"))]
    forced = cpu[("torus-8x8x16", "1GiB", ("--algorithm", "torus"))]
    print(f"auto / forced torus (CPU, 1 GiB on 1,024 chips): {auto / forced:.2f}x (target 1.2x)")


if __name__ == "__main__":
    main()
