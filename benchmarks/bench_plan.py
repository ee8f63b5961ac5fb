"""``tpusim plan`` speed (issue 21 target: one model on one pod under 60 s).

Plans Llama 3.1 405B on the 9,216-chip ``ironwood-pod`` at a global batch of 2,304
sequences of 8,192 tokens, as ``tpusim plan llama-3.1-405b ironwood-pod
--global-batch 2304 --seq 8192`` does, in-process, and prints the wall and CPU time,
the peak memory (resident set), the search's counts, each simulation's wall time, and
the best layout against pure FSDP.

Run: ``python benchmarks/bench_plan.py``
"""

from __future__ import annotations

import resource
import time

from tpusim.planner import PlanRequest, plan_layouts

TARGET_S = 15.0
"""Issue 34's target for the final answer on 2 cores (issue 21's was 60 s)."""

BEFORE_S = 43.8
"""Wall time recorded before issue 34 (2026-12-05, 2 cores at load 1.4, `tpusim plan`
as a process; 42.5 s of CPU): best fsdp 2304 x tensor 4, remat none,
sequence_parallel, 7.510 s at flow (29.8% MFU); 21,572 considered, 4,293 fit. The
memory stage was about 60% of it (22 s in-process), the screen 4.5 s."""

BEFORE_CPU_S = 39.8
"""CPU seconds (with the workers') before auto's choice was kept across the search's
simulations (2026-12-06, measured side by side: 27.2 s after it, load 7-8)."""


def _cpu_s() -> float:
    """CPU seconds of this process and its finished workers."""
    own, workers = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + workers.ru_utime + workers.ru_stime


def stages() -> None:
    """The closed-form stages alone (memory pruning, screen), wall seconds."""
    from tpusim.config import load_system
    from tpusim.planner.search import candidates, screen_all
    from tpusim.topology import build_topology

    request = PlanRequest("llama-3.1-405b", "ironwood-pod", 2304, 8192)
    system = load_system(request.system)
    topology = build_topology(system)
    began = time.perf_counter()
    report = candidates(request, system, topology)
    memory_s = time.perf_counter() - began
    screen_all(report, system, topology)
    screen_s = time.perf_counter() - began - memory_s
    print(f"stages: memory {memory_s:.1f} s (before 22.1), screen {screen_s:.1f} s (before 4.5)")


def main() -> None:
    stages()
    began_wall, began_cpu = time.perf_counter(), _cpu_s()
    result = plan_layouts(PlanRequest("llama-3.1-405b", "ironwood-pod", 2304, 8192))
    wall_s, cpu_s = time.perf_counter() - began_wall, _cpu_s() - began_cpu
    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 2**30
    memory = result.memory
    print(
        f"plan llama-3.1-405b on ironwood-pod: {wall_s:.1f} s wall, {cpu_s:.1f} s CPU "
        f"(with the workers'), "
        f"peak RSS {peak_gib:.2f} GiB (target < {TARGET_S:.0f} s wall; before: "
        f"{BEFORE_S:.1f} s, {wall_s / BEFORE_S:.2f}x of it; CPU before {BEFORE_CPU_S:.1f} s, "
        f"{cpu_s / BEFORE_CPU_S:.2f}x of it)"
    )
    print(
        f"search: {memory.considered} considered, {memory.rejected} rejected by the "
        f"builder's checks, {len(memory.too_big)} out of memory, {len(memory.fitting)} fit"
    )
    for s in [*result.ranked, *result.confirmed]:
        layout = s.fitted.layout
        print(
            f"  {s.fidelity:<8} {layout.label():<36} remat {layout.remat.name:<4} "
            f"m {layout.microbatches:<3} step {s.step_time_s:7.3f} s  MFU {s.mfu:6.1%}  "
            f"({s.how}, {s.wall_s:.1f} s)"
        )
    best, reference = result.best(), result.reference_run()
    print(f"best: {best.fitted.layout.label()}, MFU {best.mfu:.1%} ({best.fidelity})")
    if reference is not None:
        print(f"pure FSDP: {reference.fitted.layout.label()}, MFU {reference.mfu:.1%}")


if __name__ == "__main__":
    main()
