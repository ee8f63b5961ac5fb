"""The README's main command, timed (issue 34): ``tpusim run scenarios/generations.yaml``
as a fresh process (start-up, 102 points on five systems: whole-model training, decode,
serving, collectives; tables, claims, plots) with the default worker processes (one
per core), printed with its ratio to the previous figure recorded below (ratio < 1:
faster); then the same scenario with ``--jobs 1`` (one process) to show what the worker
processes buy.

Issue 34's must-hold: the Quickstart (``pip install . && tpusim run
scenarios/generations.yaml``) under 2 minutes from a fresh clone on a 2-core machine;
the install takes ~30-40 s, so the run itself should take at most ~75 s.

The machine is shared, so each run also prints its CPU time (user + system of the
child processes), which the load inflates much less than the wall time, and the
slowest point (``points.jsonl``).

Run: ``python benchmarks/bench_generations.py [--quick]`` (``--quick``: only the first).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCENARIO = Path(__file__).resolve().parent.parent / "scenarios" / "generations.yaml"

#: Previous figures, default jobs (2 workers on the 2-core machine): git 6ea9d05 on a
#: quiet-ish machine, 2026-12-06: 117.6 s wall ("simulated in 94.9 s"), 126 s user
#: CPU, 3.0 GB peak RSS; its slowest point, the DeepSeek-V3 step on tpu8t-superpod,
#: 48.4 s (5.1 GB).
PREVIOUS_WALL_S = 117.6
PREVIOUS_CPU_S = 126.0
PREVIOUS_SLOWEST_POINT_S = 48.4
#: Issue 34's target for the run (wall seconds, quiet 2-core machine, installed).
TARGET_S = 75.0


def cpu_of_children() -> float:
    """User + system CPU seconds of every finished child process so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def slowest_point(out: Path) -> tuple[float, str]:
    """The longest point of a run (wall s) and its name, from ``points.jsonl``."""
    points = [json.loads(line) for line in (out / "points.jsonl").read_text().splitlines()]
    worst = max(points, key=lambda p: p["wall_s"])
    return worst["wall_s"], f"{worst['system']} {worst['workload']}"


def run(*extra: str) -> float:
    """One fresh ``tpusim run`` of the scenario; prints and returns its wall time."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        cpu_before = cpu_of_children()
        start = time.perf_counter()
        command = [sys.executable, "-m", "tpusim", "run", str(SCENARIO), "--out", folder]
        subprocess.run(
            [*command, "--quiet", *extra],
            check=True,
            capture_output=True,
        )
        wall = time.perf_counter() - start
        cpu = cpu_of_children() - cpu_before
        plots = len(list(out.glob("*.png")))
        point_s, point = slowest_point(out)
    label = " ".join(extra) or "(default jobs)"
    line = f"tpusim run generations.yaml {label}: {wall:.1f} s wall, {cpu:.1f} s CPU"
    if not extra:
        line += (
            f" (previous {PREVIOUS_WALL_S:.1f} s wall, ratio {wall / PREVIOUS_WALL_S:.2f};"
            f" {PREVIOUS_CPU_S:.0f} s CPU, ratio {cpu / PREVIOUS_CPU_S:.2f};"
            f" target {TARGET_S:.0f} s)"
        )
    print(line)
    print(
        f"  {plots} PNG plots; slowest point {point}: {point_s:.1f} s"
        + (f" (previous {PREVIOUS_SLOWEST_POINT_S:.1f} s)" if not extra else "")
    )
    return wall


def main() -> int:
    run()
    if "--quick" not in sys.argv:
        run("--jobs", "1")
    return 0


if __name__ == "__main__":
    sys.exit(main())
