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

import json
import resource
import subprocess
import sys
import time

#: Previous figures: wall seconds of fresh processes, best of 3, on the quiet 2-core
#: machine (load 0.4), 2026-12-06 at git 36fae28 (before the flow fidelity answered
#: batches pinned by their bounds in closed form). Before issue 34 (git bec498c, load
#: ~5): 1.00, 1.05, 1.04, 16.85 and 12.6 s.
PREVIOUS_S = {
    "tpusim --version": 0.06,
    "tpusim systems": 0.28,
    "ironwood-256 --chips 64 all-reduce 1 GiB": 0.44,
    "tpu8i-1024 all-reduce 1 KiB (auto)": 2.84,
    "tpu8i-1024 all-reduce 1 KiB (direct)": 4.77,
}
#: CPU seconds (user + system of the process) of the same runs.
PREVIOUS_CPU_S = {
    "ironwood-256 --chips 64 all-reduce 1 GiB": 0.54,
    "tpu8i-1024 all-reduce 1 KiB (auto)": 2.94,
    "tpu8i-1024 all-reduce 1 KiB (direct)": 4.88,
}
#: Issue 34's targets (wall seconds, quiet 2-core machine).
TARGET_S = {
    "tpusim --version": 0.3,
    "ironwood-256 --chips 64 all-reduce 1 GiB": 0.5,
    "tpu8i-1024 all-reduce 1 KiB (auto)": 1.0,
}
#: Simulated times (s) at git 36fae28, one-shot's 1,047,552 flows simulated flow by
#: flow: the figure must stay within the flow tolerance (1%).
PREVIOUS_SIMULATED_S = {"tpu8i-1024 all-reduce 1 KiB (auto)": 1.5987353581189092e-05}
FLOW_TOLERANCE = 0.01
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


def fresh_s(argv: list[str], runs: int) -> tuple[float, float, str]:
    """Best wall time and best CPU time (user + system, s) of ``runs`` fresh
    ``python -m tpusim ARGV`` processes, and the last one's standard output."""
    best_wall = best_cpu = float("inf")
    out = ""
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "tpusim", *argv], check=True, capture_output=True, text=True
        )
        best_wall = min(best_wall, time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        best_cpu = min(best_cpu, cpu)
        out = done.stdout
    return best_wall, best_cpu, out


def figure_line(name: str, wall: float, cpu: float, runs: int) -> str:
    """One command's line: its times, ratios to the previous ones and its target."""
    before = PREVIOUS_S[name]
    line = (
        f"{name}: {wall:.2f} s wall, {cpu:.2f} s CPU (best of {runs}); "
        f"previous {before:.2f} s wall, ratio {wall / before:.2f}"
    )
    if name in PREVIOUS_CPU_S:
        was = PREVIOUS_CPU_S[name]
        line += f"; previous {was:.2f} s CPU, ratio {cpu / was:.2f}"
    if name in TARGET_S:
        line += f"; target {TARGET_S[name]:.1f} s: {'met' if wall <= TARGET_S[name] else 'NOT met'}"
    return line


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
        simulated = name in PREVIOUS_SIMULATED_S
        wall, cpu, out = fresh_s([*argv, "--json"] if simulated else argv, runs)
        print(figure_line(name, wall, cpu, runs))
        if simulated:
            time_s, was_s = json.loads(out)["time_s"], PREVIOUS_SIMULATED_S[name]
            within = abs(time_s / was_s - 1) <= FLOW_TOLERANCE
            print(
                f"  simulated {time_s * 1e6:.5f} us, previous {was_s * 1e6:.5f} us "
                f"(ratio {time_s / was_s:.6f}; {'within' if within else 'OUTSIDE'} the "
                f"{FLOW_TOLERANCE:.0%} flow tolerance)"
            )
    second, fresh = session_s()
    print(
        f"Session second call, ironwood-pod 1 GiB all-reduce: {second:.2f} s; "
        f"fresh simulate_collective {fresh:.2f} s, ratio {second / fresh:.2f}"
    )
    print("ASTRA-sim analytical backend: not installable here (not on PyPI); no ratio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
