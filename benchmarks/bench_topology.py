"""Wall time of ``tpusim topo`` on the largest shipped systems (issue 2 targets:
ironwood-pod and tpu8t-superpod under 5 s each, tpu8t-virgo under 30 s).

Each system runs as a fresh ``python -m tpusim topo NAME --json`` process, so the
time includes interpreter start-up, imports, YAML loading and every metric.
Run: ``python benchmarks/bench_topology.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

TARGETS_S = {
    "ironwood-pod": 5.0,
    "tpu8t-superpod": 5.0,
    "tpu8t-virgo": 30.0,
    "tpu8i-pod": 5.0,
    "v5p-pod": 5.0,
}


def main() -> int:
    failed = False
    print(f"{'system':<16} {'chips':>8} {'diameter':>8} {'wall_s':>8} {'target_s':>8}")
    for name, target in TARGETS_S.items():
        start = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-m", "tpusim", "topo", name, "--json"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        wall = time.perf_counter() - start
        rec = json.loads(out)
        failed |= wall > target
        print(f"{name:<16} {rec['chips']:>8} {rec['diameter_hops']:>8} {wall:>8.2f} {target:>8.1f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
