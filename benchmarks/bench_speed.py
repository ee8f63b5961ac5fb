"""Interactive speed (issue 34): fresh-process wall times of the commands a user
types while changing one thing and looking again, each printed with the ratio to the
previous figure recorded below (ratio < 1: faster than before).

- ``tpusim --version`` (target 0.3 s) and ``tpusim systems``;
- a 64-chip 1 GiB all-reduce (``ironwood-256 --chips 64``; target 0.5 s);
- a 1 KiB all-reduce on ``tpu8i-1024`` with ``auto`` (target 1 s) and with
  ``--algorithm direct`` (latency bound);
- in-process: ``tpusim.Session``'s second call against a fresh ``simulate_collective``.

The machine is shared, so each command also prints its CPU time (user + system of the
child process), which the load does not inflate, and its ratio to the previous CPU
figure where one is recorded.

ASTRA-sim's analytical backend is not installable here (no ``astra-sim`` on PyPI, no
other network access), so no ratio to it is printed.

Run: ``python benchmarks/bench_speed.py [RUNS]`` (best of RUNS fresh processes, default 3).
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time

#: Previous figures (s, fresh processes on the 2-core machine shared with other jobs,
#: load ~5), measured 2026-05 at git bec498c, before issue 34's changes. Issue 34's
#: figures under the same load: 0.17-0.24, 0.69-0.75, 0.86-0.90 and 5.9 s (auto).
PREVIOUS_S = {
    "tpusim --version": 1.00,
    "tpusim systems": 1.05,
    "ironwood-256 --chips 64 all-reduce 1 GiB": 1.04,
    "tpu8i-1024 all-reduce 1 KiB (auto)": 16.85,
    "tpu8i-1024 all-reduce 1 KiB (direct)": 12.6,
}
#: Previous CPU seconds (user + system of the process; the machine's load inflates
#: wall, not these), measured 2026-12-06 at git 37d96df (after the speed branch: dense
#: link table, table-driven Boardfly routes, the all-pairs diameter bound), before the
#: fly branch's fewer whole-array passes per flow drain event. Before the speed branch
#: (git c633ad7): 6.62 s (auto) and 8.49 s (direct).
PREVIOUS_CPU_S = {
    "tpu8i-1024 all-reduce 1 KiB (auto)": 4.73,
    "tpu8i-1024 all-reduce 1 KiB (direct)": 8.76,
}
COMMANDS = {
    "tpusim --version": ["--version"],
    "tpusim systems": ["systems"],
    "ironwood-256 --chips 64 all-reduce 1 GiB": [
        "collective",
        "ironwood-256",
        "--chips",
        "64",
        "--op",
        "all-reduce",
        "--bytes",
        "1GiB",
    ],
    "tpu8i-1024 all-reduce 1 KiB (auto)": [
        "collective",
        "tpu8i-1024",
        "--op",
        "all-reduce",
        "--bytes",
        "1KiB",
    ],
    "tpu8i-1024 all-reduce 1 KiB (direct)": [
        "collective",
        "tpu8i-1024",
        "--op",
        "all-reduce",
        "--bytes",
        "1KiB",
        "--algorithm",
        "direct",
    ],
}


def fresh_s(argv: list[str], runs: int) -> tuple[float, float]:
    """Best wall time and best CPU time (user + system, s) of ``runs`` fresh
    ``python -m tpusim ARGV`` processes."""
    best_wall = best_cpu = float("inf")
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "tpusim", *argv], check=True, capture_output=True)
        best_wall = min(best_wall, time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        best_cpu = min(best_cpu, cpu)
    return best_wall, best_cpu


def session_s() -> tuple[float, float]:
    """(a Session's second 1 GiB all-reduce on ironwood-pod, a fresh simulate_collective)."""
    import tpusim
    from tpusim.engine import simulate_collective

    s = tpusim.Session("ironwood-pod")
    s.collective("all-reduce", "1 GiB")
    start = time.perf_counter()
    s.collective("all-reduce", "1 GiB")
    second = time.perf_counter() - start
    start = time.perf_counter()
    simulate_collective("ironwood-pod", "all-reduce", 2**30)
    return second, time.perf_counter() - start


def main() -> int:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    for name, argv in COMMANDS.items():
        wall, cpu = fresh_s(argv, runs)
        before = PREVIOUS_S[name]
        line = (
            f"{name}: {wall:.2f} s wall, {cpu:.2f} s CPU (best of {runs}); "
            f"previous {before:.2f} s wall, ratio {wall / before:.2f}"
        )
        if name in PREVIOUS_CPU_S:
            was = PREVIOUS_CPU_S[name]
            line += f"; previous {was:.2f} s CPU, ratio {cpu / was:.2f}"
        print(line)
    second, fresh = session_s()
    print(
        f"Session second call, ironwood-pod 1 GiB all-reduce: {second:.2f} s; "
        f"fresh simulate_collective {fresh:.2f} s, ratio {second / fresh:.2f}"
    )
    print("ASTRA-sim analytical backend: not installable here (not on PyPI); no ratio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
