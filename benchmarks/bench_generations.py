"""The README's main command, timed: ``tpusim run scenarios/generations.yaml`` as a
fresh process (start-up, 104 points on five systems: whole-model training, decode,
serving, collectives; tables, claims, plots), target under 3 minutes on a 2-core
machine; then the same scenario in-process on one core
(``--jobs 1``) to show what the worker processes buy.

Run: ``python benchmarks/bench_generations.py [--quick]`` (``--quick``: only the first).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCENARIO = Path(__file__).resolve().parent.parent / "scenarios" / "generations.yaml"


def run(*extra: str) -> float:
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "tpusim", "run", str(SCENARIO), "--out", out, "--quiet", *extra],
            check=True,
            capture_output=True,
        )
        wall = time.perf_counter() - start
        plots = len(list(Path(out).glob("*.png")))
    print(
        f"tpusim run generations.yaml {' '.join(extra) or '(default jobs)'}: "
        f"{wall:.1f} s wall, {plots} PNG plots (target 180 s, issue 13)"
    )
    return wall


def main() -> int:
    run()
    if "--quick" not in sys.argv:
        run("--jobs", "1")
    return 0


if __name__ == "__main__":
    sys.exit(main())
